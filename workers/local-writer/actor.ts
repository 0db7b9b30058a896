/**
 * The local-writer actor: the ONLY component that creates, updates or deletes anything
 * in the local cluster. It watches the local mirror objects (label-selected Services,
 * Endpoints and EndpointSlices) and the Namespaces, holds every cluster's desired mirrors
 * (DesiredStore, fed by the desired channels), and reconciles local keys through one
 * work queue: desired ⊕ observed → planMirror (pure) → rate-limited writes.
 * This file wires the parts, each one job in a file of this folder: local-stores.ts,
 *   desired-channels.ts, absorb-batch.ts, desired-store.ts, reconcile.ts, write-path.ts,
 *   fence.ts, shard-handoff.ts, status.ts, link-status.ts (SPEC §15), tier-book.ts (SPEC §14).
 *
 * Guarantees:
 * - per-key ordering: the queue never hands out a key that is in flight, and a key
 *   changed meanwhile is reconciled again afterwards (superseded desires coalesce);
 * - bounded concurrency across keys (`concurrency`) and a client-side token bucket;
 *   clusters take turns in both (write-lanes.ts), so none starves the others;
 * - retries with per-key exponential backoff and no permanent give-up; a periodic
 *   full resync re-checks every key (a safety net for anything a watch missed);
 * - no write when nothing differs; nothing written before the local stores are synced;
 * - ownership (SPEC §5) and garbage collection only on complete knowledge (SPEC §6);
 * - every desired batch is answered (absorbed or rejected with a resend), never dropped;
 * - status is published every second whatever the local API does;
 * - dry run (`options.dryRun`): the same watches, queue and plans, but the writes go to
 *   the dry run's plan instead of the API server, and no Event is recorded: the only
 *   requests are reads (DESIGN §3 "Dry run").
 */
import { type Clock, systemClock } from "../../src/core/clock.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import { shardedFederatedProblem } from "../../src/core/federated-shards.ts";
import { hostsCluster, type ShardOwnership } from "../../src/core/shards.ts";
import { runWorkers, WorkQueue } from "../../src/core/workqueue.ts";
import { KubeClient } from "../../src/kube/client.ts";
import type { WatchFailure } from "../../src/kube/watcher.ts";
import type { Logger } from "../../src/log.ts";
import type { EventRequest, FromWriter, WriterOptions, WriterStatus } from "../../src/protocol/messages.ts";
import { absorbBatch } from "./absorb-batch.ts";
import { type ActorPort, DesiredChannels } from "./desired-channels.ts";
import { DesiredStore } from "./desired-store.ts";
import { EventRecorder } from "./event-recorder.ts";
import { WriteFence } from "./fence.ts";
import { type LinkStatusWriter, linkStatusWriter } from "./link-status.ts";
import { LocalStores } from "./local-stores.ts";
import { MutationCache } from "./mutation-cache.ts";
import { namespaceQuota } from "./namespace-quota.ts";
import { MirrorReconciler } from "./reconcile.ts";
import { ShardHandoff } from "./shard-handoff.ts";
import { SharedStrings } from "./shared-strings.ts";
import { SharedTriggers } from "./shared-triggers.ts";
import { WriterStats } from "./status.ts";
import { reconcileErrorReporter } from "./write-executor.ts";
import { writeLane } from "./write-lanes.ts";
import { createWritePath, type WritePath } from "./write-path.ts";

export type { ActorPort } from "./desired-channels.ts";

export interface WriterPorts {
  readonly supervisor: (message: FromWriter) => void;
}

export interface WriterDeps {
  readonly logger: Logger;
  /** Monotonic time for the fence, expiries and backoffs. Default `systemClock`. */
  readonly clock?: Clock;
}

const STATUS_INTERVAL_MS = 1_000;
/**
 * How long a headless mirror waits for more changes of its per-host Services (SPEC §12):
 * a burst of new hosts costs it a write per interval, not one per host.
 */
const HEADLESS_HOSTS_DELAY_MS = 500;

