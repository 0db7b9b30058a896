import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Clock } from "../../src/core/clock.ts";
import { abortableSleep } from "../../src/core/clock.ts";
import { candidateDelay } from "../../src/leader/schedule.ts";

describe("leader election schedule", () => {
  it("retries a candidate after the retry period stretched by at most 20 % jitter", () => {
    assert.equal(
      candidateDelay(2_000, undefined, 0, () => 0),
      2_000,
    );
    assert.equal(
      candidateDelay(2_000, undefined, 0, () => 0.999_999),
      2_000 * (1 + 0.999_999 * 0.2),
    );
  });

  it("wakes a candidate just after the observed Lease expires when that comes sooner", () => {
    assert.equal(
      candidateDelay(2_000, 10_500, 10_000, () => 0),
      520,
    );
    assert.equal(
      candidateDelay(2_000, 9_000, 10_000, () => 0),
      20,
    );
    assert.equal(
      candidateDelay(2_000, 20_000, 10_000, () => 0),
      2_000,
    );
  });

  it("ends a sleep at once when it is aborted, and never rejects", async () => {
    const timers = new Set<number>();
    let next = 0;
    const clock = {
      now: () => 0,
      setTimeout: () => {
        timers.add(++next);
        return next;
      },
      clearTimeout: (t: unknown) => timers.delete(t as number),
    } as unknown as Clock;
    const abort = new AbortController();
    const sleeping = abortableSleep(clock, 60_000, abort.signal);
    assert.equal(timers.size, 1);
    abort.abort(new Error("stop"));
    await sleeping;
    assert.equal(timers.size, 0, "the timer is cleared");
    await abortableSleep(clock, 60_000, abort.signal);
    assert.equal(timers.size, 0, "an aborted signal sleeps not at all");
  });
});
