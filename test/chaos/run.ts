/**
 * The chaos run (issue "Survive faults"): three remote clusters behind fault-injecting
 * proxies, the controller as a separate process, and a seeded schedule of remote changes
 * interleaved with faults (cut/stalled/failing watches and requests, API server restarts,
 * controller kill -9 and SIGTERM), and gateways dying and recovering: every gateway has an
 * `mc-probe` port answered by real probe servers (`probes.ts`) that steps stop, make fail
 * and restore (without CAP_NET_ADMIN the run goes on unprobed and its report says why).
 * One step in three changes the other ways of exporting (mode-schedule.ts: label export,
 * fleet-wide members, MCS ServiceExports where the MCS API is installed, headless hosts).
 * The parts: set-up (setup.ts), faults and steps (chaos-run.ts, remote-steps.ts), what
 * is read and compared (observe.ts). Once the faults stop, it asserts:
 *
 * - the local mirrors, fleet-wide Services and MCS imports equal the independent oracles
 *   (`oracle.ts`, `oracle-shared.ts`) within `settleMs`, each endpoint ready or not as its
 *   address's probe server answers or not — this is also the proof that no key is stuck;
 * - the mirrors of Services exported throughout the run were never deleted (same uids);
 * - objects fleet-mirror does not own were never written (same resourceVersions);
 * - the controller exited 0 on every SIGTERM.
 *
 * With `replicas` (`--replicas R`), R replicas `--leader-elect --shards 6` replace the one
 * controller (replica-faults.ts: replica kill -9, SIGTERM rolling restarts, partitions of a
 * replica's local API), every remote is registered under a second name so that every
 * replica hosts clusters, and the audit log must show no mirror write by a replica that
 * did not hold its cluster's shard.
 *
 * `runChaos` is used by `test/e2e/chaos.test.ts` (short) and by `main` below:
 *
 *     npm run test:chaos -- --minutes 30 [--seed 1234] [--replicas 3]
 *
 * Every failure message starts with the seed; rerun with `--seed` to replay the schedule.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { Fleet } from "../helpers/fleet.ts";
import { ChaosRun } from "./chaos-run.ts";
import { SingleController } from "./controller.ts";
import type { Registration } from "./observe.ts";
import { CHAOS_SHARDS, ChaosReplicas, replicaNames } from "./replica-faults.ts";
import { Schedule } from "./schedule.ts";
import { setUpWorld } from "./setup.ts";
import { identityOf, STABLE, USER_OBJECTS, uidOf } from "./world.ts";

export const CHAOS_CLUSTERS = ["east", "west", "north"] as const;

/**
 * A sharded run registers every remote a second time under an alias, so that its six
 * cluster names fall on five of the six shards (east→2, west→0, north→2, east3→5,
 * west4→4, north1→3) and every replica hosts clusters: with the three names alone, two
 * shards would hold them all.
 */
const SHARDED_ALIASES: Readonly<Record<string, string>> = { east: "east3", west: "west4", north: "north1" };

export interface ChaosOptions {
  readonly seed: number;
  /** Run exactly this many steps … */
  readonly steps?: number;
  /** … or generate steps until this many minutes have passed. */
  readonly minutes?: number;
  /** Bound on convergence once the faults stop. Default 90 s. */
  readonly settleMs?: number;
  /** Weight of the slow faults (restarts). Default 1. */
  readonly heavyWeight?: number;
  /** Share of faults among the steps, 0–1. Default 0.4. */
  readonly faultShare?: number;
  /**
   * Run this many replicas `--leader-elect --shards 6` (replica-faults.ts) instead of one
   * controller, with replica kills, rolling restarts and partitions among the faults.
   */
  readonly replicas?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly seed: number;
  readonly steps: readonly string[];
  readonly mirrors: number;
  readonly settledInMs: number;
  readonly controllerRestarts: number;
  /** Sharded runs, from the local API server's audit log: successful mirror writes per identity, and shard handovers. */
  readonly audit?: { readonly mirrorWrites: Readonly<Record<string, number>>; readonly shardHandovers: number };
  readonly durationMs: number;
  readonly notes: readonly string[];
  /** Fleet-wide Services and MCS imports the oracle expected at the end. */
  readonly shared: number;
  /** Why the gateways were not probed; absent: they were. */
  readonly unprobed?: string;
  /** Why the MCS API was not exercised; absent: it was. */
  readonly mcsUnavailable?: string;
}

