/**
 * The soak: `npm run bench -- soak [--minutes 30] [--smoke] [--out dir]` (never part of
 * the default run). 200 clusters (5 remote API servers behind fault proxies, 40 cluster
 * names each), the default placement and settings sized for the chart's Pod (1 GiB memory limit), 50 mirror changes per second over the
 * fleet (as steady-latency counts them: one remote change is a change of each of its
 * remote's cluster names), and a fault every minute from the chaos repertoire (a watch
 * cut, a remote API server killed and restarted, a gateway losing its address for 20 s,
 * an actor crash), for `--minutes` (default 30; `--smoke`: 2 minutes, 10 clusters).
 *
 * The controller runs in this process (its test hooks on, so actors can be crashed),
 * with its admin server: every sample reads `/metrics` (process_resident_memory_bytes,
 * fleet_mirror_thread_heap_used_bytes over every thread), `/proc/self/fd` and
 * `/proc/self/task`, and the writer's queue depth and write rate. The process is the
 * controller plus this harness, whose own state (a few clients and the samples) does
 * not grow with time.
 *
 * After the last fault the load stops, and the local mirrors must converge to the chaos
 * oracle (test/chaos/oracle.ts; fleet-mirror's EndpointSlices read as the Endpoints the
 * oracle describes); a mirror of a Service exported throughout whose uid changed is a
 * wrongful delete. Summary keys (bench/targets.ts): soak_rss_growth_pct (RSS at the end
 * against at 10 min; a run shorter than 30 min compares against its first third),
 * soak_fd_growth, soak_wrongful_deletes. bench/chart-soak.ts draws the samples.
 */
import { readdirSync } from "node:fs";
import { availableParallelism } from "node:os";
import { createMetrics } from "../src/admin/metrics.ts";
import { runAdminSource } from "../src/admin/run-source.ts";
import { startAdminServer } from "../src/admin/server.ts";
import { alwaysLeading } from "../src/leader/leadership.ts";
import { silentLogger } from "../src/log.ts";
import { Supervisor } from "../src/supervisor/supervisor.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import {
  type BenchOptions,
  printTable,
  progress,
  round,
  type ScenarioResult,
  sleep,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";
import { soakOracleDiff, stableUids } from "./soak-oracle.ts";
import { applyFault, offerSoakLoad, type SoakFault, type SoakShape, shapeSoak } from "./soak-world.ts";

/** The Helm chart's default memory limit (charts/fleet-mirror/values.yaml, resources.limits). */
const CHART_MEMORY_LIMIT_BYTES = 2 ** 30;

const FULL: SoakShape = {
  remotes: 5,
  clustersPerRemote: 40,
  stable: 5,
  toggled: 5,
  mirrorChangesPerS: 50,
  faultEveryS: 60,
};
const SMOKE: SoakShape = {
  remotes: 2,
  clustersPerRemote: 5,
  stable: 3,
  toggled: 2,
  mirrorChangesPerS: 10,
  faultEveryS: 15,
};

export interface SoakSample {
  readonly minute: number;
  readonly rssMb: number;
  readonly heapMb: number | null;
  readonly fds: number;
  readonly threads: number;
  readonly queueDepth: number;
  readonly writesPerS: number;
}

