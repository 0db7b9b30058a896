import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock, systemClock } from "../../src/core/clock.ts";
import { type ReconcileResult, runWorkers, WorkQueue, type WorkQueueOptions } from "../../src/core/workqueue.ts";

/** Lets promise callbacks run (no real waiting). */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** A queue on a manual clock with exact (un-jittered) backoff 10 ms → 1000 ms. */
function newQueue(options: WorkQueueOptions = {}): { queue: WorkQueue; clock: ManualClock } {
  const clock = new ManualClock();
  const queue = new WorkQueue({ clock, itemBackoff: { initialMs: 10, maxMs: 1000, jitter: 0 }, ...options });
  return { queue, clock };
}

/** Takes every key that is ready right now. */
async function drain(queue: WorkQueue): Promise<string[]> {
  const keys: string[] = [];
  while (queue.len > 0) {
    const key = await queue.get();
    if (key === undefined) break;
    keys.push(key);
  }
  return keys;
}

/** A promise with its resolve function, to hold a reconcile open. */
function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => {};
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("ManualClock", () => {
  it("runs due timers in order of due time, then of creation, each at its own time", () => {
    const clock = new ManualClock(1000);
    const log: string[] = [];
    clock.setTimeout(() => log.push(`b@${clock.now()}`), 20);
    clock.setTimeout(() => log.push(`a@${clock.now()}`), 10);
    clock.setTimeout(() => log.push(`c@${clock.now()}`), 20);
    clock.setTimeout(() => log.push("late"), 31);
    clock.advance(30);
    assert.deepEqual(log, ["a@1010", "b@1020", "c@1020"]);
    assert.equal(clock.now(), 1030);
    assert.equal(clock.pending, 1);
    assert.equal(clock.nextDueAt(), 1031);
  });

  it("runs a timer set by a timer when it falls due within the same advance", () => {
    const clock = new ManualClock();
    const log: number[] = [];
    clock.setTimeout(() => clock.setTimeout(() => log.push(clock.now()), 5), 5);
    clock.advance(10);
    assert.deepEqual(log, [10]);
  });

  it("never runs a cancelled timer, and runs a zero-delay timer only on advance", () => {
    const clock = new ManualClock();
    const log: string[] = [];
    const handle = clock.setTimeout(() => log.push("cancelled"), 5);
    clock.setTimeout(() => log.push("zero"), 0);
    clock.clearTimeout(handle);
    assert.deepEqual(log, []);
    clock.advance(0);
    clock.advance(10);
    assert.deepEqual(log, ["zero"]);
  });

  it("refuses to go backwards", () => {
    assert.throws(() => new ManualClock().advance(-1), RangeError);
  });

  it("systemClock is monotonic and its timers fire", async () => {
    const a = systemClock.now();
    await new Promise<void>((resolve) => systemClock.setTimeout(resolve, 1));
    assert.ok(systemClock.now() >= a);
    let fired = false;
    systemClock.clearTimeout(systemClock.setTimeout(() => (fired = true), 0));
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(fired, false);
  });
});

