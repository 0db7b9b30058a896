/**
 * Who leads: the view of leader election that the admin server, the metrics and the
 * CLI read. With leader election off, this replica always leads (`alwaysLeading`).
 */

export interface Leadership {
  /** --leader-elect was given. */
  readonly enabled: boolean;
  /** This replica holds the Lease (always true when leader election is off). */
  readonly leading: boolean;
  readonly identity: string;
  /** The current holder as last observed in the Lease, if known. */
  readonly holder?: string;
  /** Epoch ms of the last transition of `leading`. */
  readonly since?: number;
  /**
   * Why this replica takes no Lease now: Leases of another layout are live, or were a
   * lease duration ago (a rollout that changes the layout; src/core/layout-guard.ts).
   * Sharded, the same is in `sharding.refused`.
   */
  readonly refused?: string;
  /**
   * Sharded (`--shards` > 1): every replica runs the controller (`leading` is true) for
   * the shards it holds; which those are, and who holds the others, as observed.
   */
  readonly sharding?: ShardingView;
}

/** Sharding across replicas as one replica observes it (see shard-coordinator.ts). */
export interface ShardingView {
  readonly shards: number;
  /** Shards this replica holds, ascending. */
  readonly held: readonly number[];
  /** Shards this replica wants (its fair share), ascending. */
  readonly wanted: readonly number[];
  /** Live replicas as observed. */
  readonly live: readonly string[];
  /** Why no shard is taken now (another layout's Leases); absent when shards may be taken. */
  readonly refused?: string;
  /** Index = shard: its holder as observed, "" when free. */
  readonly holders: readonly string[];
}

/** Leadership when leader election is off: this replica always leads. */
export function alwaysLeading(identity: string, since: number = Date.now()): Leadership {
  return { enabled: false, leading: true, identity, since };
}
