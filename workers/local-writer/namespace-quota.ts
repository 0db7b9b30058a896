/**
 * The writer's side of the per-cluster quota on created Namespaces
 * (src/core/namespace-quota.ts): per cluster, how many Namespaces exist that were created
 * for it (labelled with it) and which namespaces its desired mirrors need that do not
 * exist. Both are recomputed only when the desired store or the local Namespaces changed
 * since, so a thousand blocked mirrors re-checked together cost one computation.
 */
import { CLUSTER_NAME, MIRRORED_SERVICE } from "../../src/core/labels.ts";
import { namespaceQuotaRefusal } from "../../src/core/namespace-quota.ts";
import type { Namespace } from "../../src/core/objects.ts";
import type { WriterOptions } from "../../src/protocol/messages.ts";
import type { DesiredStore } from "./desired-store.ts";

/** What the quota reads of the local Namespaces: the writer's namespace watcher. */
export interface NamespaceSource {
  get(name: string): Namespace | undefined;
  values(): Iterable<Namespace>;
  on(event: "change", listener: () => void): unknown;
}

interface ClusterView {
  readonly desiredVersion: number;
  readonly namespacesVersion: number;
  readonly created: number;
  /** Sorted. */
  readonly missing: readonly string[];
}

export class NamespaceQuota {
  readonly #namespaces: NamespaceSource;
  readonly #desired: Pick<DesiredStore, "version" | "namespacesOf">;
  readonly #limit: number;
  #namespacesVersion = 0;
  readonly #views = new Map<string, ClusterView>();

  /** `limit`: Namespaces that may be created per cluster; 0: no quota. */
  constructor(namespaces: NamespaceSource, desired: Pick<DesiredStore, "version" | "namespacesOf">, limit: number) {
    this.#namespaces = namespaces;
    this.#desired = desired;
    this.#limit = limit;
    namespaces.on("change", () => {
      this.#namespacesVersion += 1;
    });
  }

  /** Why creating `namespace` for `cluster` would pass its quota; undefined when it may be created. */
  readonly refusal = (namespace: string, cluster: string): string | undefined => {
    if (this.#limit <= 0) return undefined;
    const { created, missing } = this.#view(cluster);
    return namespaceQuotaRefusal(namespace, cluster, created, missing, this.#limit);
  };

  #view(cluster: string): ClusterView {
    const desiredVersion = this.#desired.version;
    const namespacesVersion = this.#namespacesVersion;
    const known = this.#views.get(cluster);
    if (known?.desiredVersion === desiredVersion && known.namespacesVersion === namespacesVersion) return known;
    if (known) this.#views.clear(); // every view is stale now: none is kept for a cluster gone since
    let created = 0;
    for (const ns of this.#namespaces.values()) {
      const labels = ns.metadata.labels;
      if (labels?.[CLUSTER_NAME] === cluster && labels[MIRRORED_SERVICE] === "true") created += 1;
    }
    const missing = [...this.#desired.namespacesOf(cluster)].filter((ns) => !this.#namespaces.get(ns)).sort();
    const view = { desiredVersion, namespacesVersion, created, missing };
    this.#views.set(cluster, view);
    return view;
  }
}

/** The writer's quota check (`ReconcilerDeps.namespaceQuota`) under `options.maxNamespacesPerCluster`. */
export function namespaceQuota(
  namespaces: NamespaceSource,
  desired: Pick<DesiredStore, "version" | "namespacesOf">,
  options: Pick<WriterOptions, "maxNamespacesPerCluster">,
): (namespace: string, cluster: string) => string | undefined {
  return new NamespaceQuota(namespaces, desired, options.maxNamespacesPerCluster ?? 0).refusal;
}
