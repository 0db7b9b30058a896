/**
 * What a remote-cluster actor's status says of its sync, and when a status is worth
 * publishing. Plain state with the time passed in; the actor decides the transitions
 * (it knows the watch) and builds the whole ClusterStatus.
 */
import type { WatchFailure } from "../../src/kube/watcher.ts";
import type { ClusterSyncState } from "../../src/protocol/messages.ts";

/** The cluster's sync state, since when, the last complete list and the watch failures. */
export class SyncTracker {
  #state: ClusterSyncState = "starting";
  #since: number;
  #lastSyncedAt: number | undefined;
  #lastFailure: WatchFailure | undefined;
  readonly #failuresByReason: Record<string, number> = {};

  readonly #reachability: ((reachable: boolean, now: number) => void) | undefined;

  /**
   * `reachability` hears when the remote turns unreachable (`stale`: a failure after it
   * synced) and reachable again (`synced`): the partition policy's clock (SPEC §14).
   */
  constructor(now: number, reachability?: (reachable: boolean, now: number) => void) {
    this.#since = now;
    this.#reachability = reachability;
  }

  get state(): ClusterSyncState {
    return this.#state;
  }

  /** Moves to `state`; true when it is a change (then `since` is `now`). */
  enter(state: ClusterSyncState, now: number): boolean {
    if (this.#state === state) return false;
    this.#state = state;
    this.#since = now;
    if (state === "stale" || state === "synced") this.#reachability?.(state === "synced", now);
    return true;
  }

  /** A complete list of the remote's Services arrived at `now`. */
  listed(now: number): void {
    this.#lastSyncedAt = now;
  }

  /** Counts a watch failure by reason and keeps it as the last one. */
  failed(failure: WatchFailure): void {
    this.#lastFailure = failure;
    this.#failuresByReason[failure.reason] = (this.#failuresByReason[failure.reason] ?? 0) + 1;
  }

  /** The sync fields of a ClusterStatus (copies). */
  report(): {
    state: ClusterSyncState;
    since: number;
    lastSyncedAt?: number;
    lastFailure?: WatchFailure;
    failuresByReason: Record<string, number>;
  } {
    return {
      state: this.#state,
      since: this.#since,
      ...(this.#lastSyncedAt !== undefined ? { lastSyncedAt: this.#lastSyncedAt } : {}),
      ...(this.#lastFailure ? { lastFailure: { ...this.#lastFailure } } : {}),
      failuresByReason: { ...this.#failuresByReason },
    };
  }
}

/**
 * Whether a status is due: something it shows changed (`markDirty`), a new API warning
 * was counted, or probe counters changed (`markProbed`) and the last status is at least
 * `countersIntervalMs` old (counters alone are not worth a status per second).
 */
export class StatusThrottle {
  readonly #countersIntervalMs: number;
  #dirty = true;
  #probed = false;
  #publishedAt = 0;
  /** `apiWarnings` in the last status published. */
  #publishedWarnings = 0;

  constructor(countersIntervalMs: number) {
    this.#countersIntervalMs = countersIntervalMs;
  }

  markDirty(): void {
    this.#dirty = true;
  }

  markProbed(): void {
    this.#probed = true;
  }

  /** True when a status is due at `now` with `warnings` counted; it is then taken as published. */
  take(now: number, warnings: number): boolean {
    const countersDue = this.#probed && now - this.#publishedAt >= this.#countersIntervalMs;
    if (!this.#dirty && !countersDue && warnings === this.#publishedWarnings) return false;
    this.#dirty = false;
    this.#probed = false;
    this.#publishedAt = now;
    this.#publishedWarnings = warnings;
    return true;
  }
}
