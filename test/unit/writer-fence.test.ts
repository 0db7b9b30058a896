/** The local writer's write fence: a deadline on the monotonic clock, the latest one wins. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { FENCE_RECHECK_MS, WriteFence } from "../../workers/local-writer/fence.ts";

describe("WriteFence", () => {
  it("is open forever without leader election", () => {
    const clock = new ManualClock(1_000);
    const fence = new WriteFence(false, clock, silentLogger());
    clock.advance(10 * 365 * 24 * 3600_000);
    assert.equal(fence.writable, true);
  });

  it("with leader election is closed until a deadline allows writing, and closes again at the deadline", () => {
    const clock = new ManualClock(1_000);
    const fence = new WriteFence(true, clock, silentLogger());
    assert.equal(fence.writable, false);
    assert.equal(fence.move(6_000), true, "reopened");
    assert.equal(fence.writable, true);
    clock.advance(4_999);
    assert.equal(fence.writable, true);
    clock.advance(1);
    assert.equal(fence.writable, false, "nothing at or after the deadline");
    assert.deepEqual(fence.held("create Service shop/web-east"), { kind: "requeue-after", ms: FENCE_RECHECK_MS });
  });

  it("reports a reopening only when a closed fence opens; the latest deadline wins, even an earlier one", () => {
    const clock = new ManualClock(0);
    const fence = new WriteFence(true, clock, silentLogger());
    assert.equal(fence.move(10_000), true);
    assert.equal(fence.move(20_000), false, "already open");
    assert.equal(fence.move(5), false, "moving the deadline back reopens nothing");
    clock.advance(5);
    assert.equal(fence.writable, false);
  });
});
