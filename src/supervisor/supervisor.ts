/**
 * The supervisor (main thread): watches the credentials Secrets, keeps one
 * remote-cluster actor per registered cluster and one local-writer thread. It wires
 * the parts, each with one job:
 * - registry-controller.ts: Secrets → registrations, and their Events;
 * - actor-lifecycle.ts (pure) run by actor-runner.ts: actors, their threads and
 *   placement (by default a thread per actor; with `maxThreads` N > 0, packed over N
 *   threads, placement.ts), restarts with backoff, crash loops;
 * - writer-lifecycle.ts (pure) run by writer-runner.ts: the local writer, its restarts,
 *   and the Events waiting for it;
 * - fleet-status.ts: status rows and counters.
 *
 * Guarantees: one remote cluster's failure never stops another; a crashed actor is
 * restarted with exponential backoff and a crash loop is reported, never dropped
 * silently; rotation restarts only that cluster's actor and its mirrors stay (the
 * writer keeps the last desired set until the new actor sends its own); the writer
 * learns the set of clusters to keep only after a complete Secret list (SPEC §6).
 *
 * Sharded (`--shards` S > 1): every replica watches every credentials Secret (the
 * registration order and the keep set are the fleet's), but runs actors only for the
 * clusters of the shards it holds (`setShards`), and its writer writes only their keys,
 * each behind its shard's fence. Until the first `setShards` it holds none; meanwhile
 * its writer runs (fenced: it writes no shard's key) and, packed, its actor threads
 * start empty (`warm-threads`), so that a held shard only starts actors.
 */
