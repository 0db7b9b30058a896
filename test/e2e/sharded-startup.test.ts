/**
 * Sharded start-up without churn, on real API servers: three `fleet-mirror run --shards
 * 12` replicas started together each take their fair share once. No shard Lease changes
 * hands after its first acquisition (every shard Lease's `leaseTransitions` stays 0:
 * created by its first holder, never released to or taken by another), and no replica
 * gives a shard up or loses one.
 * Before the join rule (`observeJoin`), the first replica to list saw only itself, took
 * every shard, and gave most of them back a list later.
 *
 * Timings: Lease 8 s, renew deadline 6 s (sharded-world.ts says why), retry period 3 s
 * here: the rule settles a joining replica once its live set held still for a retry
 * period, so "started together" means within one retry period. Three processes started at once on
 * a loaded 2-core machine can be more than the world's usual 1 s apart before each has
 * its membership Lease; 3 s keeps the test about the rule, not about process start skew.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { shardLeaseName } from "../../src/core/lease-names.ts";
import { CONTROLLER_NAMESPACE } from "../helpers/fleet.ts";
import { LEASE_ID, ShardedWorld } from "../helpers/sharded-world.ts";

const SHARDS = 12;
const NAMES = ["fm-0", "fm-1", "fm-2"];

describe("sharded start-up: three replicas started together", () => {
  let world: ShardedWorld;

  before(async () => {
    world = await ShardedWorld.start({
      remotes: ["east", "west"],
      clusters: 24,
      shards: SHARDS,
      services: ["web"],
      extraArgs: ["--max-threads", "2", "--leader-election-retry-period", "3s"],
    });
  });
  after(async () => {
    await world?.stop();
  });

  it("each replica takes its fair share once: no shard changes hands, none is given up", async (t) => {
    await world.withDiagnostics(t, async () => {
      const started = Date.now();
      await Promise.all(NAMES.map((name) => world.addReplica(name)));
      await world.waitForMirrors("web");
      const converged = Date.now();
      await world.waitForSettled(NAMES);
      t.diagnostic(`24 clusters mirrored ${converged - started} ms after the three replicas started`);

      const leases = await world.fleet
        .kubeConfig("local")
        .makeApiClient(CoordinationV1Api)
        .listNamespacedLease({ namespace: CONTROLLER_NAMESPACE });
      const transitions = new Map(
        leases.items.map((l) => [l.metadata?.name ?? "", l.spec?.leaseTransitions ?? 0] as const),
      );
      for (let shard = 0; shard < SHARDS; shard++) {
        const name = shardLeaseName(LEASE_ID, SHARDS, shard);
        assert.equal(transitions.get(name), 0, `${name} changed hands ${transitions.get(name)} times`);
      }
      for (const replica of world.replicas.list) {
        const settled = replica.logLines().find((l) => String(l["msg"]).startsWith("membership settled"));
        t.diagnostic(`${replica.name}: joined after ${settled?.["joiningMs"]} ms, live ${settled?.["live"]}`);
        assert.equal(replica.hasLog(/^giving shard/), false, `${replica.name} gave a shard up`);
        assert.equal(replica.hasLog(/^lost shard/), false, `${replica.name} lost a shard`);
      }
    });
  });
});
