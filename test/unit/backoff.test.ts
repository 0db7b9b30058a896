import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { exponentialBackoff, ItemBackoff, WATCH_BACKOFF, WRITER_BACKOFF } from "../../src/core/backoff.ts";

const exact = { initialMs: 100, maxMs: 1000, jitter: 0 } as const;

describe("exponentialBackoff", () => {
  it("starts at initialMs and doubles with each attempt by default", () => {
    assert.deepEqual(
      [0, 1, 2, 3].map((a) => exponentialBackoff(exact, a)),
      [100, 200, 400, 800],
    );
  });

  it("never exceeds maxMs, even for attempts so large that the power overflows", () => {
    assert.equal(exponentialBackoff(exact, 4), 1000);
    assert.equal(exponentialBackoff(exact, 10_000), 1000);
  });

  it("grows by the given factor", () => {
    assert.equal(exponentialBackoff({ ...exact, factor: 3 }, 2), 900);
  });

  it("spreads a jittered delay over base × [1 − j, 1 + j]", () => {
    const options = { initialMs: 100, maxMs: 10_000, jitter: 0.2 };
    assert.equal(
      exponentialBackoff(options, 1, () => 0),
      160,
    );
    assert.equal(
      exponentialBackoff(options, 1, () => 0.5),
      200,
    );
    assert.ok(Math.abs(exponentialBackoff(options, 1, () => 0.999_999) - 240) < 0.001);
  });

  it("applies 20 % jitter when none is given", () => {
    assert.equal(
      exponentialBackoff({ initialMs: 100, maxMs: 10_000 }, 0, () => 0),
      80,
    );
  });

  it("caps a jittered delay at maxMs", () => {
    assert.equal(
      exponentialBackoff({ initialMs: 100, maxMs: 1000, jitter: 0.5 }, 20, () => 0.99),
      1000,
    );
  });

  it("draws full jitter from zero up to the base delay", () => {
    const options = { initialMs: 100, maxMs: 1000, jitter: "full" } as const;
    assert.equal(
      exponentialBackoff(options, 2, () => 0),
      0,
    );
    assert.equal(
      exponentialBackoff(options, 2, () => 0.5),
      200,
    );
  });

  it("rejects inconsistent options and negative or fractional attempts", () => {
    assert.throws(() => exponentialBackoff({ initialMs: -1, maxMs: 10 }, 0), RangeError);
    assert.throws(() => exponentialBackoff({ initialMs: 100, maxMs: 10 }, 0), RangeError);
    assert.throws(() => exponentialBackoff({ initialMs: 1, maxMs: 10, factor: 0.5 }, 0), RangeError);
    assert.throws(() => exponentialBackoff({ initialMs: 1, maxMs: 10, jitter: 1.5 }, 0), RangeError);
    assert.throws(() => exponentialBackoff(exact, -1), RangeError);
    assert.throws(() => exponentialBackoff(exact, 1.5), RangeError);
  });
});

describe("WATCH_BACKOFF", () => {
  it("waits at most 4 s and at least 2 s per retry once a remote has been down a while, so a returning remote is seen within 4 s", () => {
    const highest = Array.from({ length: 40 }, (_, attempt) =>
      exponentialBackoff(WATCH_BACKOFF, attempt, () => 0.999_999),
    );
    const lowest = Array.from({ length: 40 }, (_, attempt) => exponentialBackoff(WATCH_BACKOFF, attempt, () => 0));
    assert.deepEqual(
      highest.slice(0, 6).map((d) => Math.round(d)),
      [250, 500, 1_000, 2_000, 4_000, 4_000],
    );
    assert.deepEqual(lowest.slice(0, 6), [125, 250, 500, 1_000, 2_000, 2_000]);
    assert.ok(highest.every((d) => d <= 4_000));
    assert.ok(lowest.slice(4).every((d) => d >= 2_000));
  });

  it("costs a remote that stays down about one request every 3 s on average (≤ 0.5/s at worst)", () => {
    let seed = 1;
    const random = (): number => {
      seed = (seed * 16807) % 2147483647;
      return (seed - 1) / 2147483646;
    };
    const delays = Array.from({ length: 10_000 }, () => exponentialBackoff(WATCH_BACKOFF, 20, random));
    const mean = delays.reduce((a, b) => a + b, 0) / delays.length;
    assert.ok(mean > 2_900 && mean < 3_100, `mean delay ${mean} ms`);
    assert.ok(Math.min(...delays) >= 2_000);
  });
});

describe("ItemBackoff", () => {
  it("returns a growing delay for each failure of the same key and counts them", () => {
    const backoff = new ItemBackoff<string>(exact);
    assert.deepEqual([backoff.next("a"), backoff.next("a"), backoff.next("a")], [100, 200, 400]);
    assert.equal(backoff.failures("a"), 3);
  });

  it("keeps a separate count per key", () => {
    const backoff = new ItemBackoff<string>(exact);
    backoff.next("a");
    backoff.next("a");
    assert.equal(backoff.next("b"), 100);
    assert.equal(backoff.failures("a"), 2);
    assert.equal(backoff.failures("b"), 1);
    assert.equal(backoff.failures("never-failed"), 0);
  });

  it("starts over at initialMs after forget", () => {
    const backoff = new ItemBackoff<string>(exact);
    backoff.next("a");
    backoff.next("a");
    backoff.forget("a");
    assert.equal(backoff.failures("a"), 0);
    assert.equal(backoff.next("a"), 100);
  });

  it("stays at maxMs however many failures follow (no give-up)", () => {
    const backoff = new ItemBackoff<string>(exact);
    let last = 0;
    for (let i = 0; i < 100; i++) last = backoff.next("a");
    assert.equal(last, 1000);
    assert.equal(backoff.failures("a"), 100);
  });

  it("defaults to the writer's backoff of 100 ms up to 5 minutes", () => {
    assert.equal(WRITER_BACKOFF.initialMs, 100);
    assert.equal(WRITER_BACKOFF.maxMs, 300_000);
    const backoff = new ItemBackoff<string>(undefined, () => 0.5);
    assert.equal(backoff.next("a"), 100);
    for (let i = 0; i < 30; i++) backoff.next("a");
    assert.equal(backoff.next("a"), 300_000);
  });

  it("rejects inconsistent options at construction", () => {
    assert.throws(() => new ItemBackoff<string>({ initialMs: 10, maxMs: 1 }), RangeError);
  });
});
