/**
 * Runs the local writer's lifecycle (writer-lifecycle.ts): spawns the writer thread,
 * decodes what it says into lifecycle events, performs the effects, and keeps its
 * status and counters (the sum over every writer incarnation, so totals never go down).
 */
import type { Transferable, Worker } from "node:worker_threads";
import type { Config } from "../config.ts";
import { responseCapBytes } from "../config-limits.ts";
import type { ConnectionSpec } from "../core/connection.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import {
  assertNever,
  decodeFromWriter,
  type EventRequest,
  type FromWriter,
  type ToWriter,
  type WriterStatus,
} from "../protocol/messages.ts";
import { addWriterCounters, EMPTY_WRITER_COUNTERS, type WriterCounters, writerCountersOf } from "../status/counters.ts";
import type { RestartPolicy } from "./restart-policy.ts";
import { spawnWorker } from "./worker-entry.ts";
import {
  initialWriterState,
  type WriterLifecycleEffect,
  type WriterLifecycleEvent,
  type WriterLifecycleState,
  writerTransition,
} from "./writer-lifecycle.ts";

/**
 * Young generation of the writer thread. V8's default is sized for a whole process: under
 * the writer's allocation rate while it creates mirrors (watch events, request bodies)
 * its semi-spaces grow to 2 × 16 MB. 12 MB gives 8 MB of semi-spaces; the price is more
 * frequent, smaller scavenges (50 clusters × 50 Services: writer CPU unchanged within
 * noise, peak RSS 217 → 200 MB). 48 MB did not make a gateway fan-out faster (0.92 × a
 * bare client against 1.02 × with 12 MB). Both measured in bench/HISTORY.md.
 */
export const WRITER_YOUNG_GENERATION_MB = 12;

export interface WriterRunnerOptions {
  readonly config: Config;
  readonly local: ConnectionSpec;
  readonly logger: Logger;
  readonly policy: RestartPolicy;
  readonly stopTimeoutMs: number;
  readonly writeFence: boolean;
  /** How often the local cluster is checked again for ServiceImports (SPEC §12); default `config.mcsRecheckMs`. */
  readonly mcsRecheckMs?: number;
  /** The writer became ready: give it the keep set and a channel per running actor. */
  readonly onReady: () => void;
  readonly onStatus: () => void;
  /** Starts a writer thread; default: the local-writer entry (tests pass a fake). */
  readonly spawn?: () => Worker;
}

export class WriterRunner {
  readonly #o: WriterRunnerOptions;
  #state: WriterLifecycleState;
  #worker: Worker | undefined;
  #timer: NodeJS.Timeout | undefined;
  #exited: Promise<void> = Promise.resolve();
  #status: WriterStatus | undefined;
  /** Counters of writer incarnations that ended, and the current one's latest status. */
  #counterBase: WriterCounters = EMPTY_WRITER_COUNTERS;
  #countersLive: WriterStatus | undefined;
  /** The latest write deadline (ms on `systemClock`), sent to every new writer. */
  #writableUntil: number | undefined;
  /** Sharded: the latest held shards and deadlines, sent to every new writer, and their sequence. */
  #shards: { shard: number; writableUntil: number }[] | undefined;
  #shardsSeq = 0;
  /** Callers of `setShards` waiting for the writer's `writer.shards-fenced`. */
  #fencedWaiters: { readonly seq: number; readonly resolve: () => void }[] = [];

  constructor(options: WriterRunnerOptions) {
    this.#o = options;
    this.#state = initialWriterState(options.policy, options.stopTimeoutMs);
  }

  get state(): WriterLifecycleState {
    return this.#state;
  }

  get ready(): boolean {
    return this.#state.phase === "ready";
  }

  get status(): WriterStatus | undefined {
    return this.#status;
  }

  get worker(): Worker | undefined {
    return this.#worker;
  }

