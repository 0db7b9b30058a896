/**
 * The shard label of sharded mirrors and the writers' watch requirement (pure): a
 * writer's selector excludes exactly the shards it does not hold, so objects of its
 * shards, unlabelled objects and objects labelled under another shard count stay
 * visible; not sharded, nothing is added.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SHARD_LABEL } from "../../src/core/labels.ts";
import { listedOwnership, shardLabelValue, shardRequirement, withShardLabel } from "../../src/core/shard-label.ts";
import { allShards, shardOf } from "../../src/core/shards.ts";

/** Whether `labels` match `requirement` (`<key> notin (a,b)`), as the API server decides it. */
function admits(requirement: string | undefined, labels: Record<string, string>): boolean {
  if (requirement === undefined) return true;
  const match = /^(\S+) notin \((.*)\)$/.exec(requirement);
  assert.ok(match, requirement);
  const value = labels[match[1] ?? ""];
  return value === undefined || !(match[2] ?? "").split(",").includes(value);
}

describe("shard label", () => {
  it("labels a sharded mirror with its cluster's shard and the shard count; leaves an unsharded one as it is", () => {
    const labels = { a: "b" };
    assert.equal(withShardLabel(labels, "east", 1), labels);
    assert.deepEqual(withShardLabel(labels, "east", 6), { a: "b", [SHARD_LABEL]: `${shardOf("east", 6)}-of-6` });
    assert.deepEqual(labels, { a: "b" }, "the input is not changed");
  });

  it("selects the held shards' mirrors and every object not labelled with another shard of this count", () => {
    const ownership = { shards: 4, held: new Set([1, 3]) };
    const requirement = shardRequirement(ownership);
    assert.equal(requirement, `${SHARD_LABEL} notin (0-of-4,2-of-4)`);
    const of = (value: string) => ({ [SHARD_LABEL]: value });
    assert.ok(admits(requirement, of(shardLabelValue(1, 4))));
    assert.ok(admits(requirement, of(shardLabelValue(3, 4))));
    assert.ok(!admits(requirement, of(shardLabelValue(0, 4))));
    assert.ok(!admits(requirement, of(shardLabelValue(2, 4))));
    assert.ok(admits(requirement, {}), "unlabelled (a fleet-wide part, a mirror from before sharding)");
    assert.ok(admits(requirement, of(shardLabelValue(0, 6))), "labelled under another shard count");
  });

  it("adds nothing when not sharded or when every shard is held; excludes all when none is", () => {
    assert.equal(shardRequirement(allShards), undefined);
    assert.equal(shardRequirement({ shards: 3, held: new Set([0, 1, 2]) }), undefined);
    assert.equal(shardRequirement({ shards: 3, held: new Set() }), `${SHARD_LABEL} notin (0-of-3,1-of-3,2-of-3)`);
  });

  it("plans only the held shards whose mirrors are listed; all of them once they are", () => {
    const ownership = { shards: 6, held: new Set([1, 4]) };
    assert.deepEqual([...listedOwnership(ownership, new Set([1])).held], [1]);
    assert.deepEqual([...listedOwnership(ownership, new Set()).held], []);
    assert.equal(listedOwnership(ownership, new Set([1, 4, 5])), ownership, "a dropped shard still listed is not held");
    assert.equal(listedOwnership(allShards, new Set()), allShards, "not sharded: everything");
  });
});
