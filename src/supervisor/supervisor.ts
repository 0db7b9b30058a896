/**
 * The supervisor (main thread): watches the credentials Secrets, keeps one
 * remote-cluster actor per registered cluster and one local-writer thread. Placement
 * (docs/DESIGN.md "Placement"): by default every actor has a thread of its own; with
 * `maxThreads` N > 0, one thread per cluster up to N, then actors are packed evenly
 * over N threads (src/supervisor/placement.ts).
 *
 * Guarantees:
 * - one remote cluster's failure (unreachable API, crash, memory blow-up) never stops
 *   another: every actor has its own restart history, and by default its own thread
 *   and heap limit. Packed, an exception in one actor is contained to that actor (it
 *   alone is stopped and restarted); a thread that dies restarts exactly the actors it
 *   hosted, each with its own backoff;
 * - a crashed actor is restarted with exponential backoff; a crash loop is reported
 *   (status, log, Event on its Secret) and retried slowly, never dropped silently;
 * - at most `maxConcurrentStarts` threads start at once (spawning dozens at once
 *   exhausts file descriptors); an actor whose thread is already up starts at once;
 * - rotation (kubeconfig changed) restarts only that cluster's actor; its mirrors stay,
 *   because the writer keeps the last desired set until the new actor sends its own;
 * - the writer learns the set of clusters to keep only after a complete Secret list,
 *   so mirrors are never collected on partial knowledge (SPEC §6).
 */
import { getHeapStatistics } from "node:v8";
import { MessageChannel, Worker } from "node:worker_threads";
import { EventEmitter } from "eventemitter3";
import {
  addClusterCounters,
  addWriterCounters,
  type ClusterCounters,
  clusterCountersOf,
  EMPTY_CLUSTER_COUNTERS,
  EMPTY_WRITER_COUNTERS,
  type WriterCounters,
  writerCountersOf,
} from "../admin/counters.ts";
import type { Config } from "../config.ts";
import type { ClusterSettings } from "../core/desired.ts";
import { SECRET_TYPE } from "../core/labels.ts";
import { objectKey, type Secret } from "../core/objects.ts";
import { KubeClient } from "../kube/client.ts";
import type { ConnectionSpec } from "../kube/connection.ts";
import { Watcher } from "../kube/watcher.ts";
import { type Logger, relayThreadOutput } from "../log.ts";
import { describeError, type SerializedError, serializeError } from "../protocol/errors.ts";
import {
  type ActorFaultKind,
  assertNever,
  type ClusterStatus,
  decodeFromRemoteActor,
  decodeFromWriter,
  type EventRequest,
  type FromRemoteActor,
  type FromWriter,
  type ToRemoteActor,
  type ToWriter,
  type WriterStatus,
} from "../protocol/messages.ts";
import { placeClusters } from "./placement.ts";
import { type ParsedSecret, parseCredentialsSecret } from "./registration.ts";
import { computeRegistry, type RegisteredCluster, type RegistryState, type SecretEntry } from "./registry.ts";
import { DEFAULT_RESTART_POLICY, decideRestart, type RestartPolicy } from "./restart-policy.ts";
import { workerEntry } from "./worker-entry.ts";

export type ActorPhase = "queued" | "starting" | "running" | "stopping" | "backoff" | "crash-loop";

export interface ClusterRow {
  readonly cluster: string;
  readonly secret: string;
  /** syncing / synced / stale / failing / crash-loop / starting / duplicate / invalid */
  readonly state: string;
  readonly since?: number;
  readonly reason?: string;
  readonly mirrors: number;
  readonly exportedServices: number;
  readonly lastSyncedAt?: number;
  readonly restarts: number;
  readonly gateways: ClusterStatus["gateways"];
  readonly problems: readonly {
    readonly remote?: string;
    readonly key?: string;
    readonly reason: string;
    readonly message: string;
  }[];
}

/** Counters that never go down across restarts (see src/admin/counters.ts). */
export interface FleetCounters {
  /** Registered clusters only: a cluster that is gone has no counters. */
  readonly clusters: ReadonlyMap<string, ClusterCounters & { readonly restarts: number }>;
  readonly writer: WriterCounters;
}

/** Heap of one thread of this process (bytes). */
export interface ThreadHeap {
  /** `main`, `local-writer`, `remote-cluster/<cluster>` or `remote-cluster/thread-<slot>`. */
  readonly thread: string;
  readonly used: number;
  readonly limit: number;
}

/** The heap of the calling thread, reported as `main`. */
export function mainThreadHeap(): ThreadHeap {
  const stats = getHeapStatistics();
  return { thread: "main", used: stats.used_heap_size, limit: stats.heap_size_limit };
}

/** A heap statistics request a thread does not answer within this time is left out. */
const HEAP_STATISTICS_TIMEOUT_MS = 1_000;

export interface FleetStatus {
  readonly secretsListed: boolean;
  readonly writer: WriterStatus | undefined;
  readonly writerRestarts: number;
  readonly clusters: readonly ClusterRow[];
}

