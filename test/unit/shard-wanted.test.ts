/** The fair share of shards over live replicas: one owner per shard, q or q + 1 each, sticky, few moves. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { wantedShards } from "../../src/core/shards.ts";

/** shard → replica, from a wanted map (asserting no shard is wanted twice). */
function owners(wanted: Map<string, number[]>): Map<number, string> {
  const out = new Map<number, string>();
  for (const [replica, shards] of wanted)
    for (const shard of shards) {
      assert.equal(out.has(shard), false, `shard ${shard} wanted twice`);
      out.set(shard, replica);
    }
  return out;
}

function moved(before: Map<number, string>, after: Map<number, string>): number[] {
  return [...before.keys()].filter((shard) => before.get(shard) !== after.get(shard));
}

const pods = (n: number, prefix = "fleet-mirror-7d9f-"): string[] =>
  Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe("wantedShards", () => {
  it("gives every shard to exactly one replica, ⌊S/R⌋ or ⌈S/R⌉ each, from scratch and from any holders", () => {
    for (const replicas of [1, 2, 3, 4, 5, 7])
      for (const shards of [1, 2, 3, 6, 10, 64]) {
        // Lopsided holders: replica 0 holds everything.
        const lopsided = new Map(Array.from({ length: shards }, (_, s) => [s, "fleet-mirror-7d9f-0"] as const));
        for (const holders of [new Map<number, string>(), lopsided]) {
          const wanted = wantedShards(pods(replicas), shards, holders);
          assert.equal(owners(wanted).size, shards, `${replicas} replicas, ${shards} shards`);
          for (const list of wanted.values())
            assert.ok(list.length === Math.floor(shards / replicas) || list.length === Math.ceil(shards / replicas));
        }
      }
  });

  it("is the same map whatever the order of the identities or duplicates in it", () => {
    const a = wantedShards(["r-2", "r-0", "r-1"], 12);
    const b = wantedShards(["r-1", "r-2", "r-0", "r-1"], 12);
    assert.deepEqual([...a].sort(), [...b].sort());
  });

  it("is stable: fixed values for fixed names (every replica version must compute the same map)", () => {
    assert.deepEqual(Object.fromEntries(wantedShards(["a", "b", "c"], 6)), { a: [4, 5], b: [0, 1], c: [2, 3] });
  });

  it("is a fixed point: once the holders are the wanted map, nothing moves", () => {
    for (const replicas of [2, 3, 4])
      for (const shards of [3, 6, 13]) {
        const first = owners(wantedShards(pods(replicas), shards));
        assert.deepEqual(owners(wantedShards(pods(replicas), shards, first)), first);
      }
  });

  it("ignores holders that are not live and shards out of range", () => {
    const holders = new Map([
      [0, "gone"],
      [1, "a"],
      [9, "a"],
    ]);
    const wanted = owners(wantedShards(["a", "b"], 2, holders));
    assert.equal(wanted.get(1), "a", "a live holder keeps its shard");
    assert.equal(wanted.get(0), "b");
  });

  it("when a replica leaves, only its shards move", () => {
    for (const shards of [6, 12, 30, 64])
      for (const replicas of [2, 3, 4, 5]) {
        const all = pods(replicas);
        const before = owners(wantedShards(all, shards));
        for (const gone of all) {
          const after = owners(
            wantedShards(
              all.filter((r) => r !== gone),
              shards,
              before,
            ),
          );
          for (const shard of moved(before, after))
            assert.equal(before.get(shard), gone, `S=${shards} R=${replicas}: ${gone} left, shard ${shard} moved`);
        }
      }
  });

  it("when a replica joins, only shards over the new share move, and they move to the newcomer", () => {
    for (const shards of [6, 12, 30])
      for (const replicas of [1, 2, 3, 4]) {
        const all = pods(replicas);
        const before = owners(wantedShards(all, shards));
        const newcomer = "fleet-mirror-7d9f-new";
        const after = owners(wantedShards([...all, newcomer], shards, before));
        const share = Math.floor(shards / (replicas + 1));
        const toNewcomer = [...after].filter(([, r]) => r === newcomer).length;
        assert.ok(toNewcomer >= share, `S=${shards} R=${replicas}: the newcomer wants ${toNewcomer}`);
        for (const shard of moved(before, after)) assert.equal(after.get(shard), newcomer);
      }
  });

  it("a rolling restart (surge, then the old replica leaves) moves shards only to the new replica, then only the old one's", () => {
    const before = owners(wantedShards(["old-a", "old-b", "old-c"], 6));
    const surge = owners(wantedShards(["old-a", "old-b", "old-c", "new-a"], 6, before));
    for (const shard of moved(before, surge)) assert.equal(surge.get(shard), "new-a");
    const after = owners(wantedShards(["old-b", "old-c", "new-a"], 6, surge));
    for (const shard of moved(surge, after)) assert.equal(surge.get(shard), "old-a");
    assert.deepEqual(
      [...wantedShards(["old-b", "old-c", "new-a"], 6, after).values()].map((l) => l.length),
      [2, 2, 2],
    );
  });

  it("no live replica: nobody wants anything", () => {
    assert.equal(wantedShards([], 6).size, 0);
    assert.throws(() => wantedShards(["a"], 0), RangeError);
  });
});
