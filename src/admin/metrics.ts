/**
 * Prometheus metrics of `fleet-mirror run` (docs/DESIGN.md "Admin server and metrics").
 *
 * Everything but the process metrics is computed at scrape time from snapshots
 * (`collect()` callbacks): the state lives in the supervisor and in worker threads, and
 * copying it into metric objects on every change would cost more than a scrape. Counters
 * come from `Supervisor.counters()`, which sums every incarnation of an actor or the
 * writer, so they never go down. Per-cluster series are rebuilt on every scrape from
 * the clusters registered at that moment: a cluster that is gone has no series.
 * Own registry (never prom-client's global one), so tests and embedders can have several.
 */
import { Counter, collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { Leadership } from "../leader/leadership.ts";
import { droppedLogLines } from "../log.ts";
import type { ClusterRow, FleetCounters, FleetStatus, ThreadHeap } from "../status/fleet-view.ts";
import type { PlacementStatus } from "../status/placement-status.ts";
import {
  clustersByState,
  countConflicts,
  gatewayAddressValues,
  plannedWriteSeries,
  SnapshotHistogram,
  writeLabels,
} from "./snapshot-series.ts";

/** prom-client default metrics left out: `sum(nodejs_active_handles)` and so on give the same. */
const GAUGES_NAMED_TOTAL = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/** Heap statistics fetched for one scrape are reused by the other heap gauge within this time. */
const HEAP_REUSE_MS = 500;

/** What the metrics read at scrape time; undefined fields: no controller runs (standby). */
export interface MetricsSource {
  fleet(): FleetStatus | undefined;
  counters(): FleetCounters | undefined;
  leadership(): Leadership;
  threadHeaps(): Promise<readonly ThreadHeap[]>;
}

/** Builds the registry; every value is read from `source` when scraped. */
export function createMetrics(source: MetricsSource): Registry {
  const registry = new Registry();
  const registers = [registry];
  // process_resident_memory_bytes, CPU, event loop lag, GC, Node version.
  collectDefaultMetrics({ register: registry });
  // prom-client's totals of active handles, requests and resources are gauges named
  // *_total, which `promtool check metrics` rejects (only counters end in _total); each
  // is the sum over its by-type gauge (nodejs_active_handles, ...), which stays.
  for (const name of GAUGES_NAMED_TOTAL) registry.removeSingleMetric(name);

  /** An unlabelled metric read from a snapshot. */
  const scalar = (kind: "gauge" | "counter", name: string, help: string, value: () => number): void => {
    if (kind === "gauge")
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(value());
        },
      });
    else
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset(); // a total that never decreases (Supervisor.counters), re-read
          this.inc(value());
        },
      });
  };
  /** A labelled metric whose series are rebuilt on every scrape: series of what is gone vanish. */
  const labelled = <T extends string>(
    kind: "gauge" | "counter",
    name: string,
    help: string,
    labelNames: readonly T[],
    fill: (set: (labels: Record<T, string>, value: number) => void) => void,
  ): void => {
    if (kind === "gauge")
      new Gauge({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          fill((l, v) => this.set(l, v));
        },
      });
    else
      new Counter({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          fill((l, v) => this.inc(l, v));
        },
      });
  };
  /** One series per registered cluster (rows of duplicate/invalid Secrets have no actor). */
  const clusterGauge = (name: string, help: string, value: (row: ClusterRow) => number | undefined): void =>
    labelled("gauge", name, help, ["cluster"], (set) => {
      for (const row of source.fleet()?.clusters ?? []) {
        const v = row.state === "duplicate" || row.state === "invalid" ? undefined : value(row);
        if (v !== undefined) set({ cluster: row.cluster }, v);
      }
    });
  type Counters = NonNullable<ReturnType<FleetCounters["clusters"]["get"]>>;
  const clusterCounter = (name: string, help: string, value: (c: Counters) => number): void =>
    labelled("counter", name, help, ["cluster"], (set) => {
      for (const [cluster, c] of source.counters()?.clusters ?? []) set({ cluster }, value(c));
    });

  scalar(
    "gauge",
    "fleet_mirror_leader",
    "1 while this replica runs the controller (holds the Lease, or leader election is off), else 0.",
    () => (source.leadership().leading ? 1 : 0),
  );
  // Sharding across replicas: without --shards everything is shard 0, held by the leader.
  scalar(
    "gauge",
    "fleet_mirror_shards_held",
    "Shards this replica holds (not sharded: 1 while it runs the controller, the one shard).",
    () => {
      const leadership = source.leadership();
      return leadership.sharding ? leadership.sharding.held.length : leadership.leading ? 1 : 0;
    },
  );
  labelled(
    "gauge",
    "fleet_mirror_shard_holder",
    "1 per shard and its holder as this replica observes the shard Leases (holder empty: free); sharded only.",
    ["shard", "holder"],
    (set) => {
      for (const [shard, holder] of (source.leadership().sharding?.holders ?? []).entries())
        set({ shard: String(shard), holder }, 1);
    },
  );
  labelled(
    "gauge",
    "fleet_mirror_clusters",
    "Registered, duplicate and invalid clusters by state.",
    ["state"],
    (set) => {
      const fleet = source.fleet();
      if (fleet) for (const [state, n] of clustersByState(fleet)) set({ state }, n);
    },
  );
  clusterGauge(
    "fleet_mirror_cluster_mirrored_services",
    "Mirrors the local writer holds for the cluster.",
    (row) => row.mirrors,
  );
  clusterGauge(
    "fleet_mirror_cluster_exported_services",
    "Remote Services of the cluster exported through a gateway.",
    (row) => row.exportedServices,
  );
  labelled(
    "gauge",
    "fleet_mirror_cluster_exports",
    "Remote Services of the cluster by export mode (SPEC §12): annotation, label, label-declined (an explicit negative label value, not exported) and mcs (ServiceExports that export).",
    ["cluster", "mode"],
    (set) => {
      for (const row of source.fleet()?.clusters ?? []) {
        if (!row.exports) continue;
        set({ cluster: row.cluster, mode: "annotation" }, row.exports.annotation);
        set({ cluster: row.cluster, mode: "label" }, row.exports.label);
        set({ cluster: row.cluster, mode: "label-declined" }, row.exports.declined);
        if (row.exports.mcs !== undefined) set({ cluster: row.cluster, mode: "mcs" }, row.exports.mcs);
      }
    },
  );
  labelled(
    "gauge",
    "fleet_mirror_cluster_export_mode",
    'Whether an optional export mode is active in the cluster (SPEC §12; cluster "": the local cluster, where ServiceImports are written): 1 for its current state (mode mcs: active, watching, not-installed, forbidden, unavailable, unknown).',
    ["cluster", "mode", "state"],
    (set) => {
      for (const row of source.fleet()?.clusters ?? [])
        if (row.mcs) set({ cluster: row.cluster, mode: "mcs", state: row.mcs.state }, 1);
      // The local cluster (cluster ""): whether ServiceImports can be written there.
      const local = source.fleet()?.writer?.mcs;
      if (local) set({ cluster: "", mode: "mcs", state: local.state }, 1);
    },
  );
  clusterGauge(
    "fleet_mirror_cluster_last_sync_timestamp_seconds",
    "Unix time of the cluster's last complete, successful list (absent before the first).",
    (row) => (row.lastSyncedAt === undefined ? undefined : row.lastSyncedAt / 1000),
  );
  clusterCounter(
    "fleet_mirror_cluster_watch_reconnects_total",
    "Watch requests on the cluster's Services started after the first one of each actor incarnation.",
    (c) => c.watchReconnects,
  );
  clusterCounter("fleet_mirror_cluster_lists_total", "Complete lists of the cluster's Services.", (c) => c.lists);
  clusterCounter(
    "fleet_mirror_cluster_relists_on_gone_total",
    "Relists of the cluster's Services caused by 410 Gone.",
    (c) => c.relistsOnGone,
  );
  clusterCounter(
    "fleet_mirror_cluster_actor_restarts_total",
    "Restarts of the cluster's actor after a crash.",
    (c) => c.restarts,
  );
  labelled(
    "counter",
    "fleet_mirror_cluster_watch_errors_total",
    "List/watch failures on the cluster's API server, by reason.",
    ["cluster", "reason"],
    (set) => {
      for (const [cluster, c] of source.counters()?.clusters ?? [])
        for (const [reason, n] of Object.entries(c.failuresByReason)) set({ cluster, reason }, n);
    },
  );

  labelled(
    "gauge",
    "fleet_mirror_gateway_addresses",
    "Addresses of each probed gateway (SPEC §10) by liveness: alive, or dead after 3 failed probes in a row.",
    ["cluster", "gateway", "state"],
    (set) => {
      for (const { labels, value } of gatewayAddressValues(source.fleet())) set(labels, value);
    },
  );
  labelled(
    "gauge",
    "fleet_mirror_cluster_reads_denied",
    "Optional remote reads the cluster's RBAC denies (SPEC §12: discovery.k8s.io/endpointslices for headless Services); 0 series: none.",
    ["cluster", "resource"],
    (set) => {
      for (const row of source.fleet()?.clusters ?? [])
        for (const d of row.deniedReads ?? []) set({ cluster: row.cluster, resource: d.resource }, 1);
    },
  );
  labelled(
    "gauge",
    "fleet_mirror_gateway_probe_config_invalid",
    "Bad probe annotations or mc-probe port of each gateway in use (SPEC §10), each replaced by its default; 0 series: none.",
    ["cluster", "gateway"],
    (set) => {
      for (const row of source.fleet()?.clusters ?? [])
        for (const g of row.gateways)
          if (g.probeProblems?.length) set({ cluster: row.cluster, gateway: g.key }, g.probeProblems.length);
    },
  );
  labelled(
    "counter",
    "fleet_mirror_gateway_probe_failures_total",
    "Failed gateway probes by reason: timeout, refused, status (an answer outside 2xx), error.",
    ["cluster", "gateway", "reason"],
    (set) => {
      for (const [cluster, c] of source.counters()?.clusters ?? [])
        for (const [gateway, probes] of Object.entries(c.gatewayProbes))
          for (const [reason, n] of Object.entries(probes.failures)) set({ cluster, gateway, reason }, n);
    },
  );
  new SnapshotHistogram(
    "fleet_mirror_gateway_probe_duration_seconds",
    "Latency of gateway probes that got an HTTP answer (timeouts and refused connections are failures only).",
    registry,
    () =>
      [...(source.counters()?.clusters ?? [])].flatMap(([cluster, c]) =>
        Object.entries(c.gatewayProbes).map(([gateway, probes]) => ({
          labels: { cluster, gateway },
          histogram: probes.latency,
        })),
      ),
    ["cluster", "gateway"],
  );

  labelled(
    "counter",
    "fleet_mirror_api_warnings_total",
    "Warning headers received from API servers: the local one (api=local) and each cluster's remote one (api=remote).",
    ["api", "cluster"],
    (set) => {
      const counters = source.counters();
      if (!counters) return;
      set({ api: "local", cluster: "" }, counters.writer.apiWarnings);
      for (const [cluster, c] of counters.clusters) set({ api: "remote", cluster }, c.apiWarnings);
    },
  );

  scalar("gauge", "fleet_mirror_writer_ready", "1 once the local writer listed the local mirrors, else 0.", () =>
    source.fleet()?.writer?.ready === true ? 1 : 0,
  );
  scalar(
    "gauge",
    "fleet_mirror_writer_queue_depth",
    "Mirror keys waiting in the local writer's work queue.",
    () => source.fleet()?.writer?.queueDepth ?? 0,
  );
  scalar(
    "gauge",
    "fleet_mirror_writer_in_flight_writes",
    "Write requests to the local API server in progress.",
    () => source.fleet()?.writer?.inFlight ?? 0,
  );
  scalar(
    "gauge",
    "fleet_mirror_conflicts",
    "Mirrors (and fleet-wide members) not written because a user's object or another cluster holds the name, or their ports conflict.",
    () => countConflicts(source.fleet()),
  );
  labelled(
    "gauge",
    "fleet_mirror_dry_run_planned_writes",
    "run --dry-run: writes to the local API server the controller would make now and does not, by verb and resource.",
    ["verb", "resource"],
    (set) => {
      for (const { labels, value } of plannedWriteSeries(source.fleet())) set(labels, value);
    },
  );
  labelled(
    "counter",
    "fleet_mirror_writes_total",
    "Write requests to the local API server by verb, resource and result (ok, HTTP status, or error).",
    ["verb", "resource", "result"],
    (set) => {
      for (const [key, n] of Object.entries(source.counters()?.writer.writes ?? {})) {
        const labels = writeLabels(key);
        if (labels) set(labels, n);
      }
    },
  );
  scalar(
    "counter",
    "fleet_mirror_write_retries_total",
    "Reconciles of a mirror that failed and were retried with backoff.",
    () => source.counters()?.writer.retries ?? 0,
  );
  new SnapshotHistogram(
    "fleet_mirror_write_duration_seconds",
    "Latency of write requests to the local API server.",
    registry,
    () => {
      const h = source.counters()?.writer.writeDuration;
      return h ? [{ labels: {}, histogram: h }] : [];
    },
  );
  scalar(
    "counter",
    "fleet_mirror_writer_restarts_total",
    "Restarts of the local writer thread.",
    () => source.fleet()?.writerRestarts ?? 0,
  );

  scalar(
    "counter",
    "fleet_mirror_log_lines_dropped_total",
    "Log lines dropped because the log destination (a pipe nobody reads, a slow disk) did not take them in time.",
    droppedLogLines,
  );

  // The placement in force (default-placement.ts); a standby has 0 threads and no info series.
  const placementGauge = (name: string, help: string, value: (p: PlacementStatus) => number): void =>
    labelled("gauge", name, help, [], (set) => {
      const placement = source.fleet()?.placement;
      if (placement) set({}, value(placement));
    });
  placementGauge("fleet_mirror_placement_threads", "Remote-cluster actor threads alive now.", (p) => p.threads);
  placementGauge(
    "fleet_mirror_placement_blast_radius_clusters",
    "The most clusters that share one actor thread's fate (heap exhaustion, a spinning event loop); 1 with a thread per cluster.",
    (p) => p.blastRadius,
  );
  placementGauge(
    "fleet_mirror_placement_packed_threads",
    "Shared actor thread slots once packed; 0 while every cluster has a thread of its own.",
    (p) => p.packedThreads ?? 0,
  );
  labelled(
    "gauge",
    "fleet_mirror_placement_info",
    "1 for the placement in force: setting (auto, isolated = --max-threads 0, fixed = --max-threads N) and mode (isolated, packed).",
    ["setting", "mode"],
    (set) => {
      const placement = source.fleet()?.placement;
      if (placement) set({ setting: placement.setting, mode: placement.mode }, 1);
    },
  );

  // Both heap gauges are read in one scrape: one request per thread serves both.
  let heaps: { readonly at: number; readonly promise: Promise<readonly ThreadHeap[]> } | undefined;
  const threadHeaps = (): Promise<readonly ThreadHeap[]> => {
    const now = Date.now();
    if (!heaps || now - heaps.at > HEAP_REUSE_MS) heaps = { at: now, promise: source.threadHeaps() };
    return heaps.promise;
  };
  for (const [name, help, pick] of [
    ["fleet_mirror_thread_heap_used_bytes", "V8 heap used by each thread.", (h: ThreadHeap) => h.used],
    ["fleet_mirror_thread_heap_limit_bytes", "V8 heap limit of each thread.", (h: ThreadHeap) => h.limit],
  ] as const) {
    new Gauge({
      name,
      help,
      labelNames: ["thread"],
      registers,
      async collect() {
        const current = await threadHeaps();
        this.reset();
        for (const h of current) this.set({ thread: h.thread }, pick(h));
      },
    });
  }
  return registry;
}
