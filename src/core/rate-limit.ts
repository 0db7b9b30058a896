/** A token bucket on an injected clock: `burst` tokens at most, refilled at `qps` per second. */
import { type Clock, systemClock } from "./clock.ts";

/**
 * `qps` tokens per second, at most `burst` stored; the bucket starts full.
 *
 * Tokens are handed out strictly in request order: `take` and `reserve` claim the next
 * token at once (going into debt if needed) and wait until it is due, so a later
 * `tryTake` never steals a token an earlier caller is waiting for. Internally it keeps
 * the "theoretical arrival time" of the next token (GCRA), so there is no refill loop.
 *
 * `qps <= 0` means unlimited: every call succeeds at once.
 */
export class TokenBucket {
  readonly #clock: Clock;
  /** ms per token; 0 when unlimited. */
  readonly #interval: number;
  /** How far `#tat` may run ahead of now without waiting: `burst × interval`. */
  readonly #tolerance: number;
  /** The time at which the bucket will be empty again, given every token claimed so far. */
  #tat: number;

  /**
   * @throws RangeError when qps is not a number, or when qps > 0 and burst is not an integer >= 1.
   */
  constructor(qps: number, burst: number, clock: Clock = systemClock) {
    if (Number.isNaN(qps)) throw new RangeError("TokenBucket qps must be a number");
    const unlimited = qps <= 0 || qps === Number.POSITIVE_INFINITY;
    if (!unlimited && !(Number.isInteger(burst) && burst >= 1)) {
      throw new RangeError(`TokenBucket burst must be an integer >= 1 (got ${burst})`);
    }
    this.#clock = clock;
    this.#interval = unlimited ? 0 : 1000 / qps;
    this.#tolerance = unlimited ? 0 : burst * this.#interval;
    this.#tat = clock.now();
  }

  get unlimited(): boolean {
    return this.#interval === 0;
  }

  /**
   * Takes a token if one is free right now (not owed to a waiting caller) and at least
   * `keep` more stay in the bucket after it; never waits.
   */
  tryTake(keep = 0): boolean {
    if (this.unlimited) return true;
    const now = this.#clock.now();
    const next = Math.max(this.#tat, now) + this.#interval;
    if (next + keep * this.#interval - this.#tolerance > now) return false;
    this.#tat = next;
    return true;
  }

  /**
   * Claims the next token now and returns how many ms until it may be used (0 when at
   * once). The claim cannot be undone except through `take`'s abort. This is what a rate
   * limiter that schedules work for later (the work queue) needs.
   */
  reserve(): number {
    if (this.unlimited) return 0;
    const now = this.#clock.now();
    this.#tat = Math.max(this.#tat, now) + this.#interval;
    return Math.max(0, this.#tat - this.#tolerance - now);
  }

  /** ms until `tryTake(keep)` would succeed, without claiming anything (0 when it would now). */
  delayUntilNextToken(keep = 0): number {
    if (this.unlimited) return 0;
    const now = this.#clock.now();
    return Math.max(0, Math.max(this.#tat, now) + (1 + keep) * this.#interval - this.#tolerance - now);
  }

  /**
   * Waits for a token. Callers are served first come, first served. On abort the promise
   * rejects with `signal.reason` and the claimed token goes back to the bucket; an
   * already-aborted signal rejects without claiming anything.
   */
  take(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const delay = this.reserve();
    if (delay <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = this.#clock.setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, delay);
      const onAbort = (): void => {
        this.#clock.clearTimeout(timer);
        this.#tat -= this.#interval;
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}
