/** decideRestart: the supervisor's restart decision as a pure function of the failure history. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_RESTART_POLICY, decideRestart, type RestartPolicy } from "../../src/supervisor/restart-policy.ts";

const policy: RestartPolicy = Object.freeze({
  initialMs: 100,
  maxMs: 1_000,
  windowMs: 60_000,
  crashLoopAfter: 10,
  crashLoopRetryMs: 300_000,
});

const NOW = 1_000_000;

/** `n` failures, one second apart, the last one now. */
function failures(n: number, now = NOW): readonly number[] {
  return Object.freeze(Array.from({ length: n }, (_, i) => now - (n - 1 - i) * 1_000));
}

describe("decideRestart", () => {
  it("waits initialMs after the first failure", () => {
    assert.deepEqual(decideRestart(failures(1), NOW, policy), { delayMs: 100, crashLoop: false, recent: [NOW] });
  });

  it("doubles the delay with every failure inside the window", () => {
    const delays = [1, 2, 3, 4].map((n) => decideRestart(failures(n), NOW, policy).delayMs);
    assert.deepEqual(delays, [100, 200, 400, 800]);
  });

  it("caps the delay at maxMs", () => {
    assert.equal(decideRestart(failures(5), NOW, policy).delayMs, 1_000);
    assert.equal(decideRestart(failures(9), NOW, policy).delayMs, 1_000);
    const noLoop = { ...policy, crashLoopAfter: Number.POSITIVE_INFINITY };
    assert.equal(decideRestart(failures(2_000), NOW, noLoop).delayMs, 1_000, "no overflow to Infinity or NaN");
  });

  it("forgets failures older than the window: the backoff starts over and they are not kept", () => {
    const history = [NOW - 120_000, NOW - 90_000, NOW - 61_000, NOW];
    const decision = decideRestart(history, NOW, policy);
    assert.deepEqual(decision, { delayMs: 100, crashLoop: false, recent: [NOW] });
  });

  it("counts a failure exactly windowMs old as inside the window", () => {
    const decision = decideRestart([NOW - 60_000, NOW], NOW, policy);
    assert.deepEqual(decision.recent, [NOW - 60_000, NOW]);
    assert.equal(decision.delayMs, 200);
  });

  it("reports a crash loop at crashLoopAfter failures inside the window and retries only every crashLoopRetryMs", () => {
    const before = decideRestart(failures(9), NOW, policy);
    assert.equal(before.crashLoop, false);

    const loop = decideRestart(failures(10), NOW, policy);
    assert.equal(loop.crashLoop, true);
    assert.equal(loop.delayMs, 300_000);
    assert.equal(loop.recent.length, 10);

    assert.equal(decideRestart(failures(25), NOW, policy).crashLoop, true, "stays a crash loop while failures go on");
  });

  it("leaves a crash loop once enough failures have aged out of the window", () => {
    const history = [...failures(9, NOW - 70_000), NOW];
    const decision = decideRestart(history, NOW, policy);
    assert.equal(decision.crashLoop, false);
    assert.deepEqual(decision.recent, [NOW]);
  });

  it("treats an empty history as a first failure", () => {
    assert.deepEqual(decideRestart([], NOW, policy), { delayMs: 100, crashLoop: false, recent: [] });
  });

  it("does not modify the history it is given", () => {
    const history = failures(4);
    const copy = [...history];
    decideRestart(history, NOW, policy);
    assert.deepEqual(history, copy);
  });

  it("uses the default policy when none is given: 1 s doubling to 60 s, crash loop at 5 failures in 10 min", () => {
    assert.deepEqual(DEFAULT_RESTART_POLICY, {
      initialMs: 1_000,
      maxMs: 60_000,
      windowMs: 600_000,
      crashLoopAfter: 5,
      crashLoopRetryMs: 300_000,
    });
    assert.equal(Object.isFrozen(DEFAULT_RESTART_POLICY), true);
    assert.equal(decideRestart(failures(1), NOW).delayMs, 1_000);
    assert.equal(decideRestart(failures(4), NOW).delayMs, 8_000);
    assert.deepEqual(
      { crashLoop: decideRestart(failures(5), NOW).crashLoop, delayMs: decideRestart(failures(5), NOW).delayMs },
      { crashLoop: true, delayMs: 300_000 },
    );
  });
});