export async function runSoak(opts: BenchOptions & { readonly minutes?: number | undefined }): Promise<ScenarioResult> {
  const shape = opts.smoke ? SMOKE : FULL;
  const minutes = opts.minutes ?? (opts.smoke ? 2 : 30);
  const remoteNames = Array.from({ length: shape.remotes }, (_, i) => `s${i + 1}`);
  const fleet = await Fleet.start(remoteNames);
  try {
    progress(`soak: ${shape.remotes * shape.clustersPerRemote} clusters over ${shape.remotes} remote API servers`);
    const remotes = await shapeSoak(fleet, remoteNames, shape);
    const config = fleet.config({ endpointsApi: "endpointslices", logLevel: "silent" });
    const supervisor = new Supervisor({
      config,
      localConnection: fleet.controllerConnection(),
      logger: silentLogger(),
      testHooks: true,
      // As the chart's Pod runs (its memory limit, 1 GiB): the default placement and the
      // packed threads' heap cap are sized from it, as in a cluster. Without it, an
      // injected leak may grow a packed thread to the 1 GiB no-limit cap before V8
      // stops it, which the RSS series would show as growth.
      hostLimits: { cpus: availableParallelism(), memoryLimitBytes: CHART_MEMORY_LIMIT_BYTES },
    });
    const source = runAdminSource(
      () => supervisor,
      () => alwaysLeading("soak"),
    );
    const admin = await startAdminServer({
      addr: "127.0.0.1:0",
      logger: silentLogger(),
      source,
      registry: createMetrics(source),
    });
    supervisor.start();
    try {
      await waitAllSynced(supervisor, shape.remotes * shape.clustersPerRemote);
      await waitWriterIdle(supervisor);
      const before = await stableUids(fleet, remotes, shape);
      progress(`soak: ${before.size} mirrors of Services exported throughout; running ${minutes} min`);

      const startedAt = Date.now();
      const endAt = startedAt + minutes * 60_000;
      const samples: SoakSample[] = [];
      const faults: SoakFault[] = [];
      const sampleEveryMs = opts.smoke ? 5_000 : 10_000;
      let lastWrites = writesOf(supervisor);
      let lastAt = Date.now();
      const sample = async (): Promise<void> => {
        const writes = writesOf(supervisor);
        const now = Date.now();
        samples.push({
          minute: round((now - startedAt) / 60_000, 2),
          ...(await processFigures(admin.url)),
          queueDepth: supervisor.status().writer?.queueDepth ?? 0,
          writesPerS: round((writes - lastWrites) / ((now - lastAt) / 1000), 1),
        });
        lastWrites = writes;
        lastAt = now;
      };
      await sample();
      const sampler = (async () => {
        while (Date.now() < endAt) {
          await sleep(Math.min(sampleEveryMs, Math.max(0, endAt - Date.now())));
          await sample();
        }
      })();
      const load = offerSoakLoad(fleet, remotes, shape, () => Date.now() >= endAt);
      const faulting = (async () => {
        for (let n = 0; ; n++) {
          const due = startedAt + (n + 1) * shape.faultEveryS * 1000;
          if (due >= endAt - 20_000) return;
          await sleep(Math.max(0, due - Date.now()));
          const fault = await applyFault(n, { fleet, remotes, supervisor, startedAt, downS: opts.smoke ? 5 : 20 });
          progress(`soak: fault ${fault.kind} on ${fault.target}${fault.ok ? "" : ` FAILED: ${fault.error}`}`);
          faults.push(fault);
        }
      })();
      const offered = await load;
      await Promise.all([sampler, faulting]);

      progress("soak: load and faults off; waiting for the oracle");
      for (const remote of remotes) remote.proxy.setRules({});
      for (const name of remoteNames)
        if (!fleet.plane.apiServerProcess(name).running) await fleet.plane.startApiServer(name);
      const settleStart = Date.now();
      let diff = await soakOracleDiff(fleet, remotes);
      while (diff.length > 0 && Date.now() - settleStart < 300_000) {
        await sleep(2_000);
        diff = await soakOracleDiff(fleet, remotes);
      }
      const settledS = round((Date.now() - settleStart) / 1000, 1);
      const after = await stableUids(fleet, remotes, shape);
      const wrongful = [...before].filter(([key, uid]) => after.get(key) !== uid).map(([key]) => key);

      const reference = referenceSample(samples, minutes);
      const last = samples[samples.length - 1];
      const rssGrowthPct =
        reference && last ? round(((last.rssMb - reference.rssMb) / reference.rssMb) * 100, 1) : null;
      const fdGrowth = reference && last ? last.fds - reference.fds : null;
      const row = {
        minutes,
        clusters: shape.remotes * shape.clustersPerRemote,
        remoteChanges: offered.changes,
        failedChanges: offered.failed,
        faults: faults.length,
        referenceMinute: reference?.minute ?? null,
        rssMbAtReference: reference?.rssMb ?? null,
        rssMbAtEnd: last?.rssMb ?? null,
        rssGrowthPct,
        fdsAtReference: reference?.fds ?? null,
        fdsAtEnd: last?.fds ?? null,
        fdGrowth,
        threadsAtEnd: last?.threads ?? null,
        settledS,
        oracleDiffLines: diff.length,
        wrongfulDeletes: wrongful.length,
        writerRestarts: supervisor.status().writerRestarts,
      };
      printTable(`soak: ${minutes} min, ${row.clusters} clusters, a fault every ${shape.faultEveryS} s`, [row]);
      if (diff.length > 0) process.stdout.write(`oracle diff (first 20):\n${diff.slice(0, 20).join("\n")}\n`);
      if (wrongful.length > 0) process.stdout.write(`wrongful deletes: ${wrongful.slice(0, 20).join(", ")}\n`);
      writeResult(opts.out, "soak", {
        smoke: opts.smoke,
        shape,
        ...row,
        oracleDiff: diff.slice(0, 50),
        wrongful: wrongful.slice(0, 50),
        faultLog: faults,
        samples,
      });
      return { result: row, summary: opts.smoke ? {} : soakSummary(row) };
    } finally {
      await supervisor.stop();
      await admin.close();
      for (const remote of remotes) await remote.proxy.stop().catch(() => undefined);
    }
  } finally {
    await fleet.stop();
  }
}

/** The summary keys of a soak result (its row, or the soak.json written from it). */
export function soakSummary(row: Readonly<Record<string, unknown>> | undefined): Record<string, number | null> {
  const num = (value: unknown): number | null => (typeof value === "number" ? value : null);
  return {
    soak_rss_growth_pct: num(row?.["rssGrowthPct"]),
    soak_fd_growth: num(row?.["fdGrowth"]),
    soak_wrongful_deletes: num(row?.["wrongfulDeletes"]),
  };
}

/** The sample the end is compared with: at 10 min of a run of 30 min or more, else at a third of the run. */
function referenceSample(samples: readonly SoakSample[], minutes: number): SoakSample | undefined {
  const at = minutes >= 30 ? 10 : minutes / 3;
  return samples.find((s) => s.minute >= at) ?? samples[0];
}

/** RSS and V8 heaps from the admin server's /metrics; fds and threads from /proc. */
async function processFigures(adminUrl: string): Promise<Pick<SoakSample, "rssMb" | "heapMb" | "fds" | "threads">> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  let rss: number | undefined;
  let heap: number | undefined;
  for (const line of text.split("\n")) {
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (line.startsWith("process_resident_memory_bytes ")) rss = value;
    else if (line.startsWith("fleet_mirror_thread_heap_used_bytes")) heap = (heap ?? 0) + value;
  }
  const mb = (bytes: number) => round(bytes / 2 ** 20, 1);
  return {
    rssMb: mb(rss ?? process.memoryUsage().rss),
    heapMb: heap === undefined ? null : mb(heap),
    fds: readdirSync("/proc/self/fd").length,
    threads: readdirSync("/proc/self/task").length,
  };
}

/** Writes made by the writer since the controller started (across writer restarts). */
function writesOf(supervisor: Supervisor): number {
  return Object.values(supervisor.counters().writer.writes).reduce((sum, n) => sum + n, 0);
}
