/**
 * Injectable time. Everything in `core/` that waits or measures durations takes a `Clock`,
 * so tests drive time with `ManualClock` instead of sleeping.
 */

declare const timerHandleBrand: unique symbol;

/** An opaque timer, valid only with the `Clock` that created it. */
export interface TimerHandle {
  readonly [timerHandleBrand]: true;
}

export interface Clock {
  /**
   * Milliseconds on a clock that never goes backwards (wall-clock changes do not affect
   * it). Use it for durations and deadlines, not as a calendar timestamp.
   */
  now(): number;
  /** Calls `fn` once, no earlier than `ms` (clamped to >= 0) from now. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Cancels a timer; a no-op when it already ran or was cancelled. */
  clearTimeout(handle: TimerHandle): void;
}

/** Node's `setTimeout` turns delays above this into 1 ms, so longer delays are chained. */
const MAX_TIMER_MS = 2_147_483_647;

interface SystemTimer {
  timeout: ReturnType<typeof globalThis.setTimeout> | undefined;
}

/**
 * The real clock: `now()` is CLOCK_MONOTONIC in ms (`process.hrtime`), one clock for the
 * whole process: every thread reads the same value at the same instant, so a deadline
 * computed on one thread (the write fence, computed on the main thread) holds on another
 * (checked on the writer thread). Not a calendar time: its zero is arbitrary (boot).
 * `performance.timeOrigin + performance.now()` is NOT such a clock: each thread samples
 * the wall clock for its own `timeOrigin`, so a step of the system time between two
 * thread starts shifts one thread's readings against the other's.
 * A pending timer keeps the event loop alive, like `setTimeout`; delays of any length
 * are honoured (not cut at 24.8 days).
 */
export const systemClock: Clock = Object.freeze({
  now: (): number => Number(process.hrtime.bigint()) / 1e6,
  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: SystemTimer = { timeout: undefined };
    const arm = (remaining: number): void => {
      const step = Math.min(remaining, MAX_TIMER_MS);
      timer.timeout = globalThis.setTimeout(() => {
        if (remaining > step) arm(remaining - step);
        else {
          timer.timeout = undefined;
          fn();
        }
      }, step);
    };
    arm(Math.max(0, ms || 0));
    return timer as unknown as TimerHandle;
  },
  clearTimeout(handle: TimerHandle): void {
    const timer = handle as unknown as SystemTimer;
    if (timer.timeout !== undefined) globalThis.clearTimeout(timer.timeout);
    timer.timeout = undefined;
  },
});

interface ManualTimer {
  readonly due: number;
  readonly seq: number;
  readonly fn: () => void;
}

/**
 * A clock for tests: time stands still until `advance` moves it. Timers run synchronously
 * inside `advance`, in order of due time, then of creation; a timer set by a running timer
 * also runs if it falls due within the same `advance`. A timer of 0 ms runs at the next
 * `advance` (even `advance(0)`), never inside `setTimeout`.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Set<ManualTimer>();

  /** @param startMs the initial reading of `now()` (default 0). */
  constructor(startMs = 0) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const timer: ManualTimer = { due: this.#now + Math.max(0, ms || 0), seq: this.#seq++, fn };
    this.#timers.add(timer);
    return timer as unknown as TimerHandle;
  }

  clearTimeout(handle: TimerHandle): void {
    this.#timers.delete(handle as unknown as ManualTimer);
  }

  /** Timers set and not yet run or cancelled. */
  get pending(): number {
    return this.#timers.size;
  }

  /** The due time of the earliest pending timer, or undefined when there is none. */
  nextDueAt(): number | undefined {
    return this.#earliest()?.due;
  }

  /**
   * Moves time forward by `ms`, running every timer that falls due on the way, each with
   * `now()` equal to its due time; afterwards `now()` is the old value plus `ms`.
   * Exceptions thrown by a timer propagate (the remaining timers stay pending).
   * @throws RangeError when `ms` is negative or not finite.
   */
  advance(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`ManualClock.advance: ms must be >= 0 (got ${ms})`);
    const target = this.#now + ms;
    for (;;) {
      const next = this.#earliest();
      if (!next || next.due > target) break;
      this.#timers.delete(next);
      this.#now = next.due;
      next.fn();
    }
    this.#now = target;
  }

  #earliest(): ManualTimer | undefined {
    let best: ManualTimer | undefined;
    for (const t of this.#timers) {
      if (!best || t.due < best.due || (t.due === best.due && t.seq < best.seq)) best = t;
    }
    return best;
  }
}

/** Resolves after `ms` on `clock`, or at once when `signal` is (or becomes) aborted. Never rejects. */
export function abortableSleep(clock: Clock, ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clock.clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
