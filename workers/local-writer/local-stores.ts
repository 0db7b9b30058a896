/**
 * The local writer's view of the local cluster: four watched stores, label-selected so
 * that only objects that can be fleet-mirror's are held in memory (mirror Services and
 * Endpoints, fleet-mirror's EndpointSlices), plus every Namespace; and fleet-mirror's
 * ServiceImports where the cluster serves them (SPEC §12: discovered at run time and
 * re-checked; they never hold up the writer's readiness). Read-only: the stores have
 * one writer each, their watch. `routeChanges` maps their changes to mirror keys for the
 * actor's queue; the reconciler reads them.
 */
import { sliceMirrorName, sliceOwner } from "../../src/core/endpoint-slices.ts";
import { MANAGED_BY_FLEET_MIRROR, MANAGED_BY_LABEL, MIRRORED_SERVICE, ownerCluster } from "../../src/core/labels.ts";
import { importKey, SERVICE_IMPORTS } from "../../src/core/mcs.ts";
import type { EndpointSlice, Endpoints, KubeObject, Namespace, Service } from "../../src/core/objects.ts";
import { objectKey, splitKey } from "../../src/core/objects.ts";
import { shardRequirement } from "../../src/core/shard-label.ts";
import type { ShardOwnership } from "../../src/core/shards.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { OptionalWatch, type OptionalWatchLog } from "../../src/kube/optional-watch.ts";
import { Watcher } from "../../src/kube/watcher.ts";
import { LocalExports } from "./local-exports.ts";
import { LocalMembers } from "./local-members.ts";
import type { MirrorKind } from "./mutation-cache.ts";
import { headlessMirrorKey, PerHostIndex } from "./per-host-index.ts";
import { isSharedPart, SharedIndex } from "./shared-index.ts";
import type { SharedStrings } from "./shared-strings.ts";
import { SliceIndex } from "./slice-index.ts";

const MIRROR_SELECTOR = `${MIRRORED_SERVICE}=true`;
/**
 * Only slices that can be ours are held in memory (not every slice of the cluster). A
 * slice under a mirror's name that this selector hides (a user's) is still found: its
 * create answers AlreadyExists, and the name is then looked up (SPEC §5).
 */
const SLICE_SELECTOR = `${MIRRORED_SERVICE}=true,${MANAGED_BY_LABEL}=${MANAGED_BY_FLEET_MIRROR}`;

/** The key of the mirror a slice belongs to (its `kubernetes.io/service-name`), or undefined. */
export function sliceMirrorKey(slice: KubeObject | undefined): string | undefined {
  const mirror = slice ? sliceMirrorName(slice) : undefined;
  return slice && mirror ? objectKey({ namespace: slice.metadata.namespace, name: mirror }) : undefined;
}

/** How the ServiceImports' watch, and the local ServiceExports' (SPEC §16), report (SPEC §12). */
export interface ServiceImportHooks {
  /** The local cluster's name (`--cluster-name`): its own ServiceExports export to the local ServiceImports. */
  readonly cluster: string;
  readonly log: OptionalWatchLog;
  /** The writer's key (`importKey`) of a ServiceImport that changed. */
  readonly changed: (key: string) => void;
  /** Whether ServiceImports are served and readable changed: every import is due again. */
  readonly availabilityChanged: () => void;
  readonly recheckMs: number | undefined;
  /** The local member of fleet-wide Services (SPEC §14): its selector and priority; absent: none. */
  readonly localMembers?: { readonly key: string; readonly value: string; readonly priority: number } | undefined;
}

export class LocalStores {
  readonly services: Watcher<Service>;
  readonly endpoints: Watcher<Endpoints>;
  readonly slices: Watcher<EndpointSlice>;
  readonly namespaces: Watcher<Namespace>;
  readonly serviceImports: OptionalWatch<KubeObject>;
  /** The local cluster's own ServiceExports, their Services and slices (SPEC §16). */
  readonly localExports: LocalExports;
  /** The local cluster's own Services that are fleet-wide members (SPEC §14); absent: none. */
  readonly localMembers: LocalMembers | undefined;
  /** fleet-mirror's slices by the Service they belong to, whatever their names. */
  readonly sliceIndex: SliceIndex;
  /** fleet-mirror's per-host mirror Services by their headless mirror (SPEC §12). */
  readonly perHostIndex: PerHostIndex;
  /** fleet-mirror's shared objects (fleet-wide, import) by key and by the clusters they name. */
  readonly sharedIndex: SharedIndex;
  /** Sharded: the shards the mirror watches' selectors were last set to admit. */
  #filterHeld: ReadonlySet<number> | undefined;
  /** Sharded: the shards whose mirrors the three mirror stores hold (their last lists used the filter). */
  #observedHeld: ReadonlySet<number> = new Set();

