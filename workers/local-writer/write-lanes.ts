/**
 * The lane of a writer key: which cluster's turn a key (and its writes) takes in the work
 * queue and at the write rate limit (core/workqueue.ts, core/fair-bucket.ts). Lanes take
 * turns, so one remote churning at full speed (every change of a remote Service's
 * resourceVersion is a local write) keeps its backlog to itself: another cluster's
 * change waits for at most one key, and one token, of each busy cluster.
 *
 * A key's lane is the cluster that wants its mirror (the first claimant in name order),
 * else the cluster its observed mirror Service is labelled with (a mirror being
 * collected); everything else shares one lane of its own: fleet-wide Services and MCS
 * imports (objects clusters share), and keys no cluster is known for. A lane is only a
 * turn in a queue: a wrong one delays a key by the turns of one lane, never drops it.
 */
import { ownerCluster } from "../../src/core/labels.ts";
import type { DesiredStore } from "./desired-store.ts";
import type { LocalStores } from "./local-stores.ts";

/** The lane of shared and unattributed keys: never a cluster's (a cluster name is a non-empty DNS label). */
export const SHARED_LANE = "";

export function writeLane(
  key: string,
  desired: Pick<DesiredStore, "claimants">,
  stores: { readonly services: Pick<LocalStores["services"], "get"> },
): string {
  return desired.claimants(key)[0] ?? ownerCluster(stores.services.get(key)?.metadata.labels) ?? SHARED_LANE;
}
