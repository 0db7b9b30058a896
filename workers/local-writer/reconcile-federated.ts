/**
 * Reconcile of one fleet-wide key (SPEC §11): one Service reduced from every member
 * cluster's state. Sharded (DESIGN §3 "Across shards"), the holder of `federatedShardOf`
 * the key writes the Service (and Endpoints) and reports its reduction; the holder of
 * each member cluster's shard writes that cluster's part and learns the members it does
 * not host from their parts in the local API; each write passes its own shard's fence.
 */

import { systemClock } from "../../src/core/clock.ts";
import { sliceNames } from "../../src/core/endpoint-slices.ts";
import {
  type FederatedMember,
  type Reduction,
  type ReductionSummary,
  reduceFederated,
  summarizeReduction,
} from "../../src/core/federated.ts";
import { annotatedClusters, isFederatedObject } from "../../src/core/federated-objects.ts";
import { shardedFederatedProblem, shardedMembers } from "../../src/core/federated-shards.ts";
import { federatedTiers } from "../../src/core/federated-tiers.ts";
import { CLUSTER_NAME } from "../../src/core/labels.ts";
import type { Blocked, ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, Endpoints, KubeObject, Service } from "../../src/core/objects.ts";
import { objectKey, splitKey } from "../../src/core/objects.ts";
import { type FederatedPlan, planFederated } from "../../src/core/plan-federated.ts";
import { hostedStanding, partReady, shardedTiers } from "../../src/core/sharded-tiers.ts";
import { federatedShardOf, hostsCluster, ownsFederated, shardOf } from "../../src/core/shards.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import type { FederatedServiceStatus } from "../../src/protocol/messages.ts";
import { type FleetProblem, reportProblems } from "./problem-events.ts";
import {
  applyActions,
  getUnlabelled,
  needsSecondPass,
  ownershipOf,
  type ReconcilerDeps,
  slicesOfService,
} from "./reconcile-io.ts";
import { TierBook, type TierOutcome } from "./tier-book.ts";

/** A fleet-wide member not written because sharding and `--endpoints-api endpoints` do not go together. */
const SHARDED_ENDPOINTS = "sharded-endpoints-api";

/** The Warning Event of each fleet-wide problem reason (any other: a name conflict). */
const FLEET_EVENT_REASONS: Readonly<Record<string, string>> = {
  "port-conflict": "FederatedPortConflict",
  [SHARDED_ENDPOINTS]: "FederatedNotSharded",
};

/**
 * The shard whose fence a fleet-wide write passes: a part's is its cluster's (only that
 * cluster's host writes it), the Service's and Endpoints' the owning shard's, a Namespace
 * create `namespaceShard` (the owning shard's, or the cluster's whose part needs it).
 */
function federatedWriteShard(
  action: WriteAction,
  shards: number,
  fleetShard: number,
  namespaceShard: number,
  localCluster: string | undefined,
): number {
  if (action.kind === "Namespace") return namespaceShard;
  if (action.kind !== "EndpointSlice") return fleetShard;
  const cluster =
    action.verb === "delete" ? action.cluster : (action.body as KubeObject).metadata.labels?.[CLUSTER_NAME];
  // The local member's part is the owner's (SPEC §14 "Sharded").
  return cluster && cluster !== localCluster ? shardOf(cluster, shards) : fleetShard;
}

export class FederatedReconciler {
  readonly #deps: ReconcilerDeps;
  /** Reports a cluster's own mirror blocked by a fleet-wide name (the mirror reconciler's record). */
  readonly #block: (key: string, cluster: string, blocked: Blocked) => void;
  /** Fleet-wide keys → member cluster → why its member is not (wholly) written (SPEC §11). */
  readonly #fleetProblems = new Map<string, ReadonlyMap<string, FleetProblem>>();
  /** Fleet-wide keys → their last reduction, for status; a key goes when its reduction deletes. */
  readonly #fleetSummaries = new Map<string, ReductionSummary>();
  /** Fleet-wide keys whose last reduction waited for unknown clusters (see `waiting`). */
  readonly #waiting = new Set<string>();
  /** The serving tiers of each fleet-wide Service (SPEC §14; unsharded). */
  readonly #tiers: TierBook;
  readonly #now: () => number;