  /**
   * `shared`: the writer's table of repeated strings; the three mirror stores keep each
   * object with its strings shared (`SharedStrings.compact`: equal values, nothing
   * dropped, so every update built from a stored copy writes what it wrote before).
   */
  constructor(client: KubeClient, shared: SharedStrings, imports: ServiceImportHooks) {
    const keep = <T extends KubeObject>(object: KubeObject): T => shared.compact(object as T);
    this.services = new Watcher<Service>({
      client,
      path: "/api/v1/services",
      expectedKind: "Service",
      labelSelector: MIRROR_SELECTOR,
      keep,
    });
    this.endpoints = new Watcher<Endpoints>({
      client,
      path: "/api/v1/endpoints",
      expectedKind: "Endpoints",
      labelSelector: MIRROR_SELECTOR,
      keep,
    });
    this.slices = new Watcher<EndpointSlice>({
      client,
      path: "/apis/discovery.k8s.io/v1/endpointslices",
      expectedKind: "EndpointSlice",
      labelSelector: SLICE_SELECTOR,
      keep,
    });
    this.sliceIndex = new SliceIndex(this.slices);
    this.perHostIndex = new PerHostIndex(this.services);
    this.sharedIndex = new SharedIndex(this.services, this.slices);
    this.namespaces = new Watcher<Namespace>({ client, path: "/api/v1/namespaces", expectedKind: "Namespace" });
    this.serviceImports = new OptionalWatch<KubeObject>({
      client,
      resource: SERVICE_IMPORTS,
      labelSelector: MIRROR_SELECTOR,
      ...(imports.recheckMs ? { recheckMs: imports.recheckMs } : {}),
      log: imports.log,
      guard: (fn) => fn,
      // Only watch stops are tracked (discovery failures are states): a failure is logged.
      track: (promise) =>
        void promise.catch((error: unknown) =>
          imports.log.warn({ error: String(error) }, "ServiceImports: watch stop failed"),
        ),
      changed: (key) => {
        const { namespace = "", name } = splitKey(key);
        imports.changed(importKey({ namespace, name }));
      },
      availabilityChanged: () => imports.availabilityChanged(),
    });
    this.localExports = new LocalExports({
      client,
      cluster: imports.cluster,
      log: imports.log,
      changed: imports.changed,
      availabilityChanged: imports.availabilityChanged,
      recheckMs: imports.recheckMs,
    });
    const members = imports.localMembers;
    this.localMembers = members
      ? new LocalMembers({
          client,
          cluster: imports.cluster,
          selector: { key: members.key, value: members.value },
          priority: members.priority,
          log: imports.log,
          changed: imports.changed,
        })
      : undefined;
  }

  /**
   * Routes the mirror stores' changes: every changed object to `watched` (the mutation
   * cache), and the key of the mirror it belongs to to `enqueue` (a slice's mirror is
   * its `kubernetes.io/service-name`). A per-host Service's headless mirror (SPEC §12)
   * goes to `enqueueLater`: that Service's cluster IP is one of the mirror's addresses.
   */
  routeChanges(route: {
    readonly watched: (kind: MirrorKind, key: string, current: KubeObject | undefined) => void;
    readonly enqueue: (key: string) => void;
    readonly enqueueLater: (key: string) => void;
  }): void {
    this.services.on("change", (key, previous, current) => {
      route.watched("Service", key, current);
      route.enqueue(key);
      const headless = headlessMirrorKey(current) ?? headlessMirrorKey(previous);
      if (headless) route.enqueueLater(headless);
    });
    this.endpoints.on("change", (key, _previous, current) => {
      route.watched("Endpoints", key, current);
      route.enqueue(key);
    });
    this.slices.on("change", (key, previous, current) => {
      route.watched("EndpointSlice", key, current);
      const mirrorKey = sliceMirrorKey(current) ?? sliceMirrorKey(previous);
      if (mirrorKey) route.enqueue(mirrorKey);
    });
  }

  /**
   * Sharded: the mirror watches (Services, Endpoints, EndpointSlices) admit only the
   * mirrors of `ownership`'s held shards and objects without another shard's label
   * (core/shard-label.ts); a change relists them. `observedHeld` follows once all three
   * have listed with it (`noteListed`). Not sharded: nothing changes.
   */
  setShardFilter(ownership: ShardOwnership): void {
    if (ownership.shards <= 1) return;
    const requirement = shardRequirement(ownership);
    const and = (base: string) => (requirement ? `${base},${requirement}` : base);
    this.services.setLabelSelector(and(MIRROR_SELECTOR));
    this.endpoints.setLabelSelector(and(MIRROR_SELECTOR));
    this.slices.setLabelSelector(and(SLICE_SELECTOR));
    this.#filterHeld = new Set(ownership.held);
  }

