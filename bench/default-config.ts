/**
 * The DEFAULT configuration's figures (issue 12): `fleet-mirror run` from `dist/` as a
 * separate OS process with no placement flag and no tuning flag at all (default write
 * rate, write concurrency and log level), only `--admin-addr` on a free loopback port and
 * `--endpoints-api`. Whatever the default placement decides (docs/DESIGN.md §1
 * "Placement") is what is measured; the placement it chose is recorded from /status.
 *
 * - sync: K = 200 clusters × 10 exported Services (all on one remote API server), both
 *   `--endpoints-api` modes side by side: spawn → /status shows all 200 synced
 *   (`sync_200_clusters_s`). The same figure with an explicit thread per cluster
 *   (`--max-threads 0`) is memory.ts's `sync_200_clusters_s_thread_mode`.
 * - rss: 50 clusters × 50 exported Services, the default mode: peak RSS (VmHWM, every
 *   thread of the process) from spawn until every cluster is synced and the writer is
 *   idle (every mirror written) plus a few seconds (`rss_mb_50_clusters_default`).
 * - restart: on that intact world, the process is stopped (SIGTERM) and a new one started:
 *   its CPU-seconds (user + system, every thread, /proc/<pid>/stat) from spawn until every
 *   cluster is synced and the writer idle (`restart_cpu_s_50_clusters_default`), with its
 *   peak RSS too.
 */
import { Fleet } from "../test/helpers/fleet.ts";
import {
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  mb,
  percentile,
  printTable,
  progress,
  round,
  type ScenarioResult,
  shapeRemote,
  sleep,
  writeResult,
} from "./harness.ts";
import { adminStatus, allSynced, freePort, processRss, waitStatus, writerSettled } from "./memory.ts";
import { busiestThreads, processCpuSeconds } from "./process-cpu.ts";

const SETTLE_MS = 3_000;

type Row = {
  readonly phase: "sync" | "converge" | "restart";
  readonly endpointsApi: BenchMode;
  readonly clusters: number;
  readonly servicesPerCluster: number;
  readonly extraArgs: string;
  /** The placement in force, as /status reports it. */
  readonly placement: string | null;
  readonly threads: number | null;
  readonly blastRadius: number | null;
  readonly allSyncedMs: number;
  readonly writerIdleMs: number;
  readonly cpuSecondsToSynced: number;
  readonly cpuSecondsToIdle: number;
  /** CPU-seconds at idle by thread name (live threads only: a thread that ended is not in it). */
  readonly cpuByThread: string;
  readonly rssMb: number;
  readonly peakRssMb: number;
  /** V8 heap used per thread once idle (the process's /metrics), MB: where the RSS above the isolates goes. */
  readonly heapUsedMb: string;
};

/** `thread MB, …` from the process's fleet_mirror_thread_heap_used_bytes. */
async function heapsByThread(admin: string): Promise<string> {
  const res = await fetch(`${admin}/metrics`, { signal: AbortSignal.timeout(30_000) });
  if (!res.ok) throw new Error(`GET ${admin}/metrics: ${res.status}`);
  const heaps: string[] = [];
  for (const line of (await res.text()).split("\n")) {
    const m = /^fleet_mirror_thread_heap_used_bytes\{thread="([^"]*)"\} (\S+)$/.exec(line);
    if (m?.[1] && m[2]) heaps.push(`${m[1]} ${mb(Number(m[2]))}`);
  }
  return heaps.join(", ");
}

/**
 * One `fleet-mirror run` from dist/ in the default configuration (plus `extraArgs`, for
 * ad hoc comparisons only), measured from spawn until synced and the writer idle; stopped after.
 */
async function runOnce(
  fleet: Fleet,
  phase: Row["phase"],
  endpointsApi: BenchMode,
  size: { clusters: number; services: number },
  extraArgs: readonly string[],
): Promise<Row> {
  progress(`default-config: ${phase}, ${endpointsApi}, ${size.clusters} × ${size.services}`);
  const port = await freePort();
  const admin = `http://127.0.0.1:${port}`;
  const started = Date.now();
  // startProcess passes --log-level info (the default) and --endpoints-api endpoints, which a later flag overrides.
  const proc = await fleet.startProcess(
    ["--admin-addr", `127.0.0.1:${port}`, "--endpoints-api", endpointsApi, ...extraArgs],
    { entry: "dist" },
  );
  const pid = proc.child.pid ?? 0;
  try {
    await waitStatus(proc, admin, `${size.clusters} clusters synced`, allSynced(size.clusters));
    const allSyncedMs = Date.now() - started;
    const cpuSecondsToSynced = processCpuSeconds(pid);
    await waitStatus(proc, admin, "the writer idle", writerSettled(size.clusters));
    const writerIdleMs = Date.now() - started;
    const cpuSecondsToIdle = processCpuSeconds(pid);
    const cpuByThread = busiestThreads(pid, 6);
    await sleep(SETTLE_MS);
    const { rss, peak } = processRss(pid);
    const placement = (await adminStatus(admin))?.placement;
    const heapUsedMb = await heapsByThread(admin);
    return {
      phase,
      endpointsApi,
      clusters: size.clusters,
      servicesPerCluster: size.services,
      extraArgs: extraArgs.join(" "),
      placement: placement ? `${placement.mode}: ${placement.reason}` : null,
      threads: placement?.threads ?? null,
      blastRadius: placement?.blastRadius ?? null,
      allSyncedMs,
      writerIdleMs,
      cpuSecondsToSynced: round(cpuSecondsToSynced, 2),
      cpuSecondsToIdle: round(cpuSecondsToIdle, 2),
      cpuByThread,
      rssMb: mb(rss),
      peakRssMb: mb(peak),
      heapUsedMb,
    };
  } finally {
    await proc.stop();
  }
}