/** One cluster's actor: its own epoch, restart history and status, whatever thread hosts it. */
interface ActorHandle {
  readonly cluster: string;
  registration: RegisteredCluster;
  phase: ActorPhase;
  epoch: number;
  /** The thread hosting the current incarnation, while it runs there. */
  thread: ThreadHandle | undefined;
  failures: number[];
  restarts: number;
  lastError: SerializedError | undefined;
  status: ClusterStatus | undefined;
  /** Counters of the incarnations that ended (their last status), so totals never go down. */
  counterBase: ClusterCounters;
  restartTimer: NodeJS.Timeout | undefined;
  /** Resolves when the current incarnation no longer runs (stopped, failed, or its thread ended). */
  stopped: Promise<void> | undefined;
  stoppedResolve: (() => void) | undefined;
}

/** A remote-cluster worker thread and the actors it hosts. */
interface ThreadHandle {
  /** Placement slot with `--max-threads`; undefined: a thread of its own for one incarnation. */
  readonly slot: number | undefined;
  readonly worker: Worker;
  /** Clusters whose current incarnation runs here. */
  readonly hosted: Map<string, ActorHandle>;
  /** Every hosted actor was asked to stop: the thread ends, and gets no new actor. */
  retiring: boolean;
  exited: boolean;
  /** Counted in `maxConcurrentStarts` until its first actor is ready (or failed, or it ended). */
  started: boolean;
  lastError: SerializedError | undefined;
  readonly exitPromise: Promise<void>;
}

export interface SupervisorOptions {
  readonly config: Config;
  readonly localConnection: ConnectionSpec;
  readonly logger: Logger;
  readonly restartPolicy?: RestartPolicy;
  /** Batching window of actors (ms). */
  readonly batchDelayMs?: number;
  readonly watchInactivityTimeoutMs?: number;
  /**
   * Tests only, default false, never set from the command line: actors accept
   * `actor.inject-fault`, and `injectActorFault` works.
   */
  readonly testHooks?: boolean;
  /**
   * Leader election is on: the writer writes nothing until `setWriteDeadline` allows
   * it, and nothing at or after the latest deadline (see `writer.fence`).
   */
  readonly writeFence?: boolean;
}

const STOP_TIMEOUT_MS = 10_000;
/**
 * Young generation of an actor thread, per hosted actor. V8's default (sized for a
 * whole process) costs ~4 MB of RSS more per thread than 4 MB, measured with 40 threads
 * of the remote-cluster actor: 19.4 MB → 15.5 MB each (docs/DESIGN.md §7). An actor
 * holds one cluster's Services; its short-lived garbage (watch lines) is small.
 */
const ACTOR_YOUNG_GENERATION_MB = 4;
const MAX_YOUNG_GENERATION_MB = 48;

export class Supervisor extends EventEmitter<{ status: []; "writer-ready": [] }> {
  readonly #config: Config;
  readonly #local: ConnectionSpec;
  readonly #log: Logger;
  readonly #policy: RestartPolicy;
  readonly #options: SupervisorOptions;
  readonly #client: KubeClient;
  readonly #secrets: Watcher<Secret>;
  readonly #actors = new Map<string, ActorHandle>();
  readonly #threads = new Set<ThreadHandle>();
  /** With `--max-threads`: cluster → slot (placement), and each slot's current thread. */
  #slots: Map<string, number> = new Map();
  readonly #slotThreads = new Map<number, ThreadHandle>();
  readonly #startQueue: string[] = [];
  #starting = 0;
  #epoch = 0;
  #registry: RegistryState = { registered: new Map(), duplicates: [], invalid: [], keep: [] };
  readonly #winners = new Map<string, string>();
  /** The latest write deadline (epoch ms), re-sent to a restarted writer. */
  #writableUntil: number | undefined;
  readonly #parsedSecrets = new Map<string, { readonly version: string; readonly parsed: ParsedSecret }>();
  #registryScheduled = false;
  readonly #reported = new Map<string, string>();
  #writer: Worker | undefined;
  #writerReady = false;
  #writerStatus: WriterStatus | undefined;
  /** Counters of writer incarnations that ended, and the current one's latest status. */
  #writerCounterBase: WriterCounters = EMPTY_WRITER_COUNTERS;
  #writerCountersLive: WriterStatus | undefined;
  #writerFailures: number[] = [];
  #writerRestarts = 0;
  #writerTimer: NodeJS.Timeout | undefined;
  #writerStopped: Promise<void> | undefined;
  #stopping = false;

