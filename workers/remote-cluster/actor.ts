/**
 * The remote-cluster actor: one per registered remote cluster. It owns that cluster's
 * list/watch of Services, computes the cluster's desired mirrors as a pure function of
 * what it observes (src/core/cluster-desired.ts), and asserts them to the local writer. It never
 * writes to any API.
 *
 * Runs in a worker thread (entry.ts wires the ports), or in-process in tests: it talks
 * only through `RemoteActorPorts` and the desired port given to `attachWriter`.
 *
 * Parts: gateways.ts (the cluster's gateways kept current: gateway-index.ts, which
 * Services and ServiceExports use which gateway; hostnames.ts + resolver.ts, gateway
 * hostnames off libuv's pool; gateway-health.ts + gateway-prober.ts + http-probe.ts,
 * gateway health, SPEC §10), headless-watches.ts (the
 * remote slices of exported headless Services, SPEC §12), an OptionalWatch
 * (src/kube/optional-watch.ts: the MCS API's ServiceExports, when served, SPEC §12),
 * desired-sender.ts + credits.ts (batches and flow control to the writer), load-report.ts
 * (large API answers held, reported so a shared thread's heap exhaustion is charged here),
 * status-state.ts + status-report.ts (the sync state, when a status is due, the status);
 * this file wires them to the watchers.
 *
 * Fault containment: every callback the actor registers runs under its guard: a throw
 * is this actor's failure (`ports.onFault`), never its thread's event loop's (which
 * would take down every actor the thread hosts).
 *
 * Invariants: see desired-sender.ts for what is sent when; while the remote API is
 * unreachable nothing is sent: the writer keeps the mirrors.
 */
import type { LocalRanges } from "../../src/core/address-policy.ts";
import { systemClock } from "../../src/core/clock.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import type { ClusterSettings } from "../../src/core/desired.ts";
import { SERVICE_EXPORTS, type ServiceExport } from "../../src/core/mcs.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { OptionalWatch } from "../../src/kube/optional-watch.ts";
import { LAST_APPLIED_CONFIGURATION } from "../../src/kube/watch-store.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import type {
  ClusterStatus,
  ClusterSyncState,
  FromRemoteActor,
  RemoteActorOptions,
} from "../../src/protocol/messages.ts";
import { type DesiredPort, DesiredSender, type FlowState } from "./desired-sender.ts";
import { ClusterGateways } from "./gateways.ts";
import { HeadlessWatches } from "./headless-watches.ts";
import { MAX_STALE_PERIODS } from "./hostnames.ts";
import { httpProbe, type Probe } from "./http-probe.ts";
import { ClusterServices, linkProbeSpecOf, memberSelectorOf } from "./link-cluster.ts";
import { LoadReporter } from "./load-report.ts";
import { createResolver, type Resolver } from "./resolver.ts";
import { clusterStatus } from "./status-report.ts";
import { StatusThrottle, SyncTracker } from "./status-state.ts";

export type { DesiredPort, FlowState } from "./desired-sender.ts";
export type { Probe } from "./http-probe.ts";
export type { Resolver } from "./resolver.ts";

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
  /** The local cluster's ranges as the supervisor knew them (SPEC §10); `setLocalRanges` brings newer ones. */
  readonly localRanges?: LocalRanges;
}

const STATUS_INTERVAL_MS = 1_000;
/**
 * Probe counters alone (no liveness change) are published at most this often: a probed
 * gateway finishes a probe every few seconds, and a status per second per cluster for
 * counters only would cost the main thread a decode per cluster per second. A scrape
 * sees them at most this late; a liveness change is published at the next interval.
 */
const PROBE_COUNTERS_INTERVAL_MS = 5_000;

export class RemoteClusterActor {
  /**
   * The init less its connection: the client built from it holds what it needs (the
   * bearer token, the CA, the client key); a second reference here would keep the token
   * and the PEMs alive for nothing, ≈ 1.3 KB per cluster on a packed thread.
   */
  readonly #init: Omit<RemoteActorInit, "connection">;
  readonly #ports: RemoteActorPorts;
  readonly #log: LineLogger;
  readonly #client: KubeClient;
  readonly #watcher: Watcher<Service>;
  readonly #services: ClusterServices;
  readonly #gateways: ClusterGateways;
  readonly #sender: DesiredSender;
  readonly #headless: HeadlessWatches;
  readonly #exports: OptionalWatch<ServiceExport>;

  #resolveTimer: NodeJS.Timeout | undefined;
  #statusTimer: NodeJS.Timeout | undefined;
  readonly #publish = new StatusThrottle(PROBE_COUNTERS_INTERVAL_MS);
  readonly #sync = new SyncTracker(Date.now(), (reachable, now) => this.#gateways.reachability(reachable, now));
  #stopped = false;
  /** The Services watch starts once the ServiceExport discovery has answered (see start). */
  #servicesStarted = false;
  #faulted = false;

