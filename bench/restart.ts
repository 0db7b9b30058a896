/**
 * Restart with intact mirrors: converge K clusters × S services, stop the controller
 * (`Supervisor.stop()`), start a new one in the same `--endpoints-api` mode, and measure
 * the local writes it makes (the target is 0: every mirror is already right) and the
 * time until every cluster is synced and the writer's queue is empty. Both modes run
 * side by side, EndpointSlices first, each on a fresh world shaped the same.
 */
import { converge } from "./cold-convergence.ts";
import {
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  diffCounts,
  localWritesByKind,
  printTable,
  type ScenarioResult,
  sleep,
  splitWrites,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

async function restartOnce(size: { clusters: number; services: number }, mode: BenchMode) {
  const run = await converge(size.clusters, size.services, mode);
  const { fleet } = run;
  try {
    await run.supervisor.stop();
    const kindsBefore = await localWritesByKind(fleet);
    const started = Date.now();
    const supervisor = fleet.startInProcess({
      endpointsApi: mode,
      logLevel: "silent",
      writeQps: 0,
      writeConcurrency: 16,
    });
    const syncedMs = await waitAllSynced(supervisor, size.clusters);
    await waitWriterIdle(supervisor);
    const readyMs = Date.now() - started;
    // Give a late write the chance to show up in the count before it is taken.
    await sleep(2_000);
    const writesByKind = diffCounts(await localWritesByKind(fleet), kindsBefore);
    await supervisor.stop();
    return {
      endpointsApi: mode,
      clusters: size.clusters,
      servicesPerCluster: size.services,
      mirrors: run.mirrors,
      localWritesAfterRestart: splitWrites(mode, writesByKind).fleetMirror,
      localWritesByKind: JSON.stringify(writesByKind),
      allSyncedMs: syncedMs,
      readyMs,
      firstConvergeMs: run.convergeMs,
    };
  } finally {
    await fleet.stop();
  }
}

export async function runRestart(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke ? { clusters: 5, services: 5 } : { clusters: 50, services: 50 };
  const rows: Awaited<ReturnType<typeof restartOnce>>[] = [];
  for (const mode of BENCH_MODES) rows.push(await restartOnce(size, mode));
  printTable("restart with intact mirrors, both --endpoints-api modes", rows);
  writeResult(opts.out, "restart", { smoke: opts.smoke, runs: rows });
  const writes = (mode: BenchMode) => rows.find((r) => r.endpointsApi === mode)?.localWritesAfterRestart ?? null;
  return {
    result: { runs: rows },
    summary: opts.smoke
      ? {}
      : { restart_writes: writes("endpointslices"), restart_writes_endpoints_mode: writes("endpoints") },
  };
}
