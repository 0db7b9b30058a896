/**
 * The local-writer actor: the ONLY component that creates, updates or deletes anything
 * in the local cluster. It watches the local mirror objects (label-selected Services
 * and Endpoints) and the Namespaces, holds every cluster's desired mirrors
 * (DesiredStore), and reconciles local keys through one work queue:
 *   desired ⊕ observed → planMirror (pure) → rate-limited writes.
 *
 * Guarantees:
 * - per-key ordering: the queue never hands out a key that is in flight, and a key
 *   changed meanwhile is reconciled again afterwards (superseded desires coalesce);
 * - bounded concurrency across keys (`concurrency`) and a client-side token bucket;
 * - retries with per-key exponential backoff and no permanent give-up; a periodic
 *   full resync re-checks every key (a safety net for anything a watch missed);
 * - no write when nothing differs; nothing written before the local stores are synced;
 * - ownership (SPEC §5) and garbage collection only on complete knowledge (SPEC §6).
 */
import { hostname } from "node:os";
import { systemClock } from "../../src/core/clock.ts";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { MIRRORED_SERVICE, ownerCluster } from "../../src/core/labels.ts";
import type { Endpoints, KubeObject, Namespace, Service } from "../../src/core/objects.ts";
import { splitKey } from "../../src/core/objects.ts";
import { type Blocked, planMirror, type WriteAction } from "../../src/core/plan.ts";
import { TokenBucket } from "../../src/core/rate-limit.ts";
import { type ReconcileResult, runWorkers, WorkQueue } from "../../src/core/workqueue.ts";
import { KubeApiError, KubeClient } from "../../src/kube/client.ts";
import type { ConnectionSpec } from "../../src/kube/connection.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import type { Logger } from "../../src/log.ts";
import { describeError, type SerializedError, serializeError } from "../../src/protocol/errors.ts";
import {
  type ChannelPort,
  decodeToWriterFromActor,
  type EventRequest,
  type FromWriter,
  type ToActorFromWriter,
  WRITE_DURATION_BUCKETS,
  type WriterOptions,
  type WriterStatus,
} from "../../src/protocol/messages.ts";
import { DesiredStore } from "./desired-store.ts";

/** The writer's end of one actor's desired channel. */
export type ActorPort = ChannelPort<ToActorFromWriter>;

export interface WriterPorts {
  readonly supervisor: (message: FromWriter) => void;
}

const MIRROR_SELECTOR = `${MIRRORED_SERVICE}=true`;
const STATUS_INTERVAL_MS = 1_000;
/** An Event with the same object, reason and message is not repeated within this window. */
const EVENT_DEDUP_MS = 10 * 60_000;
/** Event POSTs in flight at once, and Events waiting at most (see recordEvent). */
const EVENT_CONCURRENCY = 2;
const EVENT_QUEUE_MAX = 2_000;
/** A key held back by the write fence is looked at again after this long (or when the fence moves). */
const FENCE_RECHECK_MS = 1_000;

