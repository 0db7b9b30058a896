/** placeClusters: where each cluster's actor runs with --max-threads N, as a pure function. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { placeClusters, slotSizes } from "../../src/supervisor/placement.ts";

const names = (n: number, prefix = "c") =>
  Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(3, "0")}`);
const spread = (sizes: readonly number[]) => Math.max(...sizes) - Math.min(...sizes);

describe("placeClusters", () => {
  it("gives each cluster a thread of its own up to N", () => {
    const a = placeClusters(names(3), new Map(), 5);
    assert.deepEqual([...a.values()].sort(), [0, 1, 2]);
    const b = placeClusters(names(5), a, 5);
    assert.deepEqual([...b.values()].sort(), [0, 1, 2, 3, 4]);
  });

  it("packs clusters beyond N evenly over the N threads", () => {
    const a = placeClusters(names(103), new Map(), 10);
    const sizes = slotSizes(a, 10);
    assert.equal(a.size, 103);
    assert.ok(spread(sizes) <= 1, `sizes ${sizes.join(",")}`);
    assert.equal(
      sizes.reduce((x, y) => x + y, 0),
      103,
    );
    for (const slot of a.values()) assert.ok(slot >= 0 && slot < 10);
  });

  it("is deterministic: the order of the input does not matter", () => {
    const list = names(17);
    assert.deepEqual(placeClusters(list, new Map(), 4), placeClusters([...list].reverse(), new Map(), 4));
  });

  it("never moves an existing cluster when others are added, one at a time or many at once", () => {
    let a = placeClusters(names(7), new Map(), 3);
    const first = new Map(a);
    for (let n = 8; n <= 40; n++) {
      const before = new Map(a);
      a = placeClusters(names(n), a, 3);
      for (const [cluster, slot] of before) assert.equal(a.get(cluster), slot, `${cluster} stayed`);
      assert.ok(spread(slotSizes(a, 3)) <= 1, `balanced after adding up to ${n}`);
    }
    for (const [cluster, slot] of first) assert.equal(a.get(cluster), slot);
    const b = placeClusters([...names(40), ...names(9, "z")], a, 3);
    for (const [cluster, slot] of a) assert.equal(b.get(cluster), slot);
    assert.ok(spread(slotSizes(b, 3)) <= 1);
  });

  it("never moves a remaining cluster when others are removed, and fills the emptied thread first", () => {
    const a = placeClusters(names(9), new Map(), 3);
    const emptied = a.get("c000");
    assert.ok(emptied !== undefined);
    const removed = [...a].filter(([, slot]) => slot === emptied).map(([c]) => c);
    const remaining = names(9).filter((c) => !removed.includes(c));
    const b = placeClusters(remaining, a, 3);
    assert.equal(b.size, remaining.length);
    for (const c of remaining) assert.equal(b.get(c), a.get(c));
    assert.equal(slotSizes(b, 3)[emptied], 0);
    const c = placeClusters([...remaining, "new-1", "new-2", "new-3"], b, 3);
    for (const n of ["new-1", "new-2", "new-3"]) assert.equal(c.get(n), emptied);
    assert.deepEqual(slotSizes(c, 3), [3, 3, 3]);
  });

  it("re-places clusters whose slot no longer exists (N lowered)", () => {
    const a = placeClusters(names(8), new Map(), 8);
    const b = placeClusters(names(8), a, 2);
    for (const slot of b.values()) assert.ok(slot < 2);
    for (const [cluster, slot] of a) if (slot < 2) assert.equal(b.get(cluster), slot);
    assert.deepEqual(slotSizes(b, 2), [4, 4]);
  });

  it("rejects a slot count that is not a positive integer", () => {
    assert.throws(() => placeClusters(names(2), new Map(), 0), RangeError);
    assert.throws(() => placeClusters(names(2), new Map(), 1.5), RangeError);
  });
});
