/**
 * Reconcile of one mirror's key (`namespace/name`): desired ⊕ observed → plan → writes.
 * Reads the desired store and the local stores (through the mutation cache, so our own
 * writes count before the watch delivers them): the objects under the mirror's names
 * (its Service, Endpoints and EndpointSlices), decides which cluster owns the name,
 * plans with the pure `planMirror`, reports conflicts, and hands each write to the
 * write executor. It never learns why it was called (level-triggered).
 *
 * Sharded (`ownership`): a mirror's key is this replica's only when its shard is held:
 * its owner cluster's (the cluster named by the observed objects' labels, else the
 * claimant that wins the name). A key of a shard not held is neither planned nor
 * written (no create, no update, no delete: its holder does that); clusters of shards
 * not held are left out of the claimants. Garbage collection of an unregistered
 * cluster's mirrors is therefore done by the holder of that cluster's shard only.
 * A fleet-wide key is split instead (DESIGN §3 "Across shards"): the holder of
 * `federatedShardOf` its key writes the Service (and Endpoints), the holder of each
 * member cluster's shard that cluster's part; each write passes its own shard's fence.
 */

import type { DesiredMirror } from "../../src/core/desired.ts";
import { desiredSliceContents, sliceNames } from "../../src/core/endpoint-slices.ts";
import { type ReductionSummary, reduceFederated, summarizeReduction } from "../../src/core/federated.ts";
import { shardedFederatedProblem, shardedMembers } from "../../src/core/federated-shards.ts";
import { CLUSTER_NAME, SERVICE_NAME_LABEL } from "../../src/core/labels.ts";
import {
  type Blocked,
  MIRROR_KINDS,
  type ObservedObject,
  objectPath,
  type WriteAction,
} from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, Endpoints, KubeObject, Namespace, Service } from "../../src/core/objects.ts";
import { objectKey, splitKey } from "../../src/core/objects.ts";
import { type MirrorPlan, planMirror } from "../../src/core/plan.ts";
import {
  annotatedClusters,
  type FederatedPlan,
  isFederatedObject,
  planFederated,
} from "../../src/core/plan-federated.ts";
import {
  allShards,
  federatedShardOf,
  hostsCluster,
  ownsFederated,
  type ShardOwnership,
  shardOf,
} from "../../src/core/shards.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import { KubeApiError, type KubeClient } from "../../src/kube/client.ts";
import type { Logger } from "../../src/log.ts";
import type { EventRequest, FederatedServiceStatus, WriterOptions } from "../../src/protocol/messages.ts";
import type { DesiredStore } from "./desired-store.ts";
import type { MutationCache } from "./mutation-cache.ts";
import type { WriteExecutor } from "./write-executor.ts";

/** The read side of a local store (a Watcher). */
export interface Store<T> {
  get(key: string): T | undefined;
}

export interface ReconcilerDeps {
  readonly desired: DesiredStore;
  readonly services: Store<Service>;
  readonly endpoints: Store<Endpoints>;
  /** Label-selected: only slices with the mirror labels and fleet-mirror's `managed-by`. */
  readonly slices: Store<EndpointSlice> & { values(): Iterable<EndpointSlice> };
  readonly namespaces: Store<Namespace>;
  readonly cache: MutationCache;
  readonly executor: WriteExecutor;
  readonly client: Pick<KubeClient, "request">;
  readonly options: Pick<
    WriterOptions,
    "createNamespaces" | "excludedNamespaces" | "blockedRecheckMs" | "endpointsApi"
  >;
  readonly log: Logger;
  readonly recordEvent: (event: EventRequest) => void;
  /** The shards this replica holds, read at every plan. Default: not sharded (everything). */
  readonly ownership?: () => ShardOwnership;
}

/** A fleet-wide member not written because sharding and `--endpoints-api endpoints` do not go together. */
const SHARDED_ENDPOINTS = "sharded-endpoints-api";

/** The Warning Event of each fleet-wide problem reason (any other: a name conflict). */
const FLEET_EVENT_REASONS: Readonly<Record<string, string>> = {
  "port-conflict": "FederatedPortConflict",
  [SHARDED_ENDPOINTS]: "FederatedNotSharded",
};

