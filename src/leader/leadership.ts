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
  /** Index = shard: its holder as observed, "" when free. */
  readonly holders: readonly string[];
}

/** Leadership when leader election is off: this replica always leads. */
export function alwaysLeading(identity: string, since: number = Date.now()): Leadership {
  return { enabled: false, leading: true, identity, since };
}
