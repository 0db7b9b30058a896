/**
 * Memory and startup (generalizes bench/actor-memory.ts): K credentials Secrets
 * (distinct cluster names) all pointing at one remote API server with S exported
 * Services. Reports process RSS before the controller starts (after a full GC), once
 * every cluster is synced and the writer is idle, (RSS − baseline) / K, the time from
 * start until every cluster is synced, and the heap of every actor thread
 * (`Worker.getHeapStatistics()`).
 *
 * Thread mode (one thread per cluster) at K = 50 and 200. Packed mode at K = 1000 only
 * when `Config` has `maxThreads`; otherwise that row is null with the reason.
 */
import type { Worker } from "node:worker_threads";
import { type Config, defaultConfig } from "../src/config.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import {
  type BenchOptions,
  mb,
  printTable,
  round,
  type ScenarioResult,
  shapeRemote,
  sleep,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

const SERVICES = 10;
const PACKED_THREADS = 8;

type Row = {
  readonly mode: string;
  readonly clusters: number;
  readonly servicesPerCluster: number;
  readonly threads: number | null;
  readonly baselineRssMb: number | null;
  readonly rssMb: number | null;
  readonly perClusterRssMb: number | null;
  readonly allSyncedMs: number | null;
  readonly actorHeapUsedMbAvg: number | null;
  readonly actorHeapUsedMbMax: number | null;
  readonly actorHeapTotalMbAvg: number | null;
  readonly note?: string;
};

/** Whether the controller has the packed placement (`Config.maxThreads`). */
export function packedModeAvailable(): boolean {
  return "maxThreads" in defaultConfig();
}

async function measure(mode: string, clusters: number, overrides: Partial<Config>): Promise<Row> {
  const fleet = await Fleet.start(["remote"]);
  try {
    const names = await shapeRemote(fleet, "remote", { services: SERVICES, clusters, gatewayIp: "192.0.2.30" });
    globalThis.gc?.();
    await sleep(500);
    const baseline = process.memoryUsage().rss;
    const started = Date.now();
    const supervisor = fleet.startInProcess({ logLevel: "silent", ...overrides });
    await waitAllSynced(supervisor, clusters);
    const syncedMs = Date.now() - started;
    await waitWriterIdle(supervisor);
    await sleep(3_000);
    globalThis.gc?.();
    const rss = process.memoryUsage().rss;
    const threads = new Set<Worker>();
    for (const name of names) {
      const thread = supervisor.actorThread(name);
      if (thread) threads.add(thread);
    }
    const heaps = await Promise.all([...threads].map((t) => t.getHeapStatistics()));
    const used = heaps.map((h) => h.used_heap_size);
    const total = heaps.map((h) => h.total_heap_size);
    const avg = (v: number[]) => (v.length === 0 ? null : mb(v.reduce((a, b) => a + b, 0) / v.length));
    await supervisor.stop();
    return {
      mode,
      clusters,
      servicesPerCluster: SERVICES,
      threads: threads.size,
      baselineRssMb: mb(baseline),
      rssMb: mb(rss),
      perClusterRssMb: round((rss - baseline) / clusters / 2 ** 20, 2),
      allSyncedMs: syncedMs,
      actorHeapUsedMbAvg: avg(used),
      actorHeapUsedMbMax: used.length === 0 ? null : mb(Math.max(...used)),
      actorHeapTotalMbAvg: avg(total),
    };
  } finally {
    await fleet.stop();
  }
}

function notMeasured(mode: string, clusters: number, note: string): Row {
  return {
    mode,
    clusters,
    servicesPerCluster: SERVICES,
    threads: null,
    baselineRssMb: null,
    rssMb: null,
    perClusterRssMb: null,
    allSyncedMs: null,
    actorHeapUsedMbAvg: null,
    actorHeapUsedMbMax: null,
    actorHeapTotalMbAvg: null,
    note,
  };
}

export async function runMemory(opts: BenchOptions): Promise<ScenarioResult> {
  const rows: Row[] = [];
  const save = () => writeResult(opts.out, "memory", { smoke: opts.smoke, runs: rows });
  for (const k of opts.smoke ? [5] : [50, 200]) {
    rows.push(await measure("thread", k, {}));
    save();
  }
  if (opts.skipPacked) {
    rows.push(notMeasured("packed", 1000, "skipped (--skip-packed)"));
  } else if (packedModeAvailable()) {
    // Passed by name so this file typechecks with and without the packed placement.
    const packed: Partial<Config> = Object.fromEntries([["maxThreads", PACKED_THREADS]]);
    rows.push(await measure(`packed(${PACKED_THREADS})`, opts.smoke ? 20 : 1000, packed));
  } else {
    rows.push(notMeasured("packed", 1000, "Config has no maxThreads: the packed placement does not exist yet"));
  }
  printTable("memory and startup (RSS of the whole process; per cluster = (RSS − baseline) / K)", rows);
  save();
  const k200 = rows.find((r) => r.mode === "thread" && r.clusters === 200);
  const packed1000 = rows.find((r) => r.mode.startsWith("packed") && r.clusters === 1000);
  return {
    result: { runs: rows },
    summary: opts.smoke
      ? {}
      : {
          rss_mb_per_cluster_thread_mode: k200?.perClusterRssMb ?? null,
          sync_200_clusters_s: k200?.allSyncedMs == null ? null : round(k200.allSyncedMs / 1000, 2),
          rss_total_mb_packed_1000: packed1000?.rssMb ?? null,
        },
  };
}