export class LocalWriterActor {
  readonly #options: WriterOptions;
  readonly #ports: WriterPorts;
  readonly #log: Logger;
  readonly #client: KubeClient;
  readonly #stores: LocalStores;
  readonly #shared = new SharedStrings(); // one table for the desired and the watched stores
  readonly #desired = new DesiredStore(this.#shared);
  readonly #queue: WorkQueue<string>;
  readonly #stats = new WriterStats();
  readonly #fence: WriteFence;
  readonly #cache: MutationCache;
  readonly #events: EventRecorder;
  readonly #executor: WritePath["executor"];
  readonly #bucket: WritePath["bucket"];
  /** `run --dry-run`: the executor that plans instead of writing (also `#executor`). */
  readonly #dryRun: WritePath["dryRun"];
  readonly #reconciler: MirrorReconciler;
  readonly #channels: DesiredChannels;
  readonly #handoff: ShardHandoff;
  /** Which shared keys (fleet-wide, import) a batch or a keep set may affect. */
  readonly #sharedKeys: SharedTriggers;
  /** Links' status (SPEC §15): `writer.links` goes to `links.set`. */
  readonly links: LinkStatusWriter;
  #ready = false;
  #workers: Promise<void> | undefined;
  #resyncTimer: NodeJS.Timeout | undefined;
  #statusTimer: NodeJS.Timeout | undefined;
  #stopped = false;
  #localApiFailing = false;

