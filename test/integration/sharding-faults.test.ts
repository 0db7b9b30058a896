/**
 * Sharding under replica faults, judged by the local API server's audit log: three
 * `fleet-mirror run --shards 12` replicas over 60 clusters, each behind its own fault
 * proxy to the local API. kill -9 of one moves only its shards, each no sooner than its
 * Lease could be taken, and the fleet converges; a replica cut off the local API sends
 * no write of a shard past that shard's renew deadline, the others take its shards once
 * they may, and no mirror is ever written by a replica that did not hold its shard when
 * the server received the write (held requests reaching the server after the network
 * heals included).
 *
 * Timings: Lease 8 s, renew deadline 6 s, retry 1 s (sharded-world.ts says why); `--max-threads 2`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { shardLeaseName } from "../../src/core/lease-names.ts";
import { describeWrites } from "../helpers/audit.ts";
import { clusterOfMirror, describeForeignWrites, holderAt, leaseHistory, tenures } from "../helpers/shard-audit.ts";
import { LEASE_DURATION_MS, LEASE_ID, RENEW_DEADLINE_MS, ShardedWorld } from "../helpers/sharded-world.ts";

const SHARDS = 12;

describe("sharding under replica faults: kill -9 and a partition (60 clusters, 12 shards, audited)", () => {
  let world: ShardedWorld;

  /** The last successful write of shard `shard`'s Lease by `identity` that the server received before `until`. */
  function lastRenewal(identity: string, shard: number, until = Number.POSITIVE_INFINITY): number {
    const records = leaseHistory(world.audit.all(), shardLeaseName(LEASE_ID, SHARDS, shard)).filter(
      (r) => r.by === identity && r.holder === identity && r.at < until,
    );
    const last = records.at(-1);
    assert.ok(last, `${identity} never renewed shard ${shard}`);
    return last.at;
  }

  before(async () => {
    world = await ShardedWorld.start({
      remotes: ["east", "west", "north"],
      clusters: 60,
      shards: SHARDS,
      services: ["web"],
      extraArgs: ["--max-threads", "2"],
    });
  });
  after(async () => {
    await world?.stop();
  });

  it("kill -9 of one replica moves only its shards, none before its Lease could be taken, and the fleet converges", async (t) => {
    await world.withDiagnostics(t, async () => {
      for (const name of ["fm-0", "fm-1", "fm-2"]) await world.addReplica(name);
      await world.waitForMirrors("web");
      const before = await world.waitForSettled(["fm-0", "fm-1", "fm-2"]);
      const victimShards = before.flatMap((h, shard) => (h === "fm-0" ? [shard] : []));
      // Replicas that start one after another hand shards over until the share is fair: the
      // history that matters starts once the three are settled.
      const settled = await world.audit.flush();

      const killedAt = Date.now();
      await world.replicas.get("fm-0").kill();
      await world.exportEverywhere("after-kill");
      const afterKill = await world.waitForEvenHolders(["fm-1", "fm-2"]);
      const movedAt = Date.now();
      await world.waitForMirrors("after-kill");
      const convergedAt = Date.now();
      t.diagnostic(
        `kill -9 → its ${victimShards.length} shards held again ${movedAt - killedAt} ms, → a new Service mirrored in all 60 clusters ${convergedAt - killedAt} ms`,
      );

      for (let shard = 0; shard < SHARDS; shard++) {
        if (before[shard] === "fm-0") continue;
        assert.equal(afterKill[shard], before[shard], `shard ${shard} of a survivor moved`);
      }
      await world.audit.flush();
      const writes = world.audit.all();
      for (let shard = 0; shard < SHARDS; shard++) {
        const full = leaseHistory(writes, shardLeaseName(LEASE_ID, SHARDS, shard));
        const since = [
          { at: settled, by: "", holder: holderAt(full, settled) },
          ...full.filter((r) => r.at >= settled),
        ];
        const holders = tenures(since).map((x) => x.holder);
        const expected = before[shard] === "fm-0" ? ["fm-0", afterKill[shard]] : [before[shard]];
        assert.deepEqual(holders, expected, `shard ${shard}: holders over time`);
      }
      for (const shard of victimShards) {
        const renewed = lastRenewal("fm-0", shard);
        const taken = leaseHistory(writes, shardLeaseName(LEASE_ID, SHARDS, shard)).find(
          (r) => r.at > renewed && r.by !== "fm-0",
        );
        assert.ok(taken, `shard ${shard} was taken over`);
        assert.ok(
          taken.at >= renewed + LEASE_DURATION_MS,
          `shard ${shard} taken ${taken.at - renewed} ms after fm-0 last renewed it (Lease ${LEASE_DURATION_MS} ms)`,
        );
      }
      const foreign = await world.foreignWrites();
      assert.deepEqual(
        foreign,
        [],
        `mirror writes by a replica not holding the shard:\n${describeForeignWrites(foreign)}`,
      );
    });
  });

  it("a replica cut off the local API writes none of its shards past their renew deadlines; the others take them, and nothing it held back lands later", async (t) => {
    await world.withDiagnostics(t, async () => {
      await world.addReplica("fm-3", { proxied: true });
      const live = ["fm-1", "fm-2", "fm-3"];
      const before = await world.waitForSettled(live);
      // Only the replica to cut runs behind a fault proxy: the proxy runs in this (busy) process.
      const cutOff = world.replicas.get("fm-3");
      const itsShards = before.flatMap((h, shard) => (h === cutOff.name ? [shard] : []));

      cutOff.partition();
      const cut = Date.now();
      // Its remote watches are not cut: it sees these and would mirror them if nothing stopped it.
      await world.exportEverywhere("during-cut");
      const survivors = await world.waitForEvenHolders(["fm-1", "fm-2"]);
      const takenAt = Date.now();
      await world.waitForMirrors("during-cut");
      cutOff.heal();
      const healedAt = Date.now();
      // Back on the network it rejoins, and the fair share gives it shards again.
      const rejoined = await world.waitForSettled(live);
      const end = await world.audit.flush();
      t.diagnostic(
        `cut → its ${itsShards.length} shards held by the others ${takenAt - cut} ms, healed ${healedAt - cut} ms; holders after ${JSON.stringify(survivors)}, after rejoining ${JSON.stringify(rejoined)}`,
      );

      const writes = world.audit.all();
      for (const shard of itsShards) {
        const renewed = lastRenewal(cutOff.name, shard, takenAt);
        const history = leaseHistory(writes, shardLeaseName(LEASE_ID, SHARDS, shard));
        const taken = history.find((r) => r.at > renewed && r.holder !== cutOff.name);
        assert.ok(taken, `shard ${shard} was taken over`);
        assert.ok(taken.at >= renewed + LEASE_DURATION_MS, `shard ${shard} taken before its Lease could be`);
        // From its renew deadline until it holds the shard again, nothing of it reaches the server.
        const back = history.find((r) => r.at > taken.at && r.holder === cutOff.name)?.at ?? end;
        const late = writes.filter(
          (w) =>
            w.identity === cutOff.name &&
            w.receivedAt >= renewed + RENEW_DEADLINE_MS &&
            w.receivedAt < back &&
            world.shardOf(clusterOfMirror(w, world.clusters) ?? "") === shard &&
            clusterOfMirror(w, world.clusters) !== undefined,
        );
        assert.deepEqual(late, [], `shard ${shard}: writes past its renew deadline:\n${describeWrites(late)}`);
      }
      const foreign = await world.foreignWrites();
      assert.deepEqual(
        foreign,
        [],
        `mirror writes by a replica not holding the shard:\n${describeForeignWrites(foreign)}`,
      );
    });
  });
});
