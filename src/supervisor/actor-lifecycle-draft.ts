/**
 * One transition's working copy of the actor lifecycle state (actor-lifecycle.ts), and
 * the steps every rule uses: queueing and starting actors on threads (placement),
 * stopping an incarnation, terminating a thread. The input state is never changed: the
 * draft copies its maps, and `finish` returns the new state with the effects.
 */
import {
  type ActorRecord,
  type Incarnation,
  type LifecycleEffect,
  type LifecycleState,
  stopTimerKey,
  type ThreadRecord,
  type Transition,
} from "./actor-lifecycle-state.ts";

/** A mutable copy of the state for one transition (the input state is never changed). */
export class LifecycleDraft {
  readonly settings: LifecycleState["settings"];
  readonly actors: Map<string, ActorRecord>;
  readonly incarnations: Map<number, Incarnation>;
  readonly threads: Map<number, ThreadRecord>;
  packedSlots: number;
  slots: Map<string, number>;
  readonly slotThreads: Map<number, number>;
  readonly slotDeaths: Map<number, readonly number[]>;
  startQueue: string[];
  nextEpoch: number;
  nextThread: number;
  shuttingDown: boolean;
  readonly effects: LifecycleEffect[] = [];

  constructor(s: LifecycleState) {
    this.settings = s.settings;
    this.actors = new Map(s.actors);
    this.incarnations = new Map(s.incarnations);
    this.threads = new Map(s.threads);
    this.packedSlots = s.packedSlots;
    this.slots = new Map(s.slots);
    this.slotThreads = new Map(s.slotThreads);
    this.slotDeaths = new Map(s.slotDeaths);
    this.startQueue = [...s.startQueue];
    this.nextEpoch = s.nextEpoch;
    this.nextThread = s.nextThread;
    this.shuttingDown = s.shuttingDown;
  }

  finish(): Transition {
    const state: LifecycleState = {
      settings: this.settings,
      actors: this.actors,
      incarnations: this.incarnations,
      threads: this.threads,
      packedSlots: this.packedSlots,
      slots: this.slots,
      slotThreads: this.slotThreads,
      slotDeaths: this.slotDeaths,
      startQueue: this.startQueue,
      nextEpoch: this.nextEpoch,
      nextThread: this.nextThread,
      shuttingDown: this.shuttingDown,
    };
    return { state, effects: this.effects };
  }

  log(level: "info" | "warn" | "error", fields: Record<string, unknown>, message: string): void {
    this.effects.push({ type: "log", level, fields, message });
  }

  /** The incarnation a thread's message is about; undefined for one that already ended (stale). */
  incarnationOf(e: {
    readonly thread: number;
    readonly cluster: string;
    readonly epoch: number;
  }): Incarnation | undefined {
    const inc = this.incarnations.get(e.epoch);
    return inc && inc.cluster === e.cluster && inc.thread === e.thread ? inc : undefined;
  }

  queue(actor: ActorRecord): void {
    this.actors.set(actor.cluster, { ...actor, phase: "queued" });
    if (!this.startQueue.includes(actor.cluster)) this.startQueue.push(actor.cluster);
  }

  stopIncarnation(epoch: number): void {
    const inc = this.incarnations.get(epoch);
    if (!inc || inc.phase === "stopping") return;
    this.incarnations.set(epoch, { ...inc, phase: "stopping" });
    this.effects.push({ type: "post-stop", thread: inc.thread, cluster: inc.cluster, epoch });
    this.effects.push({
      type: "start-timer",
      key: stopTimerKey(epoch),
      ms: this.settings.stopTimeoutMs,
      event: { type: "stop-timeout", epoch },
    });
    const thread = this.threads.get(inc.thread);
    if (!thread) return;
    // The thread ends once every actor it hosts has stopped: give it no new actor.
    const allStopping = thread.incarnations.every((e) => this.incarnations.get(e)?.phase === "stopping");
    if (allStopping && !thread.retiring) this.threads.set(thread.id, { ...thread, retiring: true });
    if (this.shuttingDown && allStopping) this.terminateWhenIdle(thread.id);
  }

