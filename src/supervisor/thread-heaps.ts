/**
 * The V8 heap of every thread, for the metrics: each thread's isolate answers for
 * itself. A thread that does not answer within the timeout (busy, ending) is left out,
 * so a scrape never hangs on a stuck thread.
 */
import type { Worker } from "node:worker_threads";
import { mainThreadHeap, type ThreadHeap } from "../status/fleet-view.ts";

/** How long a scrape waits for the threads' heap statistics. */
export const HEAP_STATISTICS_TIMEOUT_MS = 1_000;

/** The main thread's heap, then each of `threads`' that answered within `timeoutMs`. */
export async function threadHeaps(
  threads: readonly { readonly name: string; readonly worker: Worker }[],
  timeoutMs = HEAP_STATISTICS_TIMEOUT_MS,
): Promise<ThreadHeap[]> {
  const heaps: ThreadHeap[] = [mainThreadHeap()];
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), timeoutMs);
  });
  const answers = await Promise.all(
    threads.map(({ worker }) =>
      Promise.race([
        worker.getHeapStatistics().catch(() => undefined), // the thread ended meanwhile: no heap to report
        timeout,
      ]),
    ),
  );
  clearTimeout(timer);
  answers.forEach((stats, i) => {
    const name = threads[i]?.name;
    if (stats && name) heaps.push({ thread: name, used: stats.used_heap_size, limit: stats.heap_size_limit });
  });
  return heaps;
}
