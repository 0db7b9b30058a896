/**
 * `promtool check metrics` (Prometheus's own linter: counters end in _total, base units,
 * help on every family, ...) reports nothing on the controller's /metrics when every
 * family has series. A real controller's scrape after failures is linted the same way by
 * admin.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetrics } from "../../src/admin/metrics.ts";
import { EVERY_METRIC_SOURCE, everyMetricScrape, familiesOf, familiesWithoutSamples } from "../helpers/every-metric.ts";
import { promtool, promtoolBuiltFirst } from "../helpers/promtool.ts";

/** prom-client families whose samples depend on the process's moment (a GC ran, a request is open). */
const MOMENTARY = new Set(["nodejs_gc_duration_seconds", "nodejs_active_handles", "nodejs_active_requests"]);

describe("the controller's metrics under promtool check metrics", () => {
  promtoolBuiltFirst();
  it("has series in every family it registers, so the lint sees them all", async () => {
    const registered = createMetrics(EVERY_METRIC_SOURCE)
      .getMetricsAsArray()
      .map((m) => m.name);
    const text = await everyMetricScrape();
    assert.deepEqual([...familiesOf(text)].sort(), [...registered].sort());
    assert.deepEqual(
      familiesWithoutSamples(text).filter((f) => !MOMENTARY.has(f)),
      [],
    );
  });

  it("reports nothing on a scrape with every family", async () => {
    const result = await promtool(["check", "metrics"], await everyMetricScrape());
    assert.equal(result.output, "");
    assert.equal(result.code, 0);
  });

  it("is a linter that does complain: a counter without _total and a unit that is not a base unit", async () => {
    const bad =
      "# HELP fleet_mirror_bad_ms A bad counter.\n# TYPE fleet_mirror_bad_ms counter\nfleet_mirror_bad_ms 1\n";
    const result = await promtool(["check", "metrics"], bad);
    assert.notEqual(result.code, 0);
    assert.match(result.output, /_total/);
  });
});