  /** `deps.resolve` replaces the actor's own DNS resolver, `deps.probe` its HTTP gateway probe (tests). */
  constructor(
    init: RemoteActorInit,
    ports: RemoteActorPorts,
    deps: { logger: LineLogger; resolve?: Resolver; probe?: Probe },
  ) {
    this.#init = { cluster: init.cluster, epoch: init.epoch, options: init.options };
    this.#ports = ports;
    this.#log = deps.logger;
    const settings = init.cluster;
    const selector = memberSelectorOf(settings, init.options.memberSelector);
    const { name: cluster } = init.cluster;
    const load = new LoadReporter((bytes) =>
      ports.supervisor({ type: "actor.load", cluster, epoch: init.epoch, bytes }),
    );
    this.#client = new KubeClient(init.connection, {
      userAgent: `fleet-mirror/remote-cluster ${init.cluster.name}`,
      logger: deps.logger,
      maxResponseBytes: init.options.maxResponseBytes,
      onHeldBytes: (bytes) => load.held(bytes),
    });
    this.#watcher = new Watcher<Service>({
      client: this.#client,
      path: "/api/v1/services",
      expectedKind: "Service",
      // A JSON copy of the whole Service, often its largest field; this store is never written back.
      dropAnnotations: [LAST_APPLIED_CONFIGURATION],
      ...(init.options.watchInactivityTimeoutMs ? { inactivityTimeoutMs: init.options.watchInactivityTimeoutMs } : {}),
    });
    const services = new ClusterServices(settings, this.#watcher);
    this.#services = services;
    this.#gateways = new ClusterGateways({
      settings,
      memberSelector: selector,
      services,
      probeSpecOf: linkProbeSpecOf(settings),
      resolve:
        deps.resolve ??
        createResolver(init.options.gatewayDnsServers ? { servers: init.options.gatewayDnsServers } : {}),
      hostnameMaxStaleMs: MAX_STALE_PERIODS * init.options.resolvePeriodMs,
      prober: {
        clock: systemClock,
        random: Math.random,
        probe: deps.probe ?? httpProbe,
        userAgent: `fleet-mirror/gateway-probe ${init.cluster.name}`,
        probed: () => this.#publish.markProbed(),
      },
      ...(init.options.gatewayPolicy ? { gatewayPolicy: init.options.gatewayPolicy } : {}),
      ...(init.localRanges ? { localRanges: init.localRanges } : {}),
      log: deps.logger,
      guard: (fn) => this.#guard(fn),
      track: (promise) => this.#track(promise),
      markDirty: (key) => this.#sender.markDirty(key),
      flush: () => this.#sender.scheduleFlush(),
      statusChanged: () => this.#publish.markDirty(),
    });
    this.#headless = new HeadlessWatches({
      client: this.#client,
      log: deps.logger,
      guard: (fn) => this.#guard(fn),
      track: (promise) => this.#track(promise),
      hostsChanged: (key) => this.#sender.changed(key),
      statusChanged: () => this.#publish.markDirty(),
      options: init.options,
    });
    this.#exports = new OptionalWatch<ServiceExport>({
      client: this.#client,
      resource: SERVICE_EXPORTS,
      ...(init.options.mcsRecheckMs ? { recheckMs: init.options.mcsRecheckMs } : {}),
      ...(init.options.watchInactivityTimeoutMs ? { inactivityTimeoutMs: init.options.watchInactivityTimeoutMs } : {}),
      log: deps.logger,
      guard: (fn) => this.#guard(fn),
      track: (promise) => this.#track(promise),
      changed: (key) => this.#onExportChange(key),
      availabilityChanged: (now, before) => {
        if (!this.#servicesStarted) {
          this.#servicesStarted = true;
          this.#watcher.start();
        }
        // The first answer lets the complete set go (exports known or not); exports
        // known later make the complete set that said "unknown" out of date.
        const answered = now.settled && !before.settled;
        if ((answered || (now.known && !before.known)) && this.#watcher.hasSynced) this.#sender.requestSnapshot();
        this.#publish.markDirty();
      },
    });
    this.#sender = new DesiredSender({
      cluster: init.cluster,
      epoch: init.epoch,
      batchDelayMs: init.options.batchDelayMs,
      maxInFlight: init.options.maxInFlight,
      services,
      serviceExports: this.#exports,
      memberSelector: selector,
      lookupHostname: this.#gateways.lookupHostname,
      deadAddresses: (gatewayKey) => this.#gateways.health.deadAddresses(gatewayKey),
      partitioned: () => this.#gateways.partitioned,
      addressPolicy: () => this.#gateways.policy,
      headlessHosts: (key) => this.#headless.hosts(key),
      hostClaimant: (namespace, hostname) => this.#headless.hostClaimant(namespace, hostname),
      headlessPending: () => this.#headless.pending,
      log: deps.logger,
      guard: (fn) => this.#guard(fn),
      statusChanged: () => this.#publish.markDirty(),
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
        if (this.#sync.state === "stale") this.#setState("synced");
      }),
    );
  }

  get cluster(): string {
    return this.#init.cluster.name;
  }

  get epoch(): number {
    return this.#init.epoch;
  }

  /** The desired channel's flow control (credits, pending changes), for tests and diagnostics. */
  get flowState(): FlowState {
    return this.#sender.flowState;
  }

  /** Starts watching. Idempotent. */
  start(): void {
    this.#setState("syncing");
    // The ServiceExport discovery first; the Services list when it has answered, on the
    // same keep-alive connection (one per cluster, then held by the watch).
    this.#exports.start();
    this.#statusTimer ??= setInterval(
      this.#guard(() => this.#publishStatus()),
      STATUS_INTERVAL_MS,
    );
    this.#resolveTimer ??= setInterval(
      this.#guard(() => this.#track(this.#gateways.refreshHostnames())),
      this.#init.options.resolvePeriodMs,
    );
  }

  /** The local cluster's ranges changed (SPEC §10): newer ones (by `seq`) re-check every gateway. */
  setLocalRanges(ranges: LocalRanges): void {
    if (!this.#stopped) this.#guard(() => this.#gateways.setLocalRanges(ranges))();
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
    this.#sender.attach(port);
  }

  /** Ends the watch, every timer and the desired port; nothing is sent or published afterwards. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#sender.stop();
    this.#gateways.stop();
    this.#headless.stop();
    clearInterval(this.#resolveTimer);
    clearInterval(this.#statusTimer);
    await Promise.all([this.#watcher.stop(), this.#exports.stop()]);
    this.#client.close();
  }

  // -------------------------------------------------------------------------------
  // Observations

  #onChange(key: string, previous: Service | undefined, current: Service | undefined): void {
    this.#sender.markDirty(key);
    // A gateway changed: every mirror of THIS cluster that uses it is recomputed.
    this.#gateways.serviceChanged(key, previous, current);
    this.#headless.syncService(key, current, this.#init.cluster);
    if (this.#sync.state === "stale") this.#setState("synced");
    if (this.#exports.get(key)) this.#onExportChange(key); // its ServiceExport's export follows it
    this.#sender.scheduleFlush();
  }

  /** ServiceExport `key` (or its Service) changed: it uses the default gateway while both exist (SPEC §12). */
  #onExportChange(key: string): void {
    this.#sender.markDirty(key);
    const gateway = objectKey(this.#init.cluster.defaultGateway);
    const uses = this.#exports.get(key) && this.#watcher.get(key) ? [gateway] : [];
    this.#gateways.exportUsesChanged(key, uses, gateway);
    this.#sender.scheduleFlush();
  }

  #onListed(): void {
    this.#sync.listed(Date.now());
    this.#setState("synced");
    this.#gateways.listed();
    this.#sender.requestSnapshot();
  }

  #onFailure(failure: WatchFailure): void {
    this.#sync.failed(failure);
    // Before the first list the cluster is still syncing; afterwards the data we hold
    // may be outdated: stale since the first failure, until the watch delivers again.
    // A skipped object of the wrong kind does not interrupt the watch: still live.
    if (this.#sync.state === "synced" && failure.reason !== "wrong-kind") this.#setState("stale");
    this.#publish.markDirty();
    this.#log.warn(
      { failure },
      `remote API ${failure.phase} failed: ${failure.message}; retrying in ${failure.retryInMs} ms`,
    );
  }

  // -------------------------------------------------------------------------------
  // Status

  #setState(state: ClusterSyncState): void {
    if (this.#sync.enter(state, Date.now()))
      this.#log.info({ state }, `cluster ${this.#init.cluster.name} is ${state}`);
    this.#publish.markDirty();
    this.#publishStatus();
  }

  status(): ClusterStatus {
    return clusterStatus({
      cluster: this.#init.cluster.name,
      epoch: this.#init.epoch,
      sync: this.#sync,
      gateways: this.#gateways.index,
      services: this.#services,
      health: this.#gateways.health,
      sender: this.#sender,
      exports: this.#exports,
      headless: this.#headless.status(),
      apiWarnings: this.#client.apiWarnings.total,
    });
  }

  #publishStatus(): void {
    if (this.#stopped) return;
    // A warning counted since the last status is news too.
    if (!this.#publish.take(Date.now(), this.#client.apiWarnings.total)) return;
    this.#ports.supervisor({ type: "actor.status", status: this.status() });
  }
}