/** 200 clusters synced in the default configuration, in `endpointsApi` mode, on a fresh world. */
export async function sync200(endpointsApi: BenchMode, clusters: number, extraArgs: readonly string[]): Promise<Row> {
  const fleet = await Fleet.start(["remote"]);
  try {
    await shapeRemote(fleet, "remote", { services: 10, clusters, gatewayIp: "198.18.0.30" });
    return await runOnce(fleet, "sync", endpointsApi, { clusters, services: 10 }, extraArgs);
  } finally {
    await fleet.stop();
  }
}

/**
 * Restarts measured per world: a restart takes 2–4 s, so one sample is at the mercy of
 * the machine's moment (one run measured 3.8 CPU-s where two probes of the same build
 * measured 2.0; twenty restarts of one build in one probe spread over 2.4–3.4); the
 * figure is their median. Five: three left the median to one unlucky sample.
 */
const RESTARTS = 5;

/** 50 × 50 converged in the default configuration (peak RSS), then restarts on the intact world (CPU). */
export async function convergeAndRestart(size: { clusters: number; services: number }, extraArgs: readonly string[]) {
  const fleet = await Fleet.start(["remote"]);
  try {
    await shapeRemote(fleet, "remote", { services: size.services, clusters: size.clusters, gatewayIp: "198.18.0.31" });
    const converge = await runOnce(fleet, "converge", "endpointslices", size, extraArgs);
    const restarts: Row[] = [];
    for (let i = 0; i < RESTARTS; i++)
      restarts.push(await runOnce(fleet, "restart", "endpointslices", size, extraArgs));
    return [converge, ...restarts] as const;
  } finally {
    await fleet.stop();
  }
}

/**
 * @param extraArgs flags added to the default configuration, for ad hoc comparisons
 * (`bench/run.ts --default-config-args`); a run with any gives no summary keys.
 */
export async function runDefaultConfig(opts: BenchOptions, extraArgs: readonly string[] = []): Promise<ScenarioResult> {
  const rows: Row[] = [];
  const save = () => writeResult(opts.out, "default-config", { smoke: opts.smoke, extraArgs, runs: rows });
  const syncClusters = opts.smoke ? 10 : 200;
  for (const endpointsApi of BENCH_MODES) {
    rows.push(await sync200(endpointsApi, syncClusters, extraArgs));
    save();
  }
  rows.push(
    ...(await convergeAndRestart(
      opts.smoke ? { clusters: 10, services: 5 } : { clusters: 50, services: 50 },
      extraArgs,
    )),
  );
  save();
  printTable(
    "default configuration (fleet-mirror run from dist/, no placement or tuning flag; RSS and CPU of the whole process)",
    rows,
  );
  return { result: { runs: rows }, summary: opts.smoke || extraArgs.length > 0 ? {} : defaultConfigSummary(rows) };
}

/** The summary keys of this scenario's rows (also read back from default-config.json by run.ts). */
export function defaultConfigSummary(
  rows: readonly Readonly<Record<string, unknown>>[],
): Record<string, number | null> {
  const num = (value: unknown): number | null => (typeof value === "number" ? value : null);
  const find = (phase: string, mode: BenchMode, clusters: number) =>
    rows.find((r) => r["phase"] === phase && r["endpointsApi"] === mode && r["clusters"] === clusters);
  const restartCpu = rows
    .filter((r) => r["phase"] === "restart" && r["endpointsApi"] === "endpointslices" && r["clusters"] === 50)
    .map((r) => num(r["cpuSecondsToIdle"]))
    .filter((v): v is number => v !== null);
  const seconds = (row: Readonly<Record<string, unknown>> | undefined) => {
    const ms = num(row?.["allSyncedMs"]);
    return ms === null ? null : round(ms / 1000, 2);
  };
  return {
    sync_200_clusters_s: seconds(find("sync", "endpointslices", 200)),
    sync_200_clusters_s_endpoints_mode: seconds(find("sync", "endpoints", 200)),
    rss_mb_50_clusters_default: num(find("converge", "endpointslices", 50)?.["peakRssMb"]),
    // The median of the restarts (one in runs before there were three).
    restart_cpu_s_50_clusters_default: percentile(restartCpu, 50),
  };
}
