/**
 * The data of the remote-cluster actors' lifecycle (actor-lifecycle.ts): state, events
 * and effects, plain and immutable, so a test can build, compare and print them.
 *
 * Identity: every incarnation of an actor has an epoch that is unique in the process
 * (never reused), so an incarnation is found by its epoch alone. A cluster has at most
 * one CURRENT incarnation (`ActorRecord.epoch`); older ones may still be stopping,
 * each tracked by its own epoch until its thread says it stopped (or its thread ends).
 */
import type { SerializedError } from "../protocol/errors.ts";
import type { RegisteredCluster } from "./registry.ts";
import type { RestartPolicy } from "./restart-policy.ts";

/** Where one cluster's actor is in its lifecycle (see actor-lifecycle.ts). */
export type ActorPhase = "queued" | "starting" | "running" | "stopping" | "backoff" | "crash-loop";

export interface LifecycleSettings {
  /** 0: a thread of its own per incarnation; N > 0: N shared thread slots (placement.ts). */
  readonly maxThreads: number;
  /**
   * The default placement (default-placement.ts), with `maxThreads` 0: a thread per
   * incarnation while at most `isolatedUpTo` clusters are registered; the first time
   * more are, `threads` shared slots from then on (no running actor moves for it).
   */
  readonly auto?: { readonly isolatedUpTo: number; readonly threads: number };
  /** Threads starting at once (spawning dozens at once exhausts file descriptors). */
  readonly maxConcurrentStarts: number;
  readonly policy: RestartPolicy;
  /** An incarnation asked to stop that has not stopped after this long gets its thread terminated. */
  readonly stopTimeoutMs: number;
}

/** One registered cluster's actor, across its incarnations. */
export interface ActorRecord {
  readonly cluster: string;
  readonly registration: RegisteredCluster;
  /**
   * `stopping` on a registered cluster: its current incarnation is being stopped to be
   * started again (credentials changed); a cluster no longer registered has no record.
   */
  readonly phase: ActorPhase;
  /** The current incarnation, while one runs (or is starting, or stopping to restart). */
  readonly epoch: number | undefined;
  /** Crash times inside the restart policy's window. */
  readonly failures: readonly number[];
  readonly restarts: number;
  /** Why the last incarnation ended abnormally; cleared when a new one starts. */
  readonly lastError: SerializedError | undefined;
  /** ActorCrashLoop was reported for the crash loop it is in now (reported once per loop). */
  readonly crashLoopReported: boolean;
  /** Times, inside the restart policy's window, at which this actor caused a shared thread to end. */
  readonly faults: readonly number[];
  /**
   * Placed on a thread of its own from its next start, whatever the placement: it caused
   * shared threads to end `QUARANTINE_AFTER` times (actor-endings.ts). For as long as
   * the cluster is registered.
   */
  readonly quarantined: boolean;
}

export interface Incarnation {
  readonly cluster: string;
  readonly epoch: number;
  readonly thread: number;
  readonly phase: "starting" | "running" | "stopping";
  /** An `actor.failed` report, kept until its own thread ends (a thread of its own). */
  readonly error: SerializedError | undefined;
  /** Bytes of API answers it holds, as last reported (`actor-load`); 0 until then. */
  readonly loadBytes: number;
}

export interface ThreadRecord {
  readonly id: number;
  /** Placement slot with `maxThreads` > 0; undefined: a thread of its own for one incarnation. */
  readonly slot: number | undefined;
  /** `thread-<slot>` or the cluster it was spawned for. */
  readonly name: string;
  /** Epochs of the incarnations on this thread (current or stopping). */
  readonly incarnations: readonly number[];
  /** Every incarnation here was asked to stop: the thread ends by itself and gets no new actor. */
  readonly retiring: boolean;
  /** Terminated (a stop timed out, or shutdown): gets no new actor. */
  readonly terminating: boolean;
  /** Counted in `maxConcurrentStarts` until its first actor is ready or failed, or it ended. */
  readonly started: boolean;
  /** The thread's uncaught error, if any: the cause given to every actor it hosted. */
  readonly lastError: SerializedError | undefined;
  /** The incarnation that caused the thread to be terminated (its stop timed out), when one did. */
  readonly culprit: number | undefined;
}

