/**
 * The compact series the scenarios record for the charts (bench/series.ts), and the
 * result files' one-line number arrays (bench/harness.ts compactNumberArrays).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compactNumberArrays } from "../../bench/harness.ts";
import { CDF_PERCENTILES, distribution, ProgressRecorder, thinIndices } from "../../bench/series.ts";

describe("bench series", () => {
  it("thins a curve to at most `max` points, evenly, keeping its first and last", () => {
    assert.deepEqual(thinIndices(3, 5), [0, 1, 2]);
    assert.deepEqual(thinIndices(11, 3), [0, 5, 10]);
    const many = thinIndices(1000, 60);
    assert.equal(many.length, 60);
    assert.equal(many[0], 0);
    assert.equal(many.at(-1), 999);
    assert.ok(
      many.every((v, i) => i === 0 || v > (many[i - 1] ?? -1)),
      "strictly increasing",
    );
  });

  it("records progress from (0 ms, 0 done) and ends at the last mark", () => {
    const recorder = new ProgressRecorder(1000);
    for (let i = 1; i <= 200; i++) recorder.mark(i * 5, 1000 + i * 250);
    const { ms, done } = recorder.series(20);
    assert.equal(ms.length, 20);
    assert.equal(done.length, 20);
    assert.deepEqual([ms[0], done[0]], [0, 0]);
    assert.deepEqual([ms.at(-1), done.at(-1)], [50_000, 1000]);
  });

  it("keeps a latency distribution at fixed percentiles, the fastest and the slowest included", () => {
    const values = Array.from({ length: 1000 }, (_, i) => 1000 - i);
    const d = distribution(values);
    assert.equal(d.length, CDF_PERCENTILES.length);
    assert.equal(d[0], 1);
    assert.equal(d[CDF_PERCENTILES.indexOf(50)], 500);
    assert.equal(d[CDF_PERCENTILES.indexOf(99)], 990);
    assert.equal(d.at(-1), 1000);
    assert.deepEqual(distribution([]), []);
  });

  it("writes arrays of numbers on one line and leaves every other value as it was", () => {
    const body = {
      curve: { ms: [0, 250.5, -1e-3] },
      pairs: [[1, 2]],
      names: ["a", "b"],
      text: "kept [1,  2 ] as it is",
      none: [],
    };
    const json = compactNumberArrays(JSON.stringify(body, null, 2));
    assert.match(json, /"ms": \[0, 250\.5, -0\.001\]/);
    assert.match(json, /\n {4}\[1, 2\]\n/);
    assert.match(json, /"names": \[\n {4}"a",/);
    assert.deepEqual(JSON.parse(json), body);
  });
});
