/**
 * The short chaos run (issue "Survive faults"): ≈ 20 seeded steps of remote changes and
 * faults against three remote clusters behind fault-injecting proxies, with the
 * controller as a separate process that is killed and restarted, and gateways whose
 * probe servers die and recover; then the local mirrors must equal the independent
 * oracle (each endpoint ready or not), stable mirrors keep their uids, and user-owned
 * objects are never written. The seed is a constant (`NPM_TEST_SEED`), or `CHAOS_SEED`;
 * it is printed, and every failure message starts with it. The long run, with a random
 * seed each time: `npm run test:chaos -- --minutes N`.
 */
import { describe, it } from "node:test";
import { runChaos } from "../chaos/run.ts";
import { NPM_TEST_SEED } from "../chaos/schedule.ts";

const envSeed = process.env.CHAOS_SEED;
const seed = envSeed !== undefined && envSeed !== "" ? Number(envSeed) : NPM_TEST_SEED;
if (!Number.isInteger(seed)) throw new Error(`CHAOS_SEED=${envSeed} is not an integer`);

describe("chaos", () => {
  it(`converges to the oracle after 20 random remote changes and faults, deleting no stable mirror and writing nothing it does not own (seed ${seed})`, {
    timeout: 360_000,
  }, async (t) => {
    const replay = `CHAOS_SEED=${seed} node --test test/integration/chaos.test.ts`;
    t.diagnostic(`chaos seed ${seed} (replay: ${replay})`);
    try {
      const report = await runChaos({ seed, steps: 20, log: (line) => t.diagnostic(line) });
      for (const note of report.notes) t.diagnostic(`note: ${note}`);
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
});
