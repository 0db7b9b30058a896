/**
 * The sharded side of a chaos run: the replicas of one Deployment (`fleet-mirror run
 * --leader-elect --shards S`, real processes with Pod-bound tokens: test/helpers/replicas.ts),
 * each behind its own fault proxy to the local API server, and their faults
 * (`ReplicaStep`): kill -9 (down until `start-replica` or the end of the schedule), a
 * SIGTERM rolling restart (must exit 0 within the Pod's grace period; started again at
 * once) and a timed partition of the replica's local API (every request and stream through
 * its proxy stalls, then is let through, unless its client gave up).
 *
 * Besides the oracle's checks, `verify()` requires every replica running and the shards
 * spread fairly over them again, and asks the local API server's audit log: no mirror
 * write (attempted, rejected or not) by a replica that did not hold the shard of the
 * mirror's cluster when the server received it, per the shard Leases' history in the same
 * log (test/helpers/shard-audit.ts). Writes held in a partitioned proxy that reach the
 * server after the heal count, at the instant they arrive.
 */

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import { shardLeaseName } from "../../src/core/lease-names.ts";
import { shardOf } from "../../src/core/shards.ts";
import { AuditLog, MIRROR_RESOURCES, succeeded } from "../helpers/audit.ts";
import { CONTROLLER_NAMESPACE, type Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import type { Replica } from "../helpers/replicas.ts";
import { Replicas } from "../helpers/replicas.ts";
import { describeForeignWrites, foreignMirrorWrites, leaseHistory, tenures } from "../helpers/shard-audit.ts";
import { LEASE_ID, shardedReplicaArgs } from "../helpers/sharded-world.ts";
import {
  type ChaosControllers,
  type ChaosFindings,
  type ControllerStep,
  handlesSigterm,
  logTailOf,
} from "./controller.ts";

/** The replicas' names (Pod names, Lease identities, audit identities). */
export function replicaNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `fm-${i}`);
}

/**
 * The shard count of a sharded chaos run: twice the replicas of the default three, so
 * each replica holds two shards and a kill moves two.
 */
export const CHAOS_SHARDS = 6;

/** A Pod's default termination grace period: a SIGTERM'd replica still running by then is a problem. */
const GRACE_MS = 30_000;
/** Bound on the shards' return to a fair share once the mirrors match the oracle (a few Lease durations). */
const SHARE_TIMEOUT_MS = 60_000;

export interface ChaosReplicasOptions {
  readonly fleet: Fleet;
  readonly findings: ChaosFindings;
  readonly count: number;
  /** The cluster names registered (mirrors are `<service>-<cluster>`): the audit check's clusters. */
  readonly clusters: readonly string[];
  readonly log: (line: string) => void;
}

export class ChaosReplicas implements ChaosControllers {
  readonly #findings: ChaosFindings;
  readonly #names: readonly string[];
  readonly #clusters: readonly string[];
  readonly #log: (line: string) => void;
  readonly #replicas: Replicas;
  readonly #audit: AuditLog;
  readonly #leases: CoordinationV1Api;
  /** Per replica, the partition now in force (a newer partition or a heal-all supersedes a timed heal). */
  readonly #partitionGeneration = new Map<string, number>();
  readonly #heals = new Set<Promise<void>>();
  /** Output of every ended run, per replica. */
  readonly #pastOutputs = new Map<string, string>();
  restarts = 0;

  private constructor(options: ChaosReplicasOptions, audit: AuditLog) {
    this.#findings = options.findings;
    this.#names = replicaNames(options.count);
    this.#clusters = options.clusters;
    this.#log = options.log;
    this.#replicas = new Replicas(options.fleet);
    this.#audit = audit;
    this.#leases = options.fleet.kubeConfig("local").makeApiClient(CoordinationV1Api);
  }

  /**
   * Prepares the replicas of `options.fleet`, which must have been started with an audited
   * local API server (`Fleet.start(…, { audit: true })`): applies the sharded RBAC.
   */
  static async create(options: ChaosReplicasOptions): Promise<ChaosReplicas> {
    const path = options.fleet.plane.cluster("local").auditLogPath;
    if (!path) throw new Error("a sharded chaos run needs the local API server's audit log (Fleet.start audit: true)");
    const admin = options.fleet.kubeConfig("local");
    await applyRbacYaml(admin, fileURLToPath(new URL("../../deploy/sharded/rbac-shards.yaml", import.meta.url)));
    return new ChaosReplicas(options, new AuditLog(path, admin));
  }

