/**
 * `summaryFromResults` (bench/run.ts): the summary keys from scenario files on disk. The
 * scenarios write one row per `--endpoints-api` mode; the plain keys are the default
 * (endpointslices) mode's, `<key>_endpoints_mode` the endpoints mode's. Files from
 * before the side-by-side runs (flat results, rows without `endpointsApi`) were
 * measured in endpoints mode.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { summaryFromResults } from "../../bench/run.ts";

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A results directory holding `files` (scenario name → JSON body). */
function resultsDir(files: Readonly<Record<string, unknown>>): string {
  const dir = mkdtempSync(join(tmpdir(), "bench-summary-"));
  dirs.push(dir);
  for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, `${name}.json`), JSON.stringify(body));
  return dir;
}

/** A conformance report in `dir` with `passed` of `total` Required specs passing. */
function mcsReport(dir: string, passed: number, total: number): string {
  const path = join(dir, "report.yaml");
  const tests = Array.from({ length: total }, (_, i) => `      - Name: spec ${i}\n        Passed: ${i < passed}`);
  writeFileSync(
    path,
    `Groups:\n  - Name: Required\n    Tests:\n${tests.join("\n")}\n  - Name: Optional\n    Tests: []\n`,
  );
  return path;
}

const latency = (p99: number) => ({ perMirror: { n: 10, p50: 1, p95: 2, p99, max: p99 + 1 } });

/** One full run's files in the side-by-side shape: slices figures, then endpoints figures. */
const sideBySide = {
  "cold-convergence": {
    smoke: false,
    runs: [
      { endpointsApi: "endpointslices", clusters: 50, servicesPerCluster: 50, ratio: 1.1, writesPerMirror: 2 },
      { endpointsApi: "endpoints", clusters: 50, servicesPerCluster: 50, ratio: 0.9, writesPerMirror: 2.01 },
      { endpointsApi: "endpointslices", clusters: 200, servicesPerCluster: 25, ratio: 5, writesPerMirror: 5 },
      { endpointsApi: "endpoints", clusters: 200, servicesPerCluster: 25, ratio: 6, writesPerMirror: 6 },
    ],
  },
  restart: {
    smoke: false,
    runs: [
      { endpointsApi: "endpointslices", localWritesAfterRestart: 0 },
      { endpointsApi: "endpoints", localWritesAfterRestart: 3 },
    ],
  },
  "steady-latency": {
    smoke: false,
    runs: [
      { endpointsApi: "endpointslices", latencyMs: latency(120), p99Ratio: 1.2 },
      { endpointsApi: "endpoints", latencyMs: latency(180), p99Ratio: 1.6 },
    ],
  },
  "gateway-fanout": {
    smoke: false,
    runs: [
      { endpointsApi: "endpointslices", ratio: 0.95 },
      { endpointsApi: "endpoints", ratio: 0.85 },
    ],
  },
  memory: {
    smoke: false,
    runs: [
      { mode: "thread", endpointsApi: "endpointslices", clusters: 50, perClusterRssMb: 99, allSyncedMs: 99_000 },
      { mode: "thread", endpointsApi: "endpoints", clusters: 50, perClusterRssMb: 98, allSyncedMs: 98_000 },
      { mode: "thread", endpointsApi: "endpointslices", clusters: 200, perClusterRssMb: 14.5, allSyncedMs: 12_345 },
      { mode: "thread", endpointsApi: "endpoints", clusters: 200, perClusterRssMb: 15.5, allSyncedMs: 13_456 },
      { mode: "packed(8)", endpointsApi: "endpointslices", clusters: 1000, rssMb: 640.5 },
      { mode: "default", endpointsApi: "endpointslices", clusters: 1000, rssMb: 410.5 },
    ],
  },
  "default-config": {
    smoke: false,
    runs: [
      { phase: "sync", endpointsApi: "endpointslices", clusters: 200, allSyncedMs: 4_321 },
      { phase: "sync", endpointsApi: "endpoints", clusters: 200, allSyncedMs: 5_432 },
      {
        phase: "converge",
        endpointsApi: "endpointslices",
        clusters: 50,
        peakRssMb: 240.5,
        cpuSecondsToIdle: 30,
        idleCpuPct: 1.25,
      },
      // restart_cpu_ratio: the restarts' median (2.75) over the bare client's median (0.5), each on its own.
      { phase: "restart", endpointsApi: "endpointslices", clusters: 50, cpuSecondsToIdle: 3.9, bareCpuSeconds: 0.4 },
      { phase: "restart", endpointsApi: "endpointslices", clusters: 50, cpuSecondsToIdle: 2.75, bareCpuSeconds: 0.6 },
      { phase: "restart", endpointsApi: "endpointslices", clusters: 50, cpuSecondsToIdle: 2.1, bareCpuSeconds: 0.5 },
    ],
  },
  "remote-recovery": { smoke: false, remoteRecoveryS: 1.5 },
  failover: { smoke: false, failoverS: 7.25 },
  "failover-tiers": { smoke: false, tierFailoverS: 8.5, tierSwitchWritesPerService: 21, tierSteadyWrites: 0 },
  "probe-cpu": { smoke: false, ratio: 1.01 },
  sharded: { smoke: false, runs: [{ ratio: 0.71, splitRatio: 0.93, failoverMovedMs: 14_567, failoverAllMs: 15_000 }] },
  "export-modes": { smoke: false, ratio: 0.98, runs: [] },
  links: { smoke: false, convergeRatio: 1.01, rssRatio: 0.99, runs: [] },
  headless: { smoke: false, convergence: { writesPerHostMirror: 2 }, actorHeapKbPerHeadlessService: 61.5 },
  image: { smoke: false, imageAppMb: 13.3, imageTotalMb: 237.8, containerReadyS: 4.42 },
  "hostile-body": { smoke: false, hostileBodyRssMb: 98.5 },
  traffic: { smoke: false, trafficFailoverS: 4.2 },
  "noisy-neighbour": { smoke: false, p99Ratio: 1.4, p99RatioSameLoad: 1.2 },
  soak: { smoke: false, rssGrowthPct: 3.5, fdGrowth: 1, wrongfulDeletes: 0 },
};

