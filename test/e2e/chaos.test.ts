/**
 * The short chaos run (issue "Survive faults"): 30 seeded steps of remote changes and
 * faults against three remote clusters behind fault-injecting proxies, with the
 * controller as a separate process that is killed and restarted, and gateways whose
 * probe servers die and recover; one step in three changes the other ways of exporting
 * (label export, fleet-wide members, MCS ServiceExports, headless hosts); then the
 * local mirrors, fleet-wide Services and MCS imports must equal the independent oracles
 * (each endpoint ready or not), stable mirrors keep their uids, and user-owned objects
 * are never written. What a run could not exercise (gateway probes without
 * CAP_NET_ADMIN, MCS without its CRDs) is a skipped sub-test, with the reason. The seed is a constant (`NPM_TEST_SEED`), or `CHAOS_SEED`;
 * it is printed, and every failure message starts with it. The long run, with a random
 * seed each time: `npm run test:chaos -- --minutes N`.
 *
 * The sharded run next to it: three replicas `--leader-elect --shards 6` instead of the one
 * controller, on the same remotes, oracle and checks, with replica kill -9s, a SIGTERM
 * rolling restart and a partition of a replica's local API among the steps; on top, the
 * local API server's audit log must show no mirror write by a replica that did not hold the
 * shard of the mirror's cluster. Its seed (`SHARDED_TEST_SEED`, or `CHAOS_SHARDED_SEED`) was
 * chosen because its 16 steps (24 with the mode steps interleaved) kill one replica, cut
 * another off the local API for 20 s (longer than a Lease: its shards move to the last
 * one), send it SIGTERM while cut off (it must still exit 0), kill it, and start the
 * first again. Long runs:
 * `npm run test:chaos -- --replicas 3 --minutes N`.
 */
import { describe, it, type TestContext } from "node:test";
import { type ChaosReport, runChaos } from "../chaos/run.ts";
import { NPM_TEST_SEED } from "../chaos/schedule.ts";

/** The seed of the sharded run in `npm test` (see the module comment for why this one). */
const SHARDED_TEST_SEED = 20265296;

function seedFrom(variable: string, fallback: number): number {
  const text = process.env[variable];
  const seed = text !== undefined && text !== "" ? Number(text) : fallback;
  if (!Number.isInteger(seed)) throw new Error(`${variable}=${text} is not an integer`);
  return seed;
}
const seed = seedFrom("CHAOS_SEED", NPM_TEST_SEED);

/**
 * What the run covered, one sub-test each: a part it could not exercise is a skipped
 * sub-test naming why (listed and counted), never a note alone.
 */
async function coverage(t: TestContext, report: ChaosReport): Promise<void> {
  await t.test("gateways were probed: addresses died and recovered", (st) => {
    if (report.unprobed !== undefined) return st.skip(report.unprobed);
  });
  await t.test("the MCS API was served: ServiceExports made and removed, imports checked", (st) => {
    if (report.mcsUnavailable !== undefined) return st.skip(report.mcsUnavailable);
  });
}
const shardedSeed = seedFrom("CHAOS_SHARDED_SEED", SHARDED_TEST_SEED);

describe("chaos", () => {
  it(`converges to the oracle after 30 random remote changes and faults, deleting no stable mirror and writing nothing it does not own (seed ${seed})`, {
    timeout: 360_000,
  }, async (t) => {
    const replay = `CHAOS_SEED=${seed} node --test test/e2e/chaos.test.ts`;
    t.diagnostic(`chaos seed ${seed} (replay: ${replay})`);
    try {
      const report = await runChaos({ seed, steps: 30, log: (line) => t.diagnostic(line) });
      for (const note of report.notes) t.diagnostic(`note: ${note}`);
      await coverage(t, report);
      t.diagnostic(
        `seed ${seed}: ${report.steps.length} steps, ${report.controllerRestarts} controller restarts, ` +
          `${report.mirrors} mirrors, converged in ${report.settledInMs} ms, ${Math.round(report.durationMs / 1000)} s in all`,
      );
    } catch (error) {
      // The seed again, next to the failure (the diagnostics above may be far away).
      t.diagnostic(`chaos seed ${seed} FAILED (replay: ${replay})`);
      throw error;
    }
  });

  it(`with 3 sharded replicas killed, restarted and partitioned, converges to the oracle and no replica writes a mirror of a shard it does not hold (seed ${shardedSeed})`, {
    timeout: 360_000,
  }, async (t) => {
    const replay = `CHAOS_SHARDED_SEED=${shardedSeed} node --test test/e2e/chaos.test.ts`;
    t.diagnostic(`chaos seed ${shardedSeed}, 3 replicas (replay: ${replay})`);
    try {
      const report = await runChaos({ seed: shardedSeed, steps: 24, replicas: 3, log: (line) => t.diagnostic(line) });
      for (const note of report.notes) t.diagnostic(`note: ${note}`);
      await coverage(t, report);
      t.diagnostic(
        `seed ${shardedSeed}: ${report.steps.length} steps, ${report.controllerRestarts} replica kills and restarts, ` +
          `${report.mirrors} mirrors, converged in ${report.settledInMs} ms, ${Math.round(report.durationMs / 1000)} s in all; ` +
          `${report.audit?.shardHandovers} shard handovers, mirror writes by identity ${JSON.stringify(report.audit?.mirrorWrites)}`,
      );
    } catch (error) {
      t.diagnostic(`chaos seed ${shardedSeed} (3 replicas) FAILED (replay: ${replay})`);
      throw error;
    }
  });
});