  /** The flags of every replica: the sharding tests' short Lease timings (sharded-world.ts says why). */
  static args(): string[] {
    return [
      ...shardedReplicaArgs(CHAOS_SHARDS),
      "--blocked-recheck-period",
      "2s",
      // As the single controller (controller.ts): departed hosts kept 2 s, not 5 min.
      "--headless-host-grace",
      "2s",
      // As the single controller (test/helpers/fleet.ts): the oracle reads Endpoints.
      "--endpoints-api",
      "endpoints",
    ];
  }

  /** Which shard each cluster is in, for the run's log. */
  describe(): string {
    return `${this.#names.length} replicas, ${CHAOS_SHARDS} shards; clusters by shard: ${this.#clusters
      .map((c) => `${c}→${shardOf(c, CHAOS_SHARDS)}`)
      .join(" ")}`;
  }

  async start(): Promise<void> {
    for (const name of this.#names) await this.#replicas.add(name, { args: ChaosReplicas.args(), proxied: true });
  }

  async apply(step: ControllerStep): Promise<void> {
    switch (step.kind) {
      case "kill-replica": {
        const replica = this.#replicas.get(step.replica);
        if (!replica.running) this.#findings.notes.push(`${step.replica} was not running when killed`);
        await replica.kill();
        this.restarts++;
        return;
      }
      case "start-replica":
        this.#restart(this.#replicas.get(step.replica));
        return;
      case "term-replica": {
        const replica = this.#replicas.get(step.replica);
        await this.#terminate(replica);
        this.restarts++;
        this.#restart(replica);
        return;
      }
      case "partition-replica":
        this.#partition(this.#replicas.get(step.replica), step.ms);
        return;
      default:
        throw new Error(`step ${step.kind} needs a single controller (a run without --replicas)`);
    }
  }

  /** Starts a new run of `replica` (same Pod, token and proxy), keeping the ended run's output. */
  #restart(replica: Replica): void {
    if (replica.running) return;
    this.#pastOutputs.set(replica.name, (this.#pastOutputs.get(replica.name) ?? "") + replica.process.output);
    replica.start();
  }

