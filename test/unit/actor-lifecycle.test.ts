/**
 * The remote-cluster actors' lifecycle as a pure function: every rule of the supervisor
 * about starting, stopping, restarting and placing actors, driven event by event in
 * microseconds, without a thread or an API server.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { transition } from "../../src/supervisor/actor-lifecycle.ts";
import type { LifecycleSettings } from "../../src/supervisor/actor-lifecycle-state.ts";
import type { RegisteredCluster } from "../../src/supervisor/registry.ts";
import { Driver, PACKED, POLICY, reg, registrations, SOLO } from "../helpers/lifecycle-driver.ts";

describe("actor lifecycle", () => {
  it("a registered cluster gets a thread of its own and an init, and runs once ready", () => {
    const d = new Driver(SOLO);
    d.step(registrations(reg("east")));
    assert.deepEqual(
      d.of("spawn-thread").map((e) => e.name),
      ["east"],
    );
    const [init] = d.of("post-init");
    assert.equal(init?.cluster, "east");
    assert.equal(d.state.actors.get("east")?.phase, "starting");
    d.ready("east");
    assert.equal(d.state.actors.get("east")?.phase, "running");
  });

  it("never starts more than maxConcurrentStarts threads at once; a ready actor lets the next start", () => {
    const d = new Driver(SOLO);
    d.step(registrations(reg("a"), reg("b"), reg("c")));
    assert.equal(d.of("spawn-thread").length, 2);
    assert.equal(d.state.actors.get("c")?.phase, "queued");
    d.ready("a");
    assert.deepEqual(
      d.of("spawn-thread").map((e) => e.name),
      ["c"],
    );
  });

  it("packs clusters on their slot's thread: one spawn per slot, later actors start on the running thread", () => {
    const d = new Driver(PACKED);
    d.step(registrations(reg("c0"), reg("c1"), reg("c2")));
    assert.equal(d.of("spawn-thread").length, 2, "one thread per slot");
    assert.equal(d.current("c0").thread, d.current("c2").thread, "c0 and c2 share slot 0");
    assert.notEqual(d.current("c0").thread, d.current("c1").thread);
  });

  it("a Secret deleted and recreated before its old actor stopped: the old stop completes by its epoch, the new incarnation runs on the same thread, the neighbour is untouched", () => {
    const d = new Driver(PACKED);
    d.step(registrations(reg("c0"), reg("c1"), reg("c2")));
    d.ready("c0");
    d.ready("c2");
    const old = d.current("c2");
    const neighbour = d.current("c0");

    d.step(registrations(reg("c0"), reg("c1")));
    assert.deepEqual(d.of("post-stop"), [{ type: "post-stop", thread: old.thread, cluster: "c2", epoch: old.epoch }]);

    d.step(registrations(reg("c0"), reg("c1"), reg("c2", { uid: "uid-c2-new" })));
    assert.equal(d.of("spawn-thread").length, 0, "no new thread: the shared one is up and keeps c0");
    const fresh = d.current("c2");
    assert.equal(fresh.thread, old.thread);
    assert.notEqual(fresh.epoch, old.epoch);

    d.step({ type: "actor-stopped", thread: old.thread, cluster: "c2", epoch: old.epoch });
    assert.ok(
      d.effects.some((e) => e.type === "cancel-timer" && e.key === `stop/${old.epoch}`),
      "its stop timer is cancelled",
    );
    assert.equal(d.of("terminate-thread").length, 0);
    assert.equal(d.state.incarnations.has(old.epoch), false, "the old incarnation ended");
    d.step({ type: "stop-timeout", epoch: old.epoch });
    assert.deepEqual(d.effects, [], "a late stop timer does nothing");

    d.step({ type: "actor-ready", thread: fresh.thread, cluster: "c2", epoch: fresh.epoch });
    assert.equal(d.state.actors.get("c2")?.phase, "running");
    assert.deepEqual(d.current("c0"), neighbour);
    assert.equal(d.state.actors.get("c0")?.restarts, 0);
    assert.equal(d.state.actors.get("c2")?.restarts, 0);
  });

  it("a stop that does not complete in time terminates the thread; its neighbours restart at once, not charged with the hung actor's fault", () => {
    const d = new Driver(PACKED);
    d.step(registrations(reg("c0"), reg("c1"), reg("c2")));
    d.ready("c0");
    d.ready("c2");
    const { epoch, thread } = d.current("c2");
    const neighbour = d.current("c0");
    d.step(registrations(reg("c0"), reg("c1")));
    d.step({ type: "stop-timeout", epoch });
    assert.deepEqual(d.of("terminate-thread"), [{ type: "terminate-thread", thread }]);
    assert.ok(d.of("log").some((l) => /timed out/.test(l.message)));
    d.step({ type: "thread-exited", thread, code: 1 });
    // c2's hung stop ended the thread: c0 is collateral, restarted at once on a new thread.
    const c0 = d.state.actors.get("c0");
    assert.equal(c0?.phase, "starting");
    assert.deepEqual(c0?.failures, []);
    assert.equal(c0?.restarts, 0, "not a crash of c0");
    assert.ok(!d.of("start-timer").some((t) => t.key === "restart/c0"), "no backoff");
    assert.notEqual(d.current("c0").thread, neighbour.thread);
    assert.ok(d.of("log").some((l) => /because of cluster c2/.test(l.message)));
    assert.equal(d.state.actors.get("c1")?.restarts, 0, "the other thread's actor is untouched");
  });

  it("an actor failing on a shared thread alone backs off and restarts on the same thread", () => {
    const d = new Driver(PACKED);
    d.step(registrations(reg("c0"), reg("c1"), reg("c2")));
    d.ready("c0");
    d.ready("c2");
    const { epoch, thread } = d.current("c2");
    const error = { name: "Error", message: "boom" };
    d.step({ type: "actor-failed", thread, cluster: "c2", epoch, error });
    assert.equal(d.state.actors.get("c2")?.phase, "backoff");
    assert.equal(d.of("terminate-thread").length, 0);
    const [timer] = d.of("start-timer");
    assert.equal(timer?.ms, POLICY.initialMs);
    assert.ok(timer);
    d.step(timer.event);
    assert.equal(d.of("spawn-thread").length, 0);
    assert.equal(d.current("c2").thread, thread);
    assert.equal(d.state.actors.get("c0")?.phase, "running");
  });

  it("a thread that exits restarts exactly the actors whose current incarnation it hosted", () => {
    const d = new Driver(PACKED);
    d.step(registrations(reg("c0"), reg("c1"), reg("c2")));
    const { thread } = d.current("c0");
    d.step({ type: "thread-error", thread, error: { name: "RangeError", message: "out of memory" } });
    d.step({ type: "thread-exited", thread, code: 1 });
    for (const c of ["c0", "c2"]) {
      assert.equal(d.state.actors.get(c)?.phase, "backoff");
      assert.equal(d.state.actors.get(c)?.lastError?.message, "out of memory");
    }
    assert.equal(d.state.actors.get("c1")?.phase, "starting");
    assert.equal(d.state.threads.has(thread), false);
  });

  it("credentials rotated while running: one stop, then ONE new incarnation with the latest registration, however many rotations arrive meanwhile", () => {
    const d = new Driver(SOLO);
    d.step(registrations(reg("east")));
    d.ready("east");
    const old = d.current("east");
    d.step(registrations(reg("east", { fingerprint: "f2" })));
    assert.equal(d.of("post-stop").length, 1);
    d.step(registrations(reg("east", { fingerprint: "f3" })));
    assert.equal(d.of("post-stop").length, 0, "the stop in progress is shared");
    d.step({ type: "actor-stopped", thread: old.thread, cluster: "east", epoch: old.epoch });
    assert.equal(d.of("post-init").length, 0, "a thread of its own: stopped once it has ended");
    d.step({ type: "thread-exited", thread: old.thread, code: 0 });
    const inits = d.of("post-init");
    assert.equal(inits.length, 1);
    assert.equal(inits[0]?.registration.fingerprint, "f3");
    assert.equal(d.state.actors.get("east")?.restarts, 0, "a rotation is not a crash");
  });

  it("reports a crash loop with one Event when the actor enters it, not one per crash", () => {
    const d = new Driver(SOLO);
    d.step(registrations(reg("east")));
    const reported: string[] = [];
    for (let i = 0; i < 5; i++) {
      const { thread } = d.current("east");
      d.step({ type: "thread-exited", thread, code: 3 });
      for (const e of d.of("report-event")) reported.push(e.reason);
      const [timer] = d.of("start-timer");
      assert.ok(timer);
      d.now += timer.ms;
      d.step(timer.event);
    }
    assert.equal(d.state.actors.get("east")?.restarts, 5);
    assert.deepEqual(reported, ["ActorCrashLoop"]);
  });

  it("unregistering a cluster in backoff cancels its restart; a stale restart timer does nothing", () => {
    const d = new Driver(SOLO);
    d.step(registrations(reg("east")));
    d.step({ type: "thread-exited", thread: d.current("east").thread, code: 1 });
    const [timer] = d.of("start-timer");
    assert.ok(timer);
    d.step(registrations());
    assert.ok(d.effects.some((e) => e.type === "cancel-timer" && e.key === "restart/east"));
    d.step(timer.event);
    assert.deepEqual(d.effects, []);
    assert.equal(d.state.actors.size, 0);
  });

  it("a cluster whose shard is given up stops like an unregistered one, and the log says why", () => {
    const d = new Driver(SOLO);
    d.step(registrations(reg("east"), reg("west")));
    d.ready("east");
    d.ready("west");
    d.step({ type: "registrations", registered: new Map([["west", reg("west")]]), elsewhere: new Set(["east"]) });
    assert.equal(d.of("post-stop").length, 1);
    assert.deepEqual(
      d.of("log").map((l) => l.message),
      ["cluster east's shard is not held here: stopping its actor"],
    );
  });

  it("messages from an incarnation that already ended are ignored", () => {
    const d = new Driver(SOLO);
    d.step(registrations(reg("east")));
    const old = d.current("east");
    d.step({ type: "thread-exited", thread: old.thread, code: 1 });
    const before = d.state;
    d.step({ type: "actor-ready", thread: old.thread, cluster: "east", epoch: old.epoch });
    assert.equal(d.state.actors.get("east")?.phase, before.actors.get("east")?.phase);
    assert.deepEqual(d.effects, []);
  });

  it("shutdown stops every actor and ends idle threads; it is over once every thread exited", () => {
    const d = new Driver(PACKED);
    d.step(registrations(reg("c0"), reg("c1")));
    d.ready("c0");
    d.ready("c1");
    const t0 = d.current("c0");
    const t1 = d.current("c1");
    d.step({ type: "shutdown" });
    assert.equal(d.of("post-stop").length, 2);
    d.step({ type: "actor-stopped", thread: t0.thread, cluster: "c0", epoch: t0.epoch });
    assert.deepEqual(d.of("terminate-thread"), [{ type: "terminate-thread", thread: t0.thread }]);
    d.step({ type: "thread-exited", thread: t0.thread, code: 1 });
    d.step({ type: "thread-exited", thread: t1.thread, code: 1 });
    assert.equal(d.state.threads.size, 0);
    assert.equal(d.of("start-timer").filter((t) => t.key.startsWith("restart/")).length, 0, "nothing restarts");
    d.step(registrations(reg("c0"), reg("c1"), reg("c2")));
    assert.deepEqual(d.effects, [], "no new actor after shutdown");
  });

  it("never changes the state it is given", () => {
    const d = new Driver(PACKED);
    d.step(registrations(reg("c0"), reg("c1")));
    const frozen = structuredClone(d.state);
    transition(d.state, registrations(reg("c0")), d.now);
    transition(d.state, { type: "shutdown" }, d.now);
    assert.deepEqual(d.state, frozen);
  });
});

describe("warm threads (sharded, before any shard is held)", () => {
  const FOUR: LifecycleSettings = { ...SOLO, maxThreads: 4, maxConcurrentStarts: 4 };
  const clusters = (n: number): RegisteredCluster[] => Array.from({ length: n }, (_, i) => reg(`c${i}`));

  it("starts every packed slot's thread empty, sized for the whole fleet; the shards' actors then start on them with no spawn", () => {
    const d = new Driver(FOUR);
    d.step({ type: "warm-threads", fleet: 300 });
    assert.deepEqual(
      d.of("spawn-thread").map((e) => [e.name, e.actorsExpected]),
      [0, 1, 2, 3].map((slot) => [`thread-${slot}`, 75]),
    );
    assert.equal(d.of("post-init").length, 0, "no actor before a shard is held");
    d.step({ type: "warm-threads", fleet: 300 });
    assert.deepEqual(d.effects, [], "idempotent: every slot has its thread");
    d.step(registrations(...clusters(100)));
    assert.equal(d.of("spawn-thread").length, 0, "the actors start on the warm threads");
    assert.equal(d.of("post-init").length, 100);
    assert.equal(new Set(clusters(100).map((r) => d.current(r.cluster).thread)).size, 4);
  });

  it("warms no more threads than maxConcurrentStarts at once, nor than the fleet has clusters", () => {
    const d = new Driver({ ...FOUR, maxConcurrentStarts: 3 });
    d.step({ type: "warm-threads", fleet: 300 });
    assert.equal(d.of("spawn-thread").length, 3);
    const small = new Driver(FOUR);
    small.step({ type: "warm-threads", fleet: 2 });
    assert.deepEqual(
      small.of("spawn-thread").map((e) => [e.name, e.actorsExpected]),
      [
        ["thread-0", 1],
        ["thread-1", 1],
      ],
    );
  });

  it("does nothing with a thread per cluster (no packed slots yet) or once shutting down", () => {
    const d = new Driver(SOLO);
    d.step({ type: "warm-threads", fleet: 300 });
    assert.deepEqual(d.effects, []);
    const stopping = new Driver(FOUR);
    stopping.step({ type: "shutdown" });
    stopping.step({ type: "warm-threads", fleet: 300 });
    assert.deepEqual(stopping.effects, []);
  });

  it("a warm thread the replica's share does not need ends once clusters are placed; with none placed it stays", () => {
    const d = new Driver(FOUR);
    d.step({ type: "warm-threads", fleet: 300 });
    const warm = d.of("spawn-thread").map((e) => e.thread);
    d.step(registrations());
    assert.equal(d.of("terminate-thread").length, 0, "no cluster here yet: the warm threads wait");
    d.step(registrations(reg("c0"), reg("c1")));
    assert.equal(d.of("post-init").length, 2);
    assert.deepEqual(
      d.of("terminate-thread").map((e) => e.thread),
      warm.slice(2),
    );
  });
});
