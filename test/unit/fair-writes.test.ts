/**
 * Fair writes between clusters, in the pure parts: the laned FIFO (lanes take turns),
 * the work queue with lanes (its other guarantees unchanged), and the token bucket whose
 * waiting callers are served by lane in turn.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { FairTokenBucket, HEAVY_MAX_WAIT_MS } from "../../src/core/fair-bucket.ts";
import { LanedFifo } from "../../src/core/fifo.ts";
import { WorkQueue } from "../../src/core/workqueue.ts";

/** Lets promise callbacks run (no real waiting). */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

const laneOfKey = (key: string): string => key.split("/")[0] ?? "";

function drainFifo<T>(fifo: LanedFifo<T>): T[] {
  const out: T[] = [];
  for (let item = fifo.shift(); item !== undefined; item = fifo.shift()) out.push(item);
  return out;
}

async function drainQueue(queue: WorkQueue): Promise<string[]> {
  const keys: string[] = [];
  while (queue.len > 0) {
    const key = await queue.get();
    if (key === undefined) break;
    keys.push(key);
    queue.done(key);
  }
  return keys;
}

describe("LanedFifo", () => {
  it("is a plain FIFO with one lane", () => {
    const fifo = new LanedFifo<number>();
    for (const n of [3, 1, 2]) fifo.push("only", n);
    assert.equal(fifo.length, 3);
    assert.deepEqual(drainFifo(fifo), [3, 1, 2]);
    assert.equal(fifo.length, 0);
    assert.equal(fifo.lanes, 0);
  });

  it("serves the lanes in turn, one item each, each lane in its own order", () => {
    const fifo = new LanedFifo<string>();
    for (let i = 0; i < 4; i++) fifo.push("a", `a${i}`);
    fifo.push("b", "b0");
    fifo.push("c", "c0");
    fifo.push("b", "b1");
    assert.deepEqual(drainFifo(fifo), ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]);
  });

  it("serves an item pushed to an empty lane after at most one item of each busy lane, however long their backlog", () => {
    const fifo = new LanedFifo<string>();
    for (let i = 0; i < 10_000; i++) fifo.push("noisy", `n${i}`);
    for (let i = 0; i < 5_000; i++) fifo.push("loud", `l${i}`);
    fifo.shift();
    fifo.push("quiet", "q");
    const order: string[] = [];
    for (let i = 0; i < 3; i++) order.push(fifo.shift() ?? "");
    assert.ok(order.includes("q"), `the quiet lane's item came within 3 turns: ${order.join(",")}`);
  });

  it("forgets a lane once it is empty and clears every lane", () => {
    const fifo = new LanedFifo<string>();
    fifo.push("a", "x");
    fifo.push("b", "y");
    assert.equal(fifo.lanes, 2);
    fifo.shift();
    assert.equal(fifo.lanes, 1);
    fifo.clear();
    assert.equal(fifo.length, 0);
    assert.equal(fifo.shift(), undefined);
    fifo.push("a", "z");
    assert.deepEqual(drainFifo(fifo), ["z"]);
  });
});