/** A failed chaos run; the message starts with the seed and carries what is needed to diagnose it. */
export class ChaosFailure extends Error {
  override name = "ChaosFailure";
}

/**
 * Runs one chaos run end to end: control plane, setup, schedule, faults off, assertions.
 * Throws `ChaosFailure` (message starting with the seed) when an assertion fails.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  try {
    return await runSeeded(options);
  } catch (error) {
    if (error instanceof ChaosFailure) throw error;
    // Anything else (the control plane would not start, a setup call failed): labelled
    // with the seed too, so every failure can be replayed.
    throw new ChaosFailure(
      `chaos seed ${options.seed}: ${error instanceof Error ? error.message : String(error)}\n-- replay: npm run test:chaos -- ${replayArgs(options).join(" ")}`,
      { cause: error },
    );
  }
}

/** The command-line arguments that replay a run with these options. */
function replayArgs(options: ChaosOptions): string[] {
  return [
    `--seed ${options.seed}`,
    options.minutes !== undefined ? `--minutes ${options.minutes}` : "",
    options.steps !== undefined ? `--steps ${options.steps}` : "",
    options.heavyWeight !== undefined ? `--heavy-weight ${options.heavyWeight}` : "",
    options.faultShare !== undefined ? `--fault-share ${options.faultShare}` : "",
    options.replicas !== undefined ? `--replicas ${options.replicas}` : "",
  ].filter(Boolean);
}

