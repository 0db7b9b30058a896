import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  FAILURES_TO_DEAD,
  INITIAL_LIVENESS,
  type Liveness,
  type LivenessEffect,
  type LivenessEvent,
  transition,
} from "../../src/core/gateway-liveness.ts";

const ok: LivenessEvent = { kind: "succeeded" };
const timeout: LivenessEvent = { kind: "failed", reason: "timeout" };
const refused: LivenessEvent = { kind: "failed", reason: "refused" };
const notReady: LivenessEvent = { kind: "failed", reason: "status" };

/** Runs `events` from `start`; returns the final state and every effect, in order. */
function run(events: readonly LivenessEvent[], start: Liveness = INITIAL_LIVENESS) {
  let state = start;
  const effects: LivenessEffect[] = [];
  for (const event of events) {
    const step = transition(state, event);
    state = step.state;
    effects.push(...step.effects);
  }
  return { state, effects };
}

describe("gateway address liveness", () => {
  it("starts alive", () => {
    assert.equal(INITIAL_LIVENESS.alive, true);
    assert.equal(INITIAL_LIVENESS.consecutiveFailures, 0);
  });

  it("stays alive, with no effect, through fewer than 3 consecutive failures", () => {
    const { state, effects } = run([timeout, refused]);
    assert.equal(state.alive, true);
    assert.deepEqual(effects, []);
  });

  it("is dead after 3 consecutive failures of any kind, with exactly one change", () => {
    assert.equal(FAILURES_TO_DEAD, 3);
    const { state, effects } = run([timeout, refused, notReady]);
    assert.equal(state.alive, false);
    assert.deepEqual(effects, [{ kind: "changed", alive: false }]);
  });

  it("needs the failures to be consecutive: a success in between starts the count over", () => {
    const { state, effects } = run([timeout, timeout, ok, timeout, timeout]);
    assert.equal(state.alive, true);
    assert.deepEqual(effects, []);
  });

  it("is alive again after one 2xx answer, with exactly one change", () => {
    const { state, effects } = run([timeout, timeout, timeout, ok]);
    assert.equal(state.alive, true);
    assert.equal(state.consecutiveFailures, 0);
    assert.deepEqual(effects, [
      { kind: "changed", alive: false },
      { kind: "changed", alive: true },
    ]);
  });

  it("has no effect for probes that confirm the current state (dead stays dead, alive stays alive)", () => {
    const dead = run([timeout, timeout, timeout]).state;
    assert.deepEqual(run([timeout, refused, notReady, timeout], dead).effects, []);
    assert.deepEqual(run([ok, ok, ok]).effects, []);
  });

  it("keeps the failure count bounded however long an address stays dead", () => {
    const { state } = run(Array.from({ length: 1_000 }, () => timeout));
    assert.equal(state.consecutiveFailures, FAILURES_TO_DEAD);
    assert.equal(state.alive, false);
  });

  it("never mutates the state it is given", () => {
    const start = { alive: true, consecutiveFailures: 2 };
    transition(start, timeout);
    assert.deepEqual(start, { alive: true, consecutiveFailures: 2 });
  });
});
