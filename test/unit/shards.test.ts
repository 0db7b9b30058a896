import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { allShards, federatedShardOf, hostsCluster, ownsFederated, shardOf } from "../../src/core/shards.ts";

describe("shardOf", () => {
  it("is stable: fixed values for fixed names (a change here remaps every deployed fleet)", () => {
    assert.equal(shardOf("east", 1), 0);
    assert.deepEqual(
      ["east", "west", "north", "cluster-0", "cluster-59"].map((name) => shardOf(name, 7)),
      [3, 4, 0, 2, 6],
    );
    // FNV-1a of "a" is 0xe40c292c.
    assert.equal(shardOf("a", 0x10000), 0xe40c292c % 0x10000);
  });

  it("spreads 60 clusters over 3 shards without an empty or a lopsided shard", () => {
    const sizes = [0, 0, 0];
    for (let i = 0; i < 60; i++) {
      const shard = shardOf(`cluster-${i}`, 3);
      sizes[shard] = (sizes[shard] ?? 0) + 1;
    }
    for (const size of sizes) assert.ok(size >= 10 && size <= 30, `sizes ${sizes.join(",")}`);
  });

  it("refuses a shard count that is not a positive integer", () => {
    assert.throws(() => shardOf("east", 0), RangeError);
    assert.throws(() => shardOf("east", 1.5), RangeError);
  });
});

describe("ownership", () => {
  it("one shard owns everything", () => {
    assert.ok(hostsCluster(allShards, "east"));
    assert.ok(ownsFederated(allShards, "shop", "search-federated"));
  });

  it("a replica hosts exactly the clusters of its held shards, and one shard owns a fleet-wide object", () => {
    const names = Array.from({ length: 60 }, (_, i) => `cluster-${i}`);
    const replicas = [0, 1, 2].map((shard) => ({ shards: 3, held: new Set([shard]) }));
    for (const name of names) assert.equal(replicas.filter((r) => hostsCluster(r, name)).length, 1);
    const owners = replicas.filter((r) => ownsFederated(r, "shop", "search-federated"));
    assert.equal(owners.length, 1);
    assert.ok(owners[0]?.held.has(federatedShardOf("shop", "search-federated", 3)));
  });
});
