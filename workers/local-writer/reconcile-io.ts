/**
 * What the mirror and the fleet-wide reconcilers share: their dependencies, and the I/O
 * both do the same way: a plan's actions handed to the write executor in order (a
 * Service's delete last), and GETs of objects the label-selected stores cannot show.
 */
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { McsAvailability } from "../../src/core/mcs.ts";
import {
  type MirrorObjectKind,
  type ObservedObject,
  objectPath,
  type WriteAction,
} from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, Endpoints, KubeObject, Namespace, Service } from "../../src/core/objects.ts";
import { objectKey, splitKey } from "../../src/core/objects.ts";
import { allShards, type ShardOwnership } from "../../src/core/shards.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import { writeStages } from "../../src/core/write-stages.ts";
import { KubeApiError, type KubeClient } from "../../src/kube/client.ts";
import type { Logger } from "../../src/log.ts";
import type { EventRequest, WriterOptions } from "../../src/protocol/messages.ts";
import type { DesiredStore } from "./desired-store.ts";
import type { LocalExports } from "./local-exports.ts";
import type { LocalMembers } from "./local-members.ts";
import type { MutationCache } from "./mutation-cache.ts";
import { sliceServiceKey } from "./slice-index.ts";
import type { WriteExecutor } from "./write-executor.ts";

/** The read side of a local store (a Watcher). */
export interface Store<T> {
  get(key: string): T | undefined;
}

/** The local cluster's ServiceImports (label-selected: fleet-mirror's), when served. */
export interface ServiceImportSource extends Store<KubeObject> {
  values(): Iterable<KubeObject>;
  readonly availability: McsAvailability;
}

export interface ReconcilerDeps {
  readonly desired: DesiredStore;
  readonly services: Store<Service>;
  readonly endpoints: Store<Endpoints>;
  /**
   * Label-selected: only slices with the mirror labels and fleet-mirror's `managed-by`.
   * `ofService`: the held slices of one Service key (slice-index.ts); without it, found
   * by scanning `values()`.
   */
  readonly slices: Store<EndpointSlice> & {
    values(): Iterable<EndpointSlice>;
    ofService?(serviceKey: string): Iterable<EndpointSlice>;
  };
  readonly namespaces: Store<Namespace>;
  /** The local ServiceImports and whether they are served (SPEC §12); absent: no MCS imports are written. */
  readonly serviceImports?: ServiceImportSource;
  /** The local cluster's own fleet-wide members (SPEC §14); absent: none. */
  readonly localMembers?: Pick<LocalMembers, "cluster" | "priority" | "memberOf">;
  /** The local cluster's own ServiceExports (SPEC §16); absent: the local cluster exports nothing. */
  readonly localExports?: Pick<LocalExports, "cluster" | "exportOf" | "nameFor">;
  /** Our own writes not yet delivered by the watches (a dry run adds the Services it would create). */
  readonly cache: Pick<MutationCache, "observed">;
  readonly executor: Pick<WriteExecutor, "apply">;
  readonly client: Pick<KubeClient, "request">;
  readonly options: Pick<
    WriterOptions,
    | "createNamespaces"
    | "excludedNamespaces"
    | "blockedRecheckMs"
    | "endpointsApi"
    | "failbackDelayMs"
    | "failoverMinReady"
  > &
    Partial<Pick<WriterOptions, "concurrency">>;
  readonly log: Logger;
  readonly recordEvent: (event: EventRequest) => void;
  /** Why creating a namespace for a cluster would pass its quota (namespace-quota.ts); absent: no quota. */
  readonly namespaceQuota?: (namespace: string, cluster: string) => string | undefined;
  /** Fleet-wide Services' tiers (SPEC §14): monotonic ms (default `systemClock`), and a count per switch. */
  readonly now?: () => number;
  readonly tierSwitched?: (direction: "failover" | "failback") => void;
  /** The shards this replica holds, read at every plan. Default: not sharded (everything). */
  readonly ownership?: () => ShardOwnership;
}

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
 * Applies a plan's actions in order (deletes of the Service last); the first outcome that
 * ends the pass, if any. `shard`: the shard whose fence every write passes, or one per action.
 *
 * Stage by stage (core/write-stages.ts): the slice writes a plan lists together go out
 * together, at most `options.concurrency` at once (the writer's `--write-concurrency`;
 * absent: one at a time), and the next stage starts once every write of this one is
 * answered. A stage ends the pass with the first outcome in plan order, after all of its
 * writes are answered: nothing of a key is in flight once its reconcile returns.
 */
