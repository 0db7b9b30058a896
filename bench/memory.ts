/**
 * Memory and startup, measured on the production build: `fleet-mirror run` from `dist/`
 * (what the image runs; `npm run bench` builds it first) as a separate OS process, with
 * K credentials Secrets (distinct cluster names) all pointing at one remote API server
 * with S exported Services.
 *
 * Per K, two processes in turn: a baseline (no credentials Secret: supervisor, local
 * writer and admin server only), then the fleet. RSS is the kernel's (VmRSS of the
 * process, every thread included), read once every cluster is synced and the writer
 * idle (plus a few seconds to settle); per cluster = (RSS − baseline RSS) / K. Startup
 * is the time from spawning the process until /status shows all K clusters synced.
 * Per-thread heaps come from the process's own /metrics
 * (fleet_mirror_thread_heap_used_bytes). No GC is forced: the figure is what a Pod's
 * memory limit has to hold.
 *
 * Thread mode (one thread per cluster, `--max-threads 0`; the default before the
 * default placement of issue 12) at K = 50 and 200, each in both
 * `--endpoints-api` modes side by side (EndpointSlices first); packed mode
 * (--max-threads 8) at K = 200 (the placement trade-off side by side) and K = 1000, in
 * the default EndpointSlices mode only (the K = 1000 run alone takes minutes). K = 1000
 * also with the default placement (no `--max-threads`: packed on as many threads as the
 * machine's CPUs allow, default-placement.ts), next to the 8-thread row: 8 threads is
 * what the default gives an 8-CPU node, so `rss_total_mb_packed_1000` stays that row.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import type { AdminStatus } from "../src/admin/source.ts";
import { type ControllerProcess, Fleet } from "../test/helpers/fleet.ts";
import {
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  mb,
  printTable,
  progress,
  round,
  type ScenarioResult,
  shapeRemote,
  sleep,
  writeResult,
} from "./harness.ts";
import { processCpuSeconds, threadCpuSeconds } from "./process-cpu.ts";

const SERVICES = 10;
const PACKED_THREADS = 8;
/** A thread per cluster, explicitly: the default placement packs a fleet this large (default-config.ts measures it). */
const THREAD_ARGS = ["--max-threads", "0"];
const SETTLE_MS = 3_000;
/** As the other scenarios: no client-side write limit (it only lengthens the wait for idle). */
const WRITE_ARGS = ["--write-qps", "0", "--write-concurrency", "16"];

type Row = {
  readonly mode: string;
  readonly endpointsApi: BenchMode;
  readonly clusters: number;
  readonly servicesPerCluster: number;
  readonly threads: number | null;
  readonly baselineRssMb: number | null;
  readonly rssMb: number | null;
  readonly peakRssMb: number | null;
  readonly perClusterRssMb: number | null;
  readonly allSyncedMs: number | null;
  readonly writerIdleMs: number | null;
  readonly actorHeapUsedMbAvg: number | null;
  readonly actorHeapUsedMbMax: number | null;
  /** CPU-seconds of the process (every thread) from spawn until the writer was idle. */
  readonly cpuSecondsToIdle?: number | null;
  /** The same by thread name, the largest first: the writer's share shows what a process-wide flag costs it. */
  readonly cpuByThread?: string | null;
  readonly note?: string;
};

/** VmRSS and VmHWM (peak) of a process, in bytes, from /proc. */
export function processRss(pid: number): {
  rss: number;
  peak: number;
  /** Anonymous (heaps, malloc) and file-backed (code) resident bytes, and the thread count. */
  anon: number;
  file: number;
  threads: number;
} {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? Number.NaN);
  return {
    rss: field("VmRSS") * 1024,
    peak: field("VmHWM") * 1024,
    anon: field("RssAnon") * 1024,
    file: field("RssFile") * 1024,
    threads: field("Threads"),
  };
}

async function getText(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return res.text();
}

/** /status; undefined while the admin server does not answer yet (the process is starting). */
export async function adminStatus(admin: string): Promise<AdminStatus | undefined> {
  try {
    return JSON.parse(await getText(`${admin}/status`)) as AdminStatus;
  } catch (error) {
    if (error instanceof TypeError) return undefined; // fetch failed: connection refused
    throw error;
  }
}

