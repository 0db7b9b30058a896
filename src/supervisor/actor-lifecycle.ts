/**
 * The lifecycle of the remote-cluster actors and of the threads that host them, as a
 * pure function: `transition(state, event, now) → { state, effects }`. It never
 * touches a thread, a timer or a clock; actor-runner.ts performs the effects and feeds
 * back what happens as events. The state and effect types are in actor-lifecycle-state.ts.
 *
 * Rules (docs/DESIGN.md §1, "Actor lifecycle", says why each holds):
 * - one cluster's failure never stops another: every actor has its own restart
 *   history; a thread that ends restarts exactly the actors whose current incarnation
 *   it hosted, and is charged to the one that caused it when that is known, never to
 *   its neighbours (actor-endings.ts); in packed mode a failed actor alone is stopped
 *   and restarted, its neighbours run on; an actor that keeps ending shared threads
 *   gets a thread of its own;
 * - an incarnation asked to stop is tracked by its epoch until its own `actor-stopped`
 *   (or its thread's exit), even when the cluster is registered again meanwhile and a
 *   new incarnation runs on the same thread: an old stop completes normally, never
 *   times out because a newer incarnation took its place;
 * - a stop that does not complete within `stopTimeoutMs` terminates the thread (on a
 *   shared thread this restarts the neighbours: a hung actor cannot be stopped otherwise);
 * - at most `maxConcurrentStarts` threads start at once; an actor whose slot's thread
 *   is up (packed) starts on it at once;
 * - rotation (credentials changed) stops the current incarnation and starts ONE new
 *   one when it has stopped, however many rotations arrive meanwhile;
 * - a crash loop is reported with one Event when the actor enters it, not per crash.
 */

import { ended, threadExited } from "./actor-endings.ts";
import { LifecycleDraft } from "./actor-lifecycle-draft.ts";
import {
  type ActorRecord,
  type LifecycleEvent,
  type LifecycleState,
  restartTimerKey,
  type Transition,
} from "./actor-lifecycle-state.ts";
import { placeClusters } from "./placement.ts";
import type { RegisteredCluster } from "./registry.ts";

export function transition(state: LifecycleState, event: LifecycleEvent, now: number): Transition {
  const d = new LifecycleDraft(state);
  switch (event.type) {
    case "registrations":
      registrations(d, event.registered, event.elsewhere);
      break;
    case "actor-ready": {
      const inc = d.incarnationOf(event);
      if (!inc) break;
      d.threadStarted(inc.thread);
      if (inc.phase !== "starting") break;
      d.incarnations.set(inc.epoch, { ...inc, phase: "running" });
      const actor = d.actors.get(inc.cluster);
      if (actor?.epoch === inc.epoch && actor.phase === "starting")
        d.actors.set(actor.cluster, { ...actor, phase: "running" });
      break;
    }
    case "actor-stopped": {
      const inc = d.incarnationOf(event);
      // A thread of its own ends right after; the incarnation has stopped once it has.
      if (inc && d.threads.get(inc.thread)?.slot !== undefined) ended(d, inc, undefined, now);
      break;
    }
    case "actor-failed": {
      const inc = d.incarnationOf(event);
      if (!inc) break;
      d.threadStarted(inc.thread);
      if (d.threads.get(inc.thread)?.slot === undefined) {
        // Its own thread: ended now, and its exit restarts the actor with this cause.
        d.incarnations.set(inc.epoch, { ...inc, error: event.error });
        d.terminate(inc.thread);
      } else {
        ended(d, inc, event.error, now); // a shared thread: the actor alone was stopped there
      }
      break;
    }
    case "actor-load": {
      const inc = d.incarnationOf(event);
      if (inc) d.incarnations.set(inc.epoch, { ...inc, loadBytes: event.bytes });
      break;
    }
    case "thread-error": {
      const thread = d.threads.get(event.thread);
      if (thread) d.threads.set(thread.id, { ...thread, lastError: event.error });
      break;
    }
    case "thread-exited":
      threadExited(d, event.thread, event.code, now);
      break;
    case "restart-timer-fired": {
      const actor = d.actors.get(event.cluster);
      if (!actor || actor.restarts !== event.restarts || d.shuttingDown) break;
      if (actor.phase === "backoff" || actor.phase === "crash-loop") d.queue(actor);
      break;
    }
    case "stop-timeout": {
      const inc = d.incarnations.get(event.epoch);
      if (inc?.phase !== "stopping") break;
      d.log(
        "warn",
        { cluster: inc.cluster, epoch: inc.epoch },
        `actor of cluster ${inc.cluster} (epoch ${inc.epoch}) did not stop within ${d.settings.stopTimeoutMs} ms: its stop timed out, terminating its thread`,
      );
      const thread = d.threads.get(inc.thread);
      if (thread) d.threads.set(thread.id, { ...thread, culprit: inc.epoch });
      d.terminate(inc.thread);
      break;
    }
    case "warm-threads":
      warmThreads(d, event.fleet);
      break;
    case "shutdown":
      shutdown(d);
      break;
    default: {
      const never: never = event;
      throw new Error(`unknown lifecycle event ${JSON.stringify(never)}`);
    }
  }
  d.pumpStarts();
  return d.finish();
}