import { MessageChannel, type Worker } from "node:worker_threads";
import { EventEmitter } from "eventemitter3";
import type { Config } from "../config.ts";
import { responseCapBytes } from "../config-limits.ts";
import type { ConnectionSpec } from "../core/connection.ts";
import { allShards, hostsCluster, type ShardOwnership, shardOf } from "../core/shards.ts";
import { KubeClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import type { ActorFaultKind, ToRemoteActor } from "../protocol/messages.ts";
import type { FleetCounters, FleetStatus, FleetView, ThreadHeap, WriterHealth } from "../status/fleet-view.ts";
import { remoteActorOptions } from "./actor-options.ts";
import { ActorRunner } from "./actor-runner.ts";
import {
  type AutoBudget,
  autoBudget,
  type HostLimits,
  placementSetting,
  placementStatus,
} from "./default-placement.ts";
import { FleetStatusBook } from "./fleet-status.ts";
import { readHostLimits } from "./host-limits.ts";
import { LocalRangesWatch } from "./local-ranges.ts";
import { RegistrationSources } from "./registration-sources.ts";
import type { RegisteredCluster, RegistryState } from "./registry.ts";
import { DEFAULT_RESTART_POLICY, type RestartPolicy } from "./restart-policy.ts";
import { packedHeapCapMb } from "./thread-heap.ts";
import { threadHeaps } from "./thread-heaps.ts";
import { WriterRunner } from "./writer-runner.ts";

/** A heap statistics request a thread does not answer within this time is left out. */
const STOP_TIMEOUT_MS = 10_000;

export interface SupervisorOptions {
  readonly config: Config;
  readonly localConnection: ConnectionSpec;
  readonly logger: Logger;
  readonly restartPolicy?: RestartPolicy;
  /** Batching window of actors (ms). */
  readonly batchDelayMs?: number;
  readonly watchInactivityTimeoutMs?: number;
  /** How often a remote read denied by RBAC is tried again (SPEC §12; tests only, default 60 s). */
  readonly deniedRetryMs?: number;
  /** Tests only: overrides `config.mcsRecheckMs` (`--mcs-recheck-period`) below the flag's 1 s floor. */
  readonly mcsRecheckMs?: number;
  /** Tests only: the DNS servers the actors resolve gateway hostnames with (default: the system's). */
  readonly gatewayDnsServers?: readonly string[];
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
  /**
   * The CPUs and memory limit the default placement (`maxThreads` "auto") is sized to,
   * read once at start; default: read from this process (host-limits.ts).
   */
  readonly hostLimits?: HostLimits;
}

export class Supervisor extends EventEmitter<{ status: []; "writer-ready": [] }> implements FleetView {
  readonly #options: SupervisorOptions;
  readonly #policy: RestartPolicy;
  readonly #client: KubeClient;
  readonly #registry: RegistrationSources;
  readonly #actors: ActorRunner;
  readonly #writer: WriterRunner;
  /** The local Service and pod CIDRs (SPEC §10); actors start once they are known. */
  readonly #localRanges: LocalRangesWatch;
  readonly #book = new FleetStatusBook();
  /** The thread budget of the default placement; undefined with an explicit `--max-threads`. */
  readonly #autoBudget: AutoBudget | undefined;
  #stopping = false;
  #ownership: ShardOwnership;

  constructor(options: SupervisorOptions) {
    super();
    this.#options = options;
    const { config, logger } = options;
    this.#ownership = config.shards > 1 ? { shards: config.shards, held: new Set() } : allShards;
    this.#policy = options.restartPolicy ?? DEFAULT_RESTART_POLICY;
    this.#client = new KubeClient(options.localConnection, {
      userAgent: "fleet-mirror/supervisor",
      maxResponseBytes: responseCapBytes(config),
    });
    this.#writer = new WriterRunner({
      config,
      local: options.localConnection,
      logger,
      policy: this.#policy,
      stopTimeoutMs: STOP_TIMEOUT_MS,
      writeFence: options.writeFence === true,
      mcsRecheckMs: options.mcsRecheckMs ?? config.mcsRecheckMs,
      onReady: () => {
        this.#attachAllToWriter();
        this.#postLinks(true);
        this.emit("writer-ready");
      },
      onStatus: () => this.emit("status"),
    });
    this.#registry = new RegistrationSources({
      config,
      client: this.#client,
      logger,
      onRegistry: (registry) => this.#onRegistry(registry),
      sendEvent: (event) => this.#writer.sendEvent(event),
      // Sharded: a registration is reported by the replica hosting its cluster only.
      ...(config.shards > 1
        ? {
            reportsFor: (cluster: string | undefined, secretKey: string) =>
              this.#ownership.held.has(shardOf(cluster ?? secretKey, this.#ownership.shards)),
          }
        : {}),
    });
    // Read once, when the default placement or the packed threads' heap cap needs it.
    const host = [config.maxThreads, config.packedThreadMaxOldGenerationMb].includes("auto")
      ? (options.hostLimits ?? readHostLimits(logger))
      : undefined;
    this.#autoBudget = config.maxThreads === "auto" && host ? autoBudget(host) : undefined;
    if (this.#autoBudget)
      logger.info(
        { isolatedUpTo: this.#autoBudget.isolatedUpTo, threads: this.#autoBudget.threads },
        `placement: a thread per cluster up to ${this.#autoBudget.isolatedUpTo} clusters, beyond that packed on ${this.#autoBudget.threads} threads (${this.#autoBudget.basis})`,
      );
    this.#actors = new ActorRunner({
      config,
      logger,
      settings: {
        maxThreads: config.maxThreads === "auto" ? 0 : config.maxThreads,
        ...(this.#autoBudget ? { auto: this.#autoBudget } : {}),
        maxConcurrentStarts: config.maxConcurrentStarts,
        policy: this.#policy,
        stopTimeoutMs: STOP_TIMEOUT_MS,
      },
      actorOptions: remoteActorOptions(config, options),
      packedHeapCapMb: packedHeapCapMb(config, host, this.#autoBudget),
      onIncarnation: (cluster, epoch, port) => {
        this.#book.incarnationStarted(cluster, epoch);
        // Without a ready writer: re-attached with a fresh channel when it is ready.
        if (this.#writer.ready) this.#writer.post({ type: "writer.attach", cluster, epoch, port }, [port]);
        else port.close();
      },
      onStatus: (status) => {
        const secretKey = this.#actors.state.actors.get(status.cluster)?.registration.secretKey;
        const fresh = this.#book.update(status);
        const warn = (reason: string, message: string): void => {
          if (secretKey)
            this.#registry.secretEvent(secretKey, "Warning", reason, `cluster ${status.cluster}: ${message}`);
        };
        // A remote Service that cannot be mirrored (SPEC §3): a Warning Event on its cluster's
        // Secret; a refused ServiceExport read (SPEC §12) is the cluster's, not a Service's.
        for (const p of fresh.mirrors) {
          if (p.reason === "export-mode-forbidden") warn("ExportModeForbidden", `MCS export is off: ${p.message}`);
          else warn("MirrorSkipped", `remote Service ${p.remote} is not mirrored (${p.reason}): ${p.message}`);
        }
        // A read the remote's role lacks (SPEC §12): once per cluster, the other modes go on.
        for (const { resource, message } of fresh.deniedReads) warn("RemoteReadDenied", `${resource}: ${message}`);
        // A bad probe annotation or port (SPEC §10): the problem names it, its value and the fallback.
        for (const { gateway, problem } of fresh.probeConfig)
          warn("InvalidProbeConfig", `gateway ${gateway}: ${problem}`);
        this.#postLinks(); // a Link's status shows its cluster's problems (SPEC §15)
        this.emit("status");
      },
      onEvent: (secretKey, type, reason, message) => this.#registry.secretEvent(secretKey, type, reason, message),
      onChange: () => this.emit("status"),
    });
    this.#localRanges = new LocalRangesWatch({
      client: this.#client,
      log: logger,
      changed: (ranges) => this.#actors.setLocalRanges(ranges),
      settled: () => !this.#stopping && this.#dispatchRegistrations(this.#registry.registry),
    });
  }

  start(): void {
    this.#writer.start();
    this.#localRanges.start();
    this.#registry.start();
  }

  get writerReady(): boolean {
    return this.#writer.ready;
  }

  /** The thread of one cluster's actor (tests use it to crash it). */
  actorThread(cluster: string): Worker | undefined {
    return this.#actors.threadOf(cluster);
  }

  /**
   * Tests only: makes `cluster`'s actor thread fail the way `kind` says (see
   * `ActorFaultKind`); the crash then goes through the restart policy like any other.
   * @throws Error when the supervisor was built without `testHooks`, or the cluster
   * has no actor thread right now.
   */
  injectActorFault(cluster: string, kind: ActorFaultKind): void {
    if (this.#options.testHooks !== true) throw new Error("injectActorFault needs a Supervisor built with testHooks");
    const worker = this.#actors.threadOf(cluster);
    if (!worker) throw new Error(`cluster ${cluster} has no actor thread to inject a fault into`);
    worker.postMessage({ type: "actor.inject-fault", cluster, kind } satisfies ToRemoteActor);
  }

  status(): FleetStatus {
    const links = this.#registry.links();
    return {
      secretsListed: this.#registry.listed,
      writer: this.#writer.status,
      writerRestarts: this.#writer.state.restarts,
      clusters: this.#book.rows(this.#actors.state, this.#registry.registry, this.#writer.status),
      placement: placementStatus(
        placementSetting(this.#options.config.maxThreads),
        this.#autoBudget,
        this.#actors.state,
      ),
      localRanges: this.#localRanges.status(),
      ...(links ? { links: links.rows, ...(links.problem ? { linksProblem: links.problem } : {}) } : {}),
    };
  }

  /**
   * Counters for metrics: per registered cluster and for the writer, each the sum over
   * every incarnation so far (never decreasing while the cluster stays registered).
   */
  counters(): FleetCounters {
    return this.#book.counters(this.#actors.state, this.#writer.counters());
  }

  /**
   * The local writer's liveness: `crashLooping` once it exited `crashLoopAfter` times
   * (restart policy) within the policy's window without becoming ready in between. A
   * writer restarting after an occasional crash is not crash-looping. `eventsWaiting`:
   * Events waiting for a writer; `eventsDropped`: Events dropped since start because
   * too many waited.
   */
  writerHealth(): WriterHealth {
    const now = Date.now();
    const state = this.#writer.state;
    const recent = state.failures.filter((t) => now - t <= this.#policy.windowMs).length;
    return {
      ready: this.#writer.ready,
      recentFailures: recent,
      crashLooping: recent >= this.#policy.crashLoopAfter,
      eventsWaiting: state.outbox.length,
      eventsDropped: state.eventsDropped,
    };
  }

  /**
   * Heap used and heap limit of every thread: the main thread, the writer and every
   * remote-cluster thread. One request per thread, answered by the thread's isolate; a
   * thread that does not answer within a second (busy, ending) is left out, so a scrape
   * never hangs on a stuck thread.
   */
  async threadHeapStatistics(): Promise<ThreadHeap[]> {
    const threads: { name: string; worker: Worker }[] = [];
    const writer = this.#writer.worker;
    if (writer) threads.push({ name: "local-writer", worker: writer });
    for (const t of this.#actors.threads()) threads.push({ name: `remote-cluster/${t.name}`, worker: t.worker });
    return threadHeaps(threads);
  }

  /**
   * Leader election: writes may be sent until `writableUntil` (ms on `systemClock`,
   * which every thread reads alike).
   * Called after each successful Lease renewal; the writer enforces it on its own.
   */
  setWriteDeadline(writableUntil: number): void {
    this.#writer.setWriteDeadline(writableUntil);
  }

  /** The shards this replica holds (everything when not sharded). */
  get ownership(): ShardOwnership {
    return this.#ownership;
  }

  /**
   * Sharded: the shards held now, each with its write deadline (ms on `systemClock`).
   * The writer learns it first (its fence closes at once for a shard not held), then
   * actors start for the clusters of gained shards and stop for those of lost ones.
   * Resolves once no write of a shard not held is in flight (the writer's answer), so
   * the caller may then release those shards' Leases.
   */
  setShards(held: ReadonlyMap<number, number>): Promise<void> {
    if (this.#ownership.shards <= 1) return Promise.resolve();
    const before = this.#ownership.held;
    const changed = before.size !== held.size || [...held.keys()].some((shard) => !before.has(shard));
    if (changed) this.#ownership = { shards: this.#ownership.shards, held: new Set(held.keys()) };
    const fenced = this.#writer.setShards([...held].map(([shard, writableUntil]) => ({ shard, writableUntil })));
    // A renewal only moves deadlines: the actors change only with the held set.
    if (changed && !this.#stopping) {
      this.#dispatchRegistrations(this.#registry.registry);
      this.#registry.refresh(); // newly hosted clusters are reported by this replica now
    }
    return fenced;
  }

  /** Stops every actor, then the writer (which finishes its in-flight writes). Mirrors stay. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    await this.#registry.stop();
    await this.#localRanges.stop();
    await this.#actors.stop();
    await this.#writer.stop();
    this.#client.close();
  }

  /** Snapshot of the registry (for status and tests). */
  get registry(): RegistryState {
    return this.#registry.registry;
  }

  #onRegistry(registry: RegistryState): void {
    if (this.#stopping) return;
    this.#dispatchRegistrations(registry);
    this.#postLinks();
    if (this.#registry.listed)
      this.#writer.post({
        type: "writer.clusters",
        keep: registry.keep,
        order: registry.order,
        registeredAt: registry.registeredAt,
        priorities: registry.priorities,
      });
  }

  /** Actors for the registered clusters this replica hosts (all of them when not sharded). */
  #dispatchRegistrations(registry: RegistryState): void {
    if (!this.#localRanges.settled) return; // dispatched once they are (a gateway is never probed before)
    if (this.#ownership.shards <= 1) {
      this.#book.retain(registry.registered);
      this.#actors.dispatch({ type: "registrations", registered: registry.registered });
      return;
    }
    const hosted = new Map<string, RegisteredCluster>();
    const elsewhere = new Set<string>();
    for (const [cluster, registration] of registry.registered)
      if (hostsCluster(this.#ownership, cluster)) hosted.set(cluster, registration);
      else elsewhere.add(cluster);
    this.#book.retain(hosted);
    this.#actors.dispatch({ type: "registrations", registered: hosted, elsewhere });
    // No shard held yet (joining, or every shard lost): the packed threads start now,
    // empty, so that the shards' actors start on threads already up once held.
    if (this.#ownership.held.size === 0)
      this.#actors.dispatch({ type: "warm-threads", fleet: registry.registered.size });
  }

  /** The Links registering clusters, to the writer for their status (SPEC §15): when it changed, or all (`force`). */
  #postLinks(force = false): void {
    const message = this.#writer.ready ? this.#registry.linksMessage((c) => this.#book.latest(c), force) : undefined;
    if (message) this.#writer.post(message);
  }

  /** A (re)started writer knows nothing: give it the keep set and a fresh channel per actor. */
  #attachAllToWriter(): void {
    if (this.#registry.listed)
      this.#writer.post({
        type: "writer.clusters",
        keep: this.#registry.registry.keep,
        order: this.#registry.registry.order,
        registeredAt: this.#registry.registry.registeredAt,
        priorities: this.#registry.registry.priorities,
      });
    for (const { cluster, epoch, worker } of this.#actors.running()) {
      const { port1, port2 } = new MessageChannel();
      this.#writer.post({ type: "writer.attach", cluster, epoch, port: port2 }, [port2]);
      worker.postMessage({ type: "actor.attach-writer", cluster, writerPort: port1 } satisfies ToRemoteActor, [port1]);
    }
  }
}