/**
 * The plan's actions, with the Service's delete last when the plan only deletes (a
 * mirror no longer wanted): deleting a Service takes its same-named Endpoints and (by
 * their ownerReference) its slices with it, so a DELETE of those sent after the
 * Service's would answer 404 (a wasted request). Any other plan keeps its order.
 */
export function deletesServiceLast(actions: readonly WriteAction[]): readonly WriteAction[] {
  if (!actions.every((a) => a.verb === "delete")) return actions;
  return [...actions.filter((a) => a.kind !== "Service"), ...actions.filter((a) => a.kind === "Service")];
}

/**
 * The shard whose fence a fleet-wide write passes: a part's is its cluster's (only that
 * cluster's host writes it), the Service's and Endpoints' the owning shard's, a Namespace
 * create `namespaceShard` (the owning shard's, or the cluster's whose part needs it).
 */
function federatedWriteShard(action: WriteAction, shards: number, fleetShard: number, namespaceShard: number): number {
  if (action.kind === "Namespace") return namespaceShard;
  if (action.kind !== "EndpointSlice") return fleetShard;
  const cluster =
    action.verb === "delete" ? action.cluster : (action.body as KubeObject).metadata.labels?.[CLUSTER_NAME];
  return cluster ? shardOf(cluster, shards) : fleetShard;
}

export interface BlockedMirror {
  readonly key: string;
  readonly reason: string;
  readonly message: string;
}

export class MirrorReconciler {
  readonly #deps: ReconcilerDeps;
  /** Keys whose mirror is not written, with the cluster that wants it and why. */
  readonly #blocked = new Map<string, Blocked & { cluster: string }>();
  /** Fleet-wide keys → member cluster → why its member is not (wholly) written (SPEC §11). */
  readonly #fleetProblems = new Map<string, Map<string, { reason: string; message: string }>>();
  /** Fleet-wide keys → their last reduction, for status; a key goes when its reduction deletes. */
  readonly #fleetSummaries = new Map<string, ReductionSummary>();

  constructor(deps: ReconcilerDeps) {
    this.#deps = deps;
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    // Sharded, a fleet-wide key is every replica's business: the holder of its shard
    // writes the Service, the host of each member cluster its part (DESIGN §3 "Across shards").
    if (this.#isFederated(key)) return this.#reconcileFederated(key);
    // A new mirror's slices need its Service's uid (their ownerReference): after the
    // Service is created, plan once more at once rather than wait for the watch.
    for (let pass = 0; ; pass++) {
      const planned = await this.#plan(key);
      if (planned === undefined) return { kind: "done" }; // a shard this replica does not hold
      const { plan, desired, observed, shard } = planned;
      if (plan.blocked && desired) {
        this.block(key, desired.cluster, plan.blocked);
        return { kind: "requeue-after", ms: this.#deps.options.blockedRecheckMs };
      }
      const outcome = await this.#apply(key, plan.actions, desired, observed, shard);
      if (outcome) return outcome;
      if (pass > 0 || !this.#needsSecondPass(plan.actions)) return { kind: "done" };
    }
  }

  /** Applies a plan's actions in order (deletes of the Service last); the first outcome that ends the pass, if any. */
  async #apply(
    key: string,
    actions: readonly WriteAction[],
    desired: DesiredMirror | undefined,
    observed: readonly ObservedObject[],
    shard: number | ((action: WriteAction) => number),
  ): Promise<ReconcileResult | undefined> {
    for (const action of deletesServiceLast(actions)) {
      const target =
        action.kind === "Namespace"
          ? undefined
          : observed.find((o) => o.kind === action.kind && o.object.metadata.name === action.name)?.object;
      const fence = typeof shard === "number" ? shard : shard(action);
      const outcome = await this.#deps.executor.apply(key, action, desired, target, fence);
      if (outcome) return outcome;
    }
    return undefined;
  }

  /** A Service was just created and slices are written: they need its uid, so plan again at once. */
  #needsSecondPass(actions: readonly WriteAction[]): boolean {
    const createdService = actions.some((a) => a.verb === "create" && a.kind === "Service");
    return createdService && this.#deps.options.endpointsApi !== "endpoints";
  }

  #ownership(): ShardOwnership {
    return this.#deps.ownership?.() ?? allShards;
  }

