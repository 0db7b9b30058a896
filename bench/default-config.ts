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
 *   peak RSS too. After each restart, with the controller stopped, the bare restart client
 *   (bare-restart.ts: a plain Node process listing the same remote Services for every
 *   cluster and the local mirrors, and comparing them with the same pure functions) on the
 *   same world: `restart_cpu_ratio` = the median restart CPU / the bare client's median.
 * - idle: the converged process, once settled, over `IDLE_MS` with nothing changing and the
 *   Helm chart's probes answered (GET /healthz every 10 s, /readyz every 5 s): its CPU as
 *   percent of one core (`idle_cpu_pct`), split by thread. The world's gateway has no
 *   `mc-probe` port, so no gateway is probed (a probed gateway needs an address that
 *   answers; probe-cpu.ts measures probing).
 */
import { Fleet } from "../test/helpers/fleet.ts";
import { bareRestartCpu } from "./bare-restart-run.ts";
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
import { busiestThreads, processCpuSeconds, threadCpuSeconds } from "./process-cpu.ts";

const SETTLE_MS = 3_000;
/** The idle window, and the quiet before it (the settle of the threads' heaps after a burst runs within seconds). */
const IDLE_MS = 60_000;
const IDLE_QUIET_MS = 10_000;
/** The Helm chart's liveness and readiness probes (charts/fleet-mirror/templates/deployment.yaml). */
const CHART_PROBES = [
  { path: "/healthz", everyMs: 10_000 },
  { path: "/readyz", everyMs: 5_000 },
] as const;

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
  /** Converge only: CPU over the idle window, percent of one core, and by thread name. */
  readonly idleCpuPct?: number;
  readonly idleCpuByThread?: string;
  /** Restart only: the bare restart client run right after, on the same world (bare-restart.ts). */
  readonly bareCpuSeconds?: number;
  readonly bareMirrorsCompared?: number;
  readonly bareMirrorsDiffering?: number;
};

/**
 * CPU of process `pid` over `IDLE_MS` while the chart's probes hit its admin server: percent
 * of one core, and `thread pct, …` by thread name (live threads), the busiest first.
 */
async function idleCpu(pid: number, admin: string, windowMs: number): Promise<{ pct: number; byThread: string }> {
  const before = processCpuSeconds(pid);
  const threadsBefore = threadCpuSeconds(pid);
  const started = Date.now();
  const timers = CHART_PROBES.map(({ path, everyMs }) =>
    setInterval(() => {
      fetch(`${admin}${path}`, { signal: AbortSignal.timeout(5_000) })
        .then((res) => res.arrayBuffer())
        .catch((error: unknown) => progress(`idle: probe ${path} failed: ${String(error)}`));
    }, everyMs),
  );
  await sleep(windowMs);
  for (const timer of timers) clearInterval(timer);
  const seconds = (Date.now() - started) / 1000;
  const pct = (cpu: number) => round((cpu / seconds) * 100, 2);
  const byThread = [...threadCpuSeconds(pid)]
    .map(([name, cpu]): [string, number] => [name, cpu - (threadsBefore.get(name) ?? 0)])
    .filter(([, cpu]) => cpu > 0)
    .sort(([, a], [, b]) => b - a)
    .map(([name, cpu]) => `${name} ${pct(cpu)}`)
    .join(", ");
  return { pct: pct(processCpuSeconds(pid) - before), byThread };
}

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
  /** The idle window measured after the row's figures; 0: none. */
  idleMs = 0,
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
    let idle: { pct: number; byThread: string } | undefined;
    if (idleMs > 0) {
      await sleep(IDLE_QUIET_MS);
      idle = await idleCpu(pid, admin, idleMs);
    }
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
      ...(idle ? { idleCpuPct: idle.pct, idleCpuByThread: idle.byThread } : {}),
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

/**
 * 50 × 50 converged in the default configuration (peak RSS, then its idle minute), then
 * restarts on the intact world (CPU), each followed by the bare restart client.
 */
export async function convergeAndRestart(
  size: { clusters: number; services: number },
  extraArgs: readonly string[],
  idleMs = IDLE_MS,
) {
  const fleet = await Fleet.start(["remote"]);
  try {
    const clusters = await shapeRemote(fleet, "remote", {
      services: size.services,
      clusters: size.clusters,
      gatewayIp: "198.18.0.31",
    });
    const converge = await runOnce(fleet, "converge", "endpointslices", size, extraArgs, idleMs);
    const restarts: Row[] = [];
    for (let i = 0; i < RESTARTS; i++) {
      const row = await runOnce(fleet, "restart", "endpointslices", size, extraArgs);
      const bare = await bareRestartCpu(fleet, "remote", clusters);
      restarts.push({
        ...row,
        bareCpuSeconds: round(bare.cpuSeconds, 3),
        bareMirrorsCompared: bare.mirrorsCompared,
        bareMirrorsDiffering: bare.mirrorsDiffering,
      });
    }
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
      opts.smoke ? 10_000 : IDLE_MS,
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
  const restarts = rows.filter(
    (r) => r["phase"] === "restart" && r["endpointsApi"] === "endpointslices" && r["clusters"] === 50,
  );
  const values = (field: string) => restarts.map((r) => num(r[field])).filter((v): v is number => v !== null);
  const restartMedian = percentile(values("cpuSecondsToIdle"), 50);
  const bareMedian = percentile(values("bareCpuSeconds"), 50);
  const seconds = (row: Readonly<Record<string, unknown>> | undefined) => {
    const ms = num(row?.["allSyncedMs"]);
    return ms === null ? null : round(ms / 1000, 2);
  };
  return {
    sync_200_clusters_s: seconds(find("sync", "endpointslices", 200)),
    sync_200_clusters_s_endpoints_mode: seconds(find("sync", "endpoints", 200)),
    rss_mb_50_clusters_default: num(find("converge", "endpointslices", 50)?.["peakRssMb"]),
    // The median of the restarts (one in runs before there were three).
    restart_cpu_s_50_clusters_default: restartMedian,
    // The restarts' median over the bare restart client's median, same world, same run.
    restart_cpu_ratio: restartMedian !== null && bareMedian ? round(restartMedian / bareMedian, 2) : null,
    idle_cpu_pct: num(find("converge", "endpointslices", 50)?.["idleCpuPct"]),
  };
}
