/**
 * The remote-cluster actor: one per registered remote cluster. It owns that cluster's
 * list/watch of Services, computes the cluster's desired mirrors as a pure function of
 * what it observes (core/desired.ts), and asserts them to the local writer. It never
 * writes to any API.
 *
 * Runs in its own worker thread in production (entry.ts wires the ports), and
 * in-process in tests: everything it talks to comes in through `RemoteActorPorts`.
 *
 * Fault containment: every callback the actor registers runs under its guard, so an
 * exception in this actor's handling is reported through `ports.onFault` as this
 * actor's failure and never reaches the thread's event loop (where it would take down
 * every actor the thread hosts).
 *
 * Invariants:
 * - Nothing is sent to the writer before the first complete list; after every complete
 *   list (start, relist on 410, writer restart) the FULL desired set is sent as one
 *   `complete` batch, so the writer may garbage-collect only on complete knowledge.
 * - Between complete batches, changes are coalesced by mirror key and sent as deltas,
 *   at most `maxInFlight` un-acknowledged batches at a time (explicit flow control).
 * - While the remote API is unreachable nothing is sent: the writer keeps the mirrors.
 */
import { lookup } from "node:dns/promises";
import {
  type ClusterSettings,
  type DesiredMirror,
  desiredMirrorFor,
  exportedGateway,
  type GatewayView,
  ingressHostnames,
  type MirrorProblem,
  viewGateway,
} from "../../src/core/desired.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import { KubeClient } from "../../src/kube/client.ts";
import type { ConnectionSpec } from "../../src/kube/connection.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import type { Logger } from "../../src/log.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import {
  type ChannelPort,
  type ClusterStatus,
  type ClusterSyncState,
  decodeToActorFromWriter,
  type FromRemoteActor,
  type RemoteActorOptions,
  type ToWriterFromActor,
} from "../../src/protocol/messages.ts";

/** The actor's end of its desired channel to the local writer. */
export type DesiredPort = ChannelPort<ToWriterFromActor>;

export interface RemoteActorPorts {
  readonly supervisor: (message: FromRemoteActor) => void;
  /**
   * Called once when one of the actor's callbacks (watcher events, timers, port
   * messages, its own promises) throws; the actor then ignores every later callback.
   * Without it the exception propagates as before (it would end the thread).
   */
  readonly onFault?: (error: unknown) => void;
}

export interface RemoteActorInit {
  readonly cluster: ClusterSettings;
  readonly epoch: number;
  readonly connection: ConnectionSpec;
  readonly options: RemoteActorOptions;
}

export type Resolver = (hostname: string) => Promise<string[]>;

const defaultResolver: Resolver = async (hostname) => {
  const answers = await lookup(hostname, { all: true, verbatim: true });
  return [...new Set(answers.map((a) => a.address))].sort();
};

interface HostnameState {
  ips: readonly string[] | undefined;
  error?: string;
}

const STATUS_INTERVAL_MS = 1_000;

export class RemoteClusterActor {
  readonly #init: RemoteActorInit;
  readonly #ports: RemoteActorPorts;
  readonly #log: Logger;
  readonly #resolve: Resolver;
  readonly #client: KubeClient;
  readonly #watcher: Watcher<Service>;

  /** Exported services (keys) using each gateway key, in this cluster only. */
  readonly #servicesByGateway = new Map<string, Set<string>>();
  /** Remote service key → the local mirror key last sent for it. */
  readonly #mirrorKeyOf = new Map<string, string>();
  /** Local mirror key → JSON of the mirror last sent (what the writer holds). */
  readonly #sent = new Map<string, string>();
  readonly #problems = new Map<string, MirrorProblem>();
  readonly #hostnames = new Map<string, HostnameState>();

  /** Remote service keys whose mirror must be recomputed. */
  #dirty = new Set<string>();
  #needSnapshot = false;
  #writer: DesiredPort | undefined;
  #seq = 0;
  #inFlight = 0;
  #flushTimer: NodeJS.Timeout | undefined;
  #resolveTimer: NodeJS.Timeout | undefined;
  #statusTimer: NodeJS.Timeout | undefined;
  #statusDirty = true;
  #state: ClusterSyncState = "starting";
  #since = Date.now();
  #lastSyncedAt: number | undefined;
  #lastFailure: WatchFailure | undefined;
  readonly #failuresByReason: Record<string, number> = {};
  #stopped = false;
  #faulted = false;

