/**
 * The benchmark summary's keys and the targets: the ONE table that
 * bench/run.ts (summary.json, SUMMARY.md) and bench/summary-docs.ts (the figures
 * tables in README.md and docs/DESIGN.md) both read, so a target changed here
 * changes every place it is shown.
 *
 * A plain key is the default (EndpointSlices) mode's figure; `<key>_endpoints_mode`
 * is the same figure in `endpoints` mode, with the same target.
 */

export const SUMMARY_KEYS = [
  "cold_converge_ratio",
  "cold_converge_ratio_endpoints_mode",
  "writes_per_mirror",
  "writes_per_mirror_endpoints_mode",
  "rss_mb_per_cluster_thread_mode",
  "rss_mb_per_cluster_thread_mode_endpoints_mode",
  "rss_total_mb_packed_1000",
  "rss_total_mb_1000_default",
  "sync_200_clusters_s",
  "sync_200_clusters_s_endpoints_mode",
  "sync_200_clusters_s_thread_mode",
  "rss_mb_50_clusters_default",
  "restart_cpu_s_50_clusters_default",
  "restart_cpu_ratio",
  "idle_cpu_pct",
  "restart_writes",
  "restart_writes_endpoints_mode",
  "steady_p99_ms",
  "steady_p99_ms_endpoints_mode",
  "steady_p99_ratio",
  "steady_p99_ratio_endpoints_mode",
  "gateway_fanout_ratio",
  "gateway_fanout_ratio_endpoints_mode",
  "remote_recovery_s",
  "failover_s",
  "tier_failover_s",
  "tier_switch_writes_per_service",
  "tier_steady_writes",
  "probe_cpu_ratio",
  "sharded_converge_ratio",
  "sharded_converge_ratio_shared_cpus",
  "shard_failover_s",
  "label_export_converge_ratio",
  "links_converge_ratio",
  "links_rss_ratio",
  "headless_writes_per_host_mirror",
  "headless_actor_heap_kb_per_service",
  "image_app_mb",
  "image_total_mb",
  "container_ready_s",
  "hostile_body_rss_mb",
  "traffic_failover_s",
  "noisy_neighbour_p99_ratio",
  "soak_rss_growth_pct",
  "soak_fd_growth",
  "soak_wrongful_deletes",
  "mcs_conformance_required_passed",
  "mcs_conformance_required_total",
] as const;

/** One key of summary.json. */
export type SummaryKey = (typeof SUMMARY_KEYS)[number];

