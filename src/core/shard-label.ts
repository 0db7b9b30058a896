/**
 * The shard label of a sharded replica's mirrors, and the label selector of its writer's
 * watches (pure). With `--shards S` > 1 every object of a cluster's mirror (Service,
 * Endpoints, EndpointSlices; a headless mirror's per-host Services too) carries
 * `mirror.linkerd.io/shard: <k>-of-<S>`, k = `shardOf(cluster, S)`. A writer then
 * watches only `mirror.linkerd.io/shard notin (<each shard it does not hold>)`: the
 * mirrors of its own shards, and every object without a label of one of the other
 * shards, so each local write is decoded by the one replica it concerns, not by all.
 *
 * Invariants:
 * - the value names S: after S changes, an object labelled under the old S matches no
 *   replica's exclusion list, so every replica sees it and the holder of its cluster's
 *   shard rewrites the label (a mirror's labels are exact: a differing label is an
 *   update, like any other drift);
 * - objects without the label stay visible to every replica: mirrors written before
 *   sharding or by a one-replica Deployment (relabelled by their holder), and the parts
 *   of fleet-wide Services, which their owning shard's holder must read (DESIGN §3
 *   "Across shards");
 * - not sharded (S = 1): no label is written, and no requirement is added.
 */
import { SHARD_LABEL } from "./labels.ts";
import { type ShardOwnership, shardOf } from "./shards.ts";

/** The label value of shard `shard` of `shards`. */
export function shardLabelValue(shard: number, shards: number): string {
  return `${shard}-of-${shards}`;
}

/** The labels of a mirror of `cluster` with the shard label added when sharded (`shards` > 1). */
export function withShardLabel(
  labels: Readonly<Record<string, string>>,
  cluster: string,
  shards: number,
): Readonly<Record<string, string>> {
  if (shards <= 1) return labels;
  return { ...labels, [SHARD_LABEL]: shardLabelValue(shardOf(cluster, shards), shards) };
}

/**
 * The requirement a writer with `ownership` adds to its mirror watches' selectors:
 * undefined when it is not sharded or holds every shard (it sees everything).
 */
export function shardRequirement(ownership: ShardOwnership): string | undefined {
  if (ownership.shards <= 1) return undefined;
  const others: string[] = [];
  for (let shard = 0; shard < ownership.shards; shard++)
    if (!ownership.held.has(shard)) others.push(shardLabelValue(shard, ownership.shards));
  return others.length === 0 ? undefined : `${SHARD_LABEL} notin (${others.join(",")})`;
}

/**
 * What a sharded writer may plan: the shards of `ownership` whose mirrors its stores
 * have listed (`listed`); `ownership` itself when not sharded or nothing is pending.
 */
export function listedOwnership(ownership: ShardOwnership, listed: ReadonlySet<number>): ShardOwnership {
  if (ownership.shards <= 1) return ownership;
  const held = [...ownership.held];
  if (held.every((shard) => listed.has(shard))) return ownership;
  return { shards: ownership.shards, held: new Set(held.filter((shard) => listed.has(shard))) };
}