async function runSeeded(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const seed = options.seed;
  const started = Date.now();
  const settleMs = options.settleMs ?? 90_000;
  const replay = replayArgs(options);
  log(`chaos seed ${seed} (replay: npm run test:chaos -- ${replay.join(" ")})`);

  const sharded = options.replicas !== undefined && options.replicas > 0;
  const registrations: Registration[] = CHAOS_CLUSTERS.map((remote) => ({ name: remote, remote }));
  if (sharded)
    for (const remote of CHAOS_CLUSTERS) registrations.push({ name: SHARDED_ALIASES[remote] ?? `${remote}2`, remote });
  // A sharded run is judged by the local API server's audit log too (replica-faults.ts).
  const fleet = await Fleet.start([...CHAOS_CLUSTERS], sharded ? { audit: true } : {});
  const run = new ChaosRun(seed, fleet, CHAOS_CLUSTERS, registrations, log);
  const fail = (what: string, details: string): never => {
    throw new ChaosFailure(
      [
        `chaos seed ${seed}: ${what}`,
        details,
        `-- replay: npm run test:chaos -- ${[...replay.filter((r) => !/^--(minutes|steps)/.test(r)), `--steps ${run.steps.length}`].join(" ")}`,
        `-- steps (${run.steps.length}) --`,
        ...run.steps.map((s, i) => `${i + 1}. ${s}`),
        run.problems.length > 0 ? `-- problems --\n${run.problems.join("\n")}` : "",
        run.controllers?.diagnostics() ?? "",
      ].join("\n"),
    );
  };

  try {
    const userHeld = await setUpWorld(run);
    const findings = { problems: run.problems, notes: run.notes };
    if (sharded) {
      const replicas = await ChaosReplicas.create({
        fleet,
        findings,
        count: options.replicas ?? 0,
        clusters: registrations.map((r) => r.name),
        log,
      });
      log(replicas.describe());
      run.controllers = replicas;
      run.shards = CHAOS_SHARDS;
    } else run.controllers = new SingleController(fleet, findings);
    await run.controllers.start();

    const initialStart = Date.now();
    let initial = await run.diff(userHeld);
    while (initial.lines.length > 0 && Date.now() - initialStart < settleMs) {
      await sleep(500);
      initial = await run.diff(userHeld);
    }
    if (initial.lines.length > 0) fail("the initial mirrors never matched the oracle", initial.lines.join("\n"));
    log(`initial ${initial.mirrors} mirrors in place after ${Date.now() - initialStart} ms`);

    const stableUids = new Map<string, string>();
    for (const { name: cluster } of registrations) {
      for (const s of STABLE) {
        for (const kind of ["Service", "Endpoints"] as const) {
          const key = `${kind} ${s.namespace}/${s.name}-${cluster}`;
          stableUids.set(key, await uidOf(fleet.local, kind, s.namespace, `${s.name}-${cluster}`));
        }
      }
    }
    const userIdentities = new Map<string, string>();
    for (const u of USER_OBJECTS) {
      userIdentities.set(
        `${u.kind} ${u.namespace}/${u.name}`,
        await identityOf(fleet.local, u.kind, u.namespace, u.name),
      );
    }

    // -- the schedule ---------------------------------------------------------------
    const schedule = new Schedule({
      seed,
      clusters: CHAOS_CLUSTERS,
      proxies: true,
      probeAddresses: run.probes?.addresses ?? [],
      modes: { mcs: run.mcs === true },
      ...(sharded ? { replicas: replicaNames(options.replicas ?? 0) } : {}),
      ...(options.heavyWeight !== undefined ? { heavyWeight: options.heavyWeight } : {}),
      ...(options.faultShare !== undefined ? { faultShare: options.faultShare } : {}),
    });
    const until = options.minutes !== undefined ? Date.now() + options.minutes * 60_000 : Number.POSITIVE_INFINITY;
    const maxSteps = options.steps ?? Number.POSITIVE_INFINITY;
    while (run.steps.length < maxSteps && Date.now() < until) {
      try {
        await run.run(schedule.next());
      } catch (error) {
        fail(
          "a step could not be applied",
          error instanceof Error ? `${error.message}\n${String(error.cause)}` : String(error),
        );
      }
    }

    // -- faults off, then the assertions --------------------------------------------
    log("faults off; waiting for convergence");
    await run.quiesce();
    const settleStart = Date.now();
    let final = await run.diff(userHeld);
    while (final.lines.length > 0 && Date.now() - settleStart < settleMs) {
      await sleep(500);
      final = await run.diff(userHeld);
    }
    const settledInMs = Date.now() - settleStart;
    if (final.lines.length > 0) {
      fail(`local state did not equal the oracle within ${settleMs} ms`, `-- diff --\n${final.lines.join("\n")}`);
    }
    log(
      `converged to ${final.mirrors} mirrors and ${final.shared} fleet-wide Services and imports (${final.notReady} endpoints not ready) in ${settledInMs} ms`,
    );

    const deleted: string[] = [];
    for (const [key, uid] of stableUids) {
      const [kind, path] = key.split(" ") as ["Service" | "Endpoints", string];
      const [namespace = "", name = ""] = path.split("/");
      const now = await uidOf(fleet.local, kind, namespace, name);
      if (now !== uid) deleted.push(`${key}: ${uid} → ${now}`);
    }
    if (deleted.length > 0) fail("mirrors of Services exported throughout the run were deleted", deleted.join("\n"));

    const written: string[] = [];
    for (const u of USER_OBJECTS) {
      const key = `${u.kind} ${u.namespace}/${u.name}`;
      const now = await identityOf(fleet.local, u.kind, u.namespace, u.name).catch(
        (e: unknown) => `gone (${String(e)})`,
      );
      if (now !== userIdentities.get(key)) written.push(`${key}: ${userIdentities.get(key)} → ${now}`);
    }
    if (written.length > 0) fail("objects fleet-mirror does not own were written", written.join("\n"));

    if (run.problems.length > 0) fail("problems during the run", run.problems.join("\n"));
    const failures = await run.controllers.verify();
    if (failures.length > 0) fail(sharded ? "the replicas' checks failed" : "the controller died", failures.join("\n"));
    return {
      seed,
      steps: run.steps,
      mirrors: final.mirrors,
      settledInMs,
      controllerRestarts: run.controllers.restarts,
      ...(run.controllers instanceof ChaosReplicas ? { audit: run.controllers.auditSummary() } : {}),
      durationMs: Date.now() - started,
      notes: run.notes,
      shared: final.shared,
      ...(run.unprobed !== undefined ? { unprobed: run.unprobed } : {}),
      ...(run.mcs !== true ? { mcsUnavailable: run.mcs.unavailable } : {}),
    };
  } finally {
    await run.stopAll();
    await fleet.stop();
  }
}