/** The targets, for SUMMARY.md: [comparison, bound, unit]; null: a figure shown next to a target's, with none of its own. */
export const TARGETS: Readonly<Record<SummaryKey, readonly [">=" | "<=" | "==", number, string] | null>> = {
  cold_converge_ratio: [">=", 0.8, "× bare client"],
  cold_converge_ratio_endpoints_mode: [">=", 0.8, "× bare client"],
  writes_per_mirror: ["<=", 2, "writes"],
  writes_per_mirror_endpoints_mode: ["<=", 2, "writes"],
  rss_mb_per_cluster_thread_mode: ["<=", 10, "MB"],
  rss_mb_per_cluster_thread_mode_endpoints_mode: ["<=", 10, "MB"],
  rss_total_mb_packed_1000: ["<=", 400, "MB"],
  // The same 1 000 clusters with the default placement (2 threads on a 2-CPU machine).
  rss_total_mb_1000_default: null,
  sync_200_clusters_s: ["<=", 15, "s"],
  sync_200_clusters_s_endpoints_mode: ["<=", 15, "s"],
  // One thread per cluster (--max-threads 0), no longer the default: reported (the bound is the default's).
  sync_200_clusters_s_thread_mode: null,
  rss_mb_50_clusters_default: ["<=", 250, "MB"],
  restart_cpu_s_50_clusters_default: ["<=", 3, "CPU-s"],
  // That restart's CPU over a bare Node process's that lists the same remote Services and
  // local mirrors and compares them (bench/bare-restart.ts), same world, same run.
  restart_cpu_ratio: ["<=", 2, "× bare client"],
  // Reported, with no bound: 50 × 50 converged, nothing changing, the chart's probes answered; percent of one core.
  idle_cpu_pct: null,
  restart_writes: ["==", 0, "writes"],
  restart_writes_endpoints_mode: ["==", 0, "writes"],
  steady_p99_ms: ["<=", 250, "ms"],
  steady_p99_ms_endpoints_mode: ["<=", 250, "ms"],
  steady_p99_ratio: ["<=", 1.5, "× bare client's p99"],
  steady_p99_ratio_endpoints_mode: ["<=", 1.5, "× bare client's p99"],
  gateway_fanout_ratio: [">=", 0.8, "× bare client"],
  gateway_fanout_ratio_endpoints_mode: [">=", 0.8, "× bare client"],
  remote_recovery_s: ["<=", 5, "s"],
  // 3 × the default probe period (3 s) + 1 s.
  failover_s: ["<=", 3 * 3 + 1, "s"],
  // SPEC §14, 200 fleet-wide Services over 3 tiers of 10 clusters: the serving tier's last
  // ready gateway dies → every Service serves the next tier; 3 × the default probe period (3 s) + 2 s.
  tier_failover_s: ["<=", 3 * 3 + 2, "s"],
  // Reported, with no bound: the JSON holds the objects that changed per Service beside it.
  tier_switch_writes_per_service: null,
  // A converged tiered world with nothing changing, over 60 s.
  tier_steady_writes: ["==", 0, "writes"],
  probe_cpu_ratio: ["<=", 1.5, "× bare client"],
  // One replica's cold-convergence time / three replicas' (--shards 12), same world, the
  // control plane on its own CPU and the replicas on the other(s), as in a real cluster.
  sharded_converge_ratio: [">=", 0.9, "× one replica"],
  // The same pair with every process free to run on every CPU (the replicas take CPU from the API server).
  sharded_converge_ratio_shared_cpus: null,
  // The default Lease duration (10 s) + 10 s.
  shard_failover_s: ["<=", 10 + 10, "s"],
  // Cold convergence of one world exported by annotation / by label (SPEC §12), alternating runs.
  label_export_converge_ratio: [">=", 0.95, "× annotation export"],
  // The same world registered by annotated Secrets / by Links (SPEC §15), alternating runs: time, then RSS.
  links_converge_ratio: [">=", 0.95, "× annotated Secrets"],
  links_rss_ratio: ["<=", 1.05, "× annotated Secrets"],
  // 20 clusters × 5 headless Services × 50 hosts: a per-host mirror's Service and its slice.
  headless_writes_per_host_mirror: ["<=", 2, "writes"],
  // Reported, with no bound: the remote actor's heap per watched headless Service of 50 hosts.
  headless_actor_heap_kb_per_service: null,
  // The layers the project adds to its base image (node:24-bookworm-slim or the local stand-in).
  image_app_mb: ["<=", 60, "MB"],
  // Reported, with no bound: the whole image, its base included.
  image_total_mb: null,
  // Reported, with no bound: a new Pod of the chart (empty compile cache) from docker run to /readyz 200.
  container_ready_s: null,
  // RSS growth while one remote streams 1.5 GiB lists: the body cap (--max-response-mb, 64) + 64 MB.
  hostile_body_rss_mb: ["<=", 64 + 64, "MB"],
  // Real traffic (kube-proxy, CoreDNS, a client Pod): a gateway dies → every request via the fleet-wide name answered.
  traffic_failover_s: ["<=", 10, "s"],
  // The quiet clusters' change-to-mirror p99 with one cluster churning 200 Services/s, against without (bench/noisy-neighbour.ts).
  noisy_neighbour_p99_ratio: ["<=", 2, "× without the noisy cluster"],
  // The soak (`npm run bench -- soak`, not in the default run; bench/soak.ts): RSS at its end (30 min) against at 10 min.
  soak_rss_growth_pct: ["<=", 10, "%"],
  // Open file descriptors at the soak's end against at 10 min.
  soak_fd_growth: ["<=", 5, "fds"],
  // Mirrors of Services exported throughout the soak whose uid changed.
  soak_wrongful_deletes: ["==", 0, "mirrors"],
  // The MCS conformance report (test/conformance/mcs/report.yaml, SPEC §16): every
  // Required spec that can run here passes; one of the 14 needs a container runtime.
  mcs_conformance_required_passed: [">=", 13, "specs"],
  mcs_conformance_required_total: null,
};

/** "met" or "MISSED" against the key's target; "—" for a key without one, "not measured" for null. */
export function verdict(key: SummaryKey, value: number | null): string {
  if (value === null) return "not measured";
  const target = TARGETS[key];
  if (!target) return "—";
  const [op, bound] = target;
  const met = op === ">=" ? value >= bound : op === "<=" ? value <= bound : value === bound;
  return met ? "met" : "MISSED";
}