describe("WorkQueue", () => {
  it("counts the keys processed (`completed`), and nothing else: not an add, not a done for a key never handed out", async () => {
    const { queue } = newQueue();
    queue.add("a");
    queue.add("b");
    assert.equal(queue.completed, 0);
    const first = await queue.get();
    assert.equal(queue.completed, 0, "handed out, not done");
    queue.done(first ?? "");
    queue.done("never-handed-out");
    assert.equal(queue.completed, 1);
    queue.done((await queue.get()) ?? "");
    assert.equal(queue.completed, 2);
  });

  it("hands out keys first in, first out", async () => {
    const { queue } = newQueue();
    queue.add("a");
    queue.add("b");
    queue.add("c");
    assert.deepEqual(await drain(queue), ["a", "b", "c"]);
  });

  it("does not queue a key twice while it is waiting", async () => {
    const { queue } = newQueue();
    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert.equal(queue.len, 2);
    assert.deepEqual(await drain(queue), ["a", "b"]);
  });

  it("never hands out a key being processed; a key added meanwhile is queued again at done", async () => {
    const { queue } = newQueue();
    queue.add("a");
    assert.equal(await queue.get(), "a");
    queue.add("a");
    queue.add("a");
    assert.equal(queue.len, 0);
    assert.equal(queue.processing, 1);
    assert.ok(queue.has("a"));
    queue.done("a");
    assert.equal(queue.len, 1);
    assert.equal(await queue.get(), "a");
    queue.done("a");
    assert.equal(queue.len, 0);
    assert.equal(queue.has("a"), false);
  });

  it("does not queue a processed key again at done when nobody added it", async () => {
    const { queue } = newQueue();
    queue.add("a");
    await queue.get();
    queue.done("a");
    assert.equal(queue.len, 0);
    assert.equal(queue.processing, 0);
  });

  it("wakes waiting get callers in call order as keys arrive", async () => {
    const { queue } = newQueue();
    const first = queue.get();
    const second = queue.get();
    queue.add("a");
    queue.add("b");
    assert.equal(await first, "a");
    assert.equal(await second, "b");
    assert.equal(queue.processing, 2);
  });

  it("adds a key after the given delay", async () => {
    const { queue, clock } = newQueue();
    queue.addAfter("a", 100);
    assert.equal(queue.len, 0);
    assert.equal(queue.delayed, 1);
    assert.ok(queue.has("a"));
    clock.advance(99);
    assert.equal(queue.len, 0);
    clock.advance(1);
    assert.equal(queue.len, 1);
    assert.equal(queue.delayed, 0);
  });

  it("adds at once when the delay is zero or negative", () => {
    const { queue, clock } = newQueue();
    queue.addAfter("a", 0);
    queue.addAfter("b", -5);
    assert.equal(queue.len, 2);
    assert.equal(clock.pending, 0);
  });

  it("keeps the earliest due time when a key is delayed twice", () => {
    const { queue, clock } = newQueue();
    queue.addAfter("a", 100);
    queue.addAfter("a", 50);
    queue.addAfter("a", 500);
    assert.equal(queue.delayed, 1);
    clock.advance(50);
    assert.equal(queue.len, 1);
    clock.advance(1000);
    assert.equal(queue.len, 1, "the superseded due times add nothing more");
  });

  it("adds delayed keys in order of due time, using a single clock timer", async () => {
    const { queue, clock } = newQueue();
    queue.addAfter("c", 30);
    queue.addAfter("a", 10);
    queue.addAfter("b", 20);
    assert.equal(clock.pending, 1);
    clock.advance(30);
    assert.deepEqual(await drain(queue), ["a", "b", "c"]);
    assert.equal(clock.pending, 0);
  });

  it("re-queues a key that falls due while it is being processed once it is done", async () => {
    const { queue, clock } = newQueue();
    queue.add("a");
    await queue.get();
    queue.addAfter("a", 10);
    clock.advance(10);
    assert.equal(queue.len, 0);
    queue.done("a");
    assert.deepEqual(await drain(queue), ["a"]);
  });

  it("backs off a rate-limited key exponentially until it is forgotten", () => {
    const { queue, clock } = newQueue();
    const dueAfter = (): number => {
      const start = clock.now();
      queue.addRateLimited("a");
      const due = clock.nextDueAt();
      clock.advance(10_000);
      return (due ?? Number.NaN) - start;
    };
    assert.deepEqual([dueAfter(), dueAfter(), dueAfter(), dueAfter()], [10, 20, 40, 80]);
    assert.equal(queue.numRequeues("a"), 4);
    queue.forget("a");
    assert.equal(queue.numRequeues("a"), 0);
    assert.equal(dueAfter(), 10);
  });

  it("delays a rate-limited key by the global token bucket when that is longer than its backoff", () => {
    const { queue, clock } = newQueue({ bucket: { qps: 10, burst: 1 } });
    queue.addRateLimited("a"); // takes the only token: backoff 10 ms applies
    queue.addRateLimited("b"); // next token in 100 ms
    queue.addRateLimited("c"); // the one after in 200 ms
    clock.advance(10);
    assert.equal(queue.len, 1);
    clock.advance(90);
    assert.equal(queue.len, 2);
    clock.advance(100);
    assert.equal(queue.len, 3);
  });

  it("after shutDown, get resolves undefined (waiting callers too) and adds are ignored", async () => {
    const { queue, clock } = newQueue();
    const waiting = queue.get();
    queue.addAfter("later", 100);
    queue.shutDown();
    assert.equal(await waiting, undefined);
    queue.add("a");
    queue.addAfter("b", 10);
    queue.addRateLimited("c");
    assert.equal(queue.len, 0);
    assert.equal(queue.delayed, 0);
    assert.equal(clock.pending, 0);
    assert.equal(await queue.get(), undefined);
    assert.equal(queue.shuttingDown, true);
  });

  it("keeps counting a key in flight at shutDown until its done", async () => {
    const { queue } = newQueue();
    queue.add("a");
    await queue.get();
    queue.add("a");
    queue.shutDown();
    assert.equal(queue.processing, 1);
    queue.done("a");
    assert.equal(queue.processing, 0);
    assert.equal(queue.len, 0);
  });
});