  constructor(deps: ReconcilerDeps, block: (key: string, cluster: string, blocked: Blocked) => void) {
    this.#deps = deps;
    this.#block = block;
    this.#now = deps.now ?? (() => systemClock.now());
    this.#tiers = new TierBook({
      settings: {
        minReady: deps.options.failoverMinReady ?? 1,
        failbackDelayMs: deps.options.failbackDelayMs ?? 30_000,
      },
      now: this.#now,
      priorityOf: (cluster) => this.#priorityOf(cluster),
      recordEvent: deps.recordEvent,
      log: deps.log,
      switched: (direction) => deps.tierSwitched?.(direction),
    });
  }

  /** The local cluster's name while it may be a member: no remote cluster is registered under it (SPEC §14). */
  #localCluster(): string | undefined {
    const local = this.#deps.localMembers;
    return local && !this.#deps.desired.order().includes(local.cluster) ? local.cluster : undefined;
  }

  #priorityOf(cluster: string): number {
    const local = this.#deps.localMembers;
    return local && cluster === this.#localCluster() ? local.priority : this.#deps.desired.priority(cluster);
  }

  /** The problems of every fleet-wide key, by key then member cluster. */
  problems(): ReadonlyMap<string, ReadonlyMap<string, FleetProblem>> {
    return this.#fleetProblems;
  }

  /**
   * Every fleet-wide Service the writer reduced and did not delete, by key; a blocked one
   * (its name held by a user's object) lists its members with no addresses written.
   */
  status(): FederatedServiceStatus[] {
    return [...this.#fleetSummaries]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, s]) => {
        const tiers = this.#tiers.summary(key);
        const serving = tiers?.servingPriority ?? 0;
        return {
          key,
          clusters: [...s.clusters],
          kept: [...s.kept],
          ready: s.ready,
          notReady: s.notReady,
          ...(tiers
            ? {
                tiers: tiers.tiers.map((t) => ({ ...t, serving: t.priority <= serving })),
                servingPriority: serving,
                servingSince: new Date(Date.now() - (this.#now() - tiers.since)).toISOString(),
              }
            : {}),
        };
      });
  }

  /**
   * Keys whose last reduction waited: only unknown clusters may still be members. They
   * are due again once no cluster is unknown (nothing else may end the wait but a part
   * of theirs, whose cluster's change enqueues them anyway).
   */
  waiting(): Iterable<string> {
    return this.#waiting;
  }

  /**
   * A fleet-wide key: some cluster holds a member of it, our fleet-wide Service holds the
   * name, or (fleet-wide names end in `-federated`) a fleet-wide part of it is observed:
   * announced by a replica that does not own the Service, or left over.
   */
  isFederated(key: string): boolean {
    if (this.#deps.desired.members(key).size > 0) return true;
    if (this.#deps.localMembers?.memberOf(key).kind === "member") return true;
    const service = this.#deps.cache.observed("Service", key, this.#deps.services.get(key));
    if (service !== undefined) return isFederatedObject("Service", service);
    const { namespace = "", name } = splitKey(key);
    if (!name.endsWith("-federated")) return false;
    return slicesOfService(this.#deps, namespace, name).some((slice) => isFederatedObject("EndpointSlice", slice));
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    // As for a mirror: once the Service is created, its slices need its uid at once.
    for (let pass = 0; ; pass++) {
      const { plan, observed, members, shard, wakeMs } = await this.#plan(key);
      if (plan.blocked) {
        this.#fleetSummaries.set(key, { clusters: members, kept: [], ready: 0, notReady: 0 });
        this.#setProblems(
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
      const outcome = await applyActions(this.#deps, key, plan.actions, undefined, observed, shard);
      if (outcome) return outcome;
      // Again at once after a mirror's slice under a part's name is deleted (the part
      // comes next), or after the Service is created (its slices need its uid).
      if (pass > 1 || (!plan.again && !needsSecondPass(this.#deps, plan.actions)))
        return wakeMs !== undefined ? { kind: "requeue-after", ms: wakeMs } : { kind: "done" };
    }
  }

  async #plan(key: string): Promise<{
    plan: FederatedPlan;
    observed: ObservedObject[];
    members: string[];
    /** The shard whose fence each write passes (see `federatedWriteShard`). */
    shard: (action: WriteAction) => number;
    /** Plan again in this many ms: a better tier will have waited long enough (SPEC §14). */
    wakeMs?: number;
  }> {
    const { desired: store, cache, options } = this.#deps;
    const { namespace = "", name } = splitKey(key);
    const ownership = ownershipOf(this.#deps);
    // Sharded (DESIGN §3 "Across shards"): this replica writes the Service only when it
    // holds its owning shard, and the parts of the clusters it hosts; it learns the
    // members of the clusters it does not host from their parts (the local API).
    const sharded = ownership.shards > 1;
    const owner = !sharded || ownsFederated(ownership, namespace, name);
    // The local cluster's own Service is a member too (SPEC §14), hosted by the owner;
    // not while a remote cluster is registered under the local cluster's name.
    const localCluster = this.#localCluster();
    const hosts = (cluster: string): boolean =>
      !sharded || (cluster === localCluster ? owner : hostsCluster(ownership, cluster));
    const unknown = new Set([...store.unknownClusters()].filter(hosts));
    const hosted = new Map([...store.members(key)].filter(([cluster]) => hosts(cluster)));
    if (localCluster !== undefined && hosts(localCluster)) {
      const answer = this.#deps.localMembers?.memberOf(key) ?? { kind: "none" };
      if (answer.kind === "member") hosted.set(localCluster, answer.member);
      else if (answer.kind === "unknown") unknown.add(localCluster);
    }
    const serviceSlices = slicesOfService(this.#deps, namespace, name);
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
        this.#setProblems(key, new Map(clusters.map((c) => [c, { reason: SHARDED_ENDPOINTS, message: problem }])));
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
      service = await getUnlabelled<Service>(this.#deps, "Service", key);
      if (owner) endpoints ??= await getUnlabelled<Endpoints>(this.#deps, "Endpoints", key);
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
    if (reduction.kind === "wait") this.#waiting.add(key);
    else this.#waiting.delete(key);
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
          ? await getUnlabelled<EndpointSlice>(this.#deps, "EndpointSlice", sliceKey)
          : undefined);
      if (found) observed.push({ kind: "EndpointSlice", object: found });
    }
    // The tiers (SPEC §14): decided by the owner, followed by the other hosts.
    const federatedSlices = serviceSlices.filter((slice) => isFederatedObject("EndpointSlice", slice));
    const { tiered, standing, wakeMs } = this.#standing(key, {
      reduction,
      service,
      slices: federatedSlices,
      hosts,
      hosted: hostedParts,
      sharded,
      owner,
    });
    const plan = planFederated({
      namespace,
      name,
      reduction: tiered && reduction.kind === "write" ? { ...reduction, parts: tiered.parts } : reduction,
      ...(tiered?.servingPriority !== undefined ? { servingPriority: tiered.servingPriority } : {}),
      observed,
      endpointsApi: options.endpointsApi,
      namespaceExists,
      createNamespaces: options.createNamespaces,
      excludedNamespaces: options.excludedNamespaces,
      namespaceQuota: this.#deps.namespaceQuota,
      ...(sharded ? { shard: { owner, hosts, members: standing } } : {}),
    });
    if (!plan.blocked) {
      const problems = new Map<string, { reason: string; message: string }>();
      const excluded = plan.excluded ?? (reduction.kind === "write" ? reduction.excluded : []);
      for (const e of excluded) problems.set(e.cluster, { reason: "port-conflict", message: e.message });
      this.#setProblems(key, problems);
    }
    // A cluster's own mirror under a fleet-wide name (a cluster named "federated"): the
    // fleet-wide Service keeps the name.
    for (const cluster of store.claimants(key))
      this.#block(key, cluster, {
        reason: "owned-by-other-cluster",
        message: `mirror name ${key} is a fleet-wide Service's; cluster ${cluster}'s mirror is not written`,
      });
    const fleetShard = federatedShardOf(namespace, name, ownership.shards);
    const namespaceShard = owner ? fleetShard : shardOf(hostedParts[0]?.cluster ?? "", ownership.shards);
    return {
      plan,
      observed,
      members: [...(sharded ? hosted : members).keys()].sort(),
      shard: (action) => federatedWriteShard(action, ownership.shards, fleetShard, namespaceShard, localCluster),
      ...(wakeMs !== undefined ? { wakeMs } : {}),
    };
  }

  /**
   * The serving tiers of `key` (SPEC §14): unsharded, or on the Service's owner, the
   * TierBook decides from every member (sharded: hosted members count their own state,
   * the others what their parts state); a host that does not own the Service follows
   * the cutoff the Service states (TierBook.follow). `standing`: the hosted parts as
   * written (sharded).
   */
  #standing(
    key: string,
    input: {
      reduction: Reduction;
      service: Service | undefined;
      slices: readonly EndpointSlice[];
      hosts: (cluster: string) => boolean;
      hosted: readonly FederatedMember[];
      sharded: boolean;
      owner: boolean;
    },
  ): { tiered?: TierOutcome; standing: readonly FederatedMember[]; wakeMs?: number } {
    const { reduction, service, slices, hosts, hosted, sharded, owner } = input;
    // A replica that neither owns the Service nor hosts a member has nothing to follow.
    if (reduction.kind !== "write" || (!owner && hosted.length === 0)) {
      if (reduction.kind !== "wait") this.#tiers.forget(key);
      return { standing: hosted };
    }
    const priorityOf = (cluster: string) => this.#priorityOf(cluster);
    const tiers = sharded
      ? shardedTiers({ parts: reduction.parts, kept: reduction.kept, slices, hosts, priorityOf })
      : federatedTiers(reduction.parts, reduction.kept, priorityOf, (c) => partReady(slices, c));
    if (owner) {
      const tiered = this.#tiers.observe(key, reduction, tiers, service);
      const standing = hostedStanding(hosted, tiered.servingPriority, priorityOf);
      return { tiered, standing, ...(tiered.wakeMs !== undefined ? { wakeMs: tiered.wakeMs } : {}) };
    }
    const followed = this.#tiers.follow(key, tiers, service);
    return {
      standing: hostedStanding(hosted, followed.servingPriority, priorityOf),
      ...(followed.wakeMs !== undefined ? { wakeMs: followed.wakeMs } : {}),
    };
  }

  /** Replaces the problems of fleet-wide key `key`, and reports them (see reportProblems). */
  #setProblems(key: string, problems: Map<string, FleetProblem>): void {
    const { namespace = "", name } = splitKey(key);
    reportProblems(this.#deps, this.#fleetProblems, {
      key,
      problems,
      involved: { kind: "Service", apiVersion: "v1", namespace, name },
      eventReasons: FLEET_EVENT_REASONS,
      otherReason: "FederatedNameConflict",
    });
  }
}