  constructor(options: SupervisorOptions) {
    super();
    this.#options = options;
    this.#config = options.config;
    this.#local = options.localConnection;
    this.#log = options.logger;
    this.#policy = options.restartPolicy ?? DEFAULT_RESTART_POLICY;
    this.#client = new KubeClient(this.#local, { userAgent: "fleet-mirror/supervisor" });
    this.#secrets = new Watcher<Secret>({
      client: this.#client,
      path: `/api/v1/namespaces/${this.#config.namespace}/secrets`,
      expectedKind: "Secret",
      fieldSelector: `type=${SECRET_TYPE}`,
    });
    this.#secrets.on("change", () => this.#scheduleRegistry());
    this.#secrets.on("listed", () => this.#scheduleRegistry());
    this.#secrets.on("failure", (f) =>
      this.#log.warn({ failure: f }, `listing credentials Secrets failed: ${f.message}`),
    );
  }

  start(): void {
    this.#startWriter();
    this.#secrets.start();
  }

  get writerReady(): boolean {
    return this.#writerReady;
  }

  /** The thread of one cluster's actor (tests use it to crash it). */
  actorThread(cluster: string): Worker | undefined {
    return this.#actors.get(cluster)?.thread?.worker;
  }

  /**
   * Tests only: makes `cluster`'s actor thread fail the way `kind` says (see
   * `ActorFaultKind`); the crash then goes through the restart policy like any other.
   * @throws Error when the supervisor was built without `testHooks`, or the cluster
   * has no actor thread right now.
   */
  injectActorFault(cluster: string, kind: ActorFaultKind): void {
    if (this.#options.testHooks !== true) throw new Error("injectActorFault needs a Supervisor built with testHooks");
    const worker = this.#actors.get(cluster)?.thread?.worker;
    if (!worker) throw new Error(`cluster ${cluster} has no actor thread to inject a fault into`);
    worker.postMessage({ type: "actor.inject-fault", cluster, kind } satisfies ToRemoteActor);
  }

  status(): FleetStatus {
    const rows: ClusterRow[] = [];
    for (const handle of this.#actors.values()) {
      const s = handle.status;
      const writerCluster = this.#writerStatus?.clusters[handle.cluster];
      let state: string = s?.state ?? "starting";
      let reason: string | undefined;
      if (handle.phase === "crash-loop") {
        state = "crash-loop";
        reason = handle.lastError ? describeError(handle.lastError) : undefined;
      } else if (handle.phase === "backoff") {
        state = "failing";
        reason = handle.lastError ? describeError(handle.lastError) : undefined;
      } else if (s?.state === "stale" || (s?.state === "syncing" && s.lastFailure)) {
        reason = s.lastFailure?.message;
      }
      rows.push({
        cluster: handle.cluster,
        secret: handle.registration.secretKey,
        state,
        ...(s?.since !== undefined ? { since: s.since } : {}),
        ...(reason ? { reason } : {}),
        mirrors: writerCluster?.mirrors ?? s?.mirrors ?? 0,
        exportedServices: s?.exportedServices ?? 0,
        ...(s?.lastSyncedAt !== undefined ? { lastSyncedAt: s.lastSyncedAt } : {}),
        restarts: handle.restarts,
        gateways: s?.gateways ?? [],
        problems: [
          ...(s?.problems ?? []).map((p) => ({ remote: p.remote, reason: p.reason, message: p.message })),
          ...(writerCluster?.blocked ?? []).map((b) => ({ key: b.key, reason: b.reason, message: b.message })),
        ],
      });
    }
    for (const d of this.#registry.duplicates) {
      rows.push({
        cluster: d.cluster,
        secret: d.secretKey,
        state: "duplicate",
        reason: `cluster already registered by ${d.winner}`,
        mirrors: 0,
        exportedServices: 0,
        restarts: 0,
        gateways: [],
        problems: [],
      });
    }
    for (const i of this.#registry.invalid) {
      rows.push({
        cluster: i.cluster ?? "",
        secret: i.secretKey,
        state: "invalid",
        reason: `${i.reason}: ${i.message}`,
        mirrors: 0,
        exportedServices: 0,
        restarts: 0,
        gateways: [],
        problems: [],
      });
    }
    rows.sort((a, b) => (a.cluster === b.cluster ? (a.secret < b.secret ? -1 : 1) : a.cluster < b.cluster ? -1 : 1));
    return {
      secretsListed: this.#secrets.hasSynced,
      writer: this.#writerStatus,
      writerRestarts: this.#writerRestarts,
      clusters: rows,
    };
  }

  /**
   * Counters for metrics: per registered cluster and for the writer, each the sum over
   * every incarnation so far (never decreasing while the cluster stays registered).
   */
  counters(): FleetCounters {
    const clusters = new Map<string, ClusterCounters & { readonly restarts: number }>();
    for (const handle of this.#actors.values()) {
      const live = handle.status ? clusterCountersOf(handle.status) : EMPTY_CLUSTER_COUNTERS;
      clusters.set(handle.cluster, { ...addClusterCounters(handle.counterBase, live), restarts: handle.restarts });
    }
    const live = this.#writerCountersLive ? writerCountersOf(this.#writerCountersLive) : EMPTY_WRITER_COUNTERS;
    return { clusters, writer: addWriterCounters(this.#writerCounterBase, live) };
  }

  /**
   * The local writer's liveness: `crashLooping` once it exited `crashLoopAfter` times
   * (restart policy) within the policy's window without becoming ready in between. A
   * writer restarting after an occasional crash is not crash-looping.
   */
  writerHealth(): { readonly ready: boolean; readonly recentFailures: number; readonly crashLooping: boolean } {
    const now = Date.now();
    const recent = this.#writerFailures.filter((t) => now - t <= this.#policy.windowMs).length;
    return { ready: this.#writerReady, recentFailures: recent, crashLooping: recent >= this.#policy.crashLoopAfter };
  }

  /**
   * Heap used and heap limit of every thread: the main thread, the writer and every
   * remote-cluster thread. One request per thread, answered by the thread's isolate; a
   * thread that does not answer within a second (busy, ending) is left out, so a scrape
   * never hangs on a stuck thread.
   */
  async threadHeapStatistics(): Promise<ThreadHeap[]> {
    const heaps: ThreadHeap[] = [mainThreadHeap()];
    const threads: { name: string; worker: Worker }[] = [];
    if (this.#writer) threads.push({ name: "local-writer", worker: this.#writer });
    for (const t of this.#threads) {
      if (t.exited) continue;
      const first = t.hosted.keys().next();
      const name =
        t.slot !== undefined ? `thread-${t.slot}` : first.done === true ? `thread-${t.worker.threadId}` : first.value;
      threads.push({ name: `remote-cluster/${name}`, worker: t.worker });
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), HEAP_STATISTICS_TIMEOUT_MS);
    });
    const answers = await Promise.all(
      threads.map(({ worker }) =>
        Promise.race([
          worker.getHeapStatistics().catch(() => undefined), // the thread ended meanwhile: no heap to report
          timeout,
        ]),
      ),
    );
    clearTimeout(timer);
    answers.forEach((stats, i) => {
      const name = threads[i]?.name;
      if (stats && name) heaps.push({ thread: name, used: stats.used_heap_size, limit: stats.heap_size_limit });
    });
    return heaps;
  }

  /**
   * Leader election: writes may be sent until `writableUntil` (ms on `systemClock`,
   * which every thread reads alike).
   * Called after each successful Lease renewal; the writer enforces it on its own.
   */
  setWriteDeadline(writableUntil: number): void {
    this.#writableUntil = writableUntil;
    this.#postWriter({ type: "writer.fence", writableUntil });
  }

  /** Stops every actor, then the writer (which finishes its in-flight writes). Mirrors stay. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    clearTimeout(this.#writerTimer);
    await this.#secrets.stop();
    await Promise.all([...this.#actors.values()].map((h) => this.#stopActor(h)));
    // Threads end once their last actor stopped; an idle shared thread is ended here.
    await Promise.all(
      [...this.#threads].map(async (thread) => {
        if (thread.hosted.size === 0 && !thread.retiring) void thread.worker.terminate();
        const timer = setTimeout(() => void thread.worker.terminate(), STOP_TIMEOUT_MS);
        await thread.exitPromise;
        clearTimeout(timer);
      }),
    );
    const writer = this.#writer;
    if (writer) {
      this.#postWriter({ type: "writer.stop" });
      const timer = setTimeout(() => void writer.terminate(), STOP_TIMEOUT_MS);
      await this.#writerStopped;
      clearTimeout(timer);
    }
    this.#client.close();
  }

  // -------------------------------------------------------------------------------
  // Registry: Secrets → registrations → actors

  /**
   * Level-triggered: a list delivers one `change` per Secret, so recomputing the
   * registry per event would cost O(K²) kubeconfig parses at start-up (K = 1000: minutes
   * of main-thread CPU). Events only mark the registry dirty; one pass runs per turn of
   * the event loop over whatever the store holds then.
   */
  #scheduleRegistry(): void {
    if (this.#registryScheduled) return;
    this.#registryScheduled = true;
    setImmediate(() => {
      this.#registryScheduled = false;
      this.#reconcileRegistry();
    });
  }

  /**
   * The parse of a Secret, reused while its uid and resourceVersion are unchanged (a
   * kubeconfig is YAML: ~0.1–1 ms each). Entries of Secrets no longer listed are dropped.
   */
  #parseSecret(secret: Secret, seen: Set<string>): ParsedSecret {
    const key = objectKey(secret.metadata);
    seen.add(key);
    const version = `${secret.metadata.uid ?? ""}/${secret.metadata.resourceVersion ?? ""}`;
    const cached = this.#parsedSecrets.get(key);
    if (cached && cached.version === version && secret.metadata.resourceVersion !== undefined) return cached.parsed;
    const parsed = parseCredentialsSecret(secret, { allowFilePaths: this.#config.allowKubeconfigFilePaths });
    this.#parsedSecrets.set(key, { version, parsed });
    return parsed;
  }

  #reconcileRegistry(): void {
    if (this.#stopping) return;
    const entries: SecretEntry[] = [];
    const seen = new Set<string>();
    for (const secret of this.#secrets.values()) entries.push({ secret, parsed: this.#parseSecret(secret, seen) });
    for (const key of this.#parsedSecrets.keys()) if (!seen.has(key)) this.#parsedSecrets.delete(key);
    const registry = computeRegistry(entries, this.#winners);
    this.#registry = registry;
    this.#winners.clear();
    for (const [cluster, r] of registry.registered) this.#winners.set(cluster, r.secretUid);
    this.#reportRegistry(registry);
    if (this.#config.maxThreads > 0)
      this.#slots = placeClusters(registry.registered.keys(), this.#slots, this.#config.maxThreads);

    for (const [cluster, registration] of registry.registered) {
      const handle = this.#actors.get(cluster);
      if (!handle) {
        const fresh: ActorHandle = {
          cluster,
          registration,
          phase: "queued",
          epoch: 0,
          thread: undefined,
          failures: [],
          restarts: 0,
          lastError: undefined,
          status: undefined,
          counterBase: EMPTY_CLUSTER_COUNTERS,
          restartTimer: undefined,
          stopped: undefined,
          stoppedResolve: undefined,
        };
        this.#actors.set(cluster, fresh);
        this.#queueStart(fresh);
      } else if (handle.registration.fingerprint !== registration.fingerprint) {
        this.#log.info({ cluster }, `credentials of cluster ${cluster} changed: restarting its actor (mirrors stay)`);
        handle.registration = registration;
        handle.failures = [];
        void this.#restartActor(handle);
      } else {
        handle.registration = registration;
      }
    }
    for (const handle of [...this.#actors.values()]) {
      if (!registry.registered.has(handle.cluster)) {
        this.#actors.delete(handle.cluster);
        this.#log.info(
          { cluster: handle.cluster },
          `cluster ${handle.cluster} is no longer registered: stopping its actor`,
        );
        void this.#stopActor(handle);
      }
    }
    if (this.#secrets.hasSynced) this.#postWriter({ type: "writer.clusters", keep: registry.keep });
    this.emit("status");
  }

  #reportRegistry(registry: RegistryState): void {
    const now = new Map<string, string>();
    for (const i of registry.invalid) {
      now.set(i.secretKey, `invalid:${i.reason}:${i.message}`);
      if (this.#reported.get(i.secretKey) !== now.get(i.secretKey)) {
        this.#log.error(
          { secret: i.secretKey, cluster: i.cluster, reason: i.reason },
          `credentials Secret ${i.secretKey} registers nothing: ${i.message}`,
        );
        this.#secretEvent(i.secretKey, "Warning", "InvalidCredentials", i.message);
      }
    }
    for (const d of registry.duplicates) {
      now.set(d.secretKey, `duplicate:${d.cluster}:${d.winner}`);
      if (this.#reported.get(d.secretKey) !== now.get(d.secretKey)) {
        const message = `cluster ${d.cluster} is already registered by Secret ${d.winner}; this Secret is ignored`;
        this.#log.error({ secret: d.secretKey, cluster: d.cluster }, message);
        this.#secretEvent(d.secretKey, "Warning", "DuplicateCluster", message);
      }
    }
    for (const [cluster, r] of registry.registered) {
      now.set(r.secretKey, `registered:${cluster}:${r.fingerprint}`);
      if (this.#reported.get(r.secretKey) !== now.get(r.secretKey)) {
        this.#log.info({ secret: r.secretKey, cluster }, `cluster ${cluster} registered by Secret ${r.secretKey}`);
        this.#secretEvent(
          r.secretKey,
          "Normal",
          "ClusterRegistered",
          `cluster ${cluster} registered (${r.connection.server})`,
        );
      }
    }
    this.#reported.clear();
    for (const [k, v] of now) this.#reported.set(k, v);
  }

  #secretEvent(secretKey: string, type: "Normal" | "Warning", reason: string, message: string): void {
    const secret = this.#secrets.get(secretKey);
    if (!secret) return;
    const event: EventRequest = {
      involved: {
        kind: "Secret",
        apiVersion: "v1",
        namespace: secret.metadata.namespace ?? this.#config.namespace,
        name: secret.metadata.name,
        ...(secret.metadata.uid ? { uid: secret.metadata.uid } : {}),
      },
      type,
      reason,
      message,
    };
    this.#postWriter({ type: "writer.event", event });
  }

  // -------------------------------------------------------------------------------
  // Remote-cluster actors and the threads that host them

  #queueStart(handle: ActorHandle): void {
    handle.phase = "queued";
    if (!this.#startQueue.includes(handle.cluster)) this.#startQueue.push(handle.cluster);
    this.#pumpStarts();
  }

  /**
   * Starts queued actors in order. An actor whose placement names a thread that is up
   * (packed mode) starts on it at once; one that needs a new thread waits while
   * `maxConcurrentStarts` threads are starting.
   */
  #pumpStarts(): void {
    let i = 0;
    while (i < this.#startQueue.length && !this.#stopping) {
      const cluster = this.#startQueue[i] as string;
      const handle = this.#actors.get(cluster);
      if (handle?.phase !== "queued") {
        this.#startQueue.splice(i, 1);
        continue;
      }
      const existing = this.#usableThreadFor(cluster);
      if (existing) {
        this.#startQueue.splice(i, 1);
        this.#startActor(handle, existing);
        continue;
      }
      if (this.#starting >= this.#config.maxConcurrentStarts) {
        i += 1; // needs a new thread: wait; later entries may go to threads already up
        continue;
      }
      this.#startQueue.splice(i, 1);
      this.#startActor(handle, this.#spawnThread(handle));
    }
  }

  /** Packed mode: the running thread of `cluster`'s slot, if it can take an actor. */
  #usableThreadFor(cluster: string): ThreadHandle | undefined {
    if (this.#config.maxThreads <= 0) return undefined;
    const slot = this.#slots.get(cluster);
    const thread = slot === undefined ? undefined : this.#slotThreads.get(slot);
    return thread && !thread.retiring && !thread.exited ? thread : undefined;
  }

  #spawnThread(first: ActorHandle): ThreadHandle {
    const packed = this.#config.maxThreads > 0;
    const slot = packed ? this.#slots.get(first.cluster) : undefined;
    // A shared thread's heap limit grows with the actors it is expected to host.
    const perThread = packed ? Math.max(1, Math.ceil(this.#actors.size / this.#config.maxThreads)) : 1;
    this.#starting += 1;
    const worker = new Worker(workerEntry("remote-cluster"), {
      name: slot === undefined ? `remote-cluster/${first.cluster}` : `remote-cluster/thread-${slot}`,
      resourceLimits: {
        maxOldGenerationSizeMb: this.#config.actorMaxOldGenerationMb * perThread,
        maxYoungGenerationSizeMb: Math.min(ACTOR_YOUNG_GENERATION_MB * perThread, MAX_YOUNG_GENERATION_MB),
      },
      stdout: true,
      stderr: false,
    });
    relayThreadOutput(worker, this.#config.logFile);
    let exitedResolve: () => void = () => {};
    const thread: ThreadHandle = {
      slot,
      worker,
      hosted: new Map(),
      retiring: false,
      exited: false,
      started: false,
      lastError: undefined,
      exitPromise: new Promise<void>((resolve) => {
        exitedResolve = resolve;
      }),
    };
    this.#threads.add(thread);
    if (slot !== undefined) this.#slotThreads.set(slot, thread);
    const startDone = (): void => {
      if (!thread.started) {
        thread.started = true;
        this.#starting -= 1;
        this.#pumpStarts();
      }
    };

    worker.on("message", (raw: unknown) => {
      let message: FromRemoteActor;
      try {
        message = decodeFromRemoteActor(raw);
      } catch (error) {
        this.#log.error(
          { thread: worker.threadId, err: serializeError(error) },
          "malformed message from a remote actor; ignored",
        );
        return;
      }
      const cluster = message.type === "actor.status" ? message.status.cluster : message.cluster;
      const epoch = message.type === "actor.status" ? message.status.epoch : message.epoch;
      const handle = thread.hosted.get(cluster);
      if (!handle || handle.epoch !== epoch || handle.thread !== thread) return; // an older incarnation
      switch (message.type) {
        case "actor.ready":
          handle.phase = "running";
          startDone();
          break;
        case "actor.status":
          this.#reportNewProblems(handle, message.status);
          handle.status = message.status;
          this.emit("status");
          break;
        case "actor.stopped":
          // A thread of its own ends after this; the actor is stopped once it has.
          if (thread.slot !== undefined) this.#detach(handle);
          break;
        case "actor.failed":
          handle.lastError = message.error;
          startDone();
          if (thread.slot === undefined) {
            void worker.terminate(); // its own thread: the exit restarts it
            break;
          }
          // A shared thread: the actor alone was stopped there; its neighbours run on.
          this.#detach(handle);
          if (handle.phase !== "stopping" && !this.#stopping && this.#actors.get(handle.cluster) === handle)
            this.#onActorCrash(handle, undefined);
          break;
        default:
          assertNever(message);
      }
    });
    worker.on("error", (error) => {
      thread.lastError = serializeError(
        error,
        `remote-cluster/${slot === undefined ? first.cluster : `thread-${slot}`}`,
      );
    });
    worker.on("exit", (code) => {
      startDone();
      thread.exited = true;
      this.#threads.delete(thread);
      if (slot !== undefined && this.#slotThreads.get(slot) === thread) this.#slotThreads.delete(slot);
      exitedResolve();
      // The thread crashed (or ended): every actor it hosted is restarted, each with its
      // own restart history; the other threads' actors are untouched.
      for (const handle of [...thread.hosted.values()]) {
        this.#detach(handle);
        if (handle.phase === "stopping" || this.#stopping) continue;
        if (this.#actors.get(handle.cluster) !== handle) continue;
        if (thread.lastError) handle.lastError = thread.lastError;
        this.#onActorCrash(handle, code);
      }
    });
    return thread;
  }

  /** Starts `handle`'s actor (a new incarnation) on `thread`. */
  #startActor(handle: ActorHandle, thread: ThreadHandle): void {
    this.#epoch += 1;
    const epoch = this.#epoch;
    handle.epoch = epoch;
    handle.phase = "starting";
    if (handle.status) handle.counterBase = addClusterCounters(handle.counterBase, clusterCountersOf(handle.status));
    handle.status = undefined;
    handle.lastError = undefined; // a later crash must not be reported with an earlier crash's cause
    handle.thread = thread;
    thread.hosted.set(handle.cluster, handle);
    handle.stopped = new Promise<void>((resolve) => {
      handle.stoppedResolve = resolve;
    });
    const { port1: actorPort, port2: writerPort } = new MessageChannel();
    const settings: ClusterSettings = {
      name: handle.cluster,
      domain: handle.registration.domain,
      excludedNamespaces: this.#config.excludedNamespaces,
    };
    const init: ToRemoteActor = {
      type: "actor.init",
      cluster: settings,
      epoch,
      connection: handle.registration.connection,
      options: {
        resolvePeriodMs: this.#config.gatewayResolvePeriodMs,
        maxInFlight: 2,
        batchDelayMs: this.#options.batchDelayMs ?? 10,
        logLevel: this.#config.logLevel,
        ...(this.#config.logFile ? { logFile: this.#config.logFile } : {}),
        ...(this.#options.watchInactivityTimeoutMs
          ? { watchInactivityTimeoutMs: this.#options.watchInactivityTimeoutMs }
          : {}),
        ...(this.#options.testHooks === true ? { testHooks: true } : {}),
      },
      writerPort: actorPort,
    };
    thread.worker.postMessage(init, [actorPort]);
    if (this.#writer && this.#writerReady) {
      this.#postWriter({ type: "writer.attach", cluster: handle.cluster, epoch, port: writerPort }, [writerPort]);
    } else {
      writerPort.close(); // re-attached with a fresh channel when the writer is ready
    }
  }

  /** The actor no longer runs on its thread (stopped, failed, or the thread ended). */
  #detach(handle: ActorHandle): void {
    const thread = handle.thread;
    if (thread && thread.hosted.get(handle.cluster) === handle) thread.hosted.delete(handle.cluster);
    handle.thread = undefined;
    handle.stoppedResolve?.();
    handle.stoppedResolve = undefined;
  }

  /** A remote Service that cannot be mirrored (SPEC §3) gets a Warning Event on its cluster's Secret. */
  #reportNewProblems(handle: ActorHandle, status: ClusterStatus): void {
    const before = new Set((handle.status?.problems ?? []).map((p) => `${p.remote}/${p.reason}`));
    for (const problem of status.problems) {
      if (before.has(`${problem.remote}/${problem.reason}`)) continue;
      this.#secretEvent(
        handle.registration.secretKey,
        "Warning",
        "MirrorSkipped",
        `cluster ${handle.cluster}: remote Service ${problem.remote} is not mirrored (${problem.reason}): ${problem.message}`,
      );
    }
  }

  /** `code`: the exit code of the actor's thread, undefined when the actor alone failed on a shared thread. */
  #onActorCrash(handle: ActorHandle, code: number | undefined): void {
    const now = Date.now();
    handle.failures.push(now);
    const decision = decideRestart(handle.failures, now, this.#policy);
    handle.failures = [...decision.recent];
    handle.restarts += 1;
    handle.lastError ??= { name: "WorkerExit", message: `actor thread exited with code ${code}` };
    const why = describeError(handle.lastError);
    if (decision.crashLoop) {
      handle.phase = "crash-loop";
      const message = `actor of cluster ${handle.cluster} is crash-looping (${decision.recent.length} crashes in ${Math.round(this.#policy.windowMs / 60_000)} min; last: ${why}); next try in ${Math.round(decision.delayMs / 1000)} s; its mirrors are kept`;
      this.#log.error({ cluster: handle.cluster, code }, message);
      this.#secretEvent(handle.registration.secretKey, "Warning", "ActorCrashLoop", message);
    } else {
      handle.phase = "backoff";
      this.#log.error(
        { cluster: handle.cluster, code },
        `actor of cluster ${handle.cluster} crashed (${why}); restarting in ${decision.delayMs} ms; its mirrors are kept`,
      );
    }
    this.emit("status");
    handle.restartTimer = setTimeout(() => {
      handle.restartTimer = undefined;
      if (this.#actors.get(handle.cluster) === handle && !this.#stopping) this.#queueStart(handle);
    }, decision.delayMs);
  }

  /**
   * Stops the actor, then starts it again with its registration as it is at spawn time.
   * Rotations that arrive while a stop is in progress share that stop and start ONE new
   * incarnation: only the first restart to resume finds the handle still `stopping`;
   * the others see it queued or started already and leave it be (otherwise each would
   * spawn a thread, and all but the last would be orphaned, still watching the remote).
   */
  async #restartActor(handle: ActorHandle): Promise<void> {
    await this.#stopActor(handle);
    if (this.#actors.get(handle.cluster) !== handle || this.#stopping) return;
    if (handle.phase === "stopping") this.#queueStart(handle);
  }

  /**
   * Asks the actor to stop, and terminates its thread if it does not within the
   * timeout (on a shared thread this restarts the neighbours too: a hung actor cannot
   * be stopped any other way).
   */
  async #stopActor(handle: ActorHandle): Promise<void> {
    clearTimeout(handle.restartTimer);
    handle.restartTimer = undefined;
    const i = this.#startQueue.indexOf(handle.cluster);
    if (i >= 0) this.#startQueue.splice(i, 1);
    const thread = handle.thread;
    handle.phase = "stopping";
    if (!thread) return;
    // The thread ends once every actor it hosts has stopped: give it no new actor.
    if ([...thread.hosted.values()].every((h) => h.phase === "stopping")) thread.retiring = true;
    thread.worker.postMessage({ type: "actor.stop", cluster: handle.cluster } satisfies ToRemoteActor);
    const worker = thread.worker;
    const timer = setTimeout(() => void worker.terminate(), STOP_TIMEOUT_MS);
    await handle.stopped;
    clearTimeout(timer);
  }

  // -------------------------------------------------------------------------------
  // Local writer

  #postWriter(message: ToWriter, transfer: readonly import("node:worker_threads").Transferable[] = []): void {
    if (!this.#writer) {
      for (const t of transfer) if (t && typeof t === "object" && "close" in t) (t as { close(): void }).close();
      return;
    }
    this.#writer.postMessage(message, [...transfer]);
  }

  #startWriter(): void {
    const worker = new Worker(workerEntry("local-writer"), { name: "local-writer", stdout: true, stderr: false });
    relayThreadOutput(worker, this.#config.logFile);
    this.#writer = worker;
    this.#writerReady = false;
    let exited: () => void = () => {};
    this.#writerStopped = new Promise<void>((resolve) => {
      exited = resolve;
    });
    let lastError: SerializedError | undefined;
    worker.postMessage({
      type: "writer.init",
      connection: this.#local,
      options: {
        createNamespaces: this.#config.createNamespaces,
        excludedNamespaces: this.#config.excludedNamespaces,
        concurrency: this.#config.writeConcurrency,
        qps: this.#config.writeQps,
        burst: this.#config.writeBurst,
        resyncPeriodMs: this.#config.resyncPeriodMs,
        blockedRecheckMs: this.#config.blockedRecheckMs,
        logLevel: this.#config.logLevel,
        ...(this.#config.logFile ? { logFile: this.#config.logFile } : {}),
        namespace: this.#config.namespace,
        ...(this.#options.writeFence === true ? { fenced: true } : {}),
      },
    } satisfies ToWriter);
    if (this.#writableUntil !== undefined)
      worker.postMessage({ type: "writer.fence", writableUntil: this.#writableUntil } satisfies ToWriter);
    worker.on("message", (raw: unknown) => {
      let message: FromWriter;
      try {
        message = decodeFromWriter(raw);
      } catch (error) {
        this.#log.error({ err: serializeError(error) }, "malformed message from the local writer; ignored");
        return;
      }
      switch (message.type) {
        case "writer.ready":
          this.#writerReady = true;
          this.#writerFailures = [];
          this.#attachAllToWriter();
          this.emit("writer-ready");
          break;
        case "writer.status":
          this.#writerStatus = message.status;
          this.#writerCountersLive = message.status;
          this.emit("status");
          break;
        case "writer.stopped":
          break;
        case "writer.failed":
          lastError = message.error;
          void worker.terminate();
          break;
        default:
          assertNever(message);
      }
    });
    worker.on("error", (error) => {
      lastError = serializeError(error, "local-writer");
    });
    worker.on("exit", (code) => {
      exited();
      if (this.#writerCountersLive) {
        this.#writerCounterBase = addWriterCounters(
          this.#writerCounterBase,
          writerCountersOf(this.#writerCountersLive),
        );
        this.#writerCountersLive = undefined;
      }
      if (this.#writer === worker) this.#writer = undefined;
      this.#writerReady = false;
      if (this.#stopping) return;
      const now = Date.now();
      this.#writerFailures.push(now);
      const decision = decideRestart(this.#writerFailures, now, {
        ...this.#policy,
        crashLoopAfter: Number.POSITIVE_INFINITY,
      });
      this.#writerFailures = [...decision.recent];
      this.#writerRestarts += 1;
      this.#log.error(
        { code, err: lastError },
        `local writer exited (${lastError ? describeError(lastError) : `code ${code}`}); restarting in ${decision.delayMs} ms`,
      );
      this.#writerTimer = setTimeout(() => this.#startWriter(), decision.delayMs);
    });
  }

  /** A (re)started writer knows nothing: give it the keep set and a fresh channel per actor. */
  #attachAllToWriter(): void {
    if (this.#secrets.hasSynced) this.#postWriter({ type: "writer.clusters", keep: this.#registry.keep });
    for (const handle of this.#actors.values()) {
      const thread = handle.thread;
      if (!thread || (handle.phase !== "running" && handle.phase !== "starting")) continue;
      const { port1, port2 } = new MessageChannel();
      this.#postWriter({ type: "writer.attach", cluster: handle.cluster, epoch: handle.epoch, port: port2 }, [port2]);
      thread.worker.postMessage(
        { type: "actor.attach-writer", cluster: handle.cluster, writerPort: port1 } satisfies ToRemoteActor,
        [port1],
      );
    }
  }

  /** Snapshot of the registry (for status and tests). */
  get registry(): RegistryState {
    return this.#registry;
  }
}