  constructor(connection: ConnectionSpec, options: WriterOptions, ports: WriterPorts, deps: WriterDeps) {
    const clock = deps.clock ?? systemClock;
    this.#options = options;
    this.#ports = ports;
    this.#log = deps.logger;
    const identity = { userAgent: "fleet-mirror/local-writer", logger: deps.logger };
    this.#client = new KubeClient(connection, { ...identity, maxResponseBytes: options.maxResponseBytes });
    this.#stores = new LocalStores(this.#client, this.#shared, {
      cluster: options.clusterName ?? "local",
      log: this.#log,
      changed: (key) => this.#enqueue(key),
      availabilityChanged: () => this.#sharedKeys.all(),
      recheckMs: options.mcsRecheckMs,
      localMembers: options.localMembers,
    });
    // Clusters take turns in the queue and at the rate limit: a churning one cannot starve the others.
    const lane = (key: string) => writeLane(key, this.#desired, this.#stores);
    // A busy cluster's keys hold at most half the workers while quiet ones write (FairTokenBucket.mayStart).
    const mayStart = (cluster: string, inFlight: number): boolean =>
      this.#bucket?.mayStart(cluster, inFlight, options.concurrency) ?? true;
    this.#queue = new WorkQueue<string>({ itemBackoff: { initialMs: 100, maxMs: 5 * 60_000 }, clock, lane, mayStart });
    this.#fence = new WriteFence(options.fenced === true, clock, this.#log, options.shards ?? 1);
    this.#cache = new MutationCache(clock);
    // Said once here; each member it concerns is reported by the reconciler (status, Event).
    const shardedProblem = shardedFederatedProblem(options.shards ?? 1, options.endpointsApi);
    if (shardedProblem) this.#log.warn({ shards: options.shards }, shardedProblem);
    this.#events = new EventRecorder({
      client: this.#client,
      clock,
      log: this.#log,
      count: (verb, kind, result) => this.#stats.count(verb, kind, result),
      failed: (error) => {
        this.#stats.lastError = error;
      },
      writable: () => this.#fence.writable,
    });
    const path = createWritePath({
      client: this.#client,
      options,
      clock,
      fence: this.#fence,
      cache: this.#cache,
      stats: this.#stats,
      log: this.#log,
      block: (key, cluster, blocked) => this.#reconciler.block(key, cluster, blocked),
      lane,
    });
    this.#executor = path.executor;
    this.#bucket = path.bucket;
    this.#dryRun = path.dryRun;
    this.#reconciler = new MirrorReconciler({
      desired: this.#desired,
      services: this.#stores.services,
      endpoints: this.#stores.endpoints,
      slices: this.#stores.indexedSlices,
      namespaces: this.#stores.namespaces,
      serviceImports: this.#stores.serviceImports,
      localExports: this.#stores.localExports,
      ...(this.#stores.localMembers ? { localMembers: this.#stores.localMembers } : {}),
      cache: this.#dryRun?.cache ?? this.#cache,
      executor: this.#executor,
      client: this.#client,
      options,
      log: this.#log,
      recordEvent: (event) => void this.recordEvent(event),
      namespaceQuota: namespaceQuota(this.#stores.namespaces, this.#desired, options),
      now: () => clock.now(),
      tierSwitched: (direction) => this.#stats.switched(direction),
      ownership: () => this.#handoff.plannable(),
    });
    this.#sharedKeys = new SharedTriggers({
      desired: this.#desired,
      observed: this.#stores,
      waiting: () => this.#reconciler.waitingSharedKeys(),
      hosts: (cluster) => hostsCluster(this.#fence.ownership, cluster),
      enqueue: (key) => this.#enqueue(key),
    });
    const absorbing = {
      desired: this.#desired,
      stores: this.#stores,
      sharedKeys: this.#sharedKeys,
      hosts: (cluster: string) => hostsCluster(this.#fence.ownership, cluster),
      enqueue: (key: string) => this.#enqueue(key),
    };
    this.#channels = new DesiredChannels({
      absorb: (batch) => absorbBatch(absorbing, batch),
      rejected: (_cluster, error) => {
        this.#stats.lastError = error;
      },
      log: this.#log,
    });
    this.#handoff = new ShardHandoff({
      fence: this.#fence,
      stores: this.#stores,
      desired: this.#desired,
      channels: this.#channels,
      executor: this.#executor,
      log: this.#log,
      ready: () => this.#ready,
      enqueue: (key) => this.#enqueue(key),
      enqueueFederated: () => this.#sharedKeys.all(),
      resyncAll: () => this.#resyncAll(),
      pumpEvents: () => this.#events.pump(),
      fenced: (seq) => this.#ports.supervisor({ type: "writer.shards-fenced", seq }),
    });

    const [reconciler, services, stats, queue] = [this.#reconciler, this.#stores.services, this.#stats, this.#queue];
    const parts = { client: this.#client, clock, log: this.#log, desired: this.#desired, fence: this.#fence };
    this.links = linkStatusWriter({ ...parts, dryRun: options.dryRun === true, reconciler, services, stats, queue });
    this.#stores.routeChanges({
      watched: (kind, key, current) => this.#cache.watched(kind, key, current),
      enqueue: (key) => this.#enqueue(key),
      enqueueLater: (key) => this.#queue.addAfter(key, HEADLESS_HOSTS_DELAY_MS),
    });
    this.#stores.namespaces.on("change", (name) => {
      this.#executor.namespaceSeen(name);
      for (const key of this.#desiredKeys()) if (key.startsWith(`${name}/`)) this.#enqueue(key);
    });
    for (const watcher of this.#stores.all) {
      watcher.on("listed", () => {
        // A relist delivered every key it changed ("change" above); what it did not
        // deliver and is old is the watch's truth again.
        this.#cache.sweep();
        this.#maybeReady();
        this.#onLocalApiBack();
        const observed = this.#stores.noteListed();
        if (observed.length > 0) {
          this.#log.info({ shards: observed }, "mirrors of gained shards listed: their keys are planned");
          if (this.#ready) this.#resyncAll();
        }
      });
      watcher.on("watching", () => this.#onLocalApiBack());
      watcher.on("failure", (failure: WatchFailure) => {
        this.#localApiFailing = true;
        this.#log.warn({ failure }, `local API ${failure.phase} failed: ${failure.message}`);
      });
    }
  }

  start(): void {
    // Sharded: the mirror watches admit no shard's mirrors until shards are held.
    this.#stores.setShardFilter(this.#fence.ownership);
    this.#stores.start();
    if (!this.#dryRun) this.#events.start();
    this.#statusTimer = setInterval(() => {
      this.#cache.sweep();
      this.#publishStatus();
      if (this.#ready) this.links.pass();
    }, STATUS_INTERVAL_MS);
  }

  /**
   * A remote actor incarnation's desired channel. Attaching registers the cluster (the
   * supervisor attaches registered clusters only): its batches are absorbed even before a
   * `setKeep` names it (only `setKeep` unregisters). Older epochs are closed.
   */
  attach(cluster: string, epoch: number, port: ActorPort): void {
    if (this.#stopped || !hostsCluster(this.#fence.ownership, cluster)) {
      port.close();
      return;
    }
    if (this.#channels.attach(cluster, epoch, port)) this.#desired.register(cluster);
  }

  /**
   * The clusters whose mirrors are kept; every other cluster's mirrors are garbage and its
   * channel is closed. `order`, `registeredAt`, `priorities`: see DesiredStore.setKeep.
   */
  setKeep(
    keep: readonly string[],
    order?: readonly string[],
    registeredAt?: Readonly<Record<string, string>>,
    priorities?: Readonly<Record<string, number>>,
  ): void {
    const before = this.#sharedKeys.registration();
    const { dropped, keys } = this.#desired.setKeep(keep, order, registeredAt, priorities);
    for (const key of keys) this.#enqueue(key);
    // Which clusters are registered, known and first may have changed (shared-triggers.ts).
    this.#sharedKeys.afterKeep(before, dropped, keep);
    if (dropped.length > 0)
      this.#log.info({ clusters: dropped }, "clusters unregistered: their mirrors will be deleted");
    for (const cluster of this.#channels.clusters()) if (!keep.includes(cluster)) this.#channels.close(cluster);
    // Mirrors of clusters the writer never heard of (removed while fleet-mirror was down).
    for (const { key, owner } of this.#stores.observedMirrors()) if (!keep.includes(owner)) this.#enqueue(key);
  }

  /** Records a Kubernetes Event (see EventRecorder); resolves once sent, dropped or found a duplicate. */
  recordEvent(event: EventRequest): Promise<void> {
    if (this.#dryRun) {
      this.#log.debug({ event }, `dry run: Event ${event.reason} not recorded`);
      return Promise.resolve();
    }
    return this.#events.record(event);
  }

  /** Moves the write fence (the latest call wins); keys held back by it are retried now. */
  fence(writableUntil: number): void {
    if (!this.#fence.move(writableUntil)) return;
    if (this.#ready) this.#resyncAll();
    this.#events.pump();
  }

  /** The shards held now (all of them when not sharded). */
  get ownership(): ShardOwnership {
    return this.#fence.ownership;
  }

  /**
   * Sharded: the shards held now and their deadlines (`writer.shards`, shard-handoff.ts).
   * Answers `writer.shards-fenced` once no write of a shard not held is in flight.
   */
  setShards(seq: number, held: readonly { readonly shard: number; readonly writableUntil: number }[]): void {
    if (!this.#stopped) this.#handoff.apply(seq, held);
  }

  /** Finishes in-flight writes, then stops watching. Mirrors stay in place. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#resyncTimer);
    clearInterval(this.#statusTimer);
    this.#queue.shutDown();
    const unsent = this.#events.stop();
    if (unsent > 0) this.#log.info({ events: unsent }, "stopping: pending Kubernetes Events not sent");
    await this.#workers;
    await Promise.all([this.#stores.stop(), this.links.stop()]);
    this.#channels.closeAll();
    this.#client.close();
  }

  get ready(): boolean {
    return this.#ready;
  }

  status(): WriterStatus {
    return this.#stats.report({
      ready: this.#ready,
      queueDepth: this.#queue.len,
      desired: this.#desired.clusterSummary(),
      blocked: this.#reconciler.blockedByCluster(),
      ...(this.#bucket ? { held: this.#bucket.held } : {}),
      federated: this.#reconciler.federatedStatus(),
      imports: this.#reconciler.importStatus(),
      mcs: this.#stores.serviceImports.availability,
      apiWarnings: this.#client.apiWarnings.total,
      ...(this.#dryRun ? { dryRun: this.#dryRun.report() } : {}),
    });
  }

  // -------------------------------------------------------------------------------

  #maybeReady(): void {
    if (this.#ready || this.#stopped) return;
    if (!this.#stores.all.every((w) => w.hasSynced)) return;
    this.#ready = true;
    this.#workers = runWorkers(
      this.#queue,
      this.#options.concurrency,
      (key) => this.#dryRun?.reconcile(key, this.#reconciler) ?? this.#reconciler.reconcile(key),
      reconcileErrorReporter({ stats: this.#stats, log: this.#log, recordEvent: (e) => void this.recordEvent(e) }),
    );
    this.#resyncAll();
    // A safety net: re-checks every key even if a watch event was lost or a write failed unnoticed (SPEC §4).
    this.#resyncTimer = setInterval(() => this.#resyncAll(), this.#options.resyncPeriodMs);
    this.#log.info("local stores synced; writer ready");
    this.#ports.supervisor({ type: "writer.ready" });
    this.#publishStatus();
  }

  /** The local API answers again after watch failures: keys in backoff are retried now, their backoff reset. */
  #onLocalApiBack(): void {
    if (!this.#localApiFailing || !this.#ready) return;
    this.#localApiFailing = false;
    for (const key of this.#desiredKeys()) this.#queue.forget(key);
    this.#resyncAll();
  }

  #resyncAll(): void {
    for (const key of [...this.#desiredKeys(), ...this.#stores.observedKeys()]) this.#enqueue(key);
  }

  /** Every key some cluster wants written: mirrors, fleet-wide Services and imports. */
  #desiredKeys(): string[] {
    return [...this.#desired.keys(), ...this.#desired.sharedKeys()];
  }

  #enqueue(key: string): void {
    if (!this.#stopped) this.#queue.add(key);
  }

  #publishStatus(): void {
    if (!this.#stopped) this.#ports.supervisor({ type: "writer.status", status: this.status() });
  }
}