describe("runWorkers", () => {
  const done: ReconcileResult = { kind: "done" };

  it("forgets a key's backoff when its reconcile is done", async () => {
    const { queue } = newQueue();
    queue.addRateLimited("a");
    queue.addRateLimited("a");
    queue.add("a");
    const seen: string[] = [];
    const workers = runWorkers(queue, 1, async (key) => {
      seen.push(key);
      return done;
    });
    await settle();
    assert.deepEqual(seen, ["a"]);
    assert.equal(queue.numRequeues("a"), 0);
    queue.shutDown();
    await workers;
  });

  it("retries a failed reconcile with growing backoff, forever, and reports each failure", async () => {
    const { queue, clock } = newQueue();
    const errors: [string, unknown, number][] = [];
    const failure = new Error("conflict");
    let calls = 0;
    const workers = runWorkers(
      queue,
      1,
      async () => {
        calls++;
        return { kind: "retry", error: failure };
      },
      (key, error, requeues) => errors.push([key, error, requeues]),
    );
    queue.add("a");
    await settle();
    assert.equal(calls, 1);
    for (const delay of [10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000]) {
      clock.advance(delay - 1);
      await settle();
      const callsBefore: number = calls;
      clock.advance(1);
      await settle();
      assert.equal(calls, callsBefore + 1, `retried after ${delay} ms`);
    }
    assert.equal(queue.numRequeues("a"), 11);
    assert.deepEqual(
      errors.map(([key, error, requeues]) => [key, error === failure, requeues]),
      Array.from({ length: 11 }, (_, i) => ["a", true, i + 1]),
    );
    queue.shutDown();
    await workers;
  });

  it("treats an exception thrown by reconcile as a retry", async () => {
    const { queue, clock } = newQueue();
    const errors: unknown[] = [];
    let calls = 0;
    const workers = runWorkers(
      queue,
      1,
      async () => {
        calls++;
        if (calls === 1) throw new Error("boom");
        return done;
      },
      (_key, error) => errors.push(error),
    );
    queue.add("a");
    await settle();
    assert.equal(queue.numRequeues("a"), 1);
    assert.match(String(errors[0]), /boom/);
    clock.advance(10);
    await settle();
    assert.equal(calls, 2);
    assert.equal(queue.numRequeues("a"), 0);
    queue.shutDown();
    await workers;
  });

  it("treats a malformed result from untyped code as a retry, not a crash", async () => {
    const { queue } = newQueue();
    const errors: unknown[] = [];
    const workers = runWorkers(
      queue,
      1,
      async () => undefined as unknown as ReconcileResult,
      (_key, error) => errors.push(error),
    );
    queue.add("a");
    await settle();
    assert.equal(queue.numRequeues("a"), 1);
    assert.ok(errors[0] instanceof TypeError);
    queue.shutDown();
    await workers;
  });

  it("requeues after the asked delay with the backoff reset", async () => {
    const { queue, clock } = newQueue();
    queue.addRateLimited("a");
    queue.addRateLimited("a");
    clock.advance(1000);
    let calls = 0;
    const workers = runWorkers(queue, 1, async () => {
      calls++;
      return calls === 1 ? { kind: "requeue-after", ms: 500 } : done;
    });
    await settle();
    assert.equal(calls, 1);
    assert.equal(queue.numRequeues("a"), 0);
    clock.advance(499);
    await settle();
    assert.equal(calls, 1);
    clock.advance(1);
    await settle();
    assert.equal(calls, 2);
    queue.shutDown();
    await workers;
  });

  it("keeps going after the error reporter throws", async () => {
    const { queue } = newQueue();
    const seen: string[] = [];
    const workers = runWorkers(
      queue,
      1,
      async (key) => {
        seen.push(key);
        return key === "a" ? { kind: "retry", error: new Error("x") } : done;
      },
      () => {
        throw new Error("reporter broke");
      },
    );
    queue.add("a");
    queue.add("b");
    await settle();
    assert.deepEqual(seen, ["a", "b"]);
    queue.shutDown();
    await workers;
  });

  it("reconciles at most `concurrency` keys at once and never one key twice at once", async () => {
    const { queue } = newQueue();
    const open = new Map<string, ReturnType<typeof deferred<ReconcileResult>>>();
    let running = 0;
    let maxRunning = 0;
    let calls = 0;
    const overlaps: string[] = [];
    const workers = runWorkers(queue, 2, async (key) => {
      if (open.has(key)) overlaps.push(key);
      running++;
      calls++;
      maxRunning = Math.max(maxRunning, running);
      const d = deferred<ReconcileResult>();
      open.set(key, d);
      const result = await d.promise;
      open.delete(key);
      running--;
      return result;
    });
    for (const key of ["a", "b", "c", "a", "a"]) queue.add(key);
    await settle();
    assert.deepEqual([...open.keys()], ["a", "b"]);
    queue.add("a"); // while a is in flight
    open.get("a")?.resolve(done);
    await settle();
    assert.deepEqual([...open.keys()].sort(), ["b", "c"], "c was waiting before a was re-added");
    open.get("b")?.resolve(done);
    await settle();
    assert.deepEqual([...open.keys()].sort(), ["a", "c"]);
    open.get("a")?.resolve(done);
    open.get("c")?.resolve(done);
    await settle();
    assert.equal(running, 0);
    assert.equal(maxRunning, 2);
    assert.equal(calls, 4);
    assert.deepEqual(overlaps, []);
    queue.shutDown();
    await workers;
  });

  it("stops its workers at shutDown once the reconciles in flight have finished", async () => {
    const { queue } = newQueue();
    const hold = deferred<ReconcileResult>();
    let stopped = false;
    const workers = runWorkers(queue, 3, () => hold.promise).then(() => {
      stopped = true;
    });
    queue.add("a");
    await settle();
    queue.shutDown();
    await settle();
    assert.equal(stopped, false);
    hold.resolve(done);
    await workers;
    assert.equal(stopped, true);
    assert.equal(queue.processing, 0);
  });

  it("rejects a concurrency below one", () => {
    const { queue } = newQueue();
    assert.throws(() => runWorkers(queue, 0, async () => done), RangeError);
  });
});
