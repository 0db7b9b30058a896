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
 * A fleet-wide key goes to `FederatedReconciler` (reconcile-federated.ts), which splits
 * it across shards instead (DESIGN §3 "Across shards"). A headless mirror (SPEC §12) is
 * planned with its hosts' addresses read from their observed per-host Services.
 */

import type { DesiredMirror } from "../../src/core/desired.ts";
import { desiredSliceContents, sliceNames } from "../../src/core/endpoint-slices.ts";
import { HEADLESS_MIRROR_LABEL, resolveHeadless } from "../../src/core/headless.ts";
import { ownerCluster } from "../../src/core/labels.ts";
import { type Blocked, MIRROR_KINDS, type ObservedObject } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, Endpoints, Service } from "../../src/core/objects.ts";
import { objectKey, splitKey } from "../../src/core/objects.ts";
import { type MirrorPlan, planMirror } from "../../src/core/plan.ts";
import { DERIVED_NAME } from "../../src/core/plan-imports.ts";
import { withShardLabel } from "../../src/core/shard-label.ts";
import { hostsCluster, shardOf } from "../../src/core/shards.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import type { FederatedServiceStatus } from "../../src/protocol/messages.ts";
import type { DesiredStore } from "./desired-store.ts";
import { NO_EVENT } from "./problem-events.ts";
import { FederatedReconciler } from "./reconcile-federated.ts";
import { ImportReconciler } from "./reconcile-imports.ts";
import {
  applyActions,
  getUnlabelled,
  needsSecondPass,
  ownershipOf,
  type ReconcilerDeps,
  slicesOfService,
} from "./reconcile-io.ts";

/** Passes of one reconcile at most: a stale owner's objects deleted, the Service created, then its slices. */
const MAX_PASSES = 3;

export interface BlockedMirror {
  readonly key: string;
  readonly reason: string;
  readonly message: string;
}

export class MirrorReconciler {
  readonly #deps: ReconcilerDeps;
  /** Keys whose mirror is not written, with the cluster that wants it and why. */
  readonly #blocked = new Map<string, Blocked & { cluster: string }>();
  /** Fleet-wide keys (SPEC §11): reconciled, and their problems and status kept, there. */
  readonly #federated: FederatedReconciler;
  /** MCS import keys (SPEC §12: a derived Service's key), likewise. */
  readonly #imports: ImportReconciler | undefined;

