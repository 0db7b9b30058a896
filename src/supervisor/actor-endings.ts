/**
 * How an incarnation ends, in the pure lifecycle (actor-lifecycle.ts): a stop, a crash
 * charged to its actor, and the end of a thread with everything it hosted.
 *
 * A shared thread that ends is charged to ONE actor when the lifecycle knows which
 * caused it, and to nobody otherwise:
 * - the culprit is the incarnation whose stop timed out (the thread was terminated for
 *   it); or, when the thread ran out of heap (ERR_WORKER_OUT_OF_MEMORY), the incarnation
 *   holding the most bytes of API answers (`actor-load`, reported from 8 MiB on): an
 *   actor's heap is mostly what it lists, and a large answer is what outgrows it; or the
 *   only incarnation the thread hosted;
 * - the culprit crashes (its own restart history: backoff, crash loop); each shared
 *   thread it ends is a fault, and at `QUARANTINE_AFTER` faults inside the policy's
 *   window it is quarantined: every later start of it is on a thread of its own, so it
 *   ends no thread but its own (reported once: log and an `ActorQuarantined` Event);
 * - its neighbours' incarnations are collateral: queued again at once, no failure, no
 *   backoff, no crash loop (logged);
 * - with no culprit (an uncaught error, `process.exit`, or a heap exhausted with no
 *   large answer held), every current incarnation on it restarts after the SLOT's
 *   backoff (the restart policy over the slot's unexplained deaths, capped at its
 *   `maxMs`, never a crash loop): nobody's own history grows, and a thread that keeps
 *   dying is not respawned hot.
 */
import type { SerializedError } from "../protocol/errors.ts";
import { describeError } from "../protocol/errors.ts";
import type { LifecycleDraft } from "./actor-lifecycle-draft.ts";
import {
  type ActorRecord,
  type Incarnation,
  restartTimerKey,
  stopTimerKey,
  type ThreadRecord,
} from "./actor-lifecycle-state.ts";
import { decideRestart } from "./restart-policy.ts";

/** Shared threads an actor may end inside the restart policy's window before it gets a thread of its own. */
export const QUARANTINE_AFTER = 2;

/** The code of a worker thread ended by its heap limit (Node's `ERR_WORKER_OUT_OF_MEMORY`). */
const OUT_OF_MEMORY = "ERR_WORKER_OUT_OF_MEMORY";

/**
 * An incarnation no longer runs (stopped, failed, or its thread ended). Asked to stop:
 * a normal end (an actor stopping to restart is queued). Otherwise a crash of the
 * current incarnation, which goes through the restart policy.
 */
export function ended(
  d: LifecycleDraft,
  inc: Incarnation,
  error: SerializedError | undefined,
  now: number,
  code?: number,
): void {
  const current = detach(d, inc);
  if (inc.phase === "stopping") {
    d.log(
      "info",
      { cluster: inc.cluster, epoch: inc.epoch },
      `actor of cluster ${inc.cluster} (epoch ${inc.epoch}) stopped`,
    );
    if (!current) return;
    const next: ActorRecord = { ...current, epoch: undefined };
    d.actors.set(current.cluster, next);
    if (current.phase === "stopping" && !d.shuttingDown) d.queue(next);
    return;
  }
  if (!current) return; // not current and not stopping cannot happen; nothing to restart
  crashed(d, current, error ?? { name: "WorkerExit", message: `actor thread exited with code ${code}` }, now, code);
}

/** Removes `inc` from the state and its thread; returns its actor when it was the current incarnation. */
function detach(d: LifecycleDraft, inc: Incarnation): ActorRecord | undefined {
  d.incarnations.delete(inc.epoch);
  d.effects.push({ type: "cancel-timer", key: stopTimerKey(inc.epoch) });
  const thread = d.threads.get(inc.thread);
  if (thread) {
    const incarnations = thread.incarnations.filter((e) => e !== inc.epoch);
    d.threads.set(thread.id, { ...thread, incarnations });
    if (d.shuttingDown) d.terminateWhenIdle(thread.id);
  }
  const actor = d.actors.get(inc.cluster);
  return actor?.epoch === inc.epoch ? actor : undefined;
}

function crashed(
  d: LifecycleDraft,
  actor: ActorRecord,
  error: SerializedError,
  now: number,
  code: number | undefined,
): void {
  const policy = d.settings.policy;
  const decision = decideRestart([...actor.failures, now], now, policy);
  const why = describeError(error);
  const restarts = actor.restarts + 1;
  let crashLoopReported = false;
  if (decision.crashLoop) {
    const message = `actor of cluster ${actor.cluster} is crash-looping (${decision.recent.length} crashes in ${Math.round(policy.windowMs / 60_000)} min; last: ${why}); next try in ${Math.round(decision.delayMs / 1000)} s; its mirrors are kept`;
    d.log("error", { cluster: actor.cluster, code }, message);
    if (!actor.crashLoopReported) report(d, actor, "ActorCrashLoop", message);
    crashLoopReported = true;
  } else {
    d.log(
      "error",
      { cluster: actor.cluster, code },
      `actor of cluster ${actor.cluster} crashed (${why}); restarting in ${decision.delayMs} ms; its mirrors are kept`,
    );
  }
  d.actors.set(actor.cluster, {
    ...actor,
    phase: decision.crashLoop ? "crash-loop" : "backoff",
    epoch: undefined,
    failures: decision.recent,
    restarts,
    lastError: error,
    crashLoopReported,
  });
  d.effects.push({
    type: "start-timer",
    key: restartTimerKey(actor.cluster),
    ms: decision.delayMs,
    event: { type: "restart-timer-fired", cluster: actor.cluster, restarts },
  });
}

