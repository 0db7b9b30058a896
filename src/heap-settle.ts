/**
 * One full garbage collection when a thread goes quiet after a burst. A burst (a cluster's first list, a writer draining thousands of writes) leaves
 * the heap's committed pages and semi-spaces grown and full of garbage; V8 releases them
 * only when its own heuristics next run a full collection, which an idle thread may not
 * do for a long time. Every thread (main, writer, each actor thread) checks every
 * `SETTLE_CHECK_MS`: when its committed heap grew by `SETTLE_GROWTH_BYTES` or more since
 * the last settle, stopped growing over the last check (the burst is over) and its event
 * loop was not saturated, it collects once. The collection also shrinks the young
 * generation's semi-spaces back to their initial size: a packed actor thread's grow to
 * 2 × 8 MB during its actors' first lists and otherwise stay committed.
 *
 * Invariants: at most one collection per check and per `SETTLE_SPACING_MS`; none while the heap still grows or the
 * thread is saturated (the cost, a few ms to tens of ms of one thread, falls after the burst); none when the heap
 * did not grow (an idle thread collects at most once per burst, never periodically).
 */
import { performance } from "node:perf_hooks";
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

export const SETTLE_CHECK_MS = 1_000;
/** Growth of the committed heap that makes a burst worth a collection (a thread's floor is ≈ 10 MB). */
export const SETTLE_GROWTH_BYTES = 4 * 2 ** 20;
/**
 * Least time between two collections of one thread: a long, slow burst (a writer taking
 * 15 writes/s for minutes) plateaus often; without it each plateau cost a collection
 * (measured: +4.7 CPU-s over 3 000 writes at 300 clusters).
 */
export const SETTLE_SPACING_MS = 30_000;
/**
 * Event-loop utilisation below which a collection may run. Not lower: on a loaded machine
 * a thread's utilisation counts the time it waits for a core, and a packed thread's
 * steady probing and status keep it above a few percent.
 */
export const QUIET_UTILIZATION = 0.5;

/** What one check sees. */
export interface HeapSample {
  /** V8's committed heap (`total_heap_size`). */
  readonly committedBytes: number;
  /** V8's committed heap at the previous check. */
  readonly previousCommittedBytes: number;
  /** Event-loop utilisation since the previous check, 0–1. */
  readonly utilization: number;
  /** Time since this thread's last collection (or since the checks started). */
  readonly sinceLastMs: number;
}

/** Whether this check collects: grown since `baselineBytes` (committed after the last settle), no longer growing, not saturated. */
export function shouldSettle(baselineBytes: number, sample: HeapSample): boolean {
  return (
    sample.committedBytes - baselineBytes >= SETTLE_GROWTH_BYTES &&
    sample.committedBytes <= sample.previousCommittedBytes &&
    sample.sinceLastMs >= SETTLE_SPACING_MS &&
    sample.utilization < QUIET_UTILIZATION
  );
}

/**
 * A memory-reducing full collection (V8's "last resort" flavour: what it runs under
 * memory pressure). A plain `gc()` leaves the semi-spaces at their grown size; this one
 * shrinks them and releases the emptied pages, for 10–30 ms of one thread.
 */
const REDUCING = { type: "major", execution: "sync", flavor: "last-resort" } as const;

/**
 * V8's full collection as a function. `--expose-gc` is process-wide: set once (the main
 * thread does it before any worker starts, so workers get a global `gc`); a context
 * made after it carries `gc`. Undefined when V8 refuses the flag: the thread then simply
 * never settles.
 */
function fullCollection(): (() => void) | undefined {
  let gc: unknown = (globalThis as { gc?: unknown }).gc;
  if (typeof gc !== "function") {
    try {
      setFlagsFromString("--expose-gc");
      gc = runInNewContext("gc");
    } catch {
      return undefined;
    }
  }
  if (typeof gc !== "function") return undefined;
  const collect = gc as (options: typeof REDUCING) => void;
  return () => collect(REDUCING);
}

let collectNow: (() => void) | undefined | null = null;

/**
 * One full collection of the calling thread, now, when `--expose-gc` is available (a
 * no-op otherwise). For memory that is garbage the moment it is dropped and too large
 * to wait for V8's own heuristics: a response body cut at the client's cap is tens of
 * MiB of Buffers outside the heap, which V8 collects only once about as much again has
 * been allocated, so the next attempt's body would stack on top of this one's.
 */
export function collectGarbageNow(): void {
  if (collectNow === null) collectNow = fullCollection();
  collectNow?.();
}

/** Starts the checks on the calling thread; returns a function that stops them. The timer never keeps a thread alive. */
export function startHeapSettle(): () => void {
  const gc = fullCollection();
  if (gc === undefined) return () => {};
  let baseline = getHeapStatistics().total_heap_size;
  let previous = baseline;
  // The first burst (start-up) may settle as soon as it ends.
  let lastAt = performance.now() - SETTLE_SPACING_MS;
  let elu = performance.eventLoopUtilization();
  const timer = setInterval(() => {
    const now = performance.eventLoopUtilization();
    const sample = {
      committedBytes: getHeapStatistics().total_heap_size,
      previousCommittedBytes: previous,
      utilization: performance.eventLoopUtilization(now, elu).utilization,
      sinceLastMs: performance.now() - lastAt,
    };
    elu = now;
    previous = sample.committedBytes;
    if (sample.committedBytes < baseline) baseline = sample.committedBytes; // V8 shrank it on its own
    if (!shouldSettle(baseline, sample)) return;
    gc();
    baseline = getHeapStatistics().total_heap_size;
    previous = baseline;
    lastAt = performance.now();
    elu = performance.eventLoopUtilization(); // the collection itself is not load
  }, SETTLE_CHECK_MS);
  timer.unref();
  return () => clearInterval(timer);
}