  threadStarted(id: number): void {
    const thread = this.threads.get(id);
    if (thread && !thread.started) this.threads.set(id, { ...thread, started: true });
  }

  terminate(id: number): void {
    const thread = this.threads.get(id);
    if (!thread || thread.terminating) return;
    this.threads.set(id, { ...thread, terminating: true });
    this.effects.push({ type: "terminate-thread", thread: id });
  }

  /** Shutting down: a thread with nothing left to stop is ended. */
  terminateWhenIdle(id: number): void {
    const thread = this.threads.get(id);
    if (thread && thread.incarnations.length === 0) this.terminate(id);
  }

  /** Whether `cluster` starts on its packed slot's thread (not on a thread of its own: unpacked, or quarantined). */
  packed(cluster: string): boolean {
    return this.packedSlots > 0 && this.actors.get(cluster)?.quarantined !== true;
  }

  usableThreadFor(cluster: string): ThreadRecord | undefined {
    if (!this.packed(cluster)) return undefined;
    const slot = this.slots.get(cluster);
    const id = slot === undefined ? undefined : this.slotThreads.get(slot);
    const thread = id === undefined ? undefined : this.threads.get(id);
    return thread && !thread.retiring && !thread.terminating ? thread : undefined;
  }

  /**
   * Starts queued actors in order. An actor whose slot's thread is up starts on it at
   * once; one that needs a new thread waits while `maxConcurrentStarts` threads start.
   */
  pumpStarts(): void {
    if (this.shuttingDown) return;
    let starting = 0;
    for (const t of this.threads.values()) if (!t.started) starting += 1;
    const waiting: string[] = [];
    for (const cluster of this.startQueue) {
      const actor = this.actors.get(cluster);
      if (actor?.phase !== "queued") continue;
      const existing = this.usableThreadFor(cluster);
      if (existing) {
        this.startOn(actor, existing.id);
      } else if (starting >= this.settings.maxConcurrentStarts) {
        waiting.push(cluster); // needs a new thread: wait; later entries may go to threads already up
      } else {
        starting += 1;
        this.startOn(actor, this.spawn(cluster));
      }
    }
    this.startQueue = waiting;
  }

  spawn(cluster: string): number {
    const packed = this.packed(cluster);
    // A shared thread's heap limit grows with the actors it is expected to host.
    const actorsExpected = packed ? Math.max(1, Math.ceil(this.actors.size / this.packedSlots)) : 1;
    return this.spawnThread(packed ? this.slots.get(cluster) : undefined, cluster, actorsExpected);
  }

  /** A thread for `slot` (undefined: a thread of its own, named after `cluster`), hosting nothing yet. */
  spawnThread(slot: number | undefined, cluster: string, actorsExpected: number): number {
    const id = this.nextThread;
    this.nextThread += 1;
    const name = slot === undefined ? cluster : `thread-${slot}`;
    this.threads.set(id, {
      id,
      slot,
      name,
      incarnations: [],
      retiring: false,
      terminating: false,
      started: false,
      lastError: undefined,
      culprit: undefined,
    });
    if (slot !== undefined) this.slotThreads.set(slot, id);
    this.effects.push({ type: "spawn-thread", thread: id, name, actorsExpected });
    return id;
  }

  startOn(actor: ActorRecord, threadId: number): void {
    const epoch = this.nextEpoch;
    this.nextEpoch += 1;
    this.incarnations.set(epoch, {
      cluster: actor.cluster,
      epoch,
      thread: threadId,
      phase: "starting",
      error: undefined,
      loadBytes: 0,
    });
    const thread = this.threads.get(threadId);
    if (thread) this.threads.set(threadId, { ...thread, incarnations: [...thread.incarnations, epoch] });
    // A later crash must not be reported with an earlier crash's cause.
    this.actors.set(actor.cluster, { ...actor, phase: "starting", epoch, lastError: undefined });
    this.effects.push({
      type: "post-init",
      thread: threadId,
      cluster: actor.cluster,
      epoch,
      registration: actor.registration,
    });
  }
}