/** Polls /status until `done` holds, every 500 ms: /status costs ~10 ms at K = 200, and polling must not load the controller being measured. */
export async function waitStatus(
  proc: ControllerProcess,
  admin: string,
  what: string,
  done: (s: AdminStatus) => boolean,
  timeoutMs = 1_800_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let reported = Date.now();
  for (;;) {
    if (proc.child.exitCode !== null) throw new Error(`controller exited while waiting for ${what}:\n${proc.output}`);
    const s = await adminStatus(admin);
    if (s && done(s)) return;
    if (s && Date.now() - reported > 10_000) {
      reported = Date.now();
      const counts: Record<string, number> = {};
      for (const r of s.clusters ?? []) counts[r.state] = (counts[r.state] ?? 0) + 1;
      const w = s.writer;
      progress(
        `waiting for ${what}: ${JSON.stringify(counts)}; writer queue ${w?.queueDepth ?? "?"}, in flight ${w?.inFlight ?? "?"}`,
      );
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(500);
  }
}

/** /status shows exactly `clusters` clusters, every one synced. */
export const allSynced =
  (clusters: number) =>
  (s: AdminStatus): boolean =>
    (s.clusters ?? []).length === clusters && (s.clusters ?? []).every((r) => r.state === "synced");

export const writerIdle = (s: AdminStatus): boolean =>
  s.writer?.ready === true && s.writer.queueDepth === 0 && s.writer.inFlight === 0;

/**
 * The writer idle AND holding a complete desired set from `clusters` clusters. Idle alone
 * is true for a moment after every cluster is synced and before their desired sets reach
 * the writer (the actors report synced to the supervisor and send the writer their sets
 * separately): a measurement stopped there misses every write.
 */
export const writerSettled =
  (clusters: number) =>
  (s: AdminStatus): boolean =>
    writerIdle(s) && Object.values(s.writer?.clusters ?? {}).filter((c) => c.complete).length >= clusters;

/** The process's /metrics text. */
export function adminMetrics(admin: string): Promise<string> {
  return getText(`${admin}/metrics`);
}

/** Used heap of every thread by its name (`main`, `local-writer`, `remote-cluster/…`), from a /metrics text. */
export function threadHeapsIn(metrics: string): Map<string, number> {
  const used = new Map<string, number>();
  for (const line of metrics.split("\n")) {
    const m = /^fleet_mirror_thread_heap_used_bytes\{thread="([^"]*)"\} (\S+)$/.exec(line);
    if (m?.[1] && m[2]) used.set(m[1], Number(m[2]));
  }
  return used;
}

/** Used heap of every remote-cluster thread, from the process's /metrics. */
export async function actorHeaps(admin: string): Promise<number[]> {
  return [...threadHeapsIn(await adminMetrics(admin))]
    .filter(([t]) => t.startsWith("remote-cluster/"))
    .map(([, b]) => b);
}

/** A free loopback port: the controllers log at warn, so the admin URL is not in their logs. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

/** `fleet-mirror run` from dist/ at warn level (info logs a line per mirror), and its admin URL. */
export async function startController(fleet: Fleet, args: readonly string[]): Promise<[ControllerProcess, string]> {
  const port = await freePort();
  const proc = await fleet.startProcess(
    ["--log-level", "warn", "--admin-addr", `127.0.0.1:${port}`, ...WRITE_ARGS, ...args],
    { entry: "dist" },
  );
  return [proc, `http://127.0.0.1:${port}`];
}

async function baselineRss(fleet: Fleet, args: readonly string[]): Promise<number> {
  const [proc, admin] = await startController(fleet, args);
  try {
    await waitStatus(proc, admin, "the writer ready", writerIdle);
    await sleep(SETTLE_MS);
    return processRss(proc.child.pid ?? 0).rss;
  } finally {
    await proc.stop();
  }
}

