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

const UTF8 = new TextEncoder();

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of UTF8.encode(text)) {
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
  // Every hash modulo 1 is 0: an unsharded writer asks this before every plan, so it skips the hash.
  return shards === 1 ? 0 : fnv1a32(name) % shards;
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

/**
 * Fair share (pure): which shards each live replica should hold. Every replica computes
 * it from what it observed (the live replicas and the current holder of each shard's
 * Lease), so replicas that observed the same agree, and there is no tug of war. Sticky:
 * a live holder keeps its shards up to its share; only the rest moves.
 *
 * With R live replicas, q = ⌊S/R⌋ and m = S mod R: the m replicas that keep the most
 * (ties by identity) may hold q + 1 shards, the others q. Each replica keeps its held
 * shards up to that cap (the best-scored ones; score = `fnv1a32("<replica>/<shard>")`,
 * rendezvous hashing), and the free shards (unheld, held by a replica that is not live,
 * or over a cap) go to the replicas with room, best score first.
 *
 * Guarantees:
 * - every shard is wanted by exactly one live replica, and each replica wants q or q + 1;
 * - deterministic: it depends only on the SET of identities, the holders and S;
 * - a fixed point: when the holders are the wanted map, the wanted map is unchanged;
 * - when a replica leaves, only its shards move (each survivor holds at most q + 1, and
 *   the new share is at least that); when one joins, only shards over the new caps move,
 *   and they move to replicas with room (the newcomer first of all).
 * With no live replica the map is empty.
 */
export function wantedShards(
  replicas: Iterable<string>,
  shards: number,
  holders: ReadonlyMap<number, string> = new Map(),
): Map<string, number[]> {
  if (!Number.isInteger(shards) || shards < 1) throw new RangeError(`shards must be a positive integer, got ${shards}`);
  const identities = [...new Set(replicas)].sort();
  const wanted = new Map<string, number[]>(identities.map((r) => [r, []]));
  if (identities.length === 0) return wanted;
  const score = (replica: string, shard: number): number => fnv1a32(`${replica}/${shard}`);
  const q = Math.floor(shards / identities.length);
  const m = shards % identities.length;
  const held = new Map<string, number[]>(identities.map((r) => [r, []]));
  for (const [shard, holder] of holders)
    if (Number.isInteger(shard) && shard >= 0 && shard < shards) held.get(holder)?.push(shard);
  // The m replicas that keep the most get the larger share: nobody drops a shard it
  // could keep.
  const byKept = [...identities].sort(
    (a, b) => Math.min(held.get(b)?.length ?? 0, q + 1) - Math.min(held.get(a)?.length ?? 0, q + 1) || (a < b ? -1 : 1),
  );
  const cap = new Map<string, number>(byKept.map((r, i) => [r, i < m ? q + 1 : q]));
  const taken = new Set<number>();
  for (const replica of identities) {
    const keep = (held.get(replica) ?? []).sort((a, b) => score(replica, b) - score(replica, a) || a - b);
    const list = wanted.get(replica) ?? [];
    for (const shard of keep.slice(0, cap.get(replica) ?? 0)) {
      list.push(shard);
      taken.add(shard);
    }
  }
  const pairs: { replica: string; shard: number; score: number }[] = [];
  for (const replica of identities)
    for (let shard = 0; shard < shards; shard++)
      if (!taken.has(shard)) pairs.push({ replica, shard, score: score(replica, shard) });
  pairs.sort(
    (a, b) => b.score - a.score || (a.replica < b.replica ? -1 : a.replica > b.replica ? 1 : 0) || a.shard - b.shard,
  );
  for (const { replica, shard } of pairs) {
    const list = wanted.get(replica);
    if (!list || taken.has(shard) || list.length >= (cap.get(replica) ?? 0)) continue;
    list.push(shard);
    taken.add(shard);
  }
  for (const list of wanted.values()) list.sort((a, b) => a - b);
  return wanted;
}

/**
 * Joining (pure): whether a replica that has just started has watched the membership
 * long enough to take shards. Before it has, it takes none: the first replica to list
 * would otherwise see only itself, take every shard, start every cluster's actors, and
 * give most of them up a list later when the replicas started with it appear.
 *
 * Fed with each membership list that shows this replica's own membership Lease (so any
 * replica listing after it sees this one, and this one sees every replica that was
 * visible before it):
 * - the first such list starts the join (`since`) and the quiet window (`changedAt`);
 *   every list whose live set differs from the one before restarts the window;
 * - the join is settled at the first list whose live set equals the one before AND has
 *   not changed for `windowMs` (the retry period): no replica appeared or left over one
 *   retry period, so replicas whose membership Leases appeared within a retry period of
 *   each other settle on the same live set and want disjoint shares from the start. The
 *   lists are made more often while joining (membership.ts), so the window ends soon
 *   after the last replica appeared instead of at the next whole retry period;
 * - or at once, at the first list that shows `expectedReplicas` live replicas or more
 *   (`--expected-replicas`, the Deployment's replica count; 0: unknown): every replica
 *   of a Deployment started together has then seen every other, so waiting out the
 *   window buys nothing (a rollout that starts 3 replicas saves one retry period);
 * - or, whatever the lists show, `maxWaitMs` after `since`, so a stream of joining
 *   replicas delays a newcomer by a bounded time;
 * - once settled it stays settled (a later change is a join or leave, handled by the
 *   sticky fair share, with no wait: takeover of a dead replica's shards is never held
 *   back by this rule).
 */
export interface JoinState {
  /** Monotonic ms of the first list showing our own membership Lease. */
  readonly since: number;
  /** Monotonic ms of the list that first showed the current live set. */
  readonly changedAt: number;
  /** The live set of the last list counted, sorted and joined. */
  readonly live: string;
  readonly settled: boolean;
}

/**
 * The join after one more list showing our own membership Lease, at `now` with `live`
 * replicas: settled once the live set stayed the same for `windowMs`, at once when it
 * holds `expectedReplicas` (> 0) replicas, or `maxWaitMs` after the first such list.
 */
export function observeJoin(
  state: JoinState | undefined,
  live: readonly string[],
  now: number,
  windowMs: number,
  maxWaitMs: number,
  expectedReplicas = 0,
): JoinState {
  const distinct = new Set(live);
  const key = [...distinct].sort().join("\n");
  const complete = expectedReplicas > 0 && distinct.size >= expectedReplicas;
  if (state === undefined) return { since: now, changedAt: now, live: key, settled: complete };
  if (state.settled) return state;
  const changedAt = key === state.live ? state.changedAt : now;
  const quiet = key === state.live && now - changedAt >= windowMs;
  return { since: state.since, changedAt, live: key, settled: complete || quiet || now - state.since >= maxWaitMs };
}