describe("summaryFromResults", () => {
  it("reads each mode's row: plain keys are endpointslices, _endpoints_mode keys are endpoints", () => {
    const dir = resultsDir(sideBySide);
    const summary = summaryFromResults(dir, mcsReport(dir, 13, 14));
    assert.deepEqual(
      Object.fromEntries(Object.entries(summary).sort(([a], [b]) => a.localeCompare(b))),
      Object.fromEntries(
        Object.entries({
          cold_converge_ratio: 1.1,
          cold_converge_ratio_endpoints_mode: 0.9,
          writes_per_mirror: 2,
          writes_per_mirror_endpoints_mode: 2.01,
          rss_mb_per_cluster_thread_mode: 14.5,
          rss_mb_per_cluster_thread_mode_endpoints_mode: 15.5,
          sync_200_clusters_s: 4.32,
          sync_200_clusters_s_endpoints_mode: 5.43,
          sync_200_clusters_s_thread_mode: 12.35,
          rss_mb_50_clusters_default: 240.5,
          restart_cpu_s_50_clusters_default: 2.75,
          restart_cpu_ratio: 5.5,
          idle_cpu_pct: 1.25,
          restart_writes: 0,
          restart_writes_endpoints_mode: 3,
          steady_p99_ms: 120,
          steady_p99_ms_endpoints_mode: 180,
          steady_p99_ratio: 1.2,
          steady_p99_ratio_endpoints_mode: 1.6,
          gateway_fanout_ratio: 0.95,
          gateway_fanout_ratio_endpoints_mode: 0.85,
          rss_total_mb_packed_1000: 640.5,
          rss_total_mb_1000_default: 410.5,
          remote_recovery_s: 1.5,
          failover_s: 7.25,
          tier_failover_s: 8.5,
          tier_switch_writes_per_service: 21,
          tier_steady_writes: 0,
          probe_cpu_ratio: 1.01,
          sharded_converge_ratio: 0.93,
          sharded_converge_ratio_shared_cpus: 0.71,
          // The moved clusters' figure, in seconds: the others never stopped.
          shard_failover_s: 14.57,
          label_export_converge_ratio: 0.98,
          links_converge_ratio: 1.01,
          links_rss_ratio: 0.99,
          headless_writes_per_host_mirror: 2,
          headless_actor_heap_kb_per_service: 61.5,
          image_app_mb: 13.3,
          image_total_mb: 237.8,
          container_ready_s: 4.42,
          hostile_body_rss_mb: 98.5,
          traffic_failover_s: 4.2,
          noisy_neighbour_p99_ratio: 1.4,
          soak_rss_growth_pct: 3.5,
          soak_fd_growth: 1,
          soak_wrongful_deletes: 0,
          mcs_conformance_required_passed: 13,
          mcs_conformance_required_total: 14,
        }).sort(([a], [b]) => a.localeCompare(b)),
      ),
    );
  });

  it("takes files from before the side-by-side runs as endpoints mode: only the _endpoints_mode keys", () => {
    const summary = summaryFromResults(
      resultsDir({
        "cold-convergence": {
          smoke: false,
          runs: [{ clusters: 50, servicesPerCluster: 50, ratio: 1.09, writesPerMirror: 2 }],
        },
        restart: { smoke: false, localWritesAfterRestart: 0 },
        "steady-latency": { smoke: false, latencyMs: latency(211) },
        "gateway-fanout": { smoke: false, ratio: 0.938 },
        memory: {
          smoke: false,
          runs: [
            { mode: "thread", clusters: 200, perClusterRssMb: 15.3, allSyncedMs: 56_110 },
            { mode: "packed(8)", clusters: 1000, rssMb: 642.5 },
          ],
        },
      }),
    );
    assert.equal(summary["cold_converge_ratio"], null);
    assert.equal(summary["cold_converge_ratio_endpoints_mode"], 1.09);
    assert.equal(summary["writes_per_mirror"], null);
    assert.equal(summary["writes_per_mirror_endpoints_mode"], 2);
    assert.equal(summary["restart_writes"], null);
    assert.equal(summary["restart_writes_endpoints_mode"], 0);
    assert.equal(summary["steady_p99_ms"], null);
    assert.equal(summary["steady_p99_ms_endpoints_mode"], 211);
    // Runs from before the bare client have no ratio: not measured, never invented.
    assert.equal(summary["steady_p99_ratio_endpoints_mode"], null);
    assert.equal(summary["gateway_fanout_ratio"], null);
    assert.equal(summary["gateway_fanout_ratio_endpoints_mode"], 0.938);
    assert.equal(summary["rss_mb_per_cluster_thread_mode"], null);
    assert.equal(summary["rss_mb_per_cluster_thread_mode_endpoints_mode"], 15.3);
    // sync_200_clusters_s is the default configuration's (default-config.json): not in these files.
    assert.equal(summary["sync_200_clusters_s_endpoints_mode"], null);
    // The packed K = 1000 key is the default mode's only: an endpoints-mode run is not it.
    assert.equal(summary["rss_total_mb_packed_1000"], null);
  });

  it("reads the MCS conformance counts from the committed report by default, whatever the results directory holds", () => {
    const summary = summaryFromResults(resultsDir({}));
    const [passed, total] = [summary["mcs_conformance_required_passed"], summary["mcs_conformance_required_total"]];
    assert.ok(typeof passed === "number" && typeof total === "number" && passed <= total, `${passed} / ${total}`);
  });

  it("gives null, never a guess, for smoke files and missing files", () => {
    const smoke = Object.fromEntries(
      Object.entries(sideBySide).map(([name, body]) => [name, { ...body, smoke: true }]),
    );
    for (const dir of [resultsDir(smoke), resultsDir({})]) {
      const summary = summaryFromResults(dir, join(dir, "no-report.yaml"));
      assert.ok(Object.keys(summary).length >= 19);
      for (const [key, value] of Object.entries(summary)) assert.equal(value, null, key);
    }
  });
});
