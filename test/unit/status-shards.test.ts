/** `fleet-mirror status` when sharded: who holds which shard, from the Leases or from a controller. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { shardRowsFromLeases, shardRowsFromView } from "../../src/cli/status-rows.ts";
import { formatShardTable } from "../../src/cli/status-table.ts";
import { shardOf } from "../../src/core/shards.ts";

const CLUSTERS = ["east", "west", "north", "south", "c0", "c1"];

describe("status: shard rows", () => {
  it("reads every shard Lease, a free shard and a missing one included, and ignores other Leases", () => {
    const rows = shardRowsFromLeases(
      [
        {
          name: "fleet-mirror-shard-0",
          spec: { holderIdentity: "replica-a", renewTime: "2026-12-03T12:00:00.000000Z" },
        },
        { name: "fleet-mirror-shard-2", spec: { holderIdentity: "" } },
        { name: "fleet-mirror-member-replica-a-0badcafe", spec: { holderIdentity: "replica-a" } },
        { name: "fleet-mirror", spec: { holderIdentity: "replica-z" } },
        { name: "other-shard-7", spec: { holderIdentity: "replica-y" } },
      ],
      "fleet-mirror",
      CLUSTERS,
    );
    assert.deepEqual(
      rows.map((r) => [r.shard, r.holder]),
      [
        [0, "replica-a"],
        [1, ""],
        [2, ""],
      ],
    );
    for (const row of rows) assert.deepEqual(row.clusters, CLUSTERS.filter((c) => shardOf(c, 3) === row.shard).sort());
    const table = formatShardTable(rows, Date.parse("2026-12-03T12:00:05Z"));
    assert.match(table, /^0\s+replica-a\s+5s ago\s+\d+$/m);
    assert.match(table, /^1\s+\(free\)/m);
  });

  it("has no rows when there is no shard Lease (not sharded)", () => {
    assert.deepEqual(shardRowsFromLeases([{ name: "fleet-mirror", spec: {} }], "fleet-mirror", CLUSTERS), []);
  });

  it("takes a sharded controller's own view, with the clusters it runs", () => {
    const rows = shardRowsFromView(
      { shards: 2, held: [1], wanted: [1], live: ["a", "b"], holders: ["a", "b"] },
      CLUSTERS.filter((c) => shardOf(c, 2) === 1),
    );
    assert.deepEqual(
      rows.map((r) => [r.shard, r.holder, r.clusters.length > 0]),
      [
        [0, "a", false],
        [1, "b", true],
      ],
    );
  });
});
