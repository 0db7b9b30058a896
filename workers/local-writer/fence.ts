/**
 * The write fence, held by the writer thread itself, per shard: no write of a key of
 * shard k may be sent at or after shard k's `writableUntil` (ms on `systemClock`,
 * CLOCK_MONOTONIC, which the main thread that computes the deadlines and this thread
 * that checks them read alike), and none at all for a shard this replica does not hold.
 *
 * Three modes, fixed at construction:
 * - not fenced (no leader election): one shard, open forever;
 * - single leader (`--leader-elect`, one shard): shard 0, closed until the first
 *   deadline (`move`);
 * - sharded (`--shards S` > 1): no shard held until `setShards` names the held shards
 *   and their deadlines; `ownership` is what the planner consults.
 * A stalled main thread sends no new deadline, so the writer stops on its own before
 * another replica can hold the Lease.
 */
import type { Clock } from "../../src/core/clock.ts";
import { allShards, type ShardOwnership } from "../../src/core/shards.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import type { Logger } from "../../src/log.ts";

/** A key held back by the fence is looked at again after this long (or when the fence moves). */
export const FENCE_RECHECK_MS = 1_000;

/** What a change of the held shards did. */
export interface ShardChange {
  /** A shard that was not writable is writable now. */
  readonly reopened: boolean;
  readonly gained: readonly number[];
  readonly dropped: readonly number[];
}

export class WriteFence {
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #sharded: boolean;
  /** Held shard → deadline. +∞ without leader election; shard 0 is 0 (closed) until the first deadline with it. */
  #writableUntil = new Map<number, number>();
  #ownership: ShardOwnership;
  /** The closed period was logged: one warning per closed period, not one per write. */
  #logged = false;

  /**
   * @param fenced leader election is on (ignored when `shards` > 1: sharding is always fenced)
   * @param shards the shard count S (default 1: not sharded)
   */
  constructor(fenced: boolean, clock: Clock, log: Logger, shards = 1) {
    this.#clock = clock;
    this.#log = log;
    this.#sharded = shards > 1;
    if (this.#sharded) {
      this.#ownership = { shards, held: new Set() };
    } else {
      this.#ownership = allShards;
      this.#writableUntil.set(0, fenced ? 0 : Number.POSITIVE_INFINITY);
    }
  }

  /** The shards held now (all of them when not sharded). */
  get ownership(): ShardOwnership {
    return this.#ownership;
  }

  /** Whether some write may be sent now (Events, which belong to no shard). */
  get writable(): boolean {
    const now = this.#clock.now();
    for (const until of this.#writableUntil.values()) if (now < until) return true;
    return false;
  }

  /** Whether a write of a key of `shard` may be sent now. Check it right before sending. */
  writableFor(shard: number): boolean {
    return this.#clock.now() < (this.#writableUntil.get(shard) ?? 0);
  }

  /**
   * How long (ms) a write of `shard` sent now may still reach the API server: until the
   * shard's deadline; +∞ without leader election, 0 when closed. The deadline is the renew
   * deadline, `leaseDuration - renewDeadline` before anyone may take the Lease: a write
   * still unanswered by then must be abandoned (its request aborted), or it could land
   * after the next holder's first writes, e.g. when it waited for a socket or for an API
   * server that restarts.
   */
  msLeftFor(shard: number): number {
    return Math.max(0, (this.#writableUntil.get(shard) ?? 0) - this.#clock.now());
  }

  /**
   * Single leader: moves shard 0's deadline (the latest call wins). Returns true when
   * this reopened a closed fence. Ignored when sharded (`setShards` carries the deadlines).
   */
  move(writableUntil: number): boolean {
    if (this.#sharded) return false;
    const wasClosed = !this.writable;
    this.#writableUntil.set(0, writableUntil);
    return this.#reopened(wasClosed);
  }

  /** Sharded: the shards held now and their deadlines; any other shard is closed and not held. */
  setShards(held: readonly { readonly shard: number; readonly writableUntil: number }[]): ShardChange {
    if (!this.#sharded) return { reopened: false, gained: [], dropped: [] };
    const before = this.#ownership.held;
    const closedBefore = new Set([...before].filter((s) => !this.writableFor(s)));
    const next = new Map<number, number>();
    for (const { shard, writableUntil } of held) if (shard < this.#ownership.shards) next.set(shard, writableUntil);
    this.#writableUntil = next;
    this.#ownership = { shards: this.#ownership.shards, held: new Set(next.keys()) };
    const gained = [...next.keys()].filter((s) => !before.has(s));
    const dropped = [...before].filter((s) => !next.has(s));
    const reopened = [...next.keys()].some((s) => (closedBefore.has(s) || !before.has(s)) && this.writableFor(s));
    if (reopened && this.#logged) this.#log.info("write fence moved forward: writing again");
    if (reopened) this.#logged = false;
    return { reopened, gained, dropped };
  }

  /** A write held back by the fence: logged once per closed period, retried later. */
  held(what: string): ReconcileResult {
    if (!this.#logged) {
      this.#logged = true;
      this.#log.warn(
        { what },
        "write fence reached (the Lease was not renewed in time): holding every write until it is",
      );
    }
    return { kind: "requeue-after", ms: FENCE_RECHECK_MS };
  }

  #reopened(wasClosed: boolean): boolean {
    if (!wasClosed || !this.writable) return false;
    if (this.#logged) this.#log.info("write fence moved forward: writing again");
    this.#logged = false;
    return true;
  }
}
