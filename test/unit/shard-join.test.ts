/**
 * Joining (observeJoin): a replica that has just started takes no shard until its lists
 * showed the same live replicas for a quiet window (the retry period), or a bounded wait
 * passed; settled stays settled.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type JoinState, observeJoin, wantedShards } from "../../src/core/shards.ts";

const MAX_WAIT_MS = 8_000;
const WINDOW_MS = 1_000;

/** Feeds lists (live sets at `intervalMs` intervals) and returns the state after each. */
function replay(lists: readonly (readonly string[])[], intervalMs = 1_000, expectedReplicas = 0): JoinState[] {
  const states: JoinState[] = [];
  let state: JoinState | undefined;
  for (const [i, live] of lists.entries()) {
    state = observeJoin(state, live, i * intervalMs, WINDOW_MS, MAX_WAIT_MS, expectedReplicas);
    states.push(state);
  }
  return states;
}

describe("observeJoin", () => {
  it("is not settled at the first list, even when it shows only this replica", () => {
    const [first] = replay([["fm-0"]]);
    assert.equal(first?.settled, false);
  });

  it("settles at the first list whose live set equals the one before", () => {
    const states = replay([["fm-0"], ["fm-0", "fm-1"], ["fm-2", "fm-0", "fm-1"], ["fm-1", "fm-2", "fm-0"]]);
    assert.deepEqual(
      states.map((s) => s.settled),
      [false, false, false, true],
    );
  });

  it("listed every quarter window, settles once the live set stayed the same for the window", () => {
    const three = ["fm-0", "fm-1", "fm-2"];
    // fm-1 appears at 250 ms, fm-2 at 750 ms: the window runs from 750 ms, so 1 750 ms.
    const lists = [["fm-0"], ["fm-0", "fm-1"], ["fm-0", "fm-1"], three, three, three, three, three, three];
    const states = replay(lists, 250);
    assert.equal(
      states.findIndex((s) => s.settled),
      7,
    );
    assert.equal(states.at(-1)?.live, three.join("\n"));
  });

  it("with --expected-replicas, settles at the first list showing that many, without the window", () => {
    const three = ["fm-0", "fm-1", "fm-2"];
    const lists = [["fm-0"], ["fm-0", "fm-1"], three, three];
    assert.deepEqual(
      replay(lists, 250, 3).map((s) => s.settled),
      [false, false, true, true],
    );
    // Already complete at the first list (the others were up first); more (a surge) counts too.
    assert.equal(replay([three], 250, 3)[0]?.settled, true);
    assert.equal(replay([[...three, "fm-3"]], 250, 3)[0]?.settled, true);
    // Fewer than expected (one replica did not start): the quiet window still settles it.
    assert.equal(
      replay(
        [
          ["fm-0", "fm-1"],
          ["fm-0", "fm-1"],
          ["fm-0", "fm-1"],
        ],
        1_000,
        3,
      ).findIndex((s) => s.settled),
      1,
    );
    // A replica named twice (its Lease seen twice) is one replica.
    assert.equal(replay([["fm-0", "fm-0", "fm-1"]], 250, 3)[0]?.settled, false);
  });

  it("settles after the bounded wait while replicas keep appearing", () => {
    const lists = Array.from({ length: 12 }, (_, i) => Array.from({ length: i + 1 }, (_, r) => `fm-${r}`));
    const states = replay(lists);
    const first = states.findIndex((s) => s.settled);
    assert.equal(first, MAX_WAIT_MS / 1_000, "settled exactly when the wait ran out");
  });

  it("stays settled whatever the later lists show", () => {
    const states = replay([["fm-0"], ["fm-0"], ["fm-0", "fm-1"], []]);
    assert.deepEqual(
      states.map((s) => s.settled),
      [false, true, true, true],
    );
  });

  it("replicas started within one list of each other settle on the same live set, and so want disjoint shares", () => {
    // fm-0 lists first and sees itself; fm-1 and fm-2 appear before its next list.
    const a = replay([["fm-0"], ["fm-0", "fm-1", "fm-2"], ["fm-0", "fm-1", "fm-2"]]);
    const b = replay([
      ["fm-0", "fm-1", "fm-2"],
      ["fm-0", "fm-1", "fm-2"],
    ]);
    assert.equal(a.at(-1)?.settled, true);
    assert.equal(b.at(-1)?.settled, true);
    assert.equal(a.at(-1)?.live, b.at(-1)?.live);
    const wanted = wantedShards(["fm-0", "fm-1", "fm-2"], 12);
    const all = [...wanted.values()].flat().sort((x, y) => x - y);
    assert.deepEqual(
      all,
      Array.from({ length: 12 }, (_, i) => i),
    );
    for (const list of wanted.values()) assert.equal(list.length, 4);
  });
});