describe("WorkQueue with lanes", () => {
  it("hands out the keys of busy lanes in turn, each lane first in first out", async () => {
    const queue = new WorkQueue({ clock: new ManualClock(), lane: laneOfKey });
    for (let i = 0; i < 5; i++) queue.add(`noisy/${i}`);
    queue.add("quiet/web");
    queue.add("other/db");
    assert.equal(queue.len, 7);
    assert.deepEqual(await drainQueue(queue), [
      "noisy/0",
      "quiet/web",
      "other/db",
      "noisy/1",
      "noisy/2",
      "noisy/3",
      "noisy/4",
    ]);
  });

  it("keeps its guarantees per key: no duplicate while waiting, never a key in flight, re-queued at done into its lane", async () => {
    const queue = new WorkQueue({ clock: new ManualClock(), lane: laneOfKey });
    queue.add("a/1");
    queue.add("a/1");
    queue.add("b/1");
    assert.equal(queue.len, 2);
    const first = await queue.get();
    assert.equal(first, "a/1");
    queue.add("a/1"); // changed while in flight: waits for done
    assert.equal(queue.len, 1);
    assert.equal(await queue.get(), "b/1");
    assert.equal(queue.len, 0, "the key in flight is not handed out");
    queue.done("a/1");
    assert.equal(queue.len, 1);
    assert.equal(await queue.get(), "a/1");
    queue.done("a/1");
    queue.done("b/1");
    assert.equal(queue.len + queue.processing, 0);
  });

  it("asks a key's lane each time it becomes ready (a mirror that changes cluster moves lane)", async () => {
    const lanes = new Map<string, string>([
      ["m", "east"],
      ["e1", "east"],
      ["e2", "east"],
    ]);
    const queue = new WorkQueue({ clock: new ManualClock(), lane: (key: string) => lanes.get(key) ?? "" });
    queue.add("m");
    assert.equal(await queue.get(), "m");
    lanes.set("m", "west");
    queue.add("m"); // changed while in flight
    queue.add("e1");
    queue.add("e2");
    queue.done("m"); // re-queued, now in west's lane
    assert.deepEqual(await drainQueue(queue), ["e1", "m", "e2"]);
  });

  it("gives a delayed key, once due, its lane's turn like any other", async () => {
    const clock = new ManualClock();
    const queue = new WorkQueue({ clock, lane: laneOfKey });
    for (let i = 0; i < 4; i++) queue.add(`noisy/${i}`);
    queue.addAfter("quiet/x", 100);
    clock.advance(100);
    assert.deepEqual((await drainQueue(queue)).slice(0, 2), ["noisy/0", "quiet/x"]);
  });
});

describe("WorkQueue with mayStart", () => {
  it("holds back a lane that mayStart refuses, hands its keys out again at its next done, and never holds back a lane with nothing in flight", async () => {
    const asked: [string, number][] = [];
    const queue = new WorkQueue({
      clock: new ManualClock(),
      lane: laneOfKey,
      mayStart: (lane, inFlight) => {
        asked.push([lane, inFlight]);
        return lane !== "busy" || inFlight < 2;
      },
    });
    for (let i = 0; i < 5; i++) queue.add(`busy/${i}`);
    assert.equal(await queue.get(), "busy/0");
    assert.equal(await queue.get(), "busy/1");
    assert.deepEqual(asked, [["busy", 1]], "a lane with nothing in flight is not asked");
    let third: string | undefined;
    void queue.get().then((key) => {
      third = key;
    });
    await settle();
    assert.equal(third, undefined, "the busy lane holds two workers: the third waits");
    queue.add("quiet/x");
    await settle();
    assert.equal(third, "quiet/x", "the waiting worker took the quiet lane's key");
    let fourth: string | undefined;
    void queue.get().then((key) => {
      fourth = key;
    });
    await settle();
    assert.equal(fourth, undefined);
    queue.done("quiet/x");
    await settle();
    assert.equal(fourth, undefined, "a done of another lane frees nothing for the busy lane");
    queue.done("busy/0");
    await settle();
    assert.equal(fourth, "busy/2", "the busy lane's done gave its next key the free worker");
    assert.equal(queue.len, 2);
    assert.equal(queue.processing, 2);
  });
});