  constructor(deps: ReconcilerDeps) {
    this.#deps = deps;
    this.#federated = new FederatedReconciler(deps, (key, cluster, blocked) => this.block(key, cluster, blocked));
    this.#imports = deps.serviceImports ? new ImportReconciler(deps, deps.serviceImports) : undefined;
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    if (this.#imports?.isImport(key)) return this.#imports.reconcile(key);
    // Sharded, a fleet-wide key is every replica's business: the holder of its shard
    // writes the Service, the host of each member cluster its part (DESIGN §3 "Across shards").
    if (this.#federated.isFederated(key)) return this.#federated.reconcile(key);
    // Plan once more at once rather than wait for the watch: after a stale owner's
    // objects are deleted (the claimant's mirror comes next), and after a new Service is
    // created (its slices need its uid, their ownerReference).
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const planned = await this.#plan(key);
      if (planned === undefined) {
        // A shard this replica does not hold: nothing is planned, and a conflict it
        // reported for a cluster it no longer hosts is no longer its to report.
        this.#dropUnhosted(key);
        return { kind: "done" };
      }
      const { plan, desired, observed, shard } = planned;
      if (plan.blocked && desired) {
        this.block(key, desired.cluster, plan.blocked);
        return { kind: "requeue-after", ms: this.#deps.options.blockedRecheckMs };
      }
      const outcome = await applyActions(this.#deps, key, plan.actions, desired, observed, shard);
      if (outcome) return outcome;
      if (plan.released === undefined && !needsSecondPass(this.#deps, plan.actions)) return { kind: "done" };
      if (plan.released !== undefined)
        this.#deps.log.info(
          { key, cluster: plan.released },
          `mirror name ${key} released by cluster ${plan.released}, which no longer claims it`,
        );
    }
    return { kind: "done" };
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
    const ownership = ownershipOf(this.#deps);
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
    if (creating && !endpoints) endpoints = await getUnlabelled<Endpoints>(this.#deps, "Endpoints", key);
    if (service) observed.push({ kind: "Service", object: service });
    if (endpoints) observed.push({ kind: "Endpoints", object: endpoints });
    if (namespace !== undefined) {
      for (const sliceName of sliceNames(name)) {
        const sliceKey = objectKey({ namespace, name: sliceName });
        const slice = cache.observed("EndpointSlice", sliceKey, this.#deps.slices.get(sliceKey));
        if (slice) observed.push({ kind: "EndpointSlice", object: slice });
      }
      // Every slice of ours that names this mirror, whatever its name (an older naming,
      // a crash between writes, a renamed mirror): kept only if wanted (SPEC §6).
      for (const slice of slicesOfService(this.#deps, namespace, name))
        if (!observed.some((o) => o.kind === "EndpointSlice" && o.object.metadata.name === slice.metadata.name))
          observed.push({ kind: "EndpointSlice", object: slice });
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
        const slice = await getUnlabelled<EndpointSlice>(this.#deps, "EndpointSlice", `${namespace}/${sliceName}`);
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
    const found = winner ? store.get(winner, key) : undefined;
    // Hosts unknown (SPEC §12): a headless mirror, and its per-host mirrors, stay as they are.
    const kept = this.#keptAsObserved(found, service, owner);
    const claimed = kept ? undefined : found;
    // Sharded, every object of the mirror carries its cluster's shard (core/shard-label.ts).
    const wanted =
      claimed && ownership.shards > 1
        ? { ...claimed, labels: withShardLabel(claimed.labels, claimed.cluster, ownership.shards) }
        : claimed;
    // A headless mirror's addresses are its per-host Services' cluster IPs (SPEC §12).
    const desired = wanted?.headless ? resolveHeadless(wanted, (svc) => this.#hostIp(namespace, svc, wanted)) : wanted;
    const reserved = desired && options.endpointsApi !== "endpoints" ? this.#reservedBy(key) : undefined;
    const plan: MirrorPlan = reserved
      ? { actions: [], blocked: reserved }
      : planMirror({
          key,
          desired,
          observed,
          endpointsApi: options.endpointsApi,
          namespaceExists,
          createNamespaces: options.createNamespaces,
          excludedNamespaces: options.excludedNamespaces,
          namespaceQuota: this.#deps.namespaceQuota,
          gcAllowed: (cluster) => !kept && store.gcAllowed(cluster),
          claimants,
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

  /**
   * Why mirror `key` may not have slices: their names (`<key>-ipv4|ipv6`) are, by
   * construction, a part's of a shared Service a cluster contributes to: `<key>` is
   * `<svc>-federated-<c>` and cluster c is a member of `<svc>-federated` (SPEC §11), or
   * `derived<hash>-<c>` and c exports to that import (SPEC §12). The part keeps the
   * name whatever came first (a blocked part would hold up every member); the mirror
   * is reported. Undefined when no part claims the names.
   */
  #reservedBy(key: string): Blocked | undefined {
    const { namespace = "", name } = splitKey(key);
    const { desired: store } = this.#deps;
    for (let dash = name.indexOf("-"); dash > 0; dash = name.indexOf("-", dash + 1)) {
      const shared = name.slice(0, dash);
      const cluster = name.slice(dash + 1);
      const sharedKey = objectKey({ namespace, name: shared });
      const part = shared.endsWith("-federated")
        ? store.members(sharedKey).has(cluster)
        : DERIVED_NAME.test(shared) && store.exports(sharedKey).has(cluster);
      if (part)
        return {
          reason: "owned-by-other-service",
          message: `the slices of mirror ${key} would take the names of cluster ${cluster}'s part of ${shared.endsWith("-federated") ? "fleet-wide Service" : "MCS import Service"} ${sharedKey}, which keeps them; the mirror is not written`,
        };
    }
    return undefined;
  }

  /**
   * Whether the objects under a key stay exactly as observed because the hosts of a
   * headless Service are not known (SPEC §12, `hostsUnknown`): `claimed` (the mirror
   * wanted there) is marked so and the observed Service is its cluster's headless
   * mirror; or nobody wants the key and the observed Service is a per-host mirror of
   * such a headless mirror. Unknown hosts are never "no hosts": nothing is flipped to an
   * ordinary mirror, nothing collected.
   */
  #keptAsObserved(
    claimed: DesiredMirror | undefined,
    service: Service | undefined,
    owner: string | undefined,
  ): boolean {
    if (!service || service.metadata.deletionTimestamp) return false;
    if (claimed) return claimed.hostsUnknown === true && this.#headlessOf(claimed.cluster, service);
    const headless = service.metadata.labels?.[HEADLESS_MIRROR_LABEL];
    if (headless === undefined || owner === undefined) return false;
    const key = objectKey({ namespace: service.metadata.namespace, name: headless });
    const parent = this.#deps.desired.get(owner, key);
    const observed = this.#deps.cache.observed("Service", key, this.#deps.services.get(key));
    return parent?.hostsUnknown === true && !!observed && this.#headlessOf(owner, observed);
  }

  /** Whether `service` is a headless mirror of `cluster` (ours, `clusterIP: None`, not being deleted). */
  #headlessOf(cluster: string, service: Service): boolean {
    return (
      !service.metadata.deletionTimestamp &&
      service.spec?.clusterIP === "None" &&
      ownerCluster(service.metadata.labels) === cluster
    );
  }

  /**
   * The cluster IP of per-host Service `service` of headless mirror `headless` as observed
   * (our own writes included), when it is that mirror's: labelled as its cluster's mirror
   * and as belonging to it. A user's Service under the name never lends its IP.
   */
  #hostIp(namespace: string | undefined, service: string, headless: DesiredMirror): string | undefined {
    const key = objectKey({ namespace, name: service });
    const observed = this.#deps.cache.observed("Service", key, this.#deps.services.get(key));
    const labels = observed?.metadata.labels;
    if (!observed || observed.metadata.deletionTimestamp || ownerCluster(labels) !== headless.cluster) return undefined;
    return labels?.[HEADLESS_MIRROR_LABEL] === headless.name ? observed.spec?.clusterIP : undefined;
  }

  /** Forgets `key`'s conflict when its cluster's shard is not held here (its holder reports it). */
  #dropUnhosted(key: string): void {
    const blocked = this.#blocked.get(key);
    if (blocked && !hostsCluster(ownershipOf(this.#deps), blocked.cluster)) this.#blocked.delete(key);
  }

  /** A mirror that is not written: logged (once per message) and reported as an Event. */
  block(key: string, cluster: string, blocked: Blocked): void {
    const previous = this.#blocked.get(key);
    this.#blocked.set(key, { ...blocked, cluster });
    if (previous?.message === blocked.message) return;
    this.#deps.log.warn({ key, cluster, reason: blocked.reason }, blocked.message);
    const { namespace, name } = splitKey(key);
    if (namespace && !NO_EVENT.has(blocked.reason)) {
      this.#deps.recordEvent({
        involved: { kind: "Service", apiVersion: "v1", namespace, name },
        type: "Warning",
        reason: blocked.reason === "owned-by-other-cluster" ? "MirrorOwnedByOtherCluster" : "MirrorNameConflict",
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
    for (const problems of [this.#federated.problems(), this.#imports?.problems() ?? new Map()])
      for (const [key, byCluster] of problems)
        for (const [cluster, p] of byCluster) add(cluster, { key, reason: p.reason, message: p.message });
    return out;
  }

  /**
   * Every fleet-wide Service the writer reduced and did not delete, by key; a blocked one
   * (its name held by a user's object) lists its members with no addresses written.
   */
  federatedStatus(): FederatedServiceStatus[] {
    return this.#federated.status();
  }

  /** Shared keys (fleet-wide, import) whose last reduction waited for unknown clusters. */
  waitingSharedKeys(): string[] {
    return [...this.#federated.waiting(), ...(this.#imports?.waiting() ?? [])];
  }

  /** Every MCS import the writer reduced and did not delete (SPEC §12). */
  importStatus(): FederatedServiceStatus[] {
    return this.#imports?.status() ?? [];
  }
}
