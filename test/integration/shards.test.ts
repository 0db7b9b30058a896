/**
 * Sharding across replicas end to end: three `fleet-mirror run --leader-elect --shards 6`
 * processes (least-privilege, with deploy/sharded/rbac-shards.yaml) on the real control
 * plane, eight clusters (one remote API server registered under eight cluster names).
 * Every shard is held by exactly one replica, two each; each replica runs and writes
 * only the clusters of its shards; kill -9 of a replica moves only its shards and a new
 * remote Service in a moved cluster is mirrored; SIGTERM releases its shards at once and
 * the membership Leases of gone replicas are deleted; losing one shard's Lease stops
 * that shard alone, and the replica takes it back once it is free.
 *
 * Short timings (Lease 4 s, renew deadline 3 s, retry 500 ms), as leader-election.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import type { AdminStatus } from "../../src/admin/source.ts";
import { shardLeaseName } from "../../src/core/lease-names.ts";
import { shardOf } from "../../src/core/shards.ts";
import type { ShardingView } from "../../src/leader/leadership.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { SHORT_LEASE_TIMINGS } from "../helpers/shard-replicas.ts";

const TIMEOUT_MS = 90_000;
const SHARDS = 6;
const LEASE_DURATION_MS = 4_000;
const CLUSTERS = Array.from({ length: 8 }, (_, i) => `c${i}`);
const NS = "shop";
const ARGS = ["--leader-elect", "--shards", String(SHARDS), "--max-threads", "2", ...SHORT_LEASE_TIMINGS];

interface Replica {
  readonly identity: string;
  readonly process: ControllerProcess;
}

describe("sharding across replicas (three controller processes, six shards)", () => {
  let fleet: Fleet;
  let leases: CoordinationV1Api;
  const replicas: Replica[] = [];

  async function start(identity: string): Promise<Replica> {
    const replica = {
      identity,
      process: await fleet.startProcess([...ARGS, "--leader-election-identity", identity]),
    };
    replicas.push(replica);
    return replica;
  }

  /** Shard → holder, from the shard Leases ("" when free or missing). */
  async function holders(): Promise<string[]> {
    return Promise.all(
      Array.from({ length: SHARDS }, async (_, shard) => {
        try {
          const lease = await leases.readNamespacedLease({
            namespace: CONTROLLER_NAMESPACE,
            name: shardLeaseName("fleet-mirror", SHARDS, shard),
          });
          return lease.spec?.holderIdentity ?? "";
        } catch (error) {
          if (statusCode(error) === 404) return "";
          throw error;
        }
      }),
    );
  }

  /** Waits until the shard Leases are held by exactly `identities`, evenly; returns shard → holder. */
  async function waitForEvenHolders(identities: readonly string[]): Promise<string[]> {
    const share = SHARDS / identities.length;
    return eventually(
      `shards held evenly by ${identities.join(", ")}`,
      async () => {
        const h = await holders();
        const even = identities.every((id) => h.filter((x) => x === id).length === share);
        return even && h.every((x) => identities.includes(x)) ? h : undefined;
      },
      TIMEOUT_MS,
      100,
    );
  }

  async function status(replica: Replica): Promise<AdminStatus> {
    const response = await fetch(`${await replica.process.adminUrl()}/status`);
    assert.equal(response.status, 200);
    return (await response.json()) as AdminStatus;
  }

  async function sharding(replica: Replica): Promise<ShardingView> {
    const view = (await status(replica)).leadership.sharding;
    assert.ok(view, "a sharded replica reports its shards");
    return view;
  }

  /** A new exported Service in the remote; waits until every cluster's mirror of it exists. */
  async function mirrorEverywhere(name: string): Promise<void> {
    await fleet.createService("east", NS, name);
    await Promise.all(CLUSTERS.map((c) => fleet.waitForMirror(NS, `${name}-${c}`, () => true, TIMEOUT_MS)));
  }

  async function scenario(t: TestContext, body: () => Promise<void>): Promise<void> {
    try {
      await body();
    } catch (error) {
      for (const r of replicas)
        t.diagnostic(`--- ${r.identity} ---\n${r.process.output.trimEnd().split("\n").slice(-40).join("\n")}`);
      throw error;
    }
  }

  before(async () => {
    fleet = await Fleet.start(["east"]);
    const admin = fleet.kubeConfig("local");
    await applyRbacYaml(admin, fileURLToPath(new URL("../../deploy/sharded/rbac-shards.yaml", import.meta.url)));
    leases = admin.makeApiClient(CoordinationV1Api);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createService("east", NS, "web");
    for (const cluster of CLUSTERS) await fleet.register("east", { clusterName: cluster });
  });
  after(async () => {
    for (const r of replicas) await r.process.stop("SIGKILL");
    await fleet?.stop();
  });

  it("holds each shard in exactly one replica, two each, and mirrors every cluster from its shard's holder", async (t) => {
    await scenario(t, async () => {
      for (const id of ["replica-a", "replica-b", "replica-c"]) await start(id);
      const byShard = await waitForEvenHolders(["replica-a", "replica-b", "replica-c"]);
      await Promise.all(CLUSTERS.map((c) => fleet.waitForMirror(NS, `web-${c}`, () => true, TIMEOUT_MS)));
      for (const replica of replicas) {
        const view = await sharding(replica);
        const mine = byShard.flatMap((h, shard) => (h === replica.identity ? [shard] : []));
        assert.deepEqual(view.held, mine, `${replica.identity} reports the shards its Leases name`);
        // Its controller runs exactly the clusters of its shards.
        const expected = CLUSTERS.filter((c) => mine.includes(shardOf(c, SHARDS))).sort();
        await eventually(
          `${replica.identity} runs ${expected.join(",")}`,
          async () => {
            const rows = (await status(replica)).clusters ?? [];
            const running = rows.map((r) => r.cluster).sort();
            return JSON.stringify(running) === JSON.stringify(expected) ? true : undefined;
          },
          TIMEOUT_MS,
        );
        // The writer forgets a shard's clusters when the shard leaves, and publishes its
        // status on a timer: a shard that moved at start-up may still show for a moment.
        await eventually(
          `${replica.identity}'s writer holds only clusters of its shards`,
          async () => {
            const held = Object.keys((await status(replica)).writer?.clusters ?? {});
            return held.every((c) => expected.includes(c)) ? true : undefined;
          },
          TIMEOUT_MS,
        );
      }
      // Every replica lists every Secret, but only the cluster's host reports its
      // registration: a Secret added once the shards are settled gets one Event, not one
      // per replica. (At start-up a shard may still move, and its new host reports again.)
      const late = "c8";
      assert.ok(!CLUSTERS.includes(late));
      await fleet.register("east", { clusterName: late });
      await fleet.waitForMirror(NS, `web-${late}`, () => true, TIMEOUT_MS);
      await fleet.waitForSecretEvent(`cluster-credentials-${late}`, "ClusterRegistered");
      const events = await fleet.secretEvents(`cluster-credentials-${late}`, "ClusterRegistered");
      assert.equal(events.length, 1, `${events.length} ClusterRegistered Events for one new Secret`);
      assert.equal(events[0]?.count ?? 1, 1);
      // Unregistered: its mirror is collected (by the holder of its shard only, per the writer's rule).
      await fleet.local.deleteNamespacedSecret({
        namespace: CONTROLLER_NAMESPACE,
        name: `cluster-credentials-${late}`,
      });
      await fleet.waitForNoMirror(NS, `web-${late}`, TIMEOUT_MS);
    });
  });

  it("kill -9 of one replica moves only its shards, and a new Service of a moved cluster is mirrored", async (t) => {
    await scenario(t, async () => {
      const before = await holders();
      const victim = replicas.find((r) => r.identity === "replica-a");
      assert.ok(victim);
      const killedAt = Date.now();
      await victim.process.stop("SIGKILL");
      const after = await waitForEvenHolders(["replica-b", "replica-c"]);
      const movedAt = Date.now();
      for (let shard = 0; shard < SHARDS; shard++)
        if (before[shard] !== "replica-a") assert.equal(after[shard], before[shard], `shard ${shard} moved`);
      t.diagnostic(`kill -9 → shards taken over in ${movedAt - killedAt} ms`);
      assert.ok(movedAt - killedAt < LEASE_DURATION_MS + 4_000, `takeover took ${movedAt - killedAt} ms`);
      const moved = CLUSTERS.filter((c) => before[shardOf(c, SHARDS)] === "replica-a");
      assert.ok(moved.length > 0, "the victim hosted some cluster");
      await mirrorEverywhere("api");
    });
  });

  it("SIGTERM of a replica releases its shards, which the last replica takes at once", async (t) => {
    await scenario(t, async () => {
      const leaving = replicas.find((r) => r.identity === "replica-b");
      assert.ok(leaving);
      const stoppedAt = Date.now();
      assert.equal(await leaving.process.stop("SIGTERM"), 0);
      await waitForEvenHolders(["replica-c"]);
      const takenAt = Date.now();
      t.diagnostic(`SIGTERM → every shard held by replica-c in ${takenAt - stoppedAt} ms`);
      await mirrorEverywhere("db");
      const view = await sharding(replicas.find((r) => r.identity === "replica-c") as Replica);
      assert.deepEqual(view.held, [0, 1, 2, 3, 4, 5]);
      // The killed replica's membership Lease (expired) and the stopped one's (released) are deleted.
      await eventually(
        "only replica-c's membership Lease left",
        async () => {
          const list = await leases.listNamespacedLease({ namespace: CONTROLLER_NAMESPACE });
          const members = (list.items ?? []).filter((l) =>
            l.metadata?.name?.startsWith(`fleet-mirror-s${SHARDS}-member-`),
          );
          return members.length === 1 && members[0]?.spec?.holderIdentity === "replica-c" ? true : undefined;
        },
        TIMEOUT_MS,
      );
    });
  });

  it("losing one shard's Lease stops that shard alone; the replica takes it back once it is free", async (t) => {
    await scenario(t, async () => {
      const last = replicas.find((r) => r.identity === "replica-c") as Replica;
      const lost = shardOf("c0", SHARDS);
      const kept = CLUSTERS.find((c) => shardOf(c, SHARDS) !== lost) as string;
      const name = shardLeaseName("fleet-mirror", SHARDS, lost);
      // An outsider takes the shard's Lease for an hour, as a replica that took it over would.
      for (let attempt = 0; ; attempt++) {
        const current = await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name });
        try {
          await leases.replaceNamespacedLease({
            namespace: CONTROLLER_NAMESPACE,
            name,
            body: { ...current, spec: { ...current.spec, holderIdentity: "intruder", leaseDurationSeconds: 3_600 } },
          });
          break;
        } catch (error) {
          if (statusCode(error) !== 409 || attempt > 10) throw error;
        }
      }
      await eventually(
        `replica-c gives shard ${lost} up`,
        async () => ((await sharding(last)).held.includes(lost) ? undefined : true),
        TIMEOUT_MS,
      );
      assert.equal(last.process.child.exitCode, null, "losing one shard does not end the replica");
      assert.equal((await sharding(last)).held.length, SHARDS - 1, "the other shards stay held");
      // A new Service: mirrored for a cluster of a held shard, not for one of the lost shard.
      await fleet.createService("east", NS, "cache");
      await fleet.waitForMirror(NS, `cache-${kept}`, () => true, TIMEOUT_MS);
      assert.equal(await fleet.localService(NS, "cache-c0"), undefined, "a shard not held was written");
      // The outsider releases it: replica-c, still wanting it, takes it at its next try.
      const current = await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name });
      await leases.replaceNamespacedLease({
        namespace: CONTROLLER_NAMESPACE,
        name,
        body: { ...current, spec: { ...current.spec, holderIdentity: "", leaseDurationSeconds: 1 } },
      });
      await fleet.waitForMirror(NS, "cache-c0", () => true, TIMEOUT_MS);
      assert.deepEqual((await sharding(last)).held, [0, 1, 2, 3, 4, 5]);
    });
  });
});
