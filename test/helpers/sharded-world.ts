/**
 * A world for sharding tests: a fleet with an audited local API server, `clusters`
 * cluster names registered over a few real remote API servers (cluster `c07` is remote
 * `remotes[7 % remotes.length]`, as the bench registers many Secrets against few API
 * servers), the RBAC of deploy/sharded/, and the replicas of test/helpers/replicas.ts
 * started with `--shards`. Questions a sharding test asks: who holds each shard's Lease
 * now, are the shards spread evenly over a set of replicas, does every cluster mirror a
 * Service, was any mirror written by a replica that did not hold its shard.
 */
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import { shardLeaseName } from "../../src/core/lease-names.ts";
import { shardOf } from "../../src/core/shards.ts";
import { AuditLog } from "./audit.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "./fleet.ts";
import { eventually } from "./kube.ts";
import { type Replica, Replicas } from "./replicas.ts";
import { type ForeignWrite, foreignMirrorWrites } from "./shard-audit.ts";

/** The Lease id of every replica (`--leader-election-id` default). */
export const LEASE_ID = "fleet-mirror";
/** The namespace the remote Services (and so their mirrors) live in. */
export const NAMESPACE = "shop";
/**
 * Timings shorter than the defaults (15 s / 10 s / 2 s) and longer than the single
 * leader tests' 4 s / 3 s / 500 ms: three replicas of 60 clusters on a loaded 2-core
 * machine see Lease requests take seconds, and a renewal that takes longer than the
 * renew deadline loses the shard (measured: shards lost and retaken in a loop at 3 s,
 * load average 25). The deadline leaves 2 s before a Lease can be taken.
 */
export const LEASE_DURATION_MS = 8_000;
export const RENEW_DEADLINE_MS = 6_000;
export const RETRY_PERIOD_MS = 1_000;

/** A sharded replica's flags: `--shards`, with the short Lease timings above (1: a single leader's, no `--shards`). */
export function shardedReplicaArgs(shards: number): string[] {
  return [
    "--leader-elect",
    ...(shards > 1 ? ["--shards", String(shards)] : []),
    "--leader-election-lease-duration",
    `${LEASE_DURATION_MS / 1_000}s`,
    "--leader-election-renew-deadline",
    `${RENEW_DEADLINE_MS / 1_000}s`,
    "--leader-election-retry-period",
    `${RETRY_PERIOD_MS}ms`,
  ];
}

export interface ShardedWorldOptions {
  readonly remotes: readonly string[];
  /** Cluster names registered: `c00` … */
  readonly clusters: number;
  readonly shards: number;
  /** Services exported by every remote (so every cluster mirrors each). */
  readonly services: readonly string[];
  /** More `fleet-mirror run` flags for every replica (e.g. `--max-threads 2`). */
  readonly extraArgs?: readonly string[];
}

export class ShardedWorld {
  readonly fleet: Fleet;
  readonly audit: AuditLog;
  readonly replicas: Replicas;
  readonly clusters: readonly string[];
  readonly shards: number;
  readonly #leases: CoordinationV1Api;
  readonly #args: readonly string[];

  private constructor(fleet: Fleet, audit: AuditLog, clusters: readonly string[], options: ShardedWorldOptions) {
    this.fleet = fleet;
    this.audit = audit;
    this.clusters = clusters;
    this.shards = options.shards;
    this.replicas = new Replicas(fleet);
    this.#leases = fleet.kubeConfig("local").makeApiClient(CoordinationV1Api);
    this.#args = [...shardedReplicaArgs(options.shards), ...(options.extraArgs ?? [])];
  }

