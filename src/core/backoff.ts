/** Exponential backoff, pure and per key (the model is client-go's ItemExponentialFailureRateLimiter). */

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
   * `[0, base]`. Default 0.2; 0 makes the delay exact.
   */
  readonly jitter?: number | "full";
}

/** Backoff of the local writer's retries (SPEC §4): 100 ms doubling up to 5 min, ±20 %. */
export const WRITER_BACKOFF: BackoffOptions = Object.freeze({ initialMs: 100, maxMs: 5 * 60_000 });

/** @throws RangeError naming the offending field when `options` are inconsistent. */
export function validateBackoff(options: BackoffOptions): void {
  const { initialMs, maxMs, factor = 2, jitter = 0.2 } = options;
  if (!Number.isFinite(initialMs) || initialMs < 0)
    throw new RangeError(`backoff initialMs must be >= 0 (got ${initialMs})`);
  if (!(maxMs >= initialMs)) throw new RangeError(`backoff maxMs must be >= initialMs (got ${maxMs} < ${initialMs})`);
  if (!(factor >= 1)) throw new RangeError(`backoff factor must be >= 1 (got ${factor})`);
  if (jitter !== "full" && !(jitter >= 0 && jitter <= 1)) {
    throw new RangeError(`backoff jitter must be in [0, 1] or "full" (got ${jitter})`);
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