  counters(): WriterCounters {
    const live = this.#countersLive ? writerCountersOf(this.#countersLive) : EMPTY_WRITER_COUNTERS;
    return addWriterCounters(this.#counterBase, live);
  }

  start(): void {
    this.#dispatch({ type: "start" });
  }

  /** Resolves once the writer thread has ended (it finishes its in-flight writes first). */
  async stop(): Promise<void> {
    this.#dispatch({ type: "stop" });
    await this.#exited;
  }

  /** An Event for the local API: handed over now, or when a writer is ready again. */
  sendEvent(event: EventRequest): void {
    this.#dispatch({ type: "event", event });
  }

  setWriteDeadline(writableUntil: number): void {
    this.#writableUntil = writableUntil;
    this.post({ type: "writer.fence", writableUntil });
  }

  /**
   * Sharded: the shards held now and their write deadlines (ms on `systemClock`); every
   * other shard is closed (`writer.shards`). Resolves once the writer answered that no
   * write of a shard it no longer holds is in flight, or at once when no writer runs (a
   * writer that is gone writes nothing; a new one starts from this state).
   */
  setShards(held: readonly { readonly shard: number; readonly writableUntil: number }[]): Promise<void> {
    this.#shards = held.map(({ shard, writableUntil }) => ({ shard, writableUntil }));
    this.#shardsSeq += 1;
    if (!this.#worker) return Promise.resolve();
    const seq = this.#shardsSeq;
    this.post({ type: "writer.shards", seq, held: this.#shards });
    return new Promise((resolve) => this.#fencedWaiters.push({ seq, resolve }));
  }

  #fenced(seq: number | undefined): void {
    const waiting = this.#fencedWaiters;
    this.#fencedWaiters = [];
    for (const waiter of waiting) {
      if (seq === undefined || waiter.seq <= seq) waiter.resolve();
      else this.#fencedWaiters.push(waiter);
    }
  }

  /**
   * Posts state the writer needs (keep set, attachment, fence) to the current writer.
   * Without one it is dropped (transferred ports closed): every new writer gets the
   * whole state again when it is ready.
   */
  post(message: ToWriter, transfer: readonly Transferable[] = []): void {
    if (!this.#worker) {
      for (const t of transfer) if (t && typeof t === "object" && "close" in t) (t as { close(): void }).close();
      return;
    }
    this.#worker.postMessage(message, [...transfer]);
  }

  #dispatch(event: WriterLifecycleEvent): void {
    const { state, effects } = writerTransition(this.#state, event, Date.now());
    this.#state = state;
    for (const effect of effects) this.#perform(effect);
  }

  #perform(effect: WriterLifecycleEffect): void {
    switch (effect.type) {
      case "spawn":
        this.#spawn();
        return;
      case "attach-all":
        this.#o.onReady();
        return;
      case "post-event":
        this.post({ type: "writer.event", event: effect.event });
        return;
      case "post-stop":
        this.post({ type: "writer.stop" });
        return;
      case "terminate":
        void this.#worker?.terminate();
        return;
      case "start-timer":
        clearTimeout(this.#timer);
        this.#timer = setTimeout(() => {
          this.#timer = undefined;
          this.#dispatch(effect.event);
        }, effect.ms);
        return;
      case "cancel-timer":
        clearTimeout(this.#timer);
        this.#timer = undefined;
        return;
      case "log":
        this.#o.logger[effect.level](effect.fields, effect.message);
        return;
      default:
        assertNever(effect);
    }
  }

  #spawn(): void {
    const { config } = this.#o;
    const worker = this.#o.spawn
      ? this.#o.spawn()
      : spawnWorker("local-writer", "local-writer", config.logFile, {
          maxYoungGenerationSizeMb: WRITER_YOUNG_GENERATION_MB,
        });
    this.#worker = worker;
    let exited: () => void = () => {};
    this.#exited = new Promise<void>((resolve) => {
      exited = resolve;
    });
    worker.postMessage({
      type: "writer.init",
      connection: this.#o.local,
      options: {
        createNamespaces: config.createNamespaces,
        excludedNamespaces: config.excludedNamespaces,
        concurrency: config.writeConcurrency,
        qps: config.writeQps,
        burst: config.writeBurst,
        busyWritePercent: config.busyWritePercent,
        resyncPeriodMs: config.resyncPeriodMs,
        blockedRecheckMs: config.blockedRecheckMs,
        endpointsApi: config.endpointsApi,
        clusterName: config.clusterName,
        failbackDelayMs: config.failbackDelayMs,
        failoverMinReady: config.failoverMinReady,
        localMembers: { ...config.federatedSelector, priority: config.localPriority },
        logLevel: config.logLevel,
        namespace: config.namespace,
        ...(this.#o.writeFence ? { fenced: true } : {}),
        ...(config.shards > 1 ? { shards: config.shards } : {}),
        mcsRecheckMs: this.#o.mcsRecheckMs ?? config.mcsRecheckMs,
        maxResponseBytes: responseCapBytes(config),
        maxNamespacesPerCluster: config.maxNamespacesPerCluster,
        ...(config.dryRun ? { dryRun: true } : {}),
      },
    } satisfies ToWriter);
    if (this.#writableUntil !== undefined)
      worker.postMessage({ type: "writer.fence", writableUntil: this.#writableUntil } satisfies ToWriter);
    if (this.#shards !== undefined)
      worker.postMessage({ type: "writer.shards", seq: this.#shardsSeq, held: this.#shards } satisfies ToWriter);
    worker.on("message", (raw: unknown) => {
      let message: FromWriter;
      try {
        message = decodeFromWriter(raw);
      } catch (error) {
        this.#o.logger.error({ err: serializeError(error) }, "malformed message from the local writer; ignored");
        return;
      }
      switch (message.type) {
        case "writer.ready":
          this.#dispatch({ type: "ready" });
          break;
        case "writer.status":
          this.#status = message.status;
          this.#countersLive = message.status;
          this.#o.onStatus();
          break;
        case "writer.stopped":
          break;
        case "writer.shards-fenced":
          this.#fenced(message.seq);
          break;
        case "writer.failed":
          this.#dispatch({ type: "failed", error: message.error });
          break;
        default:
          assertNever(message);
      }
    });
    worker.on("error", (error) =>
      this.#dispatch({ type: "thread-error", error: serializeError(error, "local-writer") }),
    );
    worker.on("exit", (code) => {
      if (this.#countersLive) {
        this.#counterBase = addWriterCounters(this.#counterBase, writerCountersOf(this.#countersLive));
        this.#countersLive = undefined;
      }
      if (this.#worker === worker) this.#worker = undefined;
      // A writer that ended has nothing in flight.
      this.#fenced(undefined);
      this.#dispatch({ type: "exited", code });
      exited();
    });
  }
}