  /**
   * After a list: once the three mirror stores have listed with the current filter, the
   * shards they hold are its shards. Returns the shards newly held in the stores (their
   * keys can be planned now), else none.
   */
  noteListed(): number[] {
    const filter = this.#filterHeld;
    if (!filter || ![this.services, this.endpoints, this.slices].every((w) => w.listedWithSelector)) return [];
    const gained = [...filter].filter((shard) => !this.#observedHeld.has(shard));
    this.#observedHeld = filter;
    return gained;
  }

  /** Sharded: the shards whose mirrors the stores hold (see `setShardFilter`). */
  get observedHeld(): ReadonlySet<number> {
    return this.#observedHeld;
  }

  /** The four watchers, in start order. */
  get all(): readonly Watcher<KubeObject>[] {
    return [this.services, this.endpoints, this.slices, this.namespaces] as readonly Watcher<KubeObject>[];
  }

  start(): void {
    for (const watcher of this.all) watcher.start();
    this.serviceImports.start();
    this.localExports.start();
    this.localMembers?.start();
  }

  async stop(): Promise<void> {
    await Promise.all([
      ...this.all.map((watcher) => watcher.stop()),
      this.serviceImports.stop(),
      this.localExports.stop(),
      this.localMembers?.stop(),
    ]);
  }

  /** The key of every observed mirror object (a slice by its mirror's key, a ServiceImport by its import's); keys may repeat. */
  *observedKeys(): Generator<string> {
    yield* this.services.keys();
    yield* this.endpoints.keys();
    for (const slice of this.slices.values()) {
      const key = sliceMirrorKey(slice);
      if (key) yield key;
    }
    yield* this.#serviceImportKeys();
    yield* this.localExports.importKeys();
    yield* this.localMembers?.fleetKeys() ?? [];
  }

  /** Every observed local mirror object with its mirror's key and owning cluster. */
  *observedMirrors(): Generator<{ key: string; owner: string }> {
    for (const watcher of [this.services, this.endpoints] as const) {
      for (const object of watcher.values()) {
        const owner = ownerCluster(object.metadata.labels);
        if (owner)
          yield { key: objectKey({ namespace: object.metadata.namespace, name: object.metadata.name }), owner };
      }
    }
    // A shared object's part (fleet-wide, import) is not a mirror: its key's reduction
    // depends on its cluster's knowledge, not on the cluster's mirrors (shared-triggers.ts).
    for (const slice of this.slices.values()) {
      const owner = sliceOwner(slice.metadata.labels);
      const key = sliceMirrorKey(slice);
      if (owner && key && !isSharedPart(slice)) yield { key, owner };
    }
  }

  /**
   * The keys of the observed mirrors `cluster` owns: `observedMirrors` filtered, but the
   * owner is compared before a key is built. Asked once per complete batch, so a start of K
   * clusters over M mirrors reads K × M labels and builds M keys, not K × M.
   */
  *observedMirrorsOf(cluster: string): Generator<string> {
    for (const watcher of [this.services, this.endpoints] as const) {
      for (const object of watcher.values()) {
        if (ownerCluster(object.metadata.labels) === cluster)
          yield objectKey({ namespace: object.metadata.namespace, name: object.metadata.name });
      }
    }
    for (const slice of this.slices.values()) {
      if (sliceOwner(slice.metadata.labels) !== cluster || isSharedPart(slice)) continue;
      const key = sliceMirrorKey(slice);
      if (key) yield key;
    }
  }

  /** The slice store with its index by Service, as the reconcilers read it. */
  get indexedSlices(): Pick<Watcher<EndpointSlice>, "get" | "values"> & { ofService(key: string): EndpointSlice[] } {
    return {
      get: (key) => this.slices.get(key),
      values: () => this.slices.values(),
      ofService: (key) => this.sliceIndex.of(key),
    };
  }

  /** The keys of fleet-mirror's shared objects observed that name `cluster` (a part of its, the annotation). */
  sharedKeysOf(cluster: string): Iterable<string> {
    return this.sharedIndex.keysOf(cluster);
  }

  /** The clusters fleet-mirror's shared objects observed name. */
  sharedClusters(): Iterable<string> {
    return this.sharedIndex.clusters();
  }

  /**
   * The keys of fleet-mirror's shared objects observed: fleet-wide Services (SPEC §11),
   * derived Services of imports and ServiceImports (SPEC §12), and their parts, with or
   * without their Service (a leftover is collected by its key's reduction).
   */
  *sharedKeys(): Generator<string> {
    yield* this.sharedIndex.keys();
    yield* this.#serviceImportKeys();
    yield* this.localExports.importKeys();
    yield* this.localMembers?.fleetKeys() ?? [];
  }

  /** The writer key (`importKey`) of every ServiceImport of ours observed. */
  *#serviceImportKeys(): Generator<string> {
    for (const key of this.serviceImports.keys()) {
      const { namespace = "", name } = splitKey(key);
      yield importKey({ namespace, name });
    }
  }
}
