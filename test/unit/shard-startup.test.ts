/**
 * Three ShardCoordinators started together over one in-memory Lease store (a fake of
 * the coordination.k8s.io Lease API, test/helpers/lease-store.ts) take
 * their fair shares once: no replica ever gives up or loses a shard it held, and every
 * shard ends held by exactly one of them. Before the join rule (`observeJoin`) the
 * first to list saw only itself, took every shard, and gave most back.
 * A replica that is leaving (SIGTERM) takes no shard any more, even one released meanwhile.
 * Real time, short periods (retry 100 ms, Lease 1 s): the replicas start 40 ms apart.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeClient } from "../../src/kube/client.ts";
import { ShardCoordinator } from "../../src/leader/shard-coordinator.ts";
import { silentLogger } from "../../src/log.ts";
import { eventually } from "../helpers/kube.ts";
import { leaseStore } from "../helpers/lease-store.ts";

const SHARDS = 6;
/** A coordinator of SHARDS shards over `client`, with short periods; `handed` sees every held set, sorted. */
function coordinatorOn(
  client: KubeClient,
  identity: string,
  handed: (held: number[]) => void = () => {},
): ShardCoordinator {
  return new ShardCoordinator({
    client,
    namespace: "fleet-mirror",
    leaseId: "fleet-mirror",
    identity,
    shards: SHARDS,
    leaseDurationMs: 1_000,
    renewDeadlineMs: 700,
    retryPeriodMs: 100,
    logger: silentLogger(),
    host: {
      setShards: async (held) => {
        handed([...held.keys()].sort((a, b) => a - b));
      },
    },
  });
}

describe("ShardCoordinator: replicas started together", () => {
  it("each takes its fair share once: no shard is given up or lost, every shard has one holder", async () => {
    const client = leaseStore();
    const names = ["fm-0", "fm-1", "fm-2"];
    /** Replica → every held set it was handed, in order. */
    const handed = new Map<string, number[][]>(names.map((n) => [n, []]));
    const coordinators = names.map((identity) =>
      coordinatorOn(client, identity, (held) => handed.get(identity)?.push(held)),
    );
    try {
      for (const coordinator of coordinators) {
        coordinator.run();
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
      await eventually(
        "every shard held by one replica, two each",
        () => {
          const held = coordinators.map((c) => c.status().held);
          const all = held.flat().sort((a, b) => a - b);
          const even = held.every((h) => h.length === SHARDS / names.length);
          return even && all.join() === "0,1,2,3,4,5" ? true : undefined;
        },
        10_000,
        20,
      );
      // Held sets only ever grow: a shard once handed to a replica is never taken back.
      for (const [replica, sets] of handed)
        for (const [i, set] of sets.entries())
          for (const shard of sets[i - 1] ?? [])
            assert.ok(set.includes(shard), `${replica} gave shard ${shard} up: ${JSON.stringify(sets)}`);
    } finally {
      await Promise.all(coordinators.map((c) => c.stop()));
    }
  });

  it("a leaving replica takes no shard: the shards another releases meanwhile stay free", async () => {
    const client = leaseStore();
    const [a, b] = [coordinatorOn(client, "fm-0"), coordinatorOn(client, "fm-1")];
    try {
      a.run();
      b.run();
      await eventually("three shards each", () =>
        a.status().held.length === 3 && b.status().held.length === 3 ? true : undefined,
      );
      const kept = b.status().held;
      b.leave();
      await a.stop();
      await eventually("fm-1 sees it is alone", () => (b.status().live.join() === "fm-1" ? true : undefined));
      // Proving that something does NOT happen: ten retry periods in which a replica that is
      // not leaving would have taken the released shards (it does within about one).
      for (let i = 0; i < 10; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        assert.deepEqual(b.status().held, kept, "the leaving replica took a shard");
      }
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});
