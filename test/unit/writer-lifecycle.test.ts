/**
 * The local writer's lifecycle in the supervisor as a pure function: restarts with
 * backoff, and Events that wait for a writer instead of being lost while it restarts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { EventRequest } from "../../src/protocol/messages.ts";
import {
  EVENT_OUTBOX_MAX,
  initialWriterState,
  type WriterLifecycleEffect,
  type WriterLifecycleEvent,
  type WriterLifecycleState,
  writerTransition,
} from "../../src/supervisor/writer-lifecycle.ts";

const POLICY = { initialMs: 1_000, maxMs: 60_000, windowMs: 600_000, crashLoopAfter: 5, crashLoopRetryMs: 300_000 };

function event(n: number): EventRequest {
  return {
    involved: { kind: "Secret", apiVersion: "v1", namespace: "fleet", name: `s${n}` },
    type: "Normal",
    reason: "ClusterRegistered",
    message: `cluster c${n} registered`,
  };
}

function run(
  events: readonly WriterLifecycleEvent[],
  state: WriterLifecycleState = initialWriterState(POLICY, 10_000),
): { state: WriterLifecycleState; effects: WriterLifecycleEffect[] } {
  const effects: WriterLifecycleEffect[] = [];
  let s = state;
  for (const e of events) {
    const t = writerTransition(s, e, 1_000_000);
    s = t.state;
    effects.push(...t.effects);
  }
  return { state: s, effects };
}

const posted = (effects: readonly WriterLifecycleEffect[]): string[] =>
  effects.flatMap((e) => (e.type === "post-event" ? [e.event.involved.name] : []));

describe("writer lifecycle", () => {
  it("an Event sent while the writer is ready is handed over at once", () => {
    const { effects } = run([{ type: "start" }, { type: "ready" }, { type: "event", event: event(1) }]);
    assert.deepEqual(posted(effects), ["s1"]);
  });

  it("an Event sent while the writer restarts waits, and is handed over when the new writer is ready", () => {
    const ready = run([{ type: "start" }, { type: "ready" }]).state;
    const down = run(
      [
        { type: "exited", code: 1 },
        { type: "event", event: event(1) },
        { type: "event", event: event(2) },
      ],
      ready,
    );
    assert.deepEqual(posted(down.effects), [], "nothing to hand it to");
    assert.equal(down.state.outbox.length, 2);
    const timer = down.effects.find((e) => e.type === "start-timer");
    assert.ok(timer?.type === "start-timer");
    assert.equal(timer.ms, POLICY.initialMs);
    const back = run([timer.event, { type: "event", event: event(3) }, { type: "ready" }], down.state);
    assert.ok(back.effects.some((e) => e.type === "spawn"));
    assert.deepEqual(posted(back.effects), ["s1", "s2", "s3"], "in order, once ready");
    assert.equal(back.state.outbox.length, 0);
    assert.equal(back.state.restarts, 1);
  });

  it("Events waiting for a writer are bounded: the oldest is dropped, counted and logged", () => {
    const events: WriterLifecycleEvent[] = [{ type: "start" }];
    for (let i = 0; i < EVENT_OUTBOX_MAX + 2; i++) events.push({ type: "event", event: event(i) });
    const { state, effects } = run(events);
    assert.equal(state.outbox.length, EVENT_OUTBOX_MAX);
    assert.equal(state.eventsDropped, 2);
    assert.equal(state.outbox[0]?.involved.name, "s2", "the oldest went first");
    assert.equal(effects.filter((e) => e.type === "log").length, 2);
  });

  it("a writer that fails is terminated and restarted with growing backoff, and the failures reset once ready", () => {
    const error = { name: "Error", message: "boom" };
    const first = run([{ type: "start" }, { type: "failed", error }, { type: "exited", code: 1 }]);
    assert.ok(first.effects.some((e) => e.type === "terminate"));
    const log = first.effects.find((e) => e.type === "log");
    assert.match(log?.type === "log" ? log.message : "", /boom/);
    const second = run([{ type: "restart-timer-fired" }, { type: "exited", code: 1 }], first.state);
    const timer = second.effects.find((e) => e.type === "start-timer");
    assert.equal(timer?.type === "start-timer" ? timer.ms : 0, 2 * POLICY.initialMs);
    const ready = run([{ type: "restart-timer-fired" }, { type: "ready" }], second.state);
    assert.deepEqual(ready.state.failures, []);
  });

  it("stop asks the writer to stop, terminates it if it does not in time, and it is not restarted", () => {
    const { state, effects } = run([{ type: "start" }, { type: "ready" }, { type: "stop" }]);
    assert.ok(effects.some((e) => e.type === "post-stop"));
    const timeout = run([{ type: "stop-timeout" }], state);
    assert.ok(timeout.effects.some((e) => e.type === "terminate"));
    const exited = run([{ type: "exited", code: 1 }], timeout.state);
    assert.equal(exited.state.phase, "stopped");
    assert.ok(!exited.effects.some((e) => e.type === "spawn" || e.type === "start-timer"));
  });
});