  constructor(init: RemoteActorInit, ports: RemoteActorPorts, deps: { logger: Logger; resolve?: Resolver }) {
    this.#init = init;
    this.#ports = ports;
    this.#log = deps.logger;
    this.#resolve = deps.resolve ?? defaultResolver;
    this.#client = new KubeClient(init.connection, { userAgent: `fleet-mirror/remote-cluster ${init.cluster.name}` });
    this.#watcher = new Watcher<Service>({
      client: this.#client,
      path: "/api/v1/services",
      expectedKind: "Service",
      ...(init.options.watchInactivityTimeoutMs ? { inactivityTimeoutMs: init.options.watchInactivityTimeoutMs } : {}),
    });
    this.#watcher.on(
      "change",
      this.#guard((key: string, previous: Service | undefined, current: Service | undefined) =>
        this.#onChange(key, previous, current),
      ),
    );
    this.#watcher.on(
      "listed",
      this.#guard(() => this.#onListed()),
    );
    this.#watcher.on(
      "failure",
      this.#guard((failure: WatchFailure) => this.#onFailure(failure)),
    );
    // A re-watch after a failure needs no relist; the cluster is live again once accepted.
    this.#watcher.on(
      "watching",
      this.#guard(() => {
        if (this.#state === "stale") this.#setState("synced");
      }),
    );
  }

  get cluster(): string {
    return this.#init.cluster.name;
  }

  get epoch(): number {
    return this.#init.epoch;
  }

  /** Starts watching. Idempotent. */
  start(): void {
    this.#setState("syncing");
    this.#watcher.start();
    this.#statusTimer = setInterval(
      this.#guard(() => this.#publishStatus()),
      STATUS_INTERVAL_MS,
    );
    this.#resolveTimer = setInterval(
      this.#guard(() => this.#track(this.#resolveAll())),
      this.#init.options.resolvePeriodMs,
    );
  }

  /** Runs `fn` on a later turn of the event loop, under this actor's guard. */
  runLater(fn: () => void): void {
    setImmediate(this.#guard(fn));
  }

  /** Wraps one of this actor's callbacks: a throw becomes this actor's fault. */
  #guard<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void {
    return (...args: A) => {
      if (this.#faulted) return;
      try {
        fn(...args);
      } catch (error) {
        this.#fault(error);
      }
    };
  }

  /** A promise of this actor's own: a rejection becomes this actor's fault. */
  #track(promise: Promise<void>): void {
    promise.catch((error: unknown) => this.#fault(error));
  }

  #fault(error: unknown): void {
    const onFault = this.#ports.onFault;
    if (!onFault) throw error;
    if (this.#faulted) return;
    this.#faulted = true;
    onFault(error);
  }

  /**
   * Uses `port` for desired batches from now on. A new port means a new writer (or a
   * restarted one) that knows nothing: the full set is sent again once listed.
   */
  attachWriter(port: DesiredPort): void {
    this.#writer?.close();
    this.#writer = port;
    this.#inFlight = 0;
    port.on(
      "message",
      this.#guard((raw: unknown) => {
        let ack: ReturnType<typeof decodeToActorFromWriter>;
        try {
          ack = decodeToActorFromWriter(raw);
        } catch (error) {
          this.#log.error({ err: serializeError(error) }, "malformed message from the local writer; ignored");
          return;
        }
        if (ack.epoch === this.#init.epoch) {
          this.#inFlight = Math.max(0, this.#inFlight - 1);
          this.#scheduleFlush();
        }
      }),
    );
    if (this.#watcher.hasSynced) {
      this.#needSnapshot = true;
      this.#scheduleFlush();
    }
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#flushTimer);
    clearInterval(this.#resolveTimer);
    clearInterval(this.#statusTimer);
    await this.#watcher.stop();
    this.#client.close();
    this.#writer?.close();
  }

  // -------------------------------------------------------------------------------
  // Observations

  #onChange(key: string, previous: Service | undefined, current: Service | undefined): void {
    this.#dirty.add(key);
    // A gateway changed: every mirror of THIS cluster that uses it is recomputed.
    for (const user of this.#servicesByGateway.get(key) ?? []) this.#dirty.add(user);
    const before = previous ? exportedGateway(previous) : undefined;
    const after = current ? exportedGateway(current) : undefined;
    const beforeKey = before ? objectKey(before) : undefined;
    const afterKey = after ? objectKey(after) : undefined;
    if (beforeKey !== afterKey) {
      if (beforeKey) {
        const users = this.#servicesByGateway.get(beforeKey);
        users?.delete(key);
        if (users?.size === 0) this.#servicesByGateway.delete(beforeKey);
      }
      if (afterKey) {
        const users = this.#servicesByGateway.get(afterKey) ?? new Set<string>();
        this.#servicesByGateway.set(afterKey, users);
        users.add(key);
      }
    }
    if (current && this.#servicesByGateway.has(key)) this.#resolveHostnames(current);
    // A Service that starts using a gateway whose hostnames nobody used before: resolve
    // them now, not at the next periodic round (its Endpoints would stay empty meanwhile).
    if (afterKey && afterKey !== beforeKey) {
      const gateway = this.#watcher.get(afterKey);
      if (gateway) this.#resolveHostnames(gateway);
    }
    if (this.#state === "stale") this.#setState("synced");
    this.#scheduleFlush();
  }

  #onListed(): void {
    this.#lastSyncedAt = Date.now();
    this.#needSnapshot = true;
    this.#setState("synced");
    for (const gatewayKey of this.#servicesByGateway.keys()) {
      const gateway = this.#watcher.get(gatewayKey);
      if (gateway) this.#resolveHostnames(gateway);
    }
    this.#scheduleFlush();
  }

  #onFailure(failure: WatchFailure): void {
    this.#lastFailure = failure;
    this.#failuresByReason[failure.reason] = (this.#failuresByReason[failure.reason] ?? 0) + 1;
    // Before the first list the cluster is still syncing; afterwards the data we hold
    // may be outdated: stale since the first failure, until the watch delivers again.
    // A skipped object of the wrong kind does not interrupt the watch: still live.
    if (this.#state === "synced" && failure.reason !== "wrong-kind") this.#setState("stale");
    this.#statusDirty = true;
    this.#log.warn(
      { failure },
      `remote API ${failure.phase} failed: ${failure.message}; retrying in ${failure.retryInMs} ms`,
    );
  }

  // -------------------------------------------------------------------------------
  // Gateway hostnames (SPEC §2: resolved to IPs, again every resolvePeriodMs)

  #resolveHostnames(gateway: Service): void {
    for (const hostname of ingressHostnames(gateway)) {
      if (!this.#hostnames.has(hostname)) {
        this.#hostnames.set(hostname, { ips: undefined });
        this.#track(this.#resolveOne(hostname));
      }
    }
  }

  async #resolveAll(): Promise<void> {
    const inUse = new Set<string>();
    for (const gatewayKey of this.#servicesByGateway.keys()) {
      const gateway = this.#watcher.get(gatewayKey);
      if (gateway) for (const h of ingressHostnames(gateway)) inUse.add(h);
    }
    for (const hostname of this.#hostnames.keys()) if (!inUse.has(hostname)) this.#hostnames.delete(hostname);
    await Promise.all([...inUse].map((h) => this.#resolveOne(h)));
  }

  async #resolveOne(hostname: string): Promise<void> {
    let next: HostnameState;
    try {
      next = { ips: await this.#resolve(hostname) };
    } catch (error) {
      next = { ips: undefined, error: (error as Error).message };
      this.#log.warn({ hostname, err: serializeError(error) }, `gateway ingress hostname ${hostname} does not resolve`);
    }
    if (this.#stopped) return;
    const previous = this.#hostnames.get(hostname);
    this.#hostnames.set(hostname, next);
    if (JSON.stringify(previous?.ips) === JSON.stringify(next.ips)) return;
    for (const [gatewayKey, users] of this.#servicesByGateway) {
      const gateway = this.#watcher.get(gatewayKey);
      if (gateway && ingressHostnames(gateway).includes(hostname)) for (const u of users) this.#dirty.add(u);
    }
    this.#scheduleFlush();
  }

  #lookupHostname = (hostname: string): readonly string[] | undefined => this.#hostnames.get(hostname)?.ips;

  // -------------------------------------------------------------------------------
  // Desired state → writer

  #gatewayView(service: Service, cache: Map<string, GatewayView>): GatewayView {
    const gw = exportedGateway(service);
    const key = gw ? objectKey(gw) : "";
    let view = cache.get(key);
    if (!view) {
      view = viewGateway(this.#watcher.get(key), this.#lookupHostname);
      cache.set(key, view);
    }
    return view;
  }

  /** Recomputes one remote service's mirror; returns the mirror (or undefined) and records problems. */
  #compute(key: string, cache: Map<string, GatewayView>): DesiredMirror | undefined {
    const service = this.#watcher.get(key);
    const outcome = service
      ? desiredMirrorFor(this.#init.cluster, service, this.#gatewayView(service, cache))
      : ({ kind: "not-exported" } as const);
    this.#setProblem(key, outcome.kind === "problem" ? outcome.problem : undefined);
    return outcome.kind === "mirror" ? outcome.mirror : undefined;
  }

  /** Records (or clears) the problem of one remote Service; a change is logged and published. */
  #setProblem(key: string, problem: MirrorProblem | undefined): void {
    const previous = this.#problems.get(key);
    if (previous?.message === problem?.message && previous?.reason === problem?.reason) return;
    this.#statusDirty = true;
    if (problem) {
      this.#problems.set(key, problem);
      this.#log.warn(
        { remote: key, reason: problem.reason },
        `exported Service ${key} is not mirrored: ${problem.message}`,
      );
    } else {
      this.#problems.delete(key);
      if (previous) this.#log.info({ remote: key }, `exported Service ${key} no longer has a mirror problem`);
    }
  }

  #scheduleFlush(): void {
    if (this.#stopped || this.#flushTimer) return;
    this.#flushTimer = setTimeout(
      this.#guard(() => {
        this.#flushTimer = undefined;
        this.#flush();
      }),
      this.#init.options.batchDelayMs,
    );
  }

  #flush(): void {
    if (!this.#writer || !this.#watcher.hasSynced) return;
    if (!this.#needSnapshot && this.#dirty.size === 0) return;
    if (this.#inFlight >= this.#init.options.maxInFlight) return; // the ack reschedules
    const cache = new Map<string, GatewayView>();
    const upserts: DesiredMirror[] = [];
    const deletes: string[] = [];
    const complete = this.#needSnapshot;
    if (complete) {
      this.#needSnapshot = false;
      this.#dirty.clear();
      this.#sent.clear();
      this.#mirrorKeyOf.clear();
      for (const key of [...this.#problems.keys()]) if (!this.#watcher.get(key)) this.#setProblem(key, undefined);
      for (const service of this.#watcher.values()) {
        const key = objectKey(service.metadata);
        const mirror = this.#compute(key, cache);
        if (!mirror) continue;
        const mirrorKey = objectKey(mirror);
        this.#mirrorKeyOf.set(key, mirrorKey);
        this.#sent.set(mirrorKey, JSON.stringify(mirror));
        upserts.push(mirror);
      }
    } else {
      const dirty = this.#dirty;
      this.#dirty = new Set();
      for (const key of dirty) {
        const mirror = this.#compute(key, cache);
        const previousKey = this.#mirrorKeyOf.get(key);
        const mirrorKey = mirror ? objectKey(mirror) : undefined;
        if (previousKey && previousKey !== mirrorKey) {
          this.#sent.delete(previousKey);
          this.#mirrorKeyOf.delete(key);
          deletes.push(previousKey);
        }
        if (mirror && mirrorKey) {
          const json = JSON.stringify(mirror);
          if (this.#sent.get(mirrorKey) === json) continue;
          this.#sent.set(mirrorKey, json);
          this.#mirrorKeyOf.set(key, mirrorKey);
          upserts.push(mirror);
        }
      }
      if (upserts.length === 0 && deletes.length === 0) return;
    }
    this.#seq += 1;
    this.#inFlight += 1;
    this.#writer.postMessage({
      type: "desired.batch",
      cluster: this.#init.cluster.name,
      epoch: this.#init.epoch,
      seq: this.#seq,
      complete,
      upserts,
      deletes,
    });
    this.#statusDirty = true;
    if (this.#dirty.size > 0 || this.#needSnapshot) this.#scheduleFlush();
  }

  // -------------------------------------------------------------------------------
  // Status

  #setState(state: ClusterSyncState): void {
    if (this.#state !== state) {
      this.#state = state;
      this.#since = Date.now();
      this.#log.info({ state }, `cluster ${this.#init.cluster.name} is ${state}`);
    }
    this.#statusDirty = true;
    this.#publishStatus();
  }

  status(): ClusterStatus {
    const gateways = [...this.#servicesByGateway.keys()].sort().map((key) => {
      const view = viewGateway(this.#watcher.get(key), this.#lookupHostname);
      return {
        key,
        usable: view.addresses.length > 0 && view.incomingPort !== undefined,
        ...(view.unusable ? { reason: view.unusable } : {}),
      };
    });
    let exported = 0;
    for (const users of this.#servicesByGateway.values()) exported += users.size;
    return {
      cluster: this.#init.cluster.name,
      epoch: this.#init.epoch,
      state: this.#state,
      since: this.#since,
      ...(this.#lastSyncedAt !== undefined ? { lastSyncedAt: this.#lastSyncedAt } : {}),
      exportedServices: exported,
      mirrors: this.#sent.size,
      problems: [...this.#problems.values()],
      ...(this.#lastFailure ? { lastFailure: { ...this.#lastFailure } } : {}),
      gateways,
      watch: { ...this.#watcher.stats },
      failuresByReason: { ...this.#failuresByReason },
    };
  }

  #publishStatus(): void {
    if (!this.#statusDirty || this.#stopped) return;
    this.#statusDirty = false;
    this.#ports.supervisor({ type: "actor.status", status: this.status() });
  }
}
