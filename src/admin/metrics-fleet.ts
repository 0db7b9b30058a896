/** Metrics of the fleet: leadership and shards, clusters by state, and each cluster's watch (docs/OPERATIONS.md). */

import type { MetricBuilders } from "./metric-builders.ts";
import { clustersByState } from "./snapshot-series.ts";

export function registerFleetMetrics(b: MetricBuilders): void {
  const { source } = b;
  b.scalar(
    "gauge",
    "fleet_mirror_leader",
    "1 while this replica runs the controller (holds the Lease, or leader election is off), else 0.",
    () => (source.leadership().leading ? 1 : 0),
  );
  // Sharding across replicas: without --shards everything is shard 0, held by the leader.
  b.scalar(
    "gauge",
    "fleet_mirror_shards_held",
    "Shards this replica holds (not sharded: 1 while it runs the controller, the one shard).",
    () => {
      const leadership = source.leadership();
      return leadership.sharding ? leadership.sharding.held.length : leadership.leading ? 1 : 0;
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_shard_holder",
    "1 per shard and its holder as this replica observes the shard Leases (holder empty: free); sharded only.",
    ["shard", "holder"],
    (set) => {
      for (const [shard, holder] of (source.leadership().sharding?.holders ?? []).entries())
        set({ shard: String(shard), holder }, 1);
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_clusters",
    "Registered, duplicate and invalid clusters by state.",
    ["state"],
    (set) => {
      const fleet = source.fleet();
      if (fleet) for (const [state, n] of clustersByState(fleet)) set({ state }, n);
    },
  );
  b.clusterGauge(
    "fleet_mirror_cluster_mirrored_services",
    "Mirrors the local writer holds for the cluster.",
    (row) => row.mirrors,
  );
  b.clusterGauge(
    "fleet_mirror_cluster_exported_services",
    "Remote Services of the cluster exported through a gateway.",
    (row) => row.exportedServices,
  );
  b.labelled(
    "gauge",
    "fleet_mirror_cluster_quota_refusals",
    "What a cluster asks for past its quotas: remote Services not mirrored for --max-mirrors-per-cluster (quota mirrors), mirrors not written because their namespace would pass --max-namespaces-per-cluster (quota namespaces).",
    ["cluster", "quota"],
    (set) => {
      const fleet = source.fleet();
      for (const row of fleet?.clusters ?? []) {
        const mirrors = row.problems.filter((p) => p.reason === "cluster-quota").length;
        const blocked = fleet?.writer?.clusters[row.cluster]?.blocked ?? [];
        set({ cluster: row.cluster, quota: "mirrors" }, mirrors);
        set(
          { cluster: row.cluster, quota: "namespaces" },
          blocked.filter((x) => x.reason === "namespace-quota").length,
        );
      }
    },
  );
  b.labelled(
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
  b.labelled(
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
  b.clusterGauge(
    "fleet_mirror_cluster_last_sync_timestamp_seconds",
    "Unix time of the cluster's last complete, successful list (absent before the first).",
    (row) => (row.lastSyncedAt === undefined ? undefined : row.lastSyncedAt / 1000),
  );
  b.clusterCounter(
    "fleet_mirror_cluster_watch_reconnects_total",
    "Watch requests on the cluster's Services started after the first one of each actor incarnation.",
    (c) => c.watchReconnects,
  );
  b.clusterCounter("fleet_mirror_cluster_lists_total", "Complete lists of the cluster's Services.", (c) => c.lists);
  b.clusterCounter(
    "fleet_mirror_cluster_relists_on_gone_total",
    "Relists of the cluster's Services caused by 410 Gone.",
    (c) => c.relistsOnGone,
  );
  b.clusterCounter(
    "fleet_mirror_cluster_actor_restarts_total",
    "Restarts of the cluster's actor after a crash.",
    (c) => c.restarts,
  );
  b.labelled(
    "counter",
    "fleet_mirror_cluster_watch_errors_total",
    "List/watch failures on the cluster's API server, by reason.",
    ["cluster", "reason"],
    (set) => {
      for (const [cluster, c] of source.counters()?.clusters ?? [])
        for (const [reason, n] of Object.entries(c.failuresByReason)) set({ cluster, reason }, n);
    },
  );
}