function report(d: LifecycleDraft, actor: ActorRecord, reason: string, message: string): void {
  const { secretKey } = actor.registration;
  d.effects.push({ type: "report-event", cluster: actor.cluster, secretKey, eventType: "Warning", reason, message });
}

/** The incarnation whose fault ended `thread`, when the lifecycle can tell (see the file's comment). */
function culpritOf(d: LifecycleDraft, thread: ThreadRecord): Incarnation | undefined {
  const hosted = thread.incarnations.flatMap((e) => d.incarnations.get(e) ?? []);
  if (thread.culprit !== undefined) return d.incarnations.get(thread.culprit);
  if (hosted.length === 1) return hosted[0];
  if (thread.lastError?.code !== OUT_OF_MEMORY) return undefined;
  let heaviest: Incarnation | undefined;
  for (const inc of hosted) if (inc.loadBytes > (heaviest?.loadBytes ?? 0)) heaviest = inc;
  return heaviest;
}

export function threadExited(d: LifecycleDraft, id: number, code: number, now: number): void {
  const thread = d.threads.get(id);
  if (!thread) return;
  d.threads.delete(id);
  if (thread.slot !== undefined && d.slotThreads.get(thread.slot) === id) d.slotThreads.delete(thread.slot);
  const culprit = culpritOf(d, thread);
  const shared = thread.slot !== undefined;
  const cause = thread.lastError ?? { name: "WorkerExit", message: `actor thread exited with code ${code}` };
  const running = thread.incarnations.some((e) => d.incarnations.get(e)?.phase !== "stopping");
  const unexplained = shared && running && culprit === undefined ? slotDelay(d, thread.slot, now) : undefined;
  if (unexplained)
    d.log(
      "warn",
      { thread: thread.name, code },
      `actor thread ${thread.name} ended (${describeError(cause)}) and could not tell which actor caused it: none is charged; its actors restart in ${unexplained} ms (this slot's backoff)`,
    );
  for (const epoch of thread.incarnations) {
    const inc = d.incarnations.get(epoch);
    if (!inc) continue;
    if (inc.phase === "stopping" || inc.epoch === culprit?.epoch || !shared) {
      ended(d, { ...inc }, thread.lastError ?? inc.error, now, code);
      if (inc.epoch === culprit?.epoch && shared) offended(d, inc.cluster, thread, now);
    } else if (culprit) {
      collateral(d, inc, thread, culprit.cluster);
    } else {
      unexplainedEnd(d, inc, cause, unexplained ?? 0);
    }
  }
}

/** The restart delay of a slot whose thread ended unexplained: the policy's backoff over its recent such ends, never a crash loop's. */
function slotDelay(d: LifecycleDraft, slot: number, now: number): number {
  const policy = d.settings.policy;
  const deaths = [...(d.slotDeaths.get(slot) ?? []), now].filter((t) => now - t <= policy.windowMs);
  d.slotDeaths.set(slot, deaths);
  return Math.min(policy.maxMs, policy.initialMs * 2 ** (deaths.length - 1));
}

/** A neighbour of the culprit: queued again at once, with no failure. */
function collateral(d: LifecycleDraft, inc: Incarnation, thread: ThreadRecord, culprit: string): void {
  const actor = detach(d, inc);
  if (!actor || d.shuttingDown) return;
  d.log(
    "info",
    { cluster: actor.cluster, thread: thread.name, culprit },
    `actor of cluster ${actor.cluster} restarts at once: its thread ${thread.name} ended because of cluster ${culprit}'s actor (not counted as its failure)`,
  );
  d.queue({ ...actor, epoch: undefined });
}

/** An actor of a thread that ended unexplained: restarted after `delayMs`, its own failure history untouched. */
function unexplainedEnd(d: LifecycleDraft, inc: Incarnation, cause: SerializedError, delayMs: number): void {
  const actor = detach(d, inc);
  if (!actor || d.shuttingDown) return;
  const restarts = actor.restarts + 1;
  d.actors.set(actor.cluster, { ...actor, phase: "backoff", epoch: undefined, restarts, lastError: cause });
  d.effects.push({
    type: "start-timer",
    key: restartTimerKey(actor.cluster),
    ms: delayMs,
    event: { type: "restart-timer-fired", cluster: actor.cluster, restarts },
  });
}

/** `cluster`'s actor ended shared `thread`: one more fault, and a thread of its own at `QUARANTINE_AFTER`. */
function offended(d: LifecycleDraft, cluster: string, thread: ThreadRecord, now: number): void {
  const actor = d.actors.get(cluster);
  if (!actor) return;
  const faults = [...actor.faults, now].filter((t) => now - t <= d.settings.policy.windowMs);
  const quarantine = !actor.quarantined && faults.length >= QUARANTINE_AFTER;
  d.actors.set(cluster, { ...actor, faults, quarantined: actor.quarantined || quarantine });
  if (!quarantine) return;
  const message = `actor of cluster ${cluster} ended its shared thread ${faults.length} times in ${Math.round(d.settings.policy.windowMs / 60_000)} min (last: ${describeError(thread.lastError ?? { name: "Error", message: "terminated" })}): it runs on a thread of its own from now on, so its neighbours are no longer restarted with it`;
  d.log("warn", { cluster, thread: thread.name, faults: faults.length }, message);
  report(d, actor, "ActorQuarantined", message);
}
