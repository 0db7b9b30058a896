/**
 * The local cluster's own ServiceExports (SPEC §16): the local cluster is a member of its
 * own clusterset (`--cluster-name`), so a ServiceExport here exports its Service to the
 * local ServiceImport too. An OptionalWatch of every local ServiceExport (discovered and
 * re-checked like the remote ones), and the Services they name followed with their own
 * EndpointSlices (local-service-slices.ts). Reads only; the import reconciler writes.
 *
 * Invariants (what `exportOf` answers for import key `k`, the derived Service's key):
 * - `unknown`: the ServiceExports are not known (not listed yet, refused, failing), or the
 *   ServiceExport exists and its Service and slices are not listed yet: the local part is
 *   kept as written, never deleted for it (unknown is never "none", SPEC §12);
 * - `none`: known, and no local ServiceExport of that name;
 * - otherwise the ServiceExport and what it contributes (`localExportFor`).
 * Every change of a ServiceExport, its Service or its slices enqueues its import key.
 */
import { type LocalExportOutcome, localExportFor } from "../../src/core/local-exports.ts";
import { importKey, LOCAL_SERVICE_EXPORTS, type McsAvailability } from "../../src/core/mcs.ts";
import { type KubeObject, objectKey, splitKey } from "../../src/core/objects.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { OptionalWatch, type OptionalWatchLog } from "../../src/kube/optional-watch.ts";
import { LocalServiceSlices } from "./local-service-slices.ts";

export type LocalExportAnswer =
  | { readonly kind: "unknown" }
  | { readonly kind: "none" }
  | { readonly kind: "exported"; readonly serviceExport: KubeObject; readonly outcome: LocalExportOutcome };

export interface LocalExportsDeps {
  readonly client: KubeClient;
  /** The local cluster's name (`--cluster-name`). */
  readonly cluster: string;
  readonly log: OptionalWatchLog;
  /** The import key (`importKey`) whose local export may have changed. */
  readonly changed: (key: string) => void;
  /** Whether the ServiceExports are served and readable changed: every import is due again. */
  readonly availabilityChanged: () => void;
  readonly recheckMs: number | undefined;
}

export class LocalExports {
  readonly #deps: LocalExportsDeps;
  readonly #watch: OptionalWatch<KubeObject>;
  readonly #services: LocalServiceSlices;

  constructor(deps: LocalExportsDeps) {
    this.#deps = deps;
    const toImportKey = (key: string): string => {
      const { namespace = "", name } = splitKey(key);
      return importKey({ namespace, name });
    };
    this.#services = new LocalServiceSlices({
      client: deps.client,
      log: deps.log,
      changed: (key) => deps.changed(toImportKey(key)),
    });
    this.#watch = new OptionalWatch<KubeObject>({
      client: deps.client,
      resource: LOCAL_SERVICE_EXPORTS,
      ...(deps.recheckMs ? { recheckMs: deps.recheckMs } : {}),
      log: deps.log,
      guard: (fn) => fn,
      track: (promise) =>
        void promise.catch((error: unknown) =>
          deps.log.warn({ error: String(error) }, "local ServiceExports: watch stop failed"),
        ),
      changed: (key) => {
        this.#services.follow(this.#watch.keys());
        deps.changed(toImportKey(key));
      },
      availabilityChanged: () => {
        this.#services.follow(this.#watch.keys());
        deps.availabilityChanged();
      },
    });
  }

  get cluster(): string {
    return this.#deps.cluster;
  }

  get availability(): McsAvailability {
    return this.#watch.availability;
  }

  start(): void {
    this.#watch.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.#watch.stop(), this.#services.stop()]);
  }

  /** The import keys of every local ServiceExport held. */
  *importKeys(): Generator<string> {
    for (const key of this.#watch.keys()) {
      const { namespace = "", name } = splitKey(key);
      yield importKey({ namespace, name });
    }
  }

  /** The local export of ServiceImport `namespace/name` (see the invariants). */
  exportOf(namespace: string, name: string): LocalExportAnswer {
    const key = objectKey({ namespace, name });
    const serviceExport = this.#watch.get(key);
    if (!serviceExport) return this.#watch.known ? { kind: "none" } : { kind: "unknown" };
    const followed = this.#services.get(key);
    if (!followed) return { kind: "unknown" };
    return {
      kind: "exported",
      serviceExport,
      outcome: localExportFor(this.#deps.cluster, serviceExport, followed.service, followed.slices),
    };
  }

  /** The ServiceImport names the local ServiceExports of `namespace` ask for (for an import key's name). */
  nameFor(namespace: string, derived: string): string | undefined {
    for (const key of this.#watch.keys()) {
      const { namespace: ns = "", name } = splitKey(key);
      if (ns === namespace && importKey({ namespace: ns, name }) === `${namespace}/${derived}`) return name;
    }
    return undefined;
  }
}