/**
 * `node test/chaos/run.ts --minutes N [--seed S]` (or `--steps N`); also `--settle-seconds N`
 * (default 90), `--heavy-weight W` (restarts, default 1), `--fault-share F` (0–1, default 0.4),
 * `--replicas R` (a sharded run: R replicas, 6 shards; replica-faults.ts).
 * Exit code 0 on success, 1 on a failed assertion (the message starts with the seed), 2 on usage.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      minutes: { type: "string" },
      seed: { type: "string" },
      steps: { type: "string" },
      "settle-seconds": { type: "string" },
      "heavy-weight": { type: "string" },
      "fault-share": { type: "string" },
      replicas: { type: "string" },
    },
    allowPositionals: false,
  });
  const seed = values.seed !== undefined ? Number(values.seed) : (Date.now() % 2_147_483_647) >>> 0;
  if (!Number.isInteger(seed)) throw new Error(`--seed: ${values.seed} is not an integer`);
  const minutes = values.minutes !== undefined ? Number(values.minutes) : undefined;
  const steps = values.steps !== undefined ? Number(values.steps) : undefined;
  const replicas = values.replicas !== undefined ? Number(values.replicas) : undefined;
  if (replicas !== undefined && !(Number.isInteger(replicas) && replicas >= 1)) {
    process.stderr.write(`--replicas: ${values.replicas} is not a positive integer\n`);
    return 2;
  }
  if (minutes === undefined && steps === undefined) {
    process.stderr.write("usage: node test/chaos/run.ts --minutes N [--seed S]  (or --steps N)\n");
    return 2;
  }
  try {
    const report = await runChaos({
      seed,
      ...(minutes !== undefined ? { minutes } : {}),
      ...(steps !== undefined ? { steps } : {}),
      ...(values["settle-seconds"] !== undefined ? { settleMs: Number(values["settle-seconds"]) * 1_000 } : {}),
      ...(values["heavy-weight"] !== undefined ? { heavyWeight: Number(values["heavy-weight"]) } : {}),
      ...(values["fault-share"] !== undefined ? { faultShare: Number(values["fault-share"]) } : {}),
      ...(replicas !== undefined ? { replicas } : {}),
    });
    for (const note of report.notes) process.stdout.write(`note: ${note}\n`);
    process.stdout.write(
      `chaos seed ${report.seed}: PASS — ${report.steps.length} steps, ${report.controllerRestarts} controller restarts, ` +
        `${report.mirrors} mirrors, converged in ${report.settledInMs} ms, ${Math.round(report.durationMs / 1000)} s in all\n`,
    );
    if (report.audit)
      process.stdout.write(
        `${report.audit.shardHandovers} shard handovers; mirror writes by identity: ${JSON.stringify(report.audit.mirrorWrites)}\n`,
      );
    return 0;
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
