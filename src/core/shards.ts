/**
 * Sharding across replicas (pure): which shard a cluster or a fleet-wide object belongs
 * to, and the question every writer asks before writing a key ("is this mine?").
 *
 * Invariants:
 * - `shardOf` is stable: the same name and shard count give the same shard in every
 *   replica, every version and every run (FNV-1a over the name's UTF-8 bytes, then
 *   modulo the count). Changing the shard count remaps clusters; that is a
 *   reconfiguration of the whole Deployment, never a runtime event.
 * - A cluster belongs to `shardOf(clusterName)`; a fleet-wide object to
 *   `shardOf("<namespace>/<name>")` of its local Service, so exactly one shard owns it.
 * - With one shard (the default) everything belongs to shard 0, and `allShards` is the
 *   ownership of a replica that holds it: the behaviour before sharding.
 */

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`. */
function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/**
 * The shard (0..shards-1) that `name` belongs to.
 * @throws RangeError when `shards` is not a positive integer
 */
export function shardOf(name: string, shards: number): number {
  if (!Number.isInteger(shards) || shards < 1) throw new RangeError(`shards must be a positive integer, got ${shards}`);
  return fnv1a32(name) % shards;
}

/** The shard that owns the fleet-wide object `<namespace>/<name>` (its local Service's key). */
export function federatedShardOf(namespace: string, name: string, shards: number): number {
  return shardOf(`${namespace}/${name}`, shards);
}

/**
 * What one replica's writer may write: the keys of the shards it holds. Read right
 * before planning a key; the per-shard write fence still checks the Lease deadline right
 * before each write.
 */
export interface ShardOwnership {
  /** The shard count S (1 = not sharded). */
  readonly shards: number;
  /** The shards this replica holds now. */
  readonly held: ReadonlySet<number>;
}

/** A replica that is not sharded: it owns everything. */
export const allShards: ShardOwnership = { shards: 1, held: new Set([0]) };

/** Whether this replica hosts `cluster` (runs its actor and writes its mirrors). */
export function hostsCluster(ownership: ShardOwnership, cluster: string): boolean {
  return ownership.held.has(shardOf(cluster, ownership.shards));
}

/** Whether this replica owns the fleet-wide Service `<namespace>/<name>` (writes the shared object). */
export function ownsFederated(ownership: ShardOwnership, namespace: string, name: string): boolean {
  return ownership.held.has(federatedShardOf(namespace, name, ownership.shards));
}
