/**
 * A key-based, rate-limited work queue,
 * and `runWorkers`, the one place that turns a reconcile result into forget / requeue /
 * retry (SPEC §4).
 */
import { type BackoffOptions, ItemBackoff, WRITER_BACKOFF } from "./backoff.ts";
import { type Clock, systemClock, type TimerHandle } from "./clock.ts";
import { DelayHeap } from "./delay-heap.ts";
import { LanedFifo } from "./fifo.ts";
import { TokenBucket } from "./rate-limit.ts";

export interface WorkQueueOptions<K extends PropertyKey = string> {
  /** Per-key exponential backoff of `addRateLimited`. Default `WRITER_BACKOFF` (100 ms → 5 min, ±20 %). */
  readonly itemBackoff?: BackoffOptions;
  /**
   * Global token bucket shared by every `addRateLimited` call, so a mass failure cannot
   * turn into a retry storm. Default: none (only the per-key backoff applies).
   */
  readonly bucket?: { readonly qps: number; readonly burst: number };
  /** Default `systemClock`. */
  readonly clock?: Clock;
  /** Source of jitter for the per-key backoff. Default `Math.random`. */
  readonly random?: () => number;
  /**
   * The lane of a key (the local writer: the cluster the key's mirror belongs to), asked
   * each time the key becomes ready. Lanes with ready keys take turns, one key each, so
   * one lane's backlog never delays another lane's next key by more than one key per
   * busy lane. Default: one lane (first in, first out).
   */
  readonly lane?: (key: K) => string;
  /**
   * Whether a key of `lane` may be handed out now, with `inFlight` of the lane's keys
   * already handed out and not done (the local writer: a busy cluster holds at most half
   * the workers while quiet ones write, so a worker is free for a quiet cluster's key
   * instead of every one waiting for a busy cluster's write token). Asked only for a lane
   * with keys in flight (a lane with none is never held back, so every lane refused has
   * a `done` to come, and each `done` asks again); a refused lane keeps its keys and is
   * passed over for the next lane in turn. Default: every lane, always.
   */
  readonly mayStart?: (lane: string, inFlight: number) => boolean;
}

/**
 * A queue of keys to reconcile, with these guarantees:
 * - a key waiting in the queue is never queued twice (`add` de-duplicates);
 * - a key is never handed out by `get` while it is being processed (between `get` and
 *   `done`); adding it meanwhile marks it dirty, and `done` queues it again;
 * - keys are handed out to `get` callers in call order: first in, first out within a lane
 *   (`WorkQueueOptions.lane`), the lanes with ready keys taking turns, one key each;
 * - delayed adds (`addAfter`, `addRateLimited`) of one key keep only the EARLIEST due time;
 * - after `shutDown`, `get` resolves `undefined` and adds are ignored.
 *
 * Keys are compared with `Set` semantics, hence `PropertyKey` (use `cluster/namespace/name`
 * strings). Every `get` that returns a key must be followed by exactly one `done(key)`.
 */
export class WorkQueue<K extends PropertyKey = string> {
  readonly #clock: Clock;
  readonly #backoff: ItemBackoff<K>;
  readonly #bucket: TokenBucket | undefined;

  readonly #laneOf: (key: K) => string;
  readonly #queue = new LanedFifo<K>();
  /** Keys that need processing: waiting in `#queue`, or in `#processing` and to be re-queued. */
  readonly #dirty = new Set<K>();
  /** Keys handed out and not done, with the lane each was handed out in. */
  readonly #processing = new Map<K, string>();
  /** Keys in flight by lane (lanes with none are forgotten). */
  readonly #inFlight = new Map<string, number>();
  readonly #allow: ((lane: string) => boolean) | undefined;
  readonly #getters: ((key: K | undefined) => void)[] = [];

  /** Earliest due time of each delayed key; heap entries that disagree with it are stale. */
  readonly #delayedDue = new Map<K, number>();
  readonly #delayHeap = new DelayHeap<K>();
  #delaySeq = 0;
  #timer: { readonly handle: TimerHandle; readonly due: number } | undefined;

  #shuttingDown = false;
  #completed = 0;

  /** @throws RangeError when the backoff or bucket options are inconsistent. */
  constructor(options: WorkQueueOptions<K> = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#laneOf = options.lane ?? (() => "");
    const mayStart = options.mayStart;
    this.#allow =
      mayStart &&
      ((lane) => {
        const inFlight = this.#inFlight.get(lane) ?? 0;
        return inFlight === 0 || mayStart(lane, inFlight);
      });
    this.#backoff = new ItemBackoff<K>(options.itemBackoff ?? WRITER_BACKOFF, options.random ?? Math.random);
    this.#bucket = options.bucket ? new TokenBucket(options.bucket.qps, options.bucket.burst, this.#clock) : undefined;
  }

