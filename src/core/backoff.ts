/** Exponential backoff, pure and per key: each failure of a key doubles its delay up to a cap. */

export interface BackoffOptions {
  /** Delay of the first attempt (attempt 0), in ms; >= 0. */
  readonly initialMs: number;
  /** Upper bound of every delay, jitter included, in ms; >= initialMs. */
  readonly maxMs: number;
  /** Growth per attempt; >= 1. Default 2. */
  readonly factor?: number;
  /**
   * A fraction in [0, 1]: the delay is drawn uniformly from `base × [1 − j, 1 + j]`
   * (then capped at `maxMs`), so retries of many keys spread out. `"full"` draws from
   * `[0, base]`; `"equal"` from `[base / 2, base]` (never above the base, never below
   * half of it). Default 0.2; 0 makes the delay exact.
   */
  readonly jitter?: number | "full" | "equal";
}

/** Backoff of the local writer's retries (SPEC §4): 100 ms doubling up to 5 min, ±20 %. */
export const WRITER_BACKOFF: BackoffOptions = Object.freeze({ initialMs: 100, maxMs: 5 * 60_000 });

/**
 * Backoff of a remote cluster's list/watch reconnects: 250 ms doubling up to 4 s, equal
 * jitter (each delay drawn from [base / 2, base]).
 *
 * Why these numbers: the delay after the remote API returns is what a user waits for,
 * so it is capped low (at most 4 s of waiting, then one list, well within the 5 s target
 * for mirrors to catch up), while a remote that stays down for hours costs each actor
 * one request (a refused connect, or a list through a load balancer) every 2–4 s: on
 * average 1 / 3 s ≈ 0.33 requests/s, never more than 0.5/s; the jitter keeps a fleet of
 * actors from retrying in lockstep. Sequence: 125–250, 250–500, 500 ms–1 s, 1–2 s,
 * then 2–4 s for every later attempt. A server's Retry-After is honoured as a lower bound.
 */
export const WATCH_BACKOFF: BackoffOptions = Object.freeze({ initialMs: 250, maxMs: 4_000, jitter: "equal" });

/** @throws RangeError naming the offending field when `options` are inconsistent. */
export function validateBackoff(options: BackoffOptions): void {
  const { initialMs, maxMs, factor = 2, jitter = 0.2 } = options;
  if (!Number.isFinite(initialMs) || initialMs < 0)
    throw new RangeError(`backoff initialMs must be >= 0 (got ${initialMs})`);
  if (!(maxMs >= initialMs)) throw new RangeError(`backoff maxMs must be >= initialMs (got ${maxMs} < ${initialMs})`);
  if (!(factor >= 1)) throw new RangeError(`backoff factor must be >= 1 (got ${factor})`);
  if (jitter !== "full" && jitter !== "equal" && !(jitter >= 0 && jitter <= 1)) {
    throw new RangeError(`backoff jitter must be in [0, 1], "full" or "equal" (got ${jitter})`);
  }
}

/**
 * The delay before retry number `attempt` (0 = first retry): `min(maxMs, initialMs ×
 * factor^attempt)`, jittered, never above `maxMs` and never negative. Pure given `random`
 * (a function returning values in [0, 1), like `Math.random`).
 * @throws RangeError for invalid options or an `attempt` that is not an integer >= 0.
 */
export function exponentialBackoff(
  options: BackoffOptions,
  attempt: number,
  random: () => number = Math.random,
): number {
  validateBackoff(options);
  if (!Number.isInteger(attempt) || attempt < 0)
    throw new RangeError(`backoff attempt must be an integer >= 0 (got ${attempt})`);
  const { initialMs, maxMs, factor = 2, jitter = 0.2 } = options;
  // factor ** attempt may be Infinity for large attempts; Math.min absorbs it (0 × Infinity is NaN, hence the guard).
  const base = initialMs === 0 ? 0 : Math.min(maxMs, initialMs * factor ** attempt);
  if (jitter === "full") return base * random();
  if (jitter === "equal") return base * (0.5 + 0.5 * random());
  if (jitter === 0) return base;
  const jittered = base * (1 + jitter * (2 * random() - 1));
  return Math.min(maxMs, Math.max(0, jittered));
}

/**
 * Per-key failure counter: each `next(key)` returns the delay for this failure and counts
 * it; `forget(key)` resets the key (call it on success). Keys are compared with `Map`
 * semantics. Memory: one entry per key that has failed and not been forgotten.
 */
export class ItemBackoff<K> {
  readonly #options: BackoffOptions;
  readonly #random: () => number;
  readonly #failures = new Map<K, number>();

  /**
   * @param options validated here (default `WRITER_BACKOFF`).
   * @throws RangeError when `options` are inconsistent.
   */
  constructor(options: BackoffOptions = WRITER_BACKOFF, random: () => number = Math.random) {
    validateBackoff(options);
    this.#options = options;
    this.#random = random;
  }

  /** The delay for the failure being reported now; the first failure of a key gets `initialMs` (jittered). */
  next(key: K): number {
    const attempt = this.#failures.get(key) ?? 0;
    this.#failures.set(key, attempt + 1);
    return exponentialBackoff(this.#options, attempt, this.#random);
  }

  /** Resets the key's failure count to 0. */
  forget(key: K): void {
    this.#failures.delete(key);
  }

  /** Failures counted for the key since it was last forgotten. */
  failures(key: K): number {
    return this.#failures.get(key) ?? 0;
  }
}
