/**
 * Runs the remote-cluster actors' lifecycle (actor-lifecycle.ts): performs its effects
 * (threads, messages, timers, logs, Events) and turns what the threads say into
 * lifecycle events. Decisions are the lifecycle's; this file only does I/O.
 */
import { MessageChannel, type MessagePort, type Worker } from "node:worker_threads";
import type { Config } from "../config.ts";
import type { LocalRanges } from "../core/address-policy.ts";
import type { ClusterSettings } from "../core/desired.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import {
  assertNever,
  type ClusterStatus,
  decodeFromRemoteActor,
  type FromRemoteActor,
  type RemoteActorOptions,
  type ToRemoteActor,
} from "../protocol/messages.ts";
import { transition } from "./actor-lifecycle.ts";
import {
  initialLifecycleState,
  type LifecycleEffect,
  type LifecycleEvent,
  type LifecycleSettings,
  type LifecycleState,
} from "./actor-lifecycle-state.ts";
import { threadHeapLimitMb } from "./thread-heap.ts";
import { spawnWorker } from "./worker-entry.ts";

/**
 * Young generation of an actor thread, per hosted actor. V8's default (sized for a
 * whole process) costs ~4 MB of RSS more per thread than 4 MB, measured with 40 threads
 * of the remote-cluster actor: 19.4 MB → 15.5 MB each (bench/HISTORY.md). An actor
 * holds one cluster's Services; its short-lived garbage (watch lines) is small.
 * 3 MB instead of 4 MB: V8 then uses semi-spaces half as large, −1.0 MB of RSS per
 * thread (bench/probes/thread-start-probe.ts, 14.3 → 13.3 MB); 2 MB saves no more.
 */
export const ACTOR_YOUNG_GENERATION_MB = 3;
const MAX_YOUNG_GENERATION_MB = 48;

export interface ActorRunnerOptions {
  readonly config: Config;
  readonly settings: LifecycleSettings;
  readonly logger: Logger;
  /** A packed thread's old generation at most, MB (thread-heap.ts); absent: no cap. */
  readonly packedHeapCapMb?: number;
  /** Options every actor's init carries (all but the per-cluster ones). */
  readonly actorOptions: RemoteActorOptions;
  /** A new incarnation was posted its init: give it a channel to the writer (`port`, or close it). */
  readonly onIncarnation: (cluster: string, epoch: number, port: MessagePort) => void;
  /** The current incarnation's status. */
  readonly onStatus: (status: ClusterStatus) => void;
  readonly onEvent: (secretKey: string, type: "Normal" | "Warning", reason: string, message: string) => void;
  /** Something in the lifecycle state changed. */
  readonly onChange: () => void;
}

export class ActorRunner {
  readonly #o: ActorRunnerOptions;
  #state: LifecycleState;
  readonly #workers = new Map<number, Worker>();
  readonly #timers = new Map<string, NodeJS.Timeout>();
  #idle: (() => void) | undefined;
  /** The local cluster's ranges as last read (SPEC §10): in every init, and sent to every thread on change. */
  #localRanges: LocalRanges | undefined;

  constructor(options: ActorRunnerOptions) {
    this.#o = options;
    this.#state = initialLifecycleState(options.settings);
  }

  get state(): LifecycleState {
    return this.#state;
  }

  /** The thread of `cluster`'s current incarnation. */
  threadOf(cluster: string): Worker | undefined {
    const epoch = this.#state.actors.get(cluster)?.epoch;
    const inc = epoch === undefined ? undefined : this.#state.incarnations.get(epoch);
    return inc ? this.#workers.get(inc.thread) : undefined;
  }

  /** Live threads by name (`thread-<slot>` or a cluster), for heap statistics. */
  threads(): { readonly name: string; readonly worker: Worker }[] {
    const out: { name: string; worker: Worker }[] = [];
    for (const t of this.#state.threads.values()) {
      const worker = this.#workers.get(t.id);
      if (worker) out.push({ name: t.name, worker });
    }
    return out;
  }

  /** Running incarnations (starting or running), for attaching a new writer. */
  *running(): Iterable<{ readonly cluster: string; readonly epoch: number; readonly worker: Worker }> {
    for (const actor of this.#state.actors.values()) {
      const inc = actor.epoch === undefined ? undefined : this.#state.incarnations.get(actor.epoch);
      const worker = inc ? this.#workers.get(inc.thread) : undefined;
      if (inc && worker && inc.phase !== "stopping") yield { cluster: inc.cluster, epoch: inc.epoch, worker };
    }
  }

