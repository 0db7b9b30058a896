/**
 * Restart with intact mirrors: converge K clusters × S services, stop the controller
 * (`Supervisor.stop()`), start a new one, and measure the local writes it makes (the
 * target is 0: every mirror is already right) and the time until every cluster is synced
 * and the writer's queue is empty.
 */
import { converge } from "./cold-convergence.ts";
import {
  type BenchOptions,
  printTable,
  type ScenarioResult,
  sleep,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

export async function runRestart(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke ? { clusters: 5, services: 5 } : { clusters: 50, services: 50 };
  const run = await converge(size.clusters, size.services);
  const { fleet } = run;
  try {
    await run.supervisor.stop();
    const writesBefore = await fleet.localWriteCount();
    const started = Date.now();
    const supervisor = fleet.startInProcess({ logLevel: "silent", writeQps: 0, writeConcurrency: 16 });
    const syncedMs = await waitAllSynced(supervisor, size.clusters);
    await waitWriterIdle(supervisor);
    const readyMs = Date.now() - started;
    // Give a late write the chance to show up in the count before it is taken.
    await sleep(2_000);
    const writes = (await fleet.localWriteCount()) - writesBefore;
    await supervisor.stop();
    const row = {
      clusters: size.clusters,
      servicesPerCluster: size.services,
      mirrors: run.mirrors,
      localWritesAfterRestart: writes,
      allSyncedMs: syncedMs,
      readyMs,
      firstConvergeMs: run.convergeMs,
    };
    printTable("restart with intact mirrors", [row]);
    writeResult(opts.out, "restart", { smoke: opts.smoke, ...row });
    return { result: row, summary: opts.smoke ? {} : { restart_writes: writes } };
  } finally {
    await fleet.stop();
  }
}
