/**
 * heap-settle.ts: when a thread collects after a burst, and that it does give the heap
 * back once quiet. The effect is checked in a child process (its heap and V8 flags are
 * its own): it grows its heap by ≈ 60 MB and its semi-spaces, drops the objects and goes
 * quiet; the check must then bring both back down, which V8 alone does not do in that time.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, it } from "node:test";
import { promisify } from "node:util";
import {
  type HeapSample,
  QUIET_UTILIZATION,
  SETTLE_CHECK_MS,
  SETTLE_GROWTH_BYTES,
  SETTLE_SPACING_MS,
  shouldSettle,
} from "../../src/heap-settle.ts";

const run = promisify(execFile);
const MiB = 2 ** 20;

describe("heap settle decision", () => {
  const base = 20 * MiB;
  /** A check of a thread whose heap is `committedBytes`, no longer growing, idle, long after its last collection; `change` varies one field. */
  const sample = (committedBytes: number, change: Partial<HeapSample> = {}): HeapSample => ({
    committedBytes,
    previousCommittedBytes: committedBytes,
    utilization: 0,
    sinceLastMs: SETTLE_SPACING_MS,
    ...change,
  });
  it("collects once the committed heap grew by the threshold and the thread is quiet", () => {
    assert.equal(shouldSettle(base, sample(base + SETTLE_GROWTH_BYTES)), true);
  });
  it("waits while the heap still grows (the burst goes on)", () => {
    const committedBytes = base + 2 * SETTLE_GROWTH_BYTES;
    assert.equal(shouldSettle(base, sample(committedBytes, { previousCommittedBytes: committedBytes - 1 })), false);
  });
  it("waits while the thread is saturated", () => {
    assert.equal(
      shouldSettle(base, sample(base + 10 * SETTLE_GROWTH_BYTES, { utilization: QUIET_UTILIZATION })),
      false,
    );
  });
  it("waits for the spacing after the thread's last collection (a slow burst's plateaus)", () => {
    assert.equal(
      shouldSettle(base, sample(base + 2 * SETTLE_GROWTH_BYTES, { sinceLastMs: SETTLE_SPACING_MS - 1 })),
      false,
    );
  });
  it("leaves a heap that did not grow (no periodic collection of an idle thread)", () => {
    assert.equal(shouldSettle(base, sample(base + SETTLE_GROWTH_BYTES - 1)), false);
  });
});

/** The child: baseline, a burst of retained objects dropped at once, then quiet until the heap shrinks or the deadline. */
const child = `
import { getHeapSpaceStatistics, getHeapStatistics } from "node:v8";
import { startHeapSettle } from ${JSON.stringify(new URL("../../src/heap-settle.ts", import.meta.url).href)};
startHeapSettle();
const newSpace = () => getHeapSpaceStatistics().find((s) => s.space_name === "new_space").space_size;
let burst = [];
for (let i = 0; i < 600_000; i++) burst.push({ i, name: "object-" + i, labels: { a: String(i) } });
// Short-lived objects that survive a scavenge or two: V8 grows the semi-spaces.
let rounds = [];
for (let r = 0; r < 30; r++) {
  const round = [];
  for (let i = 0; i < 100_000; i++) round.push({ i, s: "x" + i });
  rounds.push(round);
  if (rounds.length > 3) rounds.shift();
}
const grown = getHeapStatistics().total_heap_size;
const grownNew = newSpace();
burst = undefined;
rounds = undefined;
const deadline = Date.now() + ${SETTLE_CHECK_MS * 4};
const timer = setInterval(() => {
  const now = getHeapStatistics().total_heap_size;
  if ((now < grown / 2 && newSpace() < grownNew / 4) || Date.now() > deadline) {
    clearInterval(timer);
    process.stdout.write(JSON.stringify({ grown, now, grownNew, nowNew: newSpace() }));
  }
}, 100);
`;

describe("heap settle on a thread", () => {
  it("gives the heap of a burst back once the thread is quiet", async () => {
    const { stdout } = await run(process.execPath, ["--input-type=module", "--eval", child]);
    const { grown, now, grownNew, nowNew } = JSON.parse(stdout) as {
      grown: number;
      now: number;
      grownNew: number;
      nowNew: number;
    };
    assert.ok(grown > 50 * MiB, `the burst grew the heap to ${(grown / MiB).toFixed(1)} MiB`);
    assert.ok(
      now < grown / 2,
      `committed heap ${(now / MiB).toFixed(1)} MiB after the burst's ${(grown / MiB).toFixed(1)} MiB`,
    );
    assert.ok(grownNew >= 8 * MiB, `the burst grew the semi-spaces to ${(grownNew / MiB).toFixed(1)} MiB`);
    assert.ok(
      nowNew < grownNew / 4,
      `young generation ${(nowNew / MiB).toFixed(1)} MiB after the burst's ${(grownNew / MiB).toFixed(1)} MiB`,
    );
  });
});
