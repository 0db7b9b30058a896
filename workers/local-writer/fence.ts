/**
 * Leader election's write fence, held by the writer thread itself: no write may be sent
 * at or after `writableUntil` (ms on `systemClock`, CLOCK_MONOTONIC, which the main
 * thread that computes the deadline and this thread that checks it read alike). Without
 * leader election the fence is open forever. A stalled main thread sends no new deadline,
 * so the writer stops on its own before another replica can hold the Lease.
 */
import type { Clock } from "../../src/core/clock.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import type { Logger } from "../../src/log.ts";

/** A key held back by the fence is looked at again after this long (or when the fence moves). */
export const FENCE_RECHECK_MS = 1_000;

export class WriteFence {
  readonly #clock: Clock;
  readonly #log: Logger;
  /** +∞ without leader election; 0 (closed) until the first deadline with it. */
  #writableUntil: number;
  /** The closed period was logged: one warning per closed period, not one per write. */
  #logged = false;

  constructor(fenced: boolean, clock: Clock, log: Logger) {
    this.#clock = clock;
    this.#log = log;
    this.#writableUntil = fenced ? 0 : Number.POSITIVE_INFINITY;
  }

  /** Whether a write may be sent now. Check it right before sending. */
  get writable(): boolean {
    return this.#clock.now() < this.#writableUntil;
  }

  /** Moves the deadline (the latest call wins). Returns true when this reopened a closed fence. */
  move(writableUntil: number): boolean {
    const wasClosed = !this.writable;
    this.#writableUntil = writableUntil;
    if (!wasClosed || !this.writable) return false;
    if (this.#logged) this.#log.info("write fence moved forward: writing again");
    this.#logged = false;
    return true;
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
}