  /** The plan of mirror `key`; undefined when its shard is not held here (nothing may be planned). */
  async #plan(key: string): Promise<
    | {
        plan: MirrorPlan;
        desired: ReturnType<DesiredStore["get"]>;
        observed: ObservedObject[];
        shard: number;
      }
    | undefined
  > {
    const { desired: store, cache, options } = this.#deps;
    const ownership = this.#ownership();
    const claimants = store.claimants(key).filter((cluster) => hostsCluster(ownership, cluster));
    const { namespace, name } = splitKey(key);
    const observed: ObservedObject[] = [];
    const service = cache.observed("Service", key, this.#deps.services.get(key));
    let endpoints = cache.observed("Endpoints", key, this.#deps.endpoints.get(key));
    const namespaceExists = namespace !== undefined && this.#deps.namespaces.get(namespace) !== undefined;
    // Our stores hold only labelled objects, so a user's Endpoints holding the name are
    // invisible to them. A failed create would reveal them only AFTER the mirror Service
    // was created next to them (and that Service would route to the user's addresses;
    // in a real cluster the built-in mirroring controller would even derive slices from
    // them): look the Endpoints up before creating a Service, in every mode (SPEC §5).
    const creating = claimants.length > 0 && !service && namespaceExists && namespace !== undefined;
    if (creating && !endpoints) endpoints = await this.#getUnlabelled<Endpoints>("Endpoints", key);
    if (service) observed.push({ kind: "Service", object: service });
    if (endpoints) observed.push({ kind: "Endpoints", object: endpoints });
    if (namespace !== undefined) {
      for (const sliceName of sliceNames(name)) {
        const sliceKey = objectKey({ namespace, name: sliceName });
        const slice = cache.observed("EndpointSlice", sliceKey, this.#deps.slices.get(sliceKey));
        if (slice) observed.push({ kind: "EndpointSlice", object: slice });
      }
    }
    // The same for a user's slice under a name a claimant's slices will need: found
    // before the Service is created, so the mirror is blocked as a whole (SPEC §5, §9).
    if (creating && options.endpointsApi !== "endpoints") {
      const wanted = new Set(
        claimants.flatMap((cluster) => {
          const claimed = store.get(cluster, key);
          return claimed ? desiredSliceContents(claimed).map((content) => content.name) : [];
        }),
      );
      for (const sliceName of wanted) {
        if (observed.some((o) => o.kind === "EndpointSlice" && o.object.metadata.name === sliceName)) continue;
        const slice = await this.#getUnlabelled<EndpointSlice>("EndpointSlice", `${namespace}/${sliceName}`);
        if (slice) observed.push({ kind: "EndpointSlice", object: slice });
      }
    }
    // The current owner keeps the name; otherwise the first claimant in name order.
    let owner: string | undefined;
    for (const o of observed) owner ??= MIRROR_KINDS[o.kind].owner(o.object.metadata.labels);
    // The owner's shard decides; with no owner, the claimant that would win it (only
    // claimants of held shards are left, so another shard's claimant never counts here).
    if (owner !== undefined && !hostsCluster(ownership, owner)) return undefined;
    const winner = owner && claimants.includes(owner) ? owner : claimants[0];
    if (winner === undefined && owner === undefined && ownership.shards > 1) return undefined;
    const desired = winner ? store.get(winner, key) : undefined;
    const plan = planMirror({
      key,
      desired,
      observed,
      endpointsApi: options.endpointsApi,
      namespaceExists,
      createNamespaces: options.createNamespaces,
      excludedNamespaces: options.excludedNamespaces,
      gcAllowed: (cluster) => store.gcAllowed(cluster),
    });
    for (const loser of claimants) {
      if (loser === winner) continue;
      this.block(key, loser, {
        reason: "owned-by-other-cluster",
        message: `mirror name ${key} is also wanted by cluster ${winner}; cluster ${loser}'s mirror is not written`,
      });
    }
    if (!plan.blocked && !claimants.some((c) => c !== winner)) this.#blocked.delete(key);
    return { plan, desired, observed, shard: shardOf(owner ?? winner ?? "", ownership.shards) };
  }

  /** A mirror that is not written: logged (once per message) and reported as an Event. */
  block(key: string, cluster: string, blocked: Blocked): void {
    const previous = this.#blocked.get(key);
    this.#blocked.set(key, { ...blocked, cluster });
    if (previous?.message === blocked.message) return;
    this.#deps.log.warn({ key, cluster, reason: blocked.reason }, blocked.message);
    const { namespace, name } = splitKey(key);
    if (namespace && blocked.reason !== "namespace-missing" && blocked.reason !== "excluded-namespace") {
      this.#deps.recordEvent({
        involved: { kind: "Service", apiVersion: "v1", namespace, name },
        type: "Warning",
        reason: blocked.reason === "user-owned" ? "MirrorNameConflict" : "MirrorOwnedByOtherCluster",
        message: blocked.message,
      });
    }
  }

  /** Blocked mirrors and fleet-wide members by the cluster that wants them. */
  blockedByCluster(): Map<string, BlockedMirror[]> {
    const out = new Map<string, BlockedMirror[]>();
    const add = (cluster: string, entry: BlockedMirror): void => {
      const list = out.get(cluster) ?? [];
      list.push(entry);
      out.set(cluster, list);
    };
    for (const [key, b] of this.#blocked) add(b.cluster, { key, reason: b.reason, message: b.message });
    for (const [key, byCluster] of this.#fleetProblems)
      for (const [cluster, p] of byCluster) add(cluster, { key, reason: p.reason, message: p.message });
    return out;
  }

  /**
   * Every fleet-wide Service the writer reduced and did not delete, by key; a blocked one
   * (its name held by a user's object) lists its members with no addresses written.
   */
  federatedStatus(): FederatedServiceStatus[] {
    return [...this.#fleetSummaries]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, s]) => ({ key, clusters: [...s.clusters], kept: [...s.kept], ready: s.ready, notReady: s.notReady }));
  }

  // -------------------------------------------------------------------------------
  // Fleet-wide Services (SPEC §11): one key reduced from every member cluster's state.

  /**
   * A fleet-wide key: some cluster holds a member of it, our fleet-wide Service holds the
   * name, or (fleet-wide names end in `-federated`) a fleet-wide part of it is observed:
   * announced by a replica that does not own the Service, or left over.
   */
  #isFederated(key: string): boolean {
    if (this.#deps.desired.members(key).size > 0) return true;
    const service = this.#deps.cache.observed("Service", key, this.#deps.services.get(key));
    if (service !== undefined) return isFederatedObject("Service", service);
    const { namespace, name } = splitKey(key);
    if (!name.endsWith("-federated")) return false;
    for (const slice of this.#deps.slices.values())
      if (
        slice.metadata.namespace === namespace &&
        slice.metadata.labels?.[SERVICE_NAME_LABEL] === name &&
        isFederatedObject("EndpointSlice", slice)
      )
        return true;
    return false;
  }

  async #reconcileFederated(key: string): Promise<ReconcileResult> {
    // As for a mirror: once the Service is created, its slices need its uid at once.
    for (let pass = 0; ; pass++) {
      const { plan, observed, members, shard } = await this.#planFederated(key);
      if (plan.blocked) {
        this.#fleetSummaries.set(key, { clusters: members, kept: [], ready: 0, notReady: 0 });
        this.#setFleetProblems(
          key,
          new Map(
            members.map((cluster) => [
              cluster,
              { reason: plan.blocked?.reason ?? "", message: plan.blocked?.message ?? "" },
            ]),
          ),
        );
        return { kind: "requeue-after", ms: this.#deps.options.blockedRecheckMs };
      }
      const outcome = await this.#apply(key, plan.actions, undefined, observed, shard);
      if (outcome) return outcome;
      if (pass > 0 || !this.#needsSecondPass(plan.actions)) return { kind: "done" };
    }
  }

  async #planFederated(key: string): Promise<{
    plan: FederatedPlan;
    observed: ObservedObject[];
    members: string[];
    /** The shard whose fence each write passes (see `federatedWriteShard`). */
    shard: (action: WriteAction) => number;
  }> {
    const { desired: store, cache, options } = this.#deps;
    const { namespace = "", name } = splitKey(key);
    const ownership = this.#ownership();
    // Sharded (DESIGN §3 "Across shards"): this replica writes the Service only when it
    // holds its owning shard, and the parts of the clusters it hosts; it learns the
    // members of the clusters it does not host from their parts (the local API).
    const sharded = ownership.shards > 1;
    const hosts = (cluster: string): boolean => !sharded || hostsCluster(ownership, cluster);
    const owner = !sharded || ownsFederated(ownership, namespace, name);
    const unknown = new Set([...store.unknownClusters()].filter(hosts));
    const hosted = new Map([...store.members(key)].filter(([cluster]) => hosts(cluster)));
    const serviceSlices: EndpointSlice[] = [];
    for (const slice of this.#deps.slices.values())
      if (slice.metadata.namespace === namespace && slice.metadata.labels?.[SERVICE_NAME_LABEL] === name) {
        const current = cache.observed("EndpointSlice", objectKey(slice.metadata), slice);
        if (current) serviceSlices.push(current);
      }
    // A part that states no ports (written before sharding): its cluster is unknown
    // until its host rewrites it.
    const { members, unreadable, partClusters } = sharded
      ? shardedMembers({
          namespace,
          name,
          hosted,
          slices: serviceSlices.filter((slice) => isFederatedObject("EndpointSlice", slice)),
          hosts,
        })
      : { members: hosted, unreadable: new Set<string>(), partClusters: new Set<string>() };
    for (const cluster of unreadable) unknown.add(cluster);
    if (sharded) {
      const problem = shardedFederatedProblem(ownership.shards, options.endpointsApi);
      if (problem) {
        const clusters = [...hosted.keys()].sort();
        this.#setFleetProblems(key, new Map(clusters.map((c) => [c, { reason: SHARDED_ENDPOINTS, message: problem }])));
        return { plan: { actions: [] }, observed: [], members: clusters, shard: () => 0 };
      }
    }
    let service = cache.observed("Service", key, this.#deps.services.get(key));
    let endpoints = cache.observed("Endpoints", key, this.#deps.endpoints.get(key));
    const namespaceExists = this.#deps.namespaces.get(namespace) !== undefined;
    // Our stores hold only labelled objects: a user's Service or Endpoints of the name
    // is looked up before the fleet-wide Service is created (SPEC §5, §11), and before
    // a host that does not own it announces a part.
    const creating = (owner ? members.size > 0 : hosted.size > 0) && !service && namespaceExists;
    if (creating) {
      service = await this.#getUnlabelled<Service>("Service", key);
      if (owner) endpoints ??= await this.#getUnlabelled<Endpoints>("Endpoints", key);
    }
    const annotated = service && isFederatedObject("Service", service) ? annotatedClusters(service) : [];
    // Before the registered clusters are known, a cluster this replica hosts that the
    // observed objects name and that has not sent its complete set may be registered:
    // unknown, not absent, so its part is kept (a restart writes nothing).
    if (!store.registrationKnown)
      for (const cluster of [...annotated, ...partClusters])
        if (hosts(cluster) && !store.known(cluster)) unknown.add(cluster);
    const reduction = reduceFederated({
      members,
      order: store.order(),
      unknown,
      registrationKnown: store.registrationKnown,
      observedClusters: [...annotated, ...partClusters],
    });
    // The Service's status is its owner's to report (each host reports its members' conflicts).
    if (reduction.kind === "delete" || !owner) this.#fleetSummaries.delete(key);
    else this.#fleetSummaries.set(key, summarizeReduction(reduction));
    const observed: ObservedObject[] = [];
    if (service) observed.push({ kind: "Service", object: service });
    if (endpoints) observed.push({ kind: "Endpoints", object: endpoints });
    const sliceKeys = new Set<string>(serviceSlices.map((slice) => objectKey(slice.metadata)));
    const hostedParts = [...hosted.values()].filter((m) => !unknown.has(m.cluster));
    const written = sharded ? hostedParts : reduction.kind === "write" ? reduction.parts : [];
    for (const part of written)
      for (const sliceName of sliceNames(`${name}-${part.cluster}`))
        sliceKeys.add(objectKey({ namespace, name: sliceName }));
    for (const sliceKey of sliceKeys) {
      const slice = cache.observed("EndpointSlice", sliceKey, this.#deps.slices.get(sliceKey));
      // A user's slice under a part's name is invisible to the labelled store: looked up
      // before the Service is created, so the fleet-wide Service is blocked as a whole
      // and never written next to it (SPEC §11).
      const found =
        slice ??
        (creating && !service && options.endpointsApi !== "endpoints"
          ? await this.#getUnlabelled<EndpointSlice>("EndpointSlice", sliceKey)
          : undefined);
      if (found) observed.push({ kind: "EndpointSlice", object: found });
    }
    const plan = planFederated({
      namespace,
      name,
      reduction,
      observed,
      endpointsApi: options.endpointsApi,
      namespaceExists,
      createNamespaces: options.createNamespaces,
      excludedNamespaces: options.excludedNamespaces,
      ...(sharded ? { shard: { owner, hosts, members: hostedParts } } : {}),
    });
    if (!plan.blocked) {
      const problems = new Map<string, { reason: string; message: string }>();
      const excluded = plan.excluded ?? (reduction.kind === "write" ? reduction.excluded : []);
      for (const e of excluded) problems.set(e.cluster, { reason: "port-conflict", message: e.message });
      this.#setFleetProblems(key, problems);
    }
    // A cluster's own mirror under a fleet-wide name (a cluster named "federated"): the
    // fleet-wide Service keeps the name.
    for (const cluster of store.claimants(key))
      this.block(key, cluster, {
        reason: "owned-by-other-cluster",
        message: `mirror name ${key} is a fleet-wide Service's; cluster ${cluster}'s mirror is not written`,
      });
    const fleetShard = federatedShardOf(namespace, name, ownership.shards);
    const namespaceShard = owner ? fleetShard : shardOf(hostedParts[0]?.cluster ?? "", ownership.shards);
    return {
      plan,
      observed,
      members: [...(sharded ? hosted : members).keys()].sort(),
      shard: (action) => federatedWriteShard(action, ownership.shards, fleetShard, namespaceShard),
    };
  }

  /** Replaces the problems of fleet-wide key `key`; a new message is logged and recorded as an Event. */
  #setFleetProblems(key: string, problems: Map<string, { reason: string; message: string }>): void {
    const previous = this.#fleetProblems.get(key);
    if (problems.size === 0) this.#fleetProblems.delete(key);
    else this.#fleetProblems.set(key, problems);
    const { namespace, name } = splitKey(key);
    for (const [cluster, p] of problems) {
      if (previous?.get(cluster)?.message === p.message) continue;
      this.#deps.log.warn({ key, cluster, reason: p.reason }, p.message);
      if (namespace && p.reason !== "namespace-missing" && p.reason !== "excluded-namespace")
        this.#deps.recordEvent({
          involved: { kind: "Service", apiVersion: "v1", namespace, name },
          type: "Warning",
          reason: FLEET_EVENT_REASONS[p.reason] ?? "FederatedNameConflict",
          message: p.message,
        });
    }
  }

  /** GETs an object our label-selected stores may not show; undefined when it does not exist. */
  async #getUnlabelled<T extends KubeObject>(
    kind: "Service" | "Endpoints" | "EndpointSlice",
    key: string,
  ): Promise<T | undefined> {
    const { namespace = "", name } = splitKey(key);
    try {
      return await this.#deps.client.request<T>("GET", objectPath(kind, namespace, name));
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }
}