/** Compares two resourceVersions of the same object; etcd-backed ones are integers. */
function newer(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

/**
 * Objects this writer wrote (or deleted) that its watch has not delivered yet. Read
 * through `observed()`, so a key reconciled again before the watch catches up does
 * not write a second time. Entries vanish once the watch reaches their version.
 */
interface Written {
  readonly object: KubeObject | undefined; // undefined: deleted
  readonly resourceVersion: string | undefined;
  readonly at: number;
}

export class LocalWriterActor {
  readonly #options: WriterOptions;
  readonly #ports: WriterPorts;
  readonly #log: Logger;
  readonly #client: KubeClient;
  readonly #services: Watcher<Service>;
  readonly #endpoints: Watcher<Endpoints>;
  readonly #namespaces: Watcher<Namespace>;
  readonly #desired = new DesiredStore();
  readonly #queue: WorkQueue<string>;
  readonly #bucket: TokenBucket;
  readonly #written = new Map<string, Written>();
  readonly #blocked = new Map<string, Blocked & { cluster: string }>();
  readonly #actorPorts = new Map<string, { epoch: number; port: ActorPort }>();
  readonly #eventsSent = new Map<string, number>();
  /** Leader election's fence (`systemClock` ms, see `writer.fence`); +∞ without leader election. */
  #writableUntil: number;
  #fenceLogged = false;
  readonly #eventQueue: { readonly event: EventRequest; readonly dedupKey: string; readonly done: () => void }[] = [];
  #eventsInFlight = 0;
  readonly #writes: Record<string, number> = {};
  /** Write latency, cumulative per bucket of WRITE_DURATION_BUCKETS (see LatencyHistogram). */
  readonly #writeDuration = { buckets: WRITE_DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 };
  #retries = 0;
  #inFlight = 0;
  #lastError: SerializedError | undefined;
  #ready = false;
  #workers: Promise<void> | undefined;
  #resyncTimer: NodeJS.Timeout | undefined;
  #statusTimer: NodeJS.Timeout | undefined;
  #stopped = false;
  /** Namespace creates in flight or done but not yet seen by the watch, by name. */
  readonly #namespaceCreates = new Map<string, Promise<ReconcileResult | undefined>>();
  #localApiFailing = false;

  constructor(connection: ConnectionSpec, options: WriterOptions, ports: WriterPorts, deps: { logger: Logger }) {
    this.#options = options;
    this.#ports = ports;
    this.#writableUntil = options.fenced === true ? 0 : Number.POSITIVE_INFINITY;
    this.#log = deps.logger;
    this.#client = new KubeClient(connection, { userAgent: "fleet-mirror/local-writer", logger: deps.logger });
    this.#services = new Watcher<Service>({
      client: this.#client,
      path: "/api/v1/services",
      expectedKind: "Service",
      labelSelector: MIRROR_SELECTOR,
    });
    this.#endpoints = new Watcher<Endpoints>({
      client: this.#client,
      path: "/api/v1/endpoints",
      expectedKind: "Endpoints",
      labelSelector: MIRROR_SELECTOR,
    });
    this.#namespaces = new Watcher<Namespace>({
      client: this.#client,
      path: "/api/v1/namespaces",
      expectedKind: "Namespace",
    });
    this.#queue = new WorkQueue<string>({ itemBackoff: { initialMs: 100, maxMs: 5 * 60_000 } });
    this.#bucket = new TokenBucket(options.qps, options.burst);

    const onMirrorChange = (kind: "Service" | "Endpoints", key: string, current: KubeObject | undefined): void => {
      const written = this.#written.get(`${kind}/${key}`);
      if (written && (!current || !newer(written.resourceVersion, current.metadata.resourceVersion))) {
        this.#written.delete(`${kind}/${key}`);
      }
      this.#enqueue(key);
    };
    this.#services.on("change", (key, _previous, current) => onMirrorChange("Service", key, current));
    this.#endpoints.on("change", (key, _previous, current) => onMirrorChange("Endpoints", key, current));
    this.#namespaces.on("change", (name) => {
      this.#namespaceCreates.delete(name);
      for (const key of this.#desired.keys()) if (key.startsWith(`${name}/`)) this.#enqueue(key);
    });
    for (const watcher of [this.#services, this.#endpoints, this.#namespaces]) {
      watcher.on("listed", () => {
        this.#maybeReady();
        this.#onLocalApiBack();
      });
      watcher.on("watching", () => this.#onLocalApiBack());
      watcher.on("failure", (failure: WatchFailure) => {
        this.#localApiFailing = true;
        this.#log.warn({ failure }, `local API ${failure.phase} failed: ${failure.message}`);
      });
    }
  }

  start(): void {
    this.#services.start();
    this.#endpoints.start();
    this.#namespaces.start();
    this.#statusTimer = setInterval(() => this.#publishStatus(), STATUS_INTERVAL_MS);
  }

  /** A remote actor incarnation's desired channel. Older epochs of the same cluster are closed. */
  attach(cluster: string, epoch: number, port: ActorPort): void {
    const current = this.#actorPorts.get(cluster);
    if (current && current.epoch > epoch) {
      port.close();
      return;
    }
    if (current && current.port !== port) current.port.close();
    this.#actorPorts.set(cluster, { epoch, port });
    port.on("message", (raw) => {
      try {
        const batch = decodeToWriterFromActor(raw);
        if (batch.cluster !== cluster) throw new Error(`batch for ${batch.cluster} on ${cluster}'s channel`);
        for (const key of this.#desired.applyBatch(batch)) this.#enqueue(key);
        // A complete batch allows GC: re-check local mirrors of this cluster it no longer wants (SPEC §6).
        if (batch.complete) this.#enqueueMirrorsOf(cluster);
        // Acknowledged once absorbed: the desired store coalesces by key, so absorbing
        // is bounded by the number of mirrors, not by the number of messages.
        port.postMessage({ type: "desired.ack", cluster, epoch: batch.epoch, seq: batch.seq });
      } catch (error) {
        this.#lastError = serializeError(error, `local-writer: desired channel of ${cluster}`);
        this.#log.error({ err: this.#lastError, cluster }, "rejected a malformed desired batch");
      }
    });
  }

  /** The clusters whose mirrors are kept; every other cluster's mirrors are garbage. */
  setKeep(keep: readonly string[]): void {
    const { dropped, keys } = this.#desired.setKeep(keep);
    for (const key of keys) this.#enqueue(key);
    if (dropped.length > 0)
      this.#log.info({ clusters: dropped }, "clusters unregistered: their mirrors will be deleted");
    for (const cluster of dropped) this.#actorPorts.get(cluster)?.port.close();
    for (const cluster of dropped) this.#actorPorts.delete(cluster);
    // Mirrors of clusters the writer never heard of (removed while fleet-mirror was down).
    for (const watcher of [this.#services, this.#endpoints]) {
      for (const object of watcher.values()) {
        const owner = ownerCluster(object.metadata.labels);
        if (owner && !keep.includes(owner)) this.#enqueue(`${object.metadata.namespace}/${object.metadata.name}`);
      }
    }
  }

  /**
   * Records a Kubernetes Event (deduplicated); failures are logged and counted, never
   * thrown. Events wait in a bounded queue sent by EVENT_CONCURRENCY requests at a time:
   * a fleet start registers K clusters at once, and K parallel POSTs (K = 1000) opened K
   * TLS connections and starved the mirror writes. When the queue is full the oldest
   * pending Event is dropped (counted as `create/Event/dropped`), like client-go's
   * broadcaster drops when its channel is full. Resolves once sent or dropped.
   */
  recordEvent(event: EventRequest): Promise<void> {
    const dedupKey = `${event.involved.kind}/${event.involved.namespace}/${event.involved.name}/${event.reason}/${event.message}`;
    const last = this.#eventsSent.get(dedupKey);
    if (last !== undefined && Date.now() - last < EVENT_DEDUP_MS) return Promise.resolve();
    this.#eventsSent.set(dedupKey, Date.now());
    return new Promise<void>((resolve) => {
      if (this.#eventQueue.length >= EVENT_QUEUE_MAX) {
        const dropped = this.#eventQueue.shift();
        if (dropped) {
          this.#eventsSent.delete(dropped.dedupKey);
          this.#count("create", "Event", "dropped");
          dropped.done();
        }
      }
      this.#eventQueue.push({ event, dedupKey, done: resolve });
      this.#pumpEvents();
    });
  }

  /** Moves the write fence (the latest call wins); keys held back by it are retried now. */
  fence(writableUntil: number): void {
    const wasClosed = !this.#writable();
    this.#writableUntil = writableUntil;
    if (wasClosed && this.#writable()) {
      if (this.#fenceLogged) this.#log.info("write fence moved forward: writing again");
      this.#fenceLogged = false;
      if (this.#ready) this.#resyncAll();
      this.#pumpEvents();
    }
  }

  /** Whether a write may be sent now: before the leader-election fence. */
  #writable(): boolean {
    return systemClock.now() < this.#writableUntil;
  }

  /** A write held back by the fence: logged once per closed period, retried later. */
  #fenced(what: string): ReconcileResult {
    if (!this.#fenceLogged) {
      this.#fenceLogged = true;
      this.#log.warn(
        { what },
        "write fence reached (the Lease was not renewed in time): holding every write until it is",
      );
    }
    return { kind: "requeue-after", ms: FENCE_RECHECK_MS };
  }

  #pumpEvents(): void {
    while (this.#eventsInFlight < EVENT_CONCURRENCY && !this.#stopped && this.#writable()) {
      const next = this.#eventQueue.shift();
      if (!next) return;
      this.#eventsInFlight += 1;
      void this.#sendEvent(next.event, next.dedupKey).finally(() => {
        this.#eventsInFlight -= 1;
        next.done();
        this.#pumpEvents();
      });
    }
  }

  async #sendEvent(event: EventRequest, dedupKey: string): Promise<void> {
    const now = new Date().toISOString();
    try {
      await this.#client.request("POST", `/api/v1/namespaces/${event.involved.namespace}/events`, {
        body: {
          metadata: { generateName: `${event.involved.name}.`, namespace: event.involved.namespace },
          involvedObject: event.involved,
          reason: event.reason,
          message: event.message.slice(0, 1024),
          type: event.type,
          source: { component: "fleet-mirror" },
          reportingComponent: "fleet-mirror",
          reportingInstance: hostname(),
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      this.#count("create", "Event", "ok");
    } catch (error) {
      this.#count("create", "Event", "error");
      this.#eventsSent.delete(dedupKey);
      this.#log.warn({ err: serializeError(error), event }, "could not record a Kubernetes Event");
    }
  }

  /** Finishes in-flight writes, then stops watching. Mirrors stay in place. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearInterval(this.#resyncTimer);
    clearInterval(this.#statusTimer);
    this.#queue.shutDown();
    // Events still waiting are best-effort notices, not state: they are not sent after stop.
    const unsent = this.#eventQueue.splice(0);
    if (unsent.length > 0) this.#log.info({ events: unsent.length }, "stopping: pending Kubernetes Events not sent");
    for (const pending of unsent) pending.done();
    await this.#workers;
    await Promise.all([this.#services.stop(), this.#endpoints.stop(), this.#namespaces.stop()]);
    for (const { port } of this.#actorPorts.values()) port.close();
    this.#client.close();
  }

  get ready(): boolean {
    return this.#ready;
  }

  // -------------------------------------------------------------------------------

  #maybeReady(): void {
    if (this.#ready || this.#stopped) return;
    if (!this.#services.hasSynced || !this.#endpoints.hasSynced || !this.#namespaces.hasSynced) return;
    this.#ready = true;
    this.#workers = runWorkers(
      this.#queue,
      this.#options.concurrency,
      (key) => this.#reconcile(key),
      (key, error, requeues) => {
        this.#retries += 1;
        this.#lastError = serializeError(error, `local-writer: reconcile ${key}`);
        this.#log.warn(
          { key, requeues, err: this.#lastError },
          `write failed, retrying with backoff: ${describeError(this.#lastError)}`,
        );
        // A failure retrying cannot fix (invalid, forbidden) needs a human: say so on the
        // object. Retries go on regardless (no permanent give-up), the Event is deduplicated.
        const { namespace, name } = splitKey(key);
        if (error instanceof KubeApiError && !error.retryable && namespace) {
          void this.recordEvent({
            involved: { kind: "Service", apiVersion: "v1", namespace, name },
            type: "Warning",
            reason: "MirrorWriteFailed",
            message: `fleet-mirror cannot write mirror ${key} (${error.status} ${error.reason}); retrying with backoff: ${error.message}`,
          });
        }
      },
    );
    this.#resyncAll();
    // The periodic resync stays as a safety net: it re-checks every key even if a watch
    // event was lost or a write failed in a way nobody re-enqueued (SPEC §4).
    this.#resyncTimer = setInterval(() => this.#resyncAll(), this.#options.resyncPeriodMs);
    this.#log.info("local stores synced; writer ready");
    this.#ports.supervisor({ type: "writer.ready" });
    this.#publishStatus();
  }

  /**
   * The local API answers again after watch failures: every key retried with backoff
   * meanwhile (its delay grown by every failed attempt during the outage) is retried
   * now, with its backoff reset, instead of minutes later.
   */
  #onLocalApiBack(): void {
    if (!this.#localApiFailing || !this.#ready) return;
    this.#localApiFailing = false;
    for (const key of this.#desired.keys()) this.#queue.forget(key);
    this.#resyncAll();
  }

  #resyncAll(): void {
    for (const key of this.#desired.keys()) this.#enqueue(key);
    for (const key of this.#services.keys()) this.#enqueue(key);
    for (const key of this.#endpoints.keys()) this.#enqueue(key);
  }

  /** Enqueues every observed local mirror (Service or Endpoints) labelled as `cluster`'s. */
  #enqueueMirrorsOf(cluster: string): void {
    for (const watcher of [this.#services, this.#endpoints]) {
      for (const object of watcher.values()) {
        if (ownerCluster(object.metadata.labels) === cluster) {
          this.#enqueue(`${object.metadata.namespace}/${object.metadata.name}`);
        }
      }
    }
  }

  #enqueue(key: string): void {
    if (!this.#stopped) this.#queue.add(key);
  }

  #observed<T extends KubeObject>(kind: "Service" | "Endpoints", key: string, watcher: Watcher<T>): T | undefined {
    const fromWatch = watcher.get(key);
    const written = this.#written.get(`${kind}/${key}`);
    if (!written) return fromWatch;
    if (!fromWatch || newer(written.resourceVersion, fromWatch.metadata.resourceVersion))
      return written.object as T | undefined;
    return fromWatch;
  }

  async #reconcile(key: string): Promise<ReconcileResult> {
    const claimants = this.#desired.claimants(key);
    const service = this.#observed("Service", key, this.#services);
    let endpoints = this.#observed("Endpoints", key, this.#endpoints);
    const { namespace } = splitKey(key);
    const namespaceExists = namespace !== undefined && this.#namespaces.get(namespace) !== undefined;
    // Our stores hold only labelled objects, so a user's Endpoints holding the name are
    // invisible to them. A failed create would reveal them only AFTER the mirror Service
    // was created next to them (and that Service would route to the user's addresses):
    // look the Endpoints up before creating a Service (SPEC §5).
    if (claimants.length > 0 && !service && !endpoints && namespaceExists) {
      endpoints = await this.#getUnlabelled<Endpoints>("endpoints", key);
    }
    // The current owner keeps the name; otherwise the first claimant in name order.
    const owner = ownerCluster(service?.metadata.labels) ?? ownerCluster(endpoints?.metadata.labels);
    const winner = owner && claimants.includes(owner) ? owner : claimants[0];
    const desired = winner ? this.#desired.get(winner, key) : undefined;
    const plan = planMirror({
      key,
      desired,
      service,
      endpoints,
      namespaceExists,
      createNamespaces: this.#options.createNamespaces,
      excludedNamespaces: this.#options.excludedNamespaces,
      gcAllowed: (cluster) => this.#desired.gcAllowed(cluster),
    });
    for (const loser of claimants) {
      if (loser === winner) continue;
      this.#block(key, loser, {
        reason: "owned-by-other-cluster",
        message: `mirror name ${key} is also wanted by cluster ${winner}; cluster ${loser}'s mirror is not written`,
      });
    }
    if (plan.blocked && desired) {
      this.#block(key, desired.cluster, plan.blocked);
      return { kind: "requeue-after", ms: this.#options.blockedRecheckMs };
    }
    if (!claimants.some((c) => c !== winner)) this.#blocked.delete(key);
    for (const action of plan.actions) {
      const outcome = await this.#apply(key, action, desired);
      if (outcome) return outcome;
    }
    return { kind: "done" };
  }

  /** GETs an object our label-selected stores may not show; undefined when it does not exist. */
  async #getUnlabelled<T extends KubeObject>(resource: "services" | "endpoints", key: string): Promise<T | undefined> {
    const { namespace, name } = splitKey(key);
    try {
      return await this.#client.request<T>("GET", `/api/v1/namespaces/${namespace}/${resource}/${name}`);
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }

  #block(key: string, cluster: string, blocked: Blocked): void {
    const previous = this.#blocked.get(key);
    this.#blocked.set(key, { ...blocked, cluster });
    if (previous?.message === blocked.message) return;
    this.#log.warn({ key, cluster, reason: blocked.reason }, blocked.message);
    const { namespace, name } = splitKey(key);
    if (namespace && blocked.reason !== "namespace-missing" && blocked.reason !== "excluded-namespace") {
      void this.recordEvent({
        involved: { kind: "Service", apiVersion: "v1", namespace, name },
        type: "Warning",
        reason: blocked.reason === "user-owned" ? "MirrorNameConflict" : "MirrorOwnedByOtherCluster",
        message: blocked.message,
      });
    }
  }

  /** Performs one write; returns a reconcile result to stop at, or undefined to go on. */
  async #apply(
    key: string,
    action: WriteAction,
    desired: DesiredMirror | undefined,
  ): Promise<ReconcileResult | undefined> {
    if (action.verb !== "create" || action.kind !== "Namespace") return this.#write(key, action, desired);
    // One create per namespace: the other keys of a new namespace share its outcome
    // instead of racing it (each racer would cost a rejected POST). The entry stays
    // until the namespace watch reports the namespace, or the create failed.
    const pending = this.#namespaceCreates.get(action.name);
    if (pending) return pending;
    const created = this.#write(key, action, desired);
    this.#namespaceCreates.set(action.name, created);
    const outcome = await created;
    if (outcome && this.#namespaceCreates.get(action.name) === created) this.#namespaceCreates.delete(action.name);
    return outcome;
  }

  async #write(
    key: string,
    action: WriteAction,
    desired: DesiredMirror | undefined,
  ): Promise<ReconcileResult | undefined> {
    await this.#bucket.take();
    // Checked after the rate-limit wait, right before sending: the wait may cross the fence.
    if (!this.#writable()) return this.#fenced(`${action.verb} ${action.kind} ${key}`);
    this.#inFlight += 1;
    const startedAt = performance.now();
    const path =
      action.kind === "Namespace"
        ? "/api/v1/namespaces"
        : `/api/v1/namespaces/${action.namespace}/${action.kind === "Service" ? "services" : "endpoints"}`;
    try {
      switch (action.verb) {
        case "create": {
          const created = await this.#client.request<KubeObject>("POST", path, { body: action.body });
          if (action.kind !== "Namespace") this.#remember(action.kind, key, created);
          break;
        }
        case "update": {
          const updated = await this.#client.request<KubeObject>("PUT", `${path}/${action.name}`, {
            body: action.body,
          });
          this.#remember(action.kind, key, updated);
          break;
        }
        case "delete": {
          await this.#client.request("DELETE", `${path}/${action.name}`, {
            body: {
              apiVersion: "v1",
              kind: "DeleteOptions",
              ...(action.uid ? { preconditions: { uid: action.uid } } : {}),
            },
          });
          this.#written.set(`${action.kind}/${key}`, { object: undefined, resourceVersion: undefined, at: Date.now() });
          this.#log.info({ key, kind: action.kind, cluster: action.cluster }, `deleted mirror ${action.kind} ${key}`);
          break;
        }
      }
      this.#count(action.verb, action.kind, "ok");
      return undefined;
    } catch (error) {
      this.#count(action.verb, action.kind, error instanceof KubeApiError ? String(error.status) : "error");
      return this.#onWriteError(key, action, desired, error);
    } finally {
      this.#inFlight -= 1;
      this.#observeWriteDuration((performance.now() - startedAt) / 1000);
    }
  }

  async #onWriteError(
    key: string,
    action: WriteAction,
    desired: DesiredMirror | undefined,
    error: unknown,
  ): Promise<ReconcileResult | undefined> {
    if (!(error instanceof KubeApiError)) return { kind: "retry", error };
    if (action.verb === "create" && error.reason === "AlreadyExists") {
      if (action.kind === "Namespace") return undefined; // exists: our store lags, go on
      // Not in our label-selected store: a user's object, or ours not yet delivered.
      try {
        const existing = await this.#client.request<KubeObject>(
          "GET",
          `/api/v1/namespaces/${action.namespace}/${action.kind === "Service" ? "services" : "endpoints"}/${action.name}`,
        );
        const owner = ownerCluster(existing.metadata.labels);
        if (owner === undefined && desired) {
          this.#block(key, desired.cluster, {
            reason: "user-owned",
            message: `${action.kind} ${key} exists and is not a fleet-mirror mirror; it is left as is`,
          });
          return { kind: "requeue-after", ms: this.#options.blockedRecheckMs };
        }
        // Ours (leftover): adopt it, and reconcile again right away to update it.
        this.#remember(action.kind, key, existing);
        return { kind: "requeue-after", ms: 0 };
      } catch (getError) {
        return { kind: "retry", error: getError };
      }
    }
    if (action.verb === "delete" && error.status === 404) return undefined; // already gone
    return { kind: "retry", error };
  }

  #remember(kind: "Service" | "Endpoints", key: string, object: KubeObject): void {
    this.#written.set(`${kind}/${key}`, { object, resourceVersion: object.metadata.resourceVersion, at: Date.now() });
  }

  #observeWriteDuration(seconds: number): void {
    const h = this.#writeDuration;
    h.count += 1;
    h.sum += seconds;
    for (let i = 0; i < WRITE_DURATION_BUCKETS.length; i++) {
      if (seconds <= (WRITE_DURATION_BUCKETS[i] ?? 0)) h.buckets[i] = (h.buckets[i] ?? 0) + 1;
    }
  }

  #count(verb: string, kind: string, result: string): void {
    const k = `${verb}/${kind}/${result}`;
    this.#writes[k] = (this.#writes[k] ?? 0) + 1;
  }

  status(): WriterStatus {
    const clusters: Record<
      string,
      { mirrors: number; blocked: { key: string; reason: string; message: string }[]; complete: boolean }
    > = {};
    for (const [cluster, summary] of this.#desired.clusterSummary()) clusters[cluster] = { ...summary, blocked: [] };
    for (const [key, b] of this.#blocked) {
      clusters[b.cluster]?.blocked.push({ key, reason: b.reason, message: b.message });
    }
    return {
      ready: this.#ready,
      queueDepth: this.#queue.len,
      inFlight: this.#inFlight,
      writes: { ...this.#writes },
      retries: this.#retries,
      writeDuration: { ...this.#writeDuration, buckets: [...this.#writeDuration.buckets] },
      clusters,
      ...(this.#lastError ? { lastError: this.#lastError } : {}),
      ...(this.#client.apiWarnings.total > 0 ? { apiWarnings: this.#client.apiWarnings.total } : {}),
    };
  }

  #publishStatus(): void {
    if (!this.#stopped) this.#ports.supervisor({ type: "writer.status", status: this.status() });
  }
}
