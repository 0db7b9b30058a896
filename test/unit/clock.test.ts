import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Worker } from "node:worker_threads";
import { systemClock } from "../../src/core/clock.ts";

/** A reading of CLOCK_MONOTONIC in ms: the process-wide clock every thread shares. */
const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

describe("systemClock across threads", () => {
  it("a worker thread and the main thread read one process-wide monotonic clock: every worker reading falls between the main-thread readings around it", async () => {
    const shared = new SharedArrayBuffer(16);
    const flags = new Int32Array(shared, 0, 2);
    const reading = new Float64Array(shared, 8, 1);
    const worker = new Worker(new URL("../fixtures/clock-reader.ts", import.meta.url), { workerData: shared });
    const exited = new Promise<number>((resolve) => worker.once("exit", resolve));
    try {
      await new Promise<void>((resolve, reject) => {
        worker.once("online", resolve);
        worker.once("error", reject);
      });
      for (let request = 1; request <= 500; request++) {
        const before = systemClock.now();
        const beforeMonotonic = monotonicMs();
        Atomics.store(flags, 0, request);
        const deadline = Date.now() + 5_000;
        while (Atomics.load(flags, 1) !== request) {
          if (Date.now() > deadline) throw new Error(`the worker did not answer request ${request}`);
        }
        const afterMonotonic = monotonicMs();
        const after = systemClock.now();
        const inWorker = reading[0] ?? Number.NaN;
        assert.ok(before <= inWorker && inWorker <= after, `main ${before} ≤ worker ${inWorker} ≤ main ${after}`);
        // The one clock is CLOCK_MONOTONIC (process.hrtime): not a per-thread sample of
        // the wall clock, which a step of the system time would shift between threads.
        assert.ok(
          beforeMonotonic <= inWorker && inWorker <= afterMonotonic,
          `CLOCK_MONOTONIC ${beforeMonotonic} ≤ worker ${inWorker} ≤ ${afterMonotonic}`,
        );
      }
    } finally {
      Atomics.store(flags, 0, -1);
      await exited;
    }
  });
});