  /** SIGTERM as a rolling update sends it: the replica must exit 0 within the grace period. */
  async #terminate(replica: Replica): Promise<void> {
    if (!replica.running) {
      this.#findings.notes.push(`${replica.name} was not running when sent SIGTERM`);
      return;
    }
    const handlerInstalled = handlesSigterm(replica.process);
    const started = Date.now();
    const exit = await replica.terminate(GRACE_MS);
    const took = Date.now() - started;
    this.#log(
      `  (${replica.name} exited ${exit.code ?? exit.signal} on SIGTERM after ${took} ms${this.#partitioned(replica) ? ", partitioned" : ""})`,
    );
    if (exit.code === 0) return;
    const how = `${replica.name} exited ${exit.code ?? `by ${exit.signal}`} on SIGTERM (after ${took} ms${this.#partitioned(replica) ? ", partitioned" : ""})`;
    // Before its handler exists, a SIGTERM ends the process by default: nothing was written yet.
    if (!handlerInstalled && exit.signal === "SIGTERM") this.#findings.notes.push(`${how}, during start-up`);
    else this.#findings.problems.push(how);
  }

  #partitioned(replica: Replica): boolean {
    return (this.#partitionGeneration.get(replica.name) ?? 0) % 2 === 1;
  }

  /** Cuts `replica` off the local API for `ms`, then heals it unless a newer partition or `quiesce` took over. */
  #partition(replica: Replica, ms: number): void {
    // Odd generations are partitions in force, even ones healed.
    const current = this.#partitionGeneration.get(replica.name) ?? 0;
    const generation = current + (current % 2 === 1 ? 2 : 1);
    this.#partitionGeneration.set(replica.name, generation);
    replica.partition();
    const heal = (async () => {
      await sleep(ms);
      if (this.#partitionGeneration.get(replica.name) !== generation) return;
      this.#partitionGeneration.set(replica.name, generation + 1);
      replica.heal();
      this.#log(`  (${replica.name} healed after ${ms} ms)`);
    })();
    this.#heals.add(heal);
    void heal.finally(() => this.#heals.delete(heal));
  }

  async quiesce(): Promise<void> {
    // Partitions run their course (≤ 20 s): one drawn late still outlasts a Lease, so its
    // shards still move and its held writes still land after the others took over.
    while (this.#heals.size > 0) await Promise.all([...this.#heals]);
    for (const replica of this.#replicas.list) {
      const generation = this.#partitionGeneration.get(replica.name) ?? 0;
      if (generation % 2 === 1) this.#partitionGeneration.set(replica.name, generation + 1);
      replica.heal();
    }
    for (const replica of this.#replicas.list) {
      if (replica.running) continue;
      const last = replica.exits.at(-1);
      // A replica is down at the end only because a kill step left it so: anything else died by itself.
      const killed = last?.signal === "SIGKILL";
      if (!killed) this.#findings.problems.push(`${replica.name} died by itself (${JSON.stringify(last)})`);
      this.#restart(replica);
    }
  }

  async verify(): Promise<string[]> {
    const failures: string[] = [];
    for (const replica of this.#replicas.list) {
      if (!replica.running)
        failures.push(`${replica.name} died after the faults stopped: ${JSON.stringify(replica.exits.at(-1))}`);
    }
    // Healed and restarted, the replicas share the shards fairly again (⌊S/R⌋ or ⌈S/R⌉ each).
    const low = Math.floor(CHAOS_SHARDS / this.#names.length);
    const high = Math.ceil(CHAOS_SHARDS / this.#names.length);
    let holders: string[] = [];
    try {
      await eventually(
        () => `shards held fairly by ${this.#names.join(", ")} (holders now ${JSON.stringify(holders)})`,
        async () => {
          holders = await this.#holders();
          const counts = this.#names.map((name) => holders.filter((h) => h === name).length);
          return counts.every((n) => n >= low && n <= high) ? true : undefined;
        },
        SHARE_TIMEOUT_MS,
        250,
      );
    } catch (error) {
      failures.push(error instanceof Error ? error.message : String(error));
    }
    await this.#audit.flush();
    const foreign = foreignMirrorWrites(this.#audit.all(), {
      replicas: this.#names,
      clusters: this.#clusters,
      shardOf: (cluster) => shardOf(cluster, CHAOS_SHARDS),
      leaseName: (shard) => shardLeaseName(LEASE_ID, CHAOS_SHARDS, shard),
    });
    if (foreign.length > 0)
      failures.push(
        `${foreign.length} mirror writes by a replica not holding the shard:\n${describeForeignWrites(foreign)}`,
      );
    return failures;
  }

  /** Shard → its Lease's holder now ("" when free or missing). */
  async #holders(): Promise<string[]> {
    const list = await this.#leases.listNamespacedLease({ namespace: CONTROLLER_NAMESPACE });
    const byName = new Map(list.items.map((l) => [l.metadata?.name ?? "", l.spec?.holderIdentity ?? ""]));
    return Array.from(
      { length: CHAOS_SHARDS },
      (_, shard) => byName.get(shardLeaseName(LEASE_ID, CHAOS_SHARDS, shard)) ?? "",
    );
  }

  /**
   * For the run's report, from the audit log: successful mirror writes per identity, and
   * how often a shard changed hands (a new holder's acquiring write, releases not counted).
   */
  auditSummary(): { readonly mirrorWrites: Record<string, number>; readonly shardHandovers: number } {
    const writes = this.#audit.all();
    let shardHandovers = 0;
    for (let shard = 0; shard < CHAOS_SHARDS; shard++) {
      const holders = tenures(leaseHistory(writes, shardLeaseName(LEASE_ID, CHAOS_SHARDS, shard))).filter(
        (t) => t.holder !== "",
      );
      for (let i = 1; i < holders.length; i++) if (holders[i]?.holder !== holders[i - 1]?.holder) shardHandovers++;
    }
    const mirrorWrites: Record<string, number> = {};
    for (const w of writes)
      if (succeeded(w) && MIRROR_RESOURCES.includes(w.resource))
        mirrorWrites[w.identity] = (mirrorWrites[w.identity] ?? 0) + 1;
    return { mirrorWrites, shardHandovers };
  }

  diagnostics(lines = 40): string {
    const dir = mkdtempSync(join(tmpdir(), "fleet-mirror-chaos-"));
    return this.#replicas.list
      .map((r) => {
        const output = (this.#pastOutputs.get(r.name) ?? "") + r.process.output;
        const path = join(dir, `${r.name}.log`);
        writeFileSync(path, output);
        return `${logTailOf(r.name, output, lines)}\n-- ${r.name}'s whole output: ${path} --`;
      })
      .join("\n");
  }

  async stop(): Promise<void> {
    await this.#replicas.stop().catch(() => undefined);
  }
}