  /** New local ranges: every actor thread is told (a thread starting later gets them in its inits). */
  setLocalRanges(ranges: LocalRanges): void {
    this.#localRanges = ranges;
    const message: ToRemoteActor = { type: "actor.local-ranges", ranges };
    for (const worker of this.#workers.values()) worker.postMessage(message);
  }

  dispatch(event: LifecycleEvent): void {
    const { state, effects } = transition(this.#state, event, Date.now());
    this.#state = state;
    for (const effect of effects) this.#perform(effect);
    this.#o.onChange();
    if (this.#idle && this.#state.shuttingDown && this.#state.threads.size === 0) this.#idle();
  }

  /** Stops every actor; resolves once every actor thread has ended. */
  async stop(): Promise<void> {
    const idle = new Promise<void>((resolve) => {
      this.#idle = resolve;
    });
    this.dispatch({ type: "shutdown" });
    await idle;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }

  #perform(effect: LifecycleEffect): void {
    switch (effect.type) {
      case "spawn-thread":
        this.#spawn(effect.thread, effect.name, effect.actorsExpected);
        return;
      case "post-init":
        this.#postInit(effect);
        return;
      case "post-stop":
        this.#workers
          .get(effect.thread)
          ?.postMessage({ type: "actor.stop", cluster: effect.cluster } satisfies ToRemoteActor);
        return;
      case "terminate-thread":
        void this.#workers.get(effect.thread)?.terminate();
        return;
      case "start-timer": {
        clearTimeout(this.#timers.get(effect.key));
        const timer = setTimeout(() => {
          this.#timers.delete(effect.key);
          this.dispatch(effect.event);
        }, effect.ms);
        this.#timers.set(effect.key, timer);
        return;
      }
      case "cancel-timer":
        clearTimeout(this.#timers.get(effect.key));
        this.#timers.delete(effect.key);
        return;
      case "report-event":
        this.#o.onEvent(effect.secretKey, effect.eventType, effect.reason, effect.message);
        return;
      case "log":
        this.#o.logger[effect.level](effect.fields, effect.message);
        return;
      default:
        assertNever(effect);
    }
  }

  #postInit(effect: Extract<LifecycleEffect, { type: "post-init" }>): void {
    const worker = this.#workers.get(effect.thread);
    const { port1: actorPort, port2: writerPort } = new MessageChannel();
    const settings: ClusterSettings = {
      name: effect.cluster,
      domain: effect.registration.domain,
      excludedNamespaces: this.#o.config.excludedNamespaces,
      defaultGateway: effect.registration.defaultGateway,
      ...(this.#o.config.exportSelector ? { exportSelector: this.#o.config.exportSelector } : {}),
      ...(effect.registration.link ? { link: effect.registration.link } : {}),
      maxMirrors: this.#o.config.maxMirrorsPerCluster,
      maxHeadlessHosts: this.#o.config.maxHostsPerHeadlessService,
    };
    const init: ToRemoteActor = {
      type: "actor.init",
      cluster: settings,
      epoch: effect.epoch,
      connection: effect.registration.connection,
      options: this.#o.actorOptions,
      writerPort: actorPort,
      ...(this.#localRanges ? { localRanges: this.#localRanges } : {}),
    };
    worker?.postMessage(init, [actorPort]);
    if (!worker) actorPort.close();
    this.#o.onIncarnation(effect.cluster, effect.epoch, writerPort);
  }

  #spawn(id: number, name: string, actorsExpected: number): void {
    const worker = spawnWorker("remote-cluster", `remote-cluster/${name}`, this.#o.config.logFile, {
      maxOldGenerationSizeMb: threadHeapLimitMb(
        this.#o.config.actorMaxOldGenerationMb,
        actorsExpected,
        this.#o.packedHeapCapMb ?? Number.POSITIVE_INFINITY,
      ),
      maxYoungGenerationSizeMb: Math.min(ACTOR_YOUNG_GENERATION_MB * actorsExpected, MAX_YOUNG_GENERATION_MB),
    });
    this.#workers.set(id, worker);
    worker.on("message", (raw: unknown) => {
      let message: FromRemoteActor;
      try {
        message = decodeFromRemoteActor(raw);
      } catch (error) {
        this.#o.logger.error(
          { thread: worker.threadId, err: serializeError(error) },
          "malformed message from a remote actor; ignored",
        );
        return;
      }
      switch (message.type) {
        case "actor.ready":
          this.dispatch({ type: "actor-ready", thread: id, cluster: message.cluster, epoch: message.epoch });
          break;
        case "actor.status": {
          const { cluster, epoch } = message.status;
          const inc = this.#state.incarnations.get(epoch);
          // Only the current incarnation's status counts (an older one may still be stopping).
          if (inc?.cluster === cluster && inc.thread === id && this.#state.actors.get(cluster)?.epoch === epoch)
            this.#o.onStatus(message.status);
          break;
        }
        case "actor.stopped":
          this.dispatch({ type: "actor-stopped", thread: id, cluster: message.cluster, epoch: message.epoch });
          break;
        case "actor.load":
          this.dispatch({
            type: "actor-load",
            thread: id,
            cluster: message.cluster,
            epoch: message.epoch,
            bytes: message.bytes,
          });
          break;
        case "actor.failed":
          this.dispatch({
            type: "actor-failed",
            thread: id,
            cluster: message.cluster,
            epoch: message.epoch,
            error: message.error,
          });
          break;
        default:
          assertNever(message);
      }
    });
    worker.on("error", (error) => {
      this.dispatch({ type: "thread-error", thread: id, error: serializeError(error, `remote-cluster/${name}`) });
    });
    worker.on("exit", (code) => {
      this.#workers.delete(id);
      this.dispatch({ type: "thread-exited", thread: id, code });
    });
  }
}