  /** Number of keys waiting to be handed out (not counting delayed or in-flight keys). */
  get len(): number {
    return this.#queue.length;
  }

  /** Keys processed so far (`done` calls for keys handed out): a stamp that moves with every reconcile. */
  get completed(): number {
    return this.#completed;
  }

  /** Number of keys handed out by `get` and not yet `done`. */
  get processing(): number {
    return this.#processing.size;
  }

  /** Number of keys scheduled by `addAfter`/`addRateLimited` and not yet due. */
  get delayed(): number {
    return this.#delayedDue.size;
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /** True when the key is waiting, being processed, or scheduled for a delayed add. */
  has(key: K): boolean {
    return this.#dirty.has(key) || this.#processing.has(key) || this.#delayedDue.has(key);
  }

  /** Queues the key now, unless it is already waiting; if it is being processed it is queued again at `done`. */
  add(key: K): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (this.#processing.has(key)) return;
    this.#queue.push(this.#laneOf(key), key);
    this.#dispatch();
  }

  /**
   * Adds the key once `ms` have passed (at once when `ms <= 0` or NaN). If the key is
   * already scheduled, the earlier of the two due times wins. A scheduled add is not
   * cancelled by an immediate `add` of the same key (it then de-duplicates at due time).
   */
  addAfter(key: K, ms: number): void {
    if (this.#shuttingDown) return;
    if (!(ms > 0)) {
      this.add(key);
      return;
    }
    const due = this.#clock.now() + ms;
    const current = this.#delayedDue.get(key);
    if (current !== undefined && current <= due) return;
    this.#delayedDue.set(key, due);
    this.#delayHeap.push({ key, due, seq: this.#delaySeq++ });
    this.#armTimer();
  }

  /**
   * Adds the key after `max(per-key backoff, global bucket delay)` and counts a requeue.
   * The per-key delay grows with each call until `forget(key)`; there is no give-up.
   */
  addRateLimited(key: K): void {
    if (this.#shuttingDown) return;
    const itemDelay = this.#backoff.next(key);
    const bucketDelay = this.#bucket?.reserve() ?? 0;
    this.addAfter(key, Math.max(itemDelay, bucketDelay));
  }

  /** Resets the key's backoff (call it when the key was reconciled successfully). Does not dequeue it. */
  forget(key: K): void {
    this.#backoff.forget(key);
  }

  /** `addRateLimited` calls for the key since it was last forgotten. */
  numRequeues(key: K): number {
    return this.#backoff.failures(key);
  }

  /**
   * The next key (first in, first out within its lane; lanes in turn), marked as being
   * processed; waits while the queue is empty. Resolves `undefined` once the queue is
   * shut down (waiting callers included).
   */
  get(): Promise<K | undefined> {
    if (this.#shuttingDown) return Promise.resolve(undefined);
    const next = this.#queue.next(this.#allow);
    if (next !== undefined) return Promise.resolve(this.#handOut(next));
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** Ends processing of the key; if it was added meanwhile it is queued again. A no-op for a key not in flight. */
  done(key: K): void {
    const lane = this.#processing.get(key);
    if (lane === undefined) return;
    this.#processing.delete(key);
    const inFlight = (this.#inFlight.get(lane) ?? 1) - 1;
    if (inFlight > 0) this.#inFlight.set(lane, inFlight);
    else this.#inFlight.delete(lane);
    this.#completed += 1;
    if (this.#shuttingDown) return;
    if (this.#dirty.has(key)) this.#queue.push(this.#laneOf(key), key);
    // A lane held back by `mayStart` may start a key now.
    if (this.#dirty.has(key) || this.#allow !== undefined) this.#dispatch();
  }

  /**
   * Stops the queue: waiting and delayed keys are dropped, their timer is cancelled, every
   * pending and future `get` resolves `undefined`, and adds are ignored. Keys in flight
   * stay counted in `processing` until their `done`. Idempotent.
   */
  shutDown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    if (this.#timer) this.#clock.clearTimeout(this.#timer.handle);
    this.#timer = undefined;
    this.#delayHeap.clear();
    this.#delayedDue.clear();
    this.#queue.clear();
    this.#dirty.clear();
    for (const resolve of this.#getters.splice(0)) resolve(undefined);
  }

  #handOut({ item: key, lane }: { readonly item: K; readonly lane: string }): K {
    this.#dirty.delete(key);
    this.#processing.set(key, lane);
    this.#inFlight.set(lane, (this.#inFlight.get(lane) ?? 0) + 1);
    return key;
  }

  #dispatch(): void {
    while (this.#getters.length > 0 && this.#queue.length > 0) {
      const next = this.#queue.next(this.#allow);
      if (next === undefined) return;
      this.#getters.shift()?.(this.#handOut(next));
    }
  }

  /** Keeps exactly one clock timer, due at the earliest delayed add. */
  #armTimer(): void {
    const next = this.#delayHeap.peek();
    if (this.#timer && next && this.#timer.due <= next.due) return;
    if (this.#timer) this.#clock.clearTimeout(this.#timer.handle);
    this.#timer = undefined;
    if (!next) return;
    const handle = this.#clock.setTimeout(() => this.#onTimer(), next.due - this.#clock.now());
    this.#timer = { handle, due: next.due };
  }

  #onTimer(): void {
    this.#timer = undefined;
    const now = this.#clock.now();
    for (;;) {
      const next = this.#delayHeap.peek();
      if (!next || next.due > now) break;
      this.#delayHeap.pop();
      if (this.#delayedDue.get(next.key) !== next.due) continue; // superseded by an earlier due time
      this.#delayedDue.delete(next.key);
      this.add(next.key);
    }
    this.#armTimer();
  }
}

/** What a reconcile asks of the queue: the whole retry policy lives in `runWorkers`. */
export type ReconcileResult =
  | { readonly kind: "done" }
  | { readonly kind: "requeue-after"; readonly ms: number }
  | { readonly kind: "retry"; readonly error: unknown };

/**
 * Runs `concurrency` workers that take keys from `queue` and reconcile them, and is the ONE
 * place that decides what happens next:
 * - `done` → `forget` (backoff reset);
 * - `requeue-after` → `forget`, then `addAfter(key, ms)`;
 * - `retry`, or an exception thrown by `reconcile` → `addRateLimited` (never given up).
 * `onError(key, error, requeues)` is told about each retry (`requeues` counts this one); an
 * exception thrown by `onError` itself is ignored so it cannot stop a worker.
 *
 * At most `concurrency` different keys are reconciled at once, and a key never twice at
 * once (the queue does not hand out a key in flight). Resolves when every worker has
 * stopped: after `queue.shutDown()`, once the reconciles in flight have finished.
 * @throws RangeError (synchronously) when `concurrency` is not an integer >= 1.
 */
export function runWorkers<K extends PropertyKey>(
  queue: WorkQueue<K>,
  concurrency: number,
  reconcile: (key: K) => Promise<ReconcileResult>,
  onError?: (key: K, error: unknown, requeues: number) => void,
): Promise<void> {
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    throw new RangeError(`runWorkers concurrency must be an integer >= 1 (got ${concurrency})`);
  }
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      let result: ReconcileResult;
      try {
        const value: unknown = await reconcile(key);
        result = isReconcileResult(value)
          ? value
          : { kind: "retry", error: new TypeError(`reconcile of ${String(key)} returned ${String(value)}`) };
      } catch (error) {
        result = { kind: "retry", error };
      }
      try {
        settle(queue, key, result, onError);
      } finally {
        queue.done(key);
      }
    }
  };
  return Promise.all(Array.from({ length: concurrency }, worker)).then(() => undefined);
}

function settle<K extends PropertyKey>(
  queue: WorkQueue<K>,
  key: K,
  result: ReconcileResult,
  onError: ((key: K, error: unknown, requeues: number) => void) | undefined,
): void {
  switch (result.kind) {
    case "done":
      queue.forget(key);
      return;
    case "requeue-after":
      queue.forget(key);
      queue.addAfter(key, result.ms);
      return;
    case "retry":
      queue.addRateLimited(key);
      if (onError) {
        try {
          onError(key, result.error, queue.numRequeues(key));
        } catch {
          // A failing error reporter must not stop the worker; the retry is already scheduled.
        }
      }
      return;
    default: {
      const unreachable: never = result;
      throw new TypeError(`unknown reconcile result ${String(unreachable)}`);
    }
  }
}

/** Guards against untyped reconcilers: anything else is treated as a failure, never dropped. */
function isReconcileResult(value: unknown): value is ReconcileResult {
  if (typeof value !== "object" || value === null || !("kind" in value)) return false;
  switch (value.kind) {
    case "done":
    case "retry":
      return true;
    case "requeue-after":
      return "ms" in value && typeof value.ms === "number";
    default:
      return false;
  }
}