async function measure(
  mode: string,
  endpointsApi: BenchMode,
  clusters: number,
  placementArgs: readonly string[],
): Promise<Row> {
  const args = [...placementArgs, "--endpoints-api", endpointsApi];
  progress(`memory: ${mode}, ${endpointsApi}, ${clusters} clusters`);
  const fleet = await Fleet.start(["remote"]);
  try {
    const baseline = await baselineRss(fleet, args);
    await shapeRemote(fleet, "remote", { services: SERVICES, clusters, gatewayIp: "198.18.0.30" });
    const started = Date.now();
    const [proc, admin] = await startController(fleet, args);
    try {
      await waitStatus(proc, admin, `${clusters} clusters synced`, allSynced(clusters));
      const syncedMs = Date.now() - started;
      await waitStatus(proc, admin, "the writer idle", writerSettled(clusters));
      const idleMs = Date.now() - started;
      const cpuSecondsToIdle = processCpuSeconds(proc.child.pid ?? 0);
      const byThread = [...threadCpuSeconds(proc.child.pid ?? 0)].sort(([, a], [, b]) => b - a).slice(0, 5);
      await sleep(SETTLE_MS);
      const { rss, peak } = processRss(proc.child.pid ?? 0);
      const used = await actorHeaps(admin);
      return {
        mode,
        endpointsApi,
        clusters,
        servicesPerCluster: SERVICES,
        threads: used.length,
        baselineRssMb: mb(baseline),
        rssMb: mb(rss),
        peakRssMb: mb(peak),
        perClusterRssMb: round((rss - baseline) / clusters / 2 ** 20, 2),
        allSyncedMs: syncedMs,
        writerIdleMs: idleMs,
        actorHeapUsedMbAvg: used.length === 0 ? null : mb(used.reduce((a, b) => a + b, 0) / used.length),
        actorHeapUsedMbMax: used.length === 0 ? null : mb(Math.max(...used)),
        cpuSecondsToIdle: round(cpuSecondsToIdle, 2),
        cpuByThread: byThread.map(([name, seconds]) => `${name} ${round(seconds, 2)}`).join(", "),
      };
    } finally {
      await proc.stop();
    }
  } finally {
    await fleet.stop();
  }
}

function notMeasured(mode: string, clusters: number, note: string): Row {
  return {
    mode,
    endpointsApi: "endpointslices",
    clusters,
    servicesPerCluster: SERVICES,
    threads: null,
    baselineRssMb: null,
    rssMb: null,
    peakRssMb: null,
    perClusterRssMb: null,
    allSyncedMs: null,
    writerIdleMs: null,
    actorHeapUsedMbAvg: null,
    actorHeapUsedMbMax: null,
    note,
  };
}

export async function runMemory(opts: BenchOptions): Promise<ScenarioResult> {
  const rows: Row[] = [];
  const save = () => writeResult(opts.out, "memory", { smoke: opts.smoke, entry: "dist/src/main.js run", runs: rows });
  for (const k of opts.memoryClusters ?? (opts.smoke ? [5] : [50, 200])) {
    for (const endpointsApi of BENCH_MODES) {
      rows.push(await measure("thread", endpointsApi, k, THREAD_ARGS));
      save();
    }
  }
  const packedArgs = ["--max-threads", String(PACKED_THREADS)];
  if (opts.skipPacked) {
    rows.push(notMeasured("packed", 1000, "skipped (--skip-packed)"));
  } else if (opts.smoke) {
    rows.push(await measure(`packed(${PACKED_THREADS})`, "endpointslices", 20, packedArgs));
  } else {
    // The same 200 clusters packed, side by side with thread mode: the placement trade-off.
    if (!opts.memoryClusters) rows.push(await measure(`packed(${PACKED_THREADS})`, "endpointslices", 200, packedArgs));
    save();
    rows.push(await measure(`packed(${PACKED_THREADS})`, "endpointslices", 1000, packedArgs));
    save();
    rows.push(await measure("default", "endpointslices", 1000, []));
  }
  printTable(
    "memory and startup (fleet-mirror run from dist/; RSS of the process; per cluster = (RSS − baseline) / K; packed rows in the default endpointslices mode only)",
    rows,
  );
  save();
  const k200 = (api: BenchMode) =>
    rows.find((r) => r.mode === "thread" && r.endpointsApi === api && r.clusters === 200);
  const seconds = (row: Row | undefined) => (row?.allSyncedMs == null ? null : round(row.allSyncedMs / 1000, 2));
  const packed1000 = rows.find((r) => r.mode.startsWith("packed") && r.clusters === 1000);
  const default1000 = rows.find((r) => r.mode === "default" && r.clusters === 1000);
  // sync_200_clusters_s_thread_mode: one thread per cluster (the default configuration's
  // sync_200_clusters_s is default-config.ts's); the packed
  // figure for the same 200 clusters is in memory.json and SUMMARY.md's notes.
  return {
    result: { runs: rows },
    summary: opts.smoke
      ? {}
      : {
          rss_mb_per_cluster_thread_mode: k200("endpointslices")?.perClusterRssMb ?? null,
          sync_200_clusters_s_thread_mode: seconds(k200("endpointslices")),
          rss_mb_per_cluster_thread_mode_endpoints_mode: k200("endpoints")?.perClusterRssMb ?? null,
          rss_total_mb_packed_1000: packed1000?.rssMb ?? null,
          rss_total_mb_1000_default: default1000?.rssMb ?? null,
        },
  };
}
