/**
 * Replicas of a sharded Deployment as `fleet-mirror run` processes on one Fleet, told
 * apart by `--leader-election-identity`, for tests of fleet-wide Services across shards:
 * start or restart one, read its `/status`, wait until the shards are spread fairly and
 * every replica is idle, and count the local API server's writes of fleet-wide kinds.
 */
import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import type { AdminStatus } from "../../src/admin/source.ts";
import { apiRequests } from "../actor/writer-harness.ts";
import type { ControllerProcess, Fleet } from "./fleet.ts";
import { eventually } from "./kube.ts";

/**
 * `run` flags of a sharded replica with short Leases (4 s, renew deadline 3 s, retry
 * 500 ms), so that shards settle and move within seconds.
 */
export function shortLeaseArgs(shards: number): string[] {
  return ["--leader-elect", "--shards", String(shards), ...SHORT_LEASE_TIMINGS];
}

/** The short Lease timings alone (leader election and sharding tests). */
export const SHORT_LEASE_TIMINGS: readonly string[] = [
  "--leader-election-lease-duration",
  "4s",
  "--leader-election-renew-deadline",
  "3s",
  "--leader-election-retry-period",
  "500ms",
];

export interface ShardReplica {
  readonly identity: string;
  process: ControllerProcess;
}

export class ShardReplicas {
  readonly replicas: ShardReplica[] = [];
  readonly #fleet: Fleet;
  readonly #args: readonly string[];
  readonly #shards: number;
  readonly #timeoutMs: number;

  constructor(fleet: Fleet, args: readonly string[], shards: number, timeoutMs: number) {
    this.#fleet = fleet;
    this.#args = args;
    this.#shards = shards;
    this.#timeoutMs = timeoutMs;
  }

  /** Starts the replica `identity`, or a new run of it. */
  async start(identity: string): Promise<ShardReplica> {
    const process = await this.#fleet.startProcess([...this.#args, "--leader-election-identity", identity]);
    const existing = this.replicas.find((r) => r.identity === identity);
    if (existing) {
      existing.process = process;
      return existing;
    }
    const replica = { identity, process };
    this.replicas.push(replica);
    return replica;
  }

  async status(replica: ShardReplica): Promise<AdminStatus> {
    const response = await fetch(`${await replica.process.adminUrl()}/status`);
    assert.equal(response.status, 200);
    return (await response.json()) as AdminStatus;
  }

  /** The replica's `/metrics` text. */
  async metrics(replica: ShardReplica): Promise<string> {
    return (await fetch(`${await replica.process.adminUrl()}/metrics`)).text();
  }

  /**
   * Waits until the live replicas hold every shard between them, each its fair share
   * (⌊S/R⌋ or ⌈S/R⌉); returns shard → holder. Every shard held is not enough: a replica
   * that starts alone takes every shard and gives the others' back as it sees them join,
   * so "all held" is also true of a moment when shards are still moving (and the owner
   * of the fleet-wide Service read then is not the one that keeps it).
   */
  async settledHolders(identities: readonly string[]): Promise<string[]> {
    const shards = this.#shards;
    const fewest = Math.floor(shards / identities.length);
    const most = Math.ceil(shards / identities.length);
    return eventually(
      `every shard held by one of ${identities.join(", ")}, a fair share each`,
      async () => {
        const views = await Promise.all(
          this.replicas
            .filter((r) => identities.includes(r.identity))
            .map(async (r) => ({ r, s: await this.status(r) })),
        );
        const holders: string[] = Array.from({ length: shards }, () => "");
        for (const { r, s } of views)
          for (const shard of s.leadership.sharding?.held ?? []) holders[shard] = holders[shard] ? "!" : r.identity;
        if (!holders.every((h) => identities.includes(h))) return undefined;
        const fair = identities.every((id) => {
          const held = holders.filter((h) => h === id).length;
          return held >= fewest && held <= most;
        });
        return fair ? holders : undefined;
      },
      this.#timeoutMs,
      100,
    );
  }

  /** Every replica of `identities` has its clusters synced and its writer idle. */
  async quiet(identities: readonly string[]): Promise<void> {
    await eventually(
      "every replica synced and idle",
      async () => {
        for (const r of this.replicas.filter((x) => identities.includes(x.identity))) {
          const s = await this.status(r);
          if (!s.writer?.ready || s.writer.queueDepth > 0 || s.writer.inFlight > 0) return undefined;
          if ((s.clusters ?? []).some((c) => c.state !== "synced")) return undefined;
        }
        return true;
      },
      this.#timeoutMs,
      100,
    );
  }

  /** Runs `body`; on failure, prints the last lines of every replica's output. */
  async scenario(t: TestContext, body: () => Promise<void>): Promise<void> {
    try {
      await body();
    } catch (error) {
      for (const r of this.replicas)
        t.diagnostic(`--- ${r.identity} ---\n${r.process.output.trimEnd().split("\n").slice(-40).join("\n")}`);
      throw error;
    }
  }

  async killAll(): Promise<void> {
    for (const r of this.replicas) await r.process.stop("SIGKILL");
  }
}

/** Writes the local API server has served on fleet-wide objects' kinds (Services, EndpointSlices). */
export async function fleetWideWrites(fleet: Fleet): Promise<number> {
  let total = 0;
  for (const verb of ["POST", "PUT", "DELETE"])
    for (const resource of ["services", "endpointslices"]) total += await apiRequests(fleet, verb, resource);
  return total;
}