describe("FairTokenBucket", () => {
  it("keeps the last half of the burst for light lanes: a busy lane waits, a quiet lane's token comes at once", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(100, 100, clock); // reserve 50; heavy from 25 tokens a second
    let noisy = 0;
    for (let i = 0; i < 200; i++) void bucket.take("noisy").then(() => noisy++);
    await settle();
    assert.equal(noisy, 50, "the busy lane took the burst down to the reserve, no further");
    assert.equal(bucket.isHeavy("noisy"), true);
    let quiet = 0;
    for (let lane = 0; lane < 7; lane++) void bucket.take(`quiet-${lane}`).then(() => quiet++);
    await settle();
    assert.equal(quiet, 7, "seven quiet clusters' writes went out at once, from the reserve");
    assert.equal(bucket.isHeavy("quiet-0"), false);
  });

  for (const busyPercent of [100, 25])
    it(`gives a heavy lane alone the whole rate, above the reserve (busy share ${busyPercent} %)`, async () => {
      const clock = new ManualClock();
      const bucket = new FairTokenBucket(100, 100, clock, busyPercent);
      let served = 0;
      for (let i = 0; i < 1_000; i++) void bucket.take("converging").then(() => served++);
      await settle();
      assert.equal(served, 50);
      // Its own first tokens, taken while it was still light, must not cap it.
      assert.equal(bucket.capped, false);
      for (let t = 0; t < 100; t++) {
        clock.advance(10);
        await settle();
      }
      assert.ok(served >= 149 && served <= 151, `100 tokens a second after the first 50 (got ${served})`);
    });

  it("delays a heavy lane's caller behind light lanes that take every token, never past HEAVY_MAX_WAIT_MS", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(10, 2, clock); // one token per 100 ms; reserve 1; heavy from 3 a second
    for (let i = 0; i < 3; i++) {
      void bucket.take("busy");
      clock.advance(100);
      await settle();
    }
    assert.equal(bucket.isHeavy("busy"), true);
    void bucket.take("light-a");
    void bucket.take("light-b");
    await settle();
    assert.equal(bucket.waiting, 0, "two light lanes took the bucket's two tokens");
    let busyServedAt: number | undefined;
    const start = clock.now();
    void bucket.take("busy").then(() => {
      busyServedAt = clock.now() - start;
    });
    // A new light lane every 100 ms takes each token as it falls due.
    for (let i = 0; i < 15 && busyServedAt === undefined; i++) {
      void bucket.take(`light-${i}`);
      clock.advance(100);
      await settle();
    }
    assert.ok(busyServedAt !== undefined, "the heavy lane's caller was served");
    assert.ok(
      busyServedAt >= HEAVY_MAX_WAIT_MS - 100 && busyServedAt <= HEAVY_MAX_WAIT_MS + 200,
      `served after about ${HEAVY_MAX_WAIT_MS} ms (got ${busyServedAt})`,
    );
  });

  it("gives a token at once while tokens are free and nobody waits", async () => {
    const bucket = new FairTokenBucket(10, 2, new ManualClock());
    const log: string[] = [];
    void bucket.take("a").then(() => log.push("a"));
    void bucket.take("b").then(() => log.push("b"));
    await settle();
    assert.deepEqual(log, ["a", "b"]);
    assert.equal(bucket.waiting, 0);
  });

  it("serves waiting lanes in turn, one token each, at the bucket's rate", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(10, 1, clock); // one token per 100 ms
    const log: string[] = [];
    void bucket.take("noisy").then(() => log.push("noisy-0"));
    for (let i = 1; i <= 4; i++) void bucket.take("noisy").then(() => log.push(`noisy-${i}`));
    void bucket.take("quiet").then(() => log.push("quiet"));
    await settle();
    assert.deepEqual(log, ["noisy-0"], "the burst of 1 is taken; the others wait");
    assert.equal(bucket.waiting, 5);
    clock.advance(100);
    await settle();
    clock.advance(100);
    await settle();
    assert.deepEqual(log, ["noisy-0", "noisy-1", "quiet"], "the quiet lane got the second token, not the sixth");
    for (let i = 0; i < 3; i++) {
      clock.advance(100);
      await settle();
    }
    assert.deepEqual(log.slice(3), ["noisy-2", "noisy-3", "noisy-4"]);
    assert.equal(bucket.waiting, 0);
  });

  it("never gives more tokens than the rate allows, however many lanes wait", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(10, 1, clock);
    let served = 0;
    for (let lane = 0; lane < 20; lane++) void bucket.take(`c${lane}`).then(() => served++);
    await settle();
    assert.equal(served, 1);
    clock.advance(1_000);
    await settle();
    assert.equal(served, 11, "10 tokens per second after the first");
    clock.advance(1_000);
    await settle();
    assert.equal(served, 20);
  });

  it("makes a caller wait when others wait, even if a token has just fallen due (no overtaking)", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(10, 1, clock);
    const log: string[] = [];
    void bucket.take("a").then(() => log.push("a0"));
    void bucket.take("a").then(() => log.push("a1"));
    await settle();
    void bucket.take("b").then(() => log.push("b0"));
    clock.advance(100);
    await settle();
    assert.deepEqual(log, ["a0", "a1"]);
    clock.advance(100);
    await settle();
    assert.deepEqual(log, ["a0", "a1", "b0"]);
  });

  it("holds busy lanes to the busy share while light lanes write, and lifts it within two seconds of their last write", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(100, 100, clock, 25); // reserve 50; busy share 25 a second
    let noisy = 0;
    for (let i = 0; i < 5_000; i++) void bucket.take("noisy").then(() => noisy++);
    await settle();
    assert.equal(noisy, 50, "alone, the busy lane took the burst down to the reserve");
    let quiet = 0;
    const noisyBefore = noisy;
    // Ten quiet clusters write once a second each, for ten seconds.
    for (let ms = 0; ms < 10_000; ms += 100) {
      void bucket.take(`quiet-${(ms / 100) % 10}`).then(() => quiet++);
      clock.advance(100);
      await settle();
    }
    assert.equal(quiet, 100, "every quiet write went out");
    const capped = noisy - noisyBefore;
    assert.ok(
      capped >= 240 && capped <= 262,
      `about 25 tokens a second while quiet lanes wrote (got ${capped} in 10 s)`,
    );
    assert.equal(bucket.capped, true);
    assert.ok((bucket.held.get("noisy") ?? 0) >= capped, "every caller of the busy lane served meanwhile was held");
    assert.deepEqual([...bucket.held.keys()], ["noisy"], "no quiet lane was held");
    // No light lane writes any more: within two windows the busy lane has the whole rate.
    for (let ms = 0; ms < 2_000; ms += 100) {
      clock.advance(100);
      await settle();
    }
    assert.equal(bucket.capped, false);
    const lifted = noisy;
    clock.advance(1_000);
    await settle();
    for (let ms = 0; ms < 1_000; ms += 10) {
      clock.advance(10);
      await settle();
    }
    assert.ok(noisy - lifted >= 190, `the whole rate again (got ${noisy - lifted} in 2 s)`);
  });

  it("keeps a held lane heavy between its writes, where the share is below the heavy threshold", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(50, 10, clock, 25); // reserve 5; heavy from 13 a second; share 12.5 a second
    let busy = 0;
    let stop = false;
    // One writer worker: the lane has no caller waiting between two of its writes.
    const worker = async (): Promise<void> => {
      while (!stop) {
        await bucket.take("busy");
        busy++;
      }
    };
    void worker();
    for (let ms = 0; ms < 1_000; ms += 20) {
      clock.advance(20);
      await settle();
    }
    assert.equal(bucket.isHeavy("busy"), true, "alone at the whole rate, it turned heavy");
    const before = busy;
    for (let ms = 0; ms < 10_000; ms += 20) {
      if (ms % 200 === 0) void bucket.take(`quiet-${(ms / 200) % 5}`);
      clock.advance(20);
      await settle();
    }
    stop = true;
    const got = busy - before;
    assert.ok(got <= 135, `held to about 12.5 a second while five quiet lanes wrote (got ${got} in 10 s)`);
    assert.equal(bucket.isHeavy("busy"), true);
  });

  it("lets a busy lane's exempt callers (writes that move traffic) pass the busy share, never the reserve", async () => {
    const clock = new ManualClock();
    const bucket = new FairTokenBucket(100, 100, clock, 25);
    let held = 0;
    for (let i = 0; i < 2_000; i++) void bucket.take("busy").then(() => held++);
    await settle();
    assert.equal(held, 50, "the burst down to the reserve");
    let exempt = 0;
    for (let i = 0; i < 2_000; i++) void bucket.take("busy", true).then(() => exempt++);
    let quiet = 0;
    for (let ms = 0; ms < 5_000; ms += 100) {
      void bucket.take(`quiet-${(ms / 100) % 10}`).then(() => quiet++);
      clock.advance(100);
      await settle();
    }
    assert.equal(bucket.capped, true, "quiet lanes wrote: the busy share caps");
    assert.equal(quiet, 50, "every quiet write went out");
    // 100 tokens a second, the quiet lanes' 10 first: the exempt callers take the rest,
    // where the busy share would allow 25 a second.
    assert.ok(
      exempt >= 400 && exempt <= 460,
      `exempt callers took the rate the quiet lanes left (got ${exempt} in 5 s)`,
    );
    assert.ok(held - 50 <= 10, `callers held by the share waited behind the exempt ones (got ${held - 50})`);
  });

  it("refuses a busy share outside 1–100 percent", () => {
    for (const bad of [0, 101, 2.5, Number.NaN])
      assert.throws(() => new FairTokenBucket(10, 1, new ManualClock(), bad), RangeError, String(bad));
  });

  it("is unlimited at qps 0", async () => {
    const bucket = new FairTokenBucket(0, 1, new ManualClock());
    let served = 0;
    for (let i = 0; i < 1_000; i++) void bucket.take("a").then(() => served++);
    await settle();
    assert.equal(served, 1_000);
  });
});
