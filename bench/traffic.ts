/**
 * Real traffic's failover: how long after a gateway dies every request through the
 * fleet-wide name is answered by the surviving cluster.
 *
 * The world is the traffic tests' (test/helpers/traffic-world.ts: the demo's fleet,
 * fleet-mirror in its default EndpointSlices mode, kube-proxy in nftables mode, CoreDNS,
 * a client Pod in a network namespace). Each run: `search-federated` answered by east
 * and west; west's gateway dies (its probe and traffic servers stop, probe period 1 s);
 * the client sends 5 requests at once every 200 ms (25 a second, each a new connection);
 * `trafficFailoverS` is the time from the death to the first round from which on every
 * request was answered by east, for at least 5 s (smoke: 2 s); then west comes back and
 * both answer again before the next run. The summary's `traffic_failover_s` is the
 * median of 5 runs (smoke: 1, no summary); the maximum is in the result file.
 *
 * The path from death to failover: 3 refused probes (1 s apart) → the mirror's slice
 * says not ready → kube-proxy's next sync (at most 1 s after the change) drops the
 * endpoint. Requests sent meanwhile that kube-proxy sends to west are refused there.
 */
import { describeTally, judgeFailover, sendRounds, tally } from "../sandbox/traffic-rounds.ts";
import { eventually } from "../test/helpers/kube.ts";
import { startTrafficWorld, type TrafficWorld, trafficSkipReason } from "../test/helpers/traffic-world.ts";
import { type BenchOptions, percentile, printTable, round, type ScenarioResult, writeResult } from "./harness.ts";

const NAME = "search-federated";
const PORT = 80;
const PER_ROUND = 5;
const ROUND_MS = 200;

/** Waits until one round of 20 is answered by both clusters and nothing failed. */
async function bothAnswer(world: TrafficWorld): Promise<void> {
  let last = "";
  await eventually(
    () => `${NAME} answered by east and west (last: ${last})`,
    async () => {
      const t = tally(await world.send(NAME, PORT, 20));
      last = describeTally(t);
      return Object.keys(t.errors).length === 0 && (t.answers["east"] ?? 0) > 0 && (t.answers["west"] ?? 0) > 0
        ? true
        : undefined;
    },
    120_000,
    200,
  );
}

async function failoverRun(world: TrafficWorld, stableS: number) {
  await bothAnswer(world);
  const diedAt = Date.now();
  await world.gateways.stopAnswering("west");
  const rounds = await sendRounds(() => world.send(NAME, PORT, PER_ROUND), {
    roundMs: ROUND_MS,
    maxMs: 120_000,
    done: (r) => judgeFailover(r, diedAt, ["east"]).stableS >= stableS,
  });
  const run = judgeFailover(rounds, diedAt, ["east"]);
  const all = tally(rounds.flatMap((r) => r.outcomes));
  await world.gateways.answerAgain("west");
  const backAt = Date.now();
  await bothAnswer(world);
  return {
    failoverS: run.failoverS === undefined ? null : round(run.failoverS, 1),
    stableS: round(run.stableS, 1),
    requests: run.sent,
    failedBeforeFailover: run.failedBefore,
    outcomes: describeTally(all),
    backS: round((Date.now() - backAt) / 1000, 1),
  };
}

export async function runTraffic(opts: BenchOptions): Promise<ScenarioResult> {
  const skip = await trafficSkipReason();
  if (skip) {
    process.stdout.write(`traffic: not measured: ${skip}\n`);
    writeResult(opts.out, "traffic", { smoke: opts.smoke, skipped: skip });
    return { result: { skipped: skip }, summary: opts.smoke ? {} : { traffic_failover_s: null } };
  }
  const world = await startTrafficWorld();
  try {
    const runs = [];
    for (let i = 0; i < (opts.smoke ? 1 : 5); i++) runs.push(await failoverRun(world, opts.smoke ? 2 : 5));
    printTable(`${NAME}: west's gateway dies (${PER_ROUND} requests every ${ROUND_MS} ms)`, runs);
    const measured = runs.map((r) => r.failoverS).filter((s): s is number => s !== null);
    const trafficFailoverS = measured.length === runs.length ? percentile(measured, 50) : null;
    const result = {
      name: NAME,
      perRound: PER_ROUND,
      roundMs: ROUND_MS,
      probePeriodS: 1,
      runs,
      trafficFailoverS,
      trafficFailoverMaxS: measured.length > 0 ? Math.max(...measured) : null,
    };
    writeResult(opts.out, "traffic", { smoke: opts.smoke, ...result });
    return { result, summary: opts.smoke ? {} : { traffic_failover_s: trafficFailoverS } };
  } finally {
    await world.stop();
  }
}