function registrations(
  d: LifecycleDraft,
  registered: ReadonlyMap<string, RegisteredCluster>,
  elsewhere: ReadonlySet<string> = new Set(),
): void {
  if (d.shuttingDown) return;
  const auto = d.settings.auto;
  if (auto && d.packedSlots === 0 && registered.size > auto.isolatedUpTo) {
    // Once, and for good until restart: the running actors keep their own threads
    // until they restart for a reason of their own; every start from now on is packed.
    d.packedSlots = Math.max(1, auto.threads);
    d.log(
      "info",
      { clusters: registered.size, isolatedUpTo: auto.isolatedUpTo, threads: d.packedSlots },
      `${registered.size} clusters registered, more than ${auto.isolatedUpTo}: actors are packed on ${d.packedSlots} threads from now on (running actors keep their threads until they restart)`,
    );
  }
  if (d.packedSlots > 0) d.slots = placeClusters(registered.keys(), d.slots, d.packedSlots);
  if (registered.size > 0) endIdleSlotThreads(d);
  for (const [cluster, registration] of registered) {
    const actor = d.actors.get(cluster);
    if (!actor) {
      const fresh: ActorRecord = {
        cluster,
        registration,
        phase: "queued",
        epoch: undefined,
        failures: [],
        restarts: 0,
        lastError: undefined,
        crashLoopReported: false,
        faults: [],
        quarantined: false,
      };
      d.actors.set(cluster, fresh);
      d.queue(fresh);
    } else if (actor.registration.fingerprint !== registration.fingerprint) {
      d.log("info", { cluster }, `credentials of cluster ${cluster} changed: restarting its actor (mirrors stay)`);
      const changed: ActorRecord = { ...actor, registration, failures: [], crashLoopReported: false };
      d.actors.set(cluster, changed);
      restart(d, changed);
    } else if (actor.registration !== registration) {
      d.actors.set(cluster, { ...actor, registration });
    }
  }
  for (const actor of [...d.actors.values()]) {
    if (registered.has(actor.cluster)) continue;
    d.actors.delete(actor.cluster);
    d.effects.push({ type: "cancel-timer", key: restartTimerKey(actor.cluster) });
    d.startQueue = d.startQueue.filter((c) => c !== actor.cluster);
    if (elsewhere.has(actor.cluster))
      d.log(
        "info",
        { cluster: actor.cluster },
        `cluster ${actor.cluster}'s shard is not held here: stopping its actor`,
      );
    else
      d.log("info", { cluster: actor.cluster }, `cluster ${actor.cluster} is no longer registered: stopping its actor`);
    if (actor.epoch !== undefined) d.stopIncarnation(actor.epoch);
  }
}

/** Credentials changed: the current incarnation stops, then one new one starts. */
function restart(d: LifecycleDraft, actor: ActorRecord): void {
  d.effects.push({ type: "cancel-timer", key: restartTimerKey(actor.cluster) });
  if (actor.phase === "stopping" || actor.phase === "queued") return; // the start to come uses the new registration
  if (actor.epoch === undefined) {
    d.queue(actor); // backoff or crash loop: start now, with the new credentials
    return;
  }
  d.actors.set(actor.cluster, { ...actor, phase: "stopping" });
  d.stopIncarnation(actor.epoch);
}

/**
 * Warm threads (sharded, no shard held yet, see the `warm-threads` event): a thread per
 * packed slot that has none, for at most `fleet` slots (two clusters never need a third
 * thread), and no more than `maxConcurrentStarts` starting at once (a warm thread counts
 * as starting until its first actor is ready, like any other). Idempotent.
 */
function warmThreads(d: LifecycleDraft, fleet: number): void {
  if (d.shuttingDown || d.packedSlots <= 0 || fleet <= 0) return;
  let starting = 0;
  for (const t of d.threads.values()) if (!t.started) starting += 1;
  const actorsExpected = Math.ceil(fleet / d.packedSlots);
  const warmed: number[] = [];
  for (let slot = 0; slot < Math.min(d.packedSlots, fleet); slot++) {
    if (starting >= d.settings.maxConcurrentStarts) break;
    const id = d.slotThreads.get(slot);
    const thread = id === undefined ? undefined : d.threads.get(id);
    if (thread && !thread.retiring && !thread.terminating) continue;
    d.spawnThread(slot, `thread-${slot}`, actorsExpected);
    warmed.push(slot);
    starting += 1;
  }
  if (warmed.length > 0)
    d.log("info", { slots: warmed }, `no shard held yet: starting ${warmed.length} actor threads ahead of the shards`);
}

/**
 * Clusters are placed here: a slot thread that hosts nothing and has no cluster placed
 * on its slot (a warm thread the replica's share did not need) ends, rather than idle
 * for the life of the process. With no cluster at all (a replica holding no shard yet)
 * warm threads stay for the shards to come.
 */
function endIdleSlotThreads(d: LifecycleDraft): void {
  const used = new Set(d.slots.values());
  for (const [slot, id] of d.slotThreads) {
    const thread = d.threads.get(id);
    if (!thread || used.has(slot) || thread.incarnations.length > 0 || thread.retiring) continue;
    d.log("info", { thread: thread.name }, `actor thread ${thread.name} hosts no cluster here: ending it`);
    d.terminate(id);
  }
}

function shutdown(d: LifecycleDraft): void {
  if (d.shuttingDown) return;
  d.shuttingDown = true;
  d.startQueue = [];
  for (const actor of d.actors.values()) {
    d.effects.push({ type: "cancel-timer", key: restartTimerKey(actor.cluster) });
    d.actors.set(actor.cluster, { ...actor, phase: "stopping" });
    if (actor.epoch !== undefined) d.stopIncarnation(actor.epoch);
  }
  for (const id of [...d.threads.keys()]) d.terminateWhenIdle(id);
}