  /** Starts the fleet, exports `services` from every remote and registers every cluster name. */
  static async start(options: ShardedWorldOptions): Promise<ShardedWorld> {
    const fleet = await Fleet.start(options.remotes, { audit: true });
    try {
      const path = fleet.plane.cluster("local").auditLogPath;
      if (!path) throw new Error("the local API server writes no audit log");
      const admin = fleet.kubeConfig("local");
      await applyRbacYaml(admin, fileURLToPath(new URL("../../deploy/sharded/rbac-shards.yaml", import.meta.url)));
      const clusters = Array.from({ length: options.clusters }, (_, i) => `c${String(i).padStart(2, "0")}`);
      await Promise.all(
        options.remotes.map(async (remote, i) => {
          await fleet.createGateway(remote, { ingress: [{ ip: `198.18.0.${10 + i}` }] });
          for (const service of options.services) await fleet.createService(remote, NAMESPACE, service);
        }),
      );
      for (const [i, cluster] of clusters.entries())
        await fleet.register(options.remotes[i % options.remotes.length] ?? "", { clusterName: cluster });
      return new ShardedWorld(fleet, new AuditLog(path, admin), clusters, options);
    } catch (error) {
      await fleet.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    await this.replicas.stop();
    await this.fleet.stop();
  }

  /** The remote a cluster name is registered against. */
  remoteOf(cluster: string): string {
    const remotes = this.fleet.remotes;
    return remotes[Number(cluster.slice(1)) % remotes.length] ?? "";
  }

  shardOf(cluster: string): number {
    return shardOf(cluster, this.shards);
  }

  /** Starts replica `name` with the world's sharding flags. */
  async addReplica(name: string, options: { readonly proxied?: boolean } = {}): Promise<Replica> {
    return this.replicas.add(name, { args: this.#args, ...options });
  }

  /** Shard → holder now, from the shard Leases ("" when free or missing). */
  /** Runs `body`; if it throws, the replicas' log tails and the shard holders go to the test's diagnostics first. */
  async withDiagnostics(t: TestContext, body: () => Promise<void>): Promise<void> {
    try {
      await body();
    } catch (error) {
      t.diagnostic(this.replicas.tails(30));
      t.diagnostic(`shard holders: ${JSON.stringify(await this.holders())}`);
      throw error;
    }
  }

  async holders(): Promise<string[]> {
    const list = await this.#leases.listNamespacedLease({ namespace: CONTROLLER_NAMESPACE });
    const byName = new Map(list.items.map((l) => [l.metadata?.name ?? "", l.spec?.holderIdentity ?? ""]));
    return Array.from(
      { length: this.shards },
      (_, shard) => byName.get(shardLeaseName(LEASE_ID, this.shards, shard)) ?? "",
    );
  }

  /** Waits until every shard is held by one of `identities`, each holding ⌊S/R⌋ or ⌈S/R⌉; returns shard → holder. */
  async waitForEvenHolders(identities: readonly string[], timeoutMs = 120_000): Promise<string[]> {
    const low = Math.floor(this.shards / identities.length);
    const high = Math.ceil(this.shards / identities.length);
    let last: string[] = [];
    return eventually(
      () => `shards held evenly by ${identities.join(", ")} (now ${JSON.stringify(last)})`,
      async () => {
        last = await this.holders();
        const counts = identities.map((id) => last.filter((h) => h === id).length);
        const even = counts.every((n) => n >= low && n <= high);
        return even && last.every((h) => identities.includes(h)) ? last : undefined;
      },
      timeoutMs,
      100,
    );
  }

  /**
   * Waits until the shards are spread evenly over `identities` (as `waitForEvenHolders`)
   * and every one of them has, in its own /status, a ready writer with nothing queued or in
   * flight and a complete desired set of each cluster of its shards, all of it unchanged
   * for `holdMs` (a report carries no time: holding longer than one report interval makes
   * it newer than whatever came before). Returns shard → holder.
   */
  async waitForSettled(identities: readonly string[], timeoutMs = 180_000, holdMs = 1_500): Promise<string[]> {
    let since: number | undefined;
    let key = "";
    let why = "";
    return eventually(
      () => `replicas ${identities.join(", ")} settled (${why})`,
      async () => {
        const holders = await this.waitForEvenHolders(identities, timeoutMs);
        for (const name of identities) {
          const writer = (await this.replicas.get(name).status()).writer;
          const mine = this.clustersOf(holders, name);
          const incomplete = mine.filter((c) => writer?.clusters[c]?.complete !== true);
          if (!writer?.ready || writer.queueDepth !== 0 || writer.inFlight !== 0 || incomplete.length > 0) {
            why = `${name}: ready ${writer?.ready}, queue ${writer?.queueDepth}, in flight ${writer?.inFlight}, incomplete ${incomplete.join(",")}`;
            since = undefined;
            return undefined;
          }
        }
        const now = JSON.stringify(holders);
        if (now !== key) {
          key = now;
          since = undefined;
        }
        since ??= Date.now();
        why = `holding for ${Date.now() - since} ms`;
        return Date.now() - since >= holdMs ? holders : undefined;
      },
      timeoutMs,
      200,
    );
  }

  /** The clusters whose shard `holders` gives to `identity`. */
  clustersOf(holders: readonly string[], identity: string): string[] {
    return this.clusters.filter((c) => holders[this.shardOf(c)] === identity);
  }

  /** Waits until the mirror `<service>-<cluster>` exists for every cluster in `clusters` (default: all). */
  async waitForMirrors(service: string, clusters = this.clusters, timeoutMs = 180_000): Promise<void> {
    let missing: string[] = [];
    await eventually(
      () => `mirrors of ${service} in ${missing.length} clusters: ${missing.slice(0, 8).join(", ")}…`,
      async () => {
        const list = await this.fleet.local.listNamespacedService({ namespace: NAMESPACE });
        const names = new Set(list.items.map((s) => s.metadata?.name ?? ""));
        missing = clusters.filter((c) => !names.has(`${service}-${c}`));
        return missing.length === 0 ? true : undefined;
      },
      timeoutMs,
      250,
    );
  }

  /** Exports Service `name` from every remote; every cluster then mirrors it. */
  async exportEverywhere(name: string): Promise<void> {
    await Promise.all(this.fleet.remotes.map((remote) => this.fleet.createService(remote, NAMESPACE, name)));
  }

  /** Every mirror write in the audit log so far by a replica not holding its shard (flushes first). */
  async foreignWrites(): Promise<ForeignWrite[]> {
    await this.audit.flush();
    return foreignMirrorWrites(this.audit.all(), {
      replicas: this.replicas.list.map((r) => r.name),
      clusters: this.clusters,
      shardOf: (c) => this.shardOf(c),
      leaseName: (shard) => shardLeaseName(LEASE_ID, this.shards, shard),
    });
  }
}