export interface LifecycleState {
  readonly settings: LifecycleSettings;
  /** Registered clusters only. */
  readonly actors: ReadonlyMap<string, ActorRecord>;
  /** By epoch: current and stopping incarnations, on a thread. */
  readonly incarnations: ReadonlyMap<number, Incarnation>;
  readonly threads: ReadonlyMap<number, ThreadRecord>;
  /**
   * Shared thread slots in use: `settings.maxThreads`, or with `settings.auto` 0 until
   * the fleet first grows past `isolatedUpTo`, then `auto.threads` (never back to 0).
   * 0: a thread of its own per incarnation.
   */
  readonly packedSlots: number;
  /** Packed mode: cluster → slot, and each slot's current thread. */
  readonly slots: ReadonlyMap<string, number>;
  readonly slotThreads: ReadonlyMap<number, number>;
  /**
   * Per packed slot, the times (inside the restart policy's window) its thread ended
   * without naming the actor that caused it: its actors' restart delay grows with
   * them, no actor's own failure history does.
   */
  readonly slotDeaths: ReadonlyMap<number, readonly number[]>;
  /** Clusters waiting to start, in order. */
  readonly startQueue: readonly string[];
  readonly nextEpoch: number;
  readonly nextThread: number;
  readonly shuttingDown: boolean;
}

export type LifecycleEvent =
  /**
   * The whole registry after a pass over the Secrets (level-triggered): the clusters to
   * run here. `elsewhere`: registered clusters left out because another replica's shard
   * holds them (sharded only), so their actors stop for that reason, not as unregistered.
   */
  | {
      readonly type: "registrations";
      readonly registered: ReadonlyMap<string, RegisteredCluster>;
      readonly elsewhere?: ReadonlySet<string>;
    }
  | { readonly type: "actor-ready"; readonly thread: number; readonly cluster: string; readonly epoch: number }
  | { readonly type: "actor-stopped"; readonly thread: number; readonly cluster: string; readonly epoch: number }
  | {
      readonly type: "actor-failed";
      readonly thread: number;
      readonly cluster: string;
      readonly epoch: number;
      readonly error: SerializedError;
    }
  /**
   * Incarnation `epoch` holds `bytes` of API answers being received or decoded
   * (`actor.load`): if its shared thread's heap runs out, this names the actor to charge.
   */
  | {
      readonly type: "actor-load";
      readonly thread: number;
      readonly cluster: string;
      readonly epoch: number;
      readonly bytes: number;
    }
  | { readonly type: "thread-error"; readonly thread: number; readonly error: SerializedError }
  | { readonly type: "thread-exited"; readonly thread: number; readonly code: number }
  /** `restarts`: the actor's restart count when the timer was set (a stale timer does nothing). */
  | { readonly type: "restart-timer-fired"; readonly cluster: string; readonly restarts: number }
  | { readonly type: "stop-timeout"; readonly epoch: number }
  /**
   * Sharded, while this replica holds no shard yet (the join's quiet window): start the
   * packed slots' threads now, empty, so that once shards are held their actors start
   * on threads already up instead of each replica spawning its isolates then. `fleet`:
   * the clusters registered in the whole fleet; a warm thread's heap limit is sized as
   * if this replica hosted all of them (the most it ever can), since a thread's limits
   * are fixed at its spawn. Nothing happens without packed slots (`packedSlots` 0).
   */
  | { readonly type: "warm-threads"; readonly fleet: number }
  | { readonly type: "shutdown" };

export type LifecycleEffect =
  | {
      readonly type: "spawn-thread";
      readonly thread: number;
      readonly name: string;
      /** Actors it is expected to host: its heap limits scale with it. */
      readonly actorsExpected: number;
    }
  | {
      readonly type: "post-init";
      readonly thread: number;
      readonly cluster: string;
      readonly epoch: number;
      readonly registration: RegisteredCluster;
    }
  | { readonly type: "post-stop"; readonly thread: number; readonly cluster: string; readonly epoch: number }
  | { readonly type: "terminate-thread"; readonly thread: number }
  /** Replaces a pending timer with the same key; `event` is fed back when it fires. */
  | { readonly type: "start-timer"; readonly key: string; readonly ms: number; readonly event: LifecycleEvent }
  | { readonly type: "cancel-timer"; readonly key: string }
  | {
      readonly type: "report-event";
      readonly cluster: string;
      readonly secretKey: string;
      readonly eventType: "Normal" | "Warning";
      readonly reason: string;
      readonly message: string;
    }
  | {
      readonly type: "log";
      readonly level: "info" | "warn" | "error";
      readonly fields: Readonly<Record<string, unknown>>;
      readonly message: string;
    };

export interface Transition {
  readonly state: LifecycleState;
  readonly effects: readonly LifecycleEffect[];
}

export function initialLifecycleState(settings: LifecycleSettings): LifecycleState {
  return {
    settings,
    actors: new Map(),
    incarnations: new Map(),
    threads: new Map(),
    packedSlots: settings.maxThreads,
    slots: new Map(),
    slotThreads: new Map(),
    slotDeaths: new Map(),
    startQueue: [],
    nextEpoch: 1,
    nextThread: 1,
    shuttingDown: false,
  };
}

export const restartTimerKey = (cluster: string): string => `restart/${cluster}`;
export const stopTimerKey = (epoch: number): string => `stop/${epoch}`;