export async function applyActions(
  deps: ReconcilerDeps,
  key: string,
  actions: readonly WriteAction[],
  desired: DesiredMirror | undefined,
  observed: readonly ObservedObject[],
  shard: number | ((action: WriteAction) => number),
): Promise<ReconcileResult | undefined> {
  // A plan that rewrites a mirror's addresses moves traffic: none of its writes waits for the busy share.
  const steers = actions.some((a) => a.kind === "EndpointSlice" || a.kind === "Endpoints");
  // A throw is this write's failure (a retry, as runWorkers makes of one), never a stage
  // left with writes in flight.
  const apply = async (action: WriteAction): Promise<ReconcileResult | undefined> => {
    const target =
      action.kind === "Namespace"
        ? undefined
        : observed.find((o) => o.kind === action.kind && o.object.metadata.name === action.name)?.object;
    try {
      const fence = typeof shard === "number" ? shard : shard(action);
      return await deps.executor.apply(key, action, desired, target, fence, steers);
    } catch (error) {
      return { kind: "retry", error };
    }
  };
  const width = Math.max(1, deps.options.concurrency ?? 1);
  for (const stage of writeStages(deletesServiceLast(actions))) {
    const outcomes = await inPool(stage, width, apply);
    const outcome = outcomes.find((o) => o !== undefined);
    if (outcome) return outcome;
  }
  return undefined;
}

/** `run` over `items`, at most `width` at once, started in order; the results in `items`' order. */
async function inPool<T, R>(items: readonly T[], width: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await run(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
  return results;
}

/** A Service was just created and slices are written: they need its uid, so plan again at once. */
export function needsSecondPass(deps: ReconcilerDeps, actions: readonly WriteAction[]): boolean {
  const createdService = actions.some((a) => a.verb === "create" && a.kind === "Service");
  return createdService && deps.options.endpointsApi !== "endpoints";
}

/** The shards this replica holds now (all of them when not sharded). */
export function ownershipOf(deps: ReconcilerDeps): ShardOwnership {
  return deps.ownership?.() ?? allShards;
}

/** GETs an object our label-selected stores may not show; undefined when it does not exist. */
export async function getUnlabelled<T extends KubeObject>(
  deps: ReconcilerDeps,
  kind: MirrorObjectKind,
  key: string,
  apiVersion?: string,
): Promise<T | undefined> {
  const { namespace = "", name } = splitKey(key);
  try {
    return await deps.client.request<T>("GET", objectPath(kind, namespace, name, apiVersion));
  } catch (error) {
    if (error instanceof KubeApiError && error.status === 404) return undefined;
    throw error;
  }
}

/**
 * fleet-mirror's slices of Service `namespace/name` (those whose service-name names it,
 * SPEC §9), whatever their names, through the mutation cache (a slice we deleted is gone).
 */
export function slicesOfService(deps: ReconcilerDeps, namespace: string, name: string): EndpointSlice[] {
  const serviceKey = objectKey({ namespace, name });
  const held = deps.slices.ofService
    ? deps.slices.ofService(serviceKey)
    : [...deps.slices.values()].filter((slice) => sliceServiceKey(slice) === serviceKey);
  const out: EndpointSlice[] = [];
  for (const slice of held) {
    const current = deps.cache.observed("EndpointSlice", objectKey(slice.metadata), slice);
    if (current) out.push(current);
  }
  return out;
}
