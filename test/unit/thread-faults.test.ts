/**
 * A shared actor thread that dies, as the pure lifecycle sees it: the death is charged to
 * the actor that caused it when that is known (its heap exhaustion came while it held a
 * large API answer, or its stop hung), its neighbours restart at once without a failure,
 * and a repeat offender is moved to a thread of its own. When nobody can be named, nobody
 * is charged: the thread's actors restart after the slot's own backoff.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SerializedError } from "../../src/protocol/errors.ts";
import type { LifecycleSettings } from "../../src/supervisor/actor-lifecycle-state.ts";
import { Driver, reg, registrations, SOLO } from "../helpers/lifecycle-driver.ts";

/** Every cluster on one shared slot. */
const ONE_SLOT: LifecycleSettings = { ...SOLO, maxThreads: 1 };
const OOM: SerializedError = {
  name: "Error",
  message: "Worker terminated due to reaching memory limit: JS heap out of memory",
  code: "ERR_WORKER_OUT_OF_MEMORY",
};
const MIB = 2 ** 20;

/** Fires `cluster`'s pending restart timer (from the last step's effects), if any. */
function fireRestart(d: Driver, cluster: string, effects = d.effects): void {
  const timer = effects.find((e) => e.type === "start-timer" && e.key === `restart/${cluster}`);
  if (timer?.type === "start-timer") d.step(timer.event);
}

/** Readies every cluster whose incarnation is starting. */
function readyAll(d: Driver): void {
  for (const actor of d.state.actors.values()) if (actor.phase === "starting") d.ready(actor.cluster);
}

describe("a shared actor thread that dies", () => {
  it("is charged to the actor that held a large answer when its heap ran out: the neighbour never backs off or crash-loops, and the offender ends up on a thread of its own", () => {
    const d = new Driver(ONE_SLOT);
    d.step(registrations(reg("a"), reg("b")));
    readyAll(d);
    assert.equal(d.current("a").thread, d.current("b").thread, "a and b share the slot's thread");
    const quarantined: string[] = [];
    for (let round = 1; round <= 5; round++) {
      const a = d.current("a");
      const bBefore = d.current("b");
      d.step({ type: "actor-load", thread: a.thread, cluster: "a", epoch: a.epoch, bytes: 48 * MIB });
      d.step({ type: "thread-error", thread: a.thread, error: OOM });
      const exit = d.step({ type: "thread-exited", thread: a.thread, code: 1 });
      for (const e of exit)
        if (e.type === "report-event" && e.reason === "ActorQuarantined") quarantined.push(`${round}:${e.cluster}`);

      const actorA = d.state.actors.get("a");
      assert.ok(actorA?.phase === "backoff" || actorA?.phase === "crash-loop", `round ${round}: a is charged`);
      assert.equal(actorA?.failures.length, round, `round ${round}: a's failure history`);
      const b = d.state.actors.get("b");
      assert.ok(b);
      assert.ok(b.phase === "starting" || b.phase === "running", `round ${round}: b is ${b.phase}`);
      assert.deepEqual(b.failures, [], `round ${round}: b has no failure`);
      assert.equal(b.crashLoopReported, false);
      assert.ok(
        !exit.some((e) => e.type === "start-timer" && e.key === "restart/b"),
        `round ${round}: b restarts at once, with no backoff`,
      );
      if (a.thread === bBefore.thread) assert.notEqual(d.current("b").epoch, bBefore.epoch, "b restarted at once");
      else assert.deepEqual(d.current("b"), bBefore, `round ${round}: a's own thread died; b is untouched`);

      readyAll(d);
      d.now += 1_000;
      fireRestart(d, "a", exit);
      readyAll(d);
    }
    assert.deepEqual(quarantined, ["2:a"], "a is moved to a thread of its own once, at its second offence");
    const a = d.current("a");
    const aThread = d.state.threads.get(a.thread);
    assert.equal(aThread?.slot, undefined, "a's thread is its own, not the slot's");
    assert.deepEqual(aThread?.incarnations, [a.epoch], "a is alone on it");
    assert.notEqual(a.thread, d.current("b").thread);
    assert.equal(d.state.actors.get("a")?.quarantined, true);
    assert.equal(d.state.actors.get("b")?.quarantined, false);
  });

  it("charges nobody when the dead thread cannot say which actor caused it: every actor it hosted restarts after the slot's backoff, none ever crash-loops", () => {
    const d = new Driver(ONE_SLOT);
    d.step(registrations(reg("a"), reg("b")));
    readyAll(d);
    const delays: number[] = [];
    for (let round = 1; round <= 6; round++) {
      const { thread } = d.current("a");
      d.step({ type: "thread-error", thread, error: { name: "Error", message: "boom" } });
      const exit = d.step({ type: "thread-exited", thread, code: 1 });
      for (const c of ["a", "b"]) {
        const actor = d.state.actors.get(c);
        assert.equal(actor?.phase, "backoff", `round ${round}: ${c}`);
        assert.deepEqual(actor?.failures, [], `round ${round}: ${c} is not charged`);
        assert.equal(actor?.lastError?.message, "boom");
      }
      assert.ok(!exit.some((e) => e.type === "report-event"), "no ActorCrashLoop, no quarantine");
      assert.ok(exit.some((e) => e.type === "log" && /could not tell which actor/.test(e.message)));
      const timers = exit.filter((e) => e.type === "start-timer");
      assert.equal(timers.length, 2);
      delays.push(timers[0]?.type === "start-timer" ? timers[0].ms : -1);
      d.now += 1_000;
      fireRestart(d, "a", exit);
      fireRestart(d, "b", exit);
      readyAll(d);
      assert.equal(d.current("a").thread, d.current("b").thread, "both back on the slot's new thread");
    }
    assert.deepEqual(delays, [1_000, 2_000, 4_000, 8_000, 16_000, 32_000], "the slot's backoff, never a crash loop's");
  });
});
