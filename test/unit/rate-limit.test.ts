import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { TokenBucket } from "../../src/core/rate-limit.ts";

/** Lets promise callbacks run (no real waiting). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Records the order in which promises settle. */
function track(promise: Promise<void>, label: string, log: string[]): void {
  promise.then(
    () => log.push(label),
    () => log.push(`${label}:rejected`),
  );
}

describe("TokenBucket", () => {
  it("starts full: burst tokens can be taken at once, then none", () => {
    const bucket = new TokenBucket(10, 3, new ManualClock());
    assert.deepEqual(
      [bucket.tryTake(), bucket.tryTake(), bucket.tryTake(), bucket.tryTake()],
      [true, true, true, false],
    );
  });

  it("refills at qps tokens per second and never holds more than burst", () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(10, 2, clock);
    bucket.tryTake();
    bucket.tryTake();
    clock.advance(99);
    assert.equal(bucket.tryTake(), false);
    clock.advance(1);
    assert.equal(bucket.tryTake(), true);
    clock.advance(10_000);
    assert.deepEqual([bucket.tryTake(), bucket.tryTake(), bucket.tryTake()], [true, true, false]);
  });

  it("says how long until the next token without taking it", () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(10, 1, clock);
    assert.equal(bucket.delayUntilNextToken(), 0);
    bucket.tryTake();
    assert.equal(bucket.delayUntilNextToken(), 100);
    clock.advance(40);
    assert.equal(bucket.delayUntilNextToken(), 60);
    assert.equal(bucket.delayUntilNextToken(), 60);
  });

  it("reserves tokens into the future, each one an interval after the last", () => {
    const bucket = new TokenBucket(10, 1, new ManualClock());
    assert.deepEqual([bucket.reserve(), bucket.reserve(), bucket.reserve()], [0, 100, 200]);
  });

  it("take resolves at once while tokens are left, and waits for the refill when empty", async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(10, 1, clock);
    await bucket.take();
    const log: string[] = [];
    track(bucket.take(), "second", log);
    await settle();
    assert.deepEqual(log, []);
    clock.advance(99);
    await settle();
    assert.deepEqual(log, []);
    clock.advance(1);
    await settle();
    assert.deepEqual(log, ["second"]);
  });

  it("serves waiting callers first come, first served", async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(10, 1, clock);
    bucket.tryTake();
    const log: string[] = [];
    track(bucket.take(), "a", log);
    track(bucket.take(), "b", log);
    track(bucket.take(), "c", log);
    clock.advance(100);
    await settle();
    assert.deepEqual(log, ["a"]);
    clock.advance(200);
    await settle();
    assert.deepEqual(log, ["a", "b", "c"]);
  });

  it("never lets tryTake steal a token that a waiting caller has claimed", async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(10, 1, clock);
    bucket.tryTake();
    const log: string[] = [];
    track(bucket.take(), "waiter", log);
    clock.advance(150);
    await settle();
    assert.deepEqual(log, ["waiter"]);
    assert.equal(bucket.tryTake(), false);
    clock.advance(50);
    assert.equal(bucket.tryTake(), true);
  });

  it("rejects a waiting take with the abort reason and gives its token back", async () => {
    const clock = new ManualClock();
    const bucket = new TokenBucket(10, 1, clock);
    bucket.tryTake();
    const controller = new AbortController();
    const waiting = bucket.take(controller.signal);
    const reason = new Error("stopping");
    controller.abort(reason);
    await assert.rejects(waiting, (error) => error === reason);
    assert.equal(clock.pending, 0);
    assert.equal(bucket.delayUntilNextToken(), 100);
  });

  it("rejects take at once when the signal is already aborted, claiming nothing", async () => {
    const bucket = new TokenBucket(10, 1, new ManualClock());
    await assert.rejects(bucket.take(AbortSignal.abort(new Error("gone"))), /gone/);
    assert.equal(bucket.tryTake(), true);
  });

  it("is unlimited when qps is zero or negative", async () => {
    for (const qps of [0, -1]) {
      const bucket = new TokenBucket(qps, 0, new ManualClock());
      for (let i = 0; i < 1000; i++) assert.equal(bucket.tryTake(), true);
      assert.equal(bucket.delayUntilNextToken(), 0);
      assert.equal(bucket.reserve(), 0);
      await bucket.take();
    }
  });

  it("rejects a burst below one when limited", () => {
    assert.throws(() => new TokenBucket(10, 0, new ManualClock()), RangeError);
    assert.throws(() => new TokenBucket(10, 1.5, new ManualClock()), RangeError);
  });
});
