/**
 * What one remote can make a cluster's gateway probing cost, whatever it sends: the
 * probe counters and their metric series stay bounded per cluster while gateway keys
 * come and go (folded into gateway "(other)", no count lost, no series going back),
 * across actor incarnations too. A fake probe on a manual clock; no network.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import type { ProbeSpec } from "../../src/core/probe-spec.ts";
import { silentLogger } from "../../src/log.ts";
import type { GatewayProbeCounters } from "../../src/protocol/messages.ts";
import { MAX_GATEWAY_SERIES, OTHER_GATEWAY } from "../../src/protocol/status.ts";
import {
  addClusterCounters,
  type ClusterCounters,
  clusterCountersOf,
  EMPTY_CLUSTER_COUNTERS,
  foldIncarnation,
} from "../../src/status/counters.ts";
import { GatewayProber } from "../../workers/remote-cluster/gateway-prober.ts";
import type { ProbeResult } from "../../workers/remote-cluster/http-probe.ts";

const SPEC: ProbeSpec = { port: 4191, path: "/ready", periodMs: 1_000 };
const refused: ProbeResult = { ok: false, reason: "refused", message: "connection refused", latencyMs: 0 };
/** Gateways with counters of their own, plus the aggregate. */
const BOUND = MAX_GATEWAY_SERIES + 1;

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A prober whose probe fails at once (refused), on a manual clock. */
function prober(): { clock: ManualClock; prober: GatewayProber } {
  const clock = new ManualClock();
  const p = new GatewayProber({
    clock,
    random: () => 0.5,
    userAgent: "test",
    log: silentLogger(),
    guard: (fn) => fn,
    livenessChanged: () => {},
    probed: () => {},
    probe: async () => refused,
  });
  return { clock, prober: p };
}

const failuresOf = (counters: Readonly<Record<string, GatewayProbeCounters>>): number =>
  Object.values(counters).reduce((n, c) => n + Object.values(c.failures).reduce((a, b) => a + b, 0), 0);

describe("bounded gateway probe counters", () => {
  it("keeps the counters of a bounded number of gateways while 10 000 are probed one at a time, the latest ones kept", async () => {
    const { clock, prober: p } = prober();
    for (let i = 0; i < 10_000; i++) {
      p.set(`gw/gw-${i}`, SPEC, ["198.51.100.1"]);
      clock.advance(SPEC.periodMs); // its first probe starts within one period
      await settle();
      p.set(`gw/gw-${i}`, undefined, []);
    }
    const counters = p.counters();
    assert.ok(Object.keys(counters).length <= BOUND, `${Object.keys(counters).length} gateways' counters kept`);
    assert.equal(counters["gw/gw-9999"]?.failures["refused"], 1, "the gateway probed last has its own counters");
    assert.equal(counters[OTHER_GATEWAY], undefined, "no probed gateway lacked room: nothing aggregated");
    p.stop();
  });

  it("counts the probes of gateways beyond the cap under (other) while every kept gateway is still probed", async () => {
    const { clock, prober: p } = prober();
    const gateways = MAX_GATEWAY_SERIES + 10;
    for (let i = 0; i < gateways; i++) p.set(`gw/gw-${i}`, SPEC, ["198.51.100.1"]);
    clock.advance(SPEC.periodMs);
    await settle();
    const counters = p.counters();
    assert.equal(Object.keys(counters).length, BOUND);
    assert.equal(counters[OTHER_GATEWAY]?.failures["refused"], 10);
    assert.equal(failuresOf(counters), gateways, "every probe counted once");
    p.stop();
  });

  it("never lowers a series it keeps: each gateway's and the aggregate's counts only grow", async () => {
    const { clock, prober: p } = prober();
    let previous: Record<string, GatewayProbeCounters> = {};
    for (let i = 0; i < 300; i++) {
      p.set(`gw/gw-${i % 150}`, SPEC, ["198.51.100.1"]);
      clock.advance(SPEC.periodMs);
      await settle();
      p.set(`gw/gw-${i % 150}`, undefined, []);
      const now = p.counters();
      for (const [key, before] of Object.entries(previous)) {
        const after = now[key];
        if (!after) continue; // folded away: the series is gone, its counts are in the aggregate
        for (const [reason, n] of Object.entries(before.failures))
          assert.ok((after.failures[reason] ?? 0) >= n, `${key} ${reason} went back`);
      }
      previous = now;
    }
    p.stop();
  });

  it("keeps the cluster's counters bounded across 1 000 incarnations each probing another gateway, no kept series going back", () => {
    let base: ClusterCounters = EMPTY_CLUSTER_COUNTERS;
    for (let epoch = 0; epoch < 1_000; epoch++) {
      const snapshot = clusterCountersOf({
        watch: { lists: 1, watchesStarted: 1, relistsOnGone: 0 },
        failuresByReason: {},
        gatewayProbes: {
          [`gw/gw-${epoch}`]: {
            failures: { refused: 2 },
            latency: { buckets: new Array<number>(11).fill(0), sum: 0, count: 0 },
          },
        },
      });
      const shown = addClusterCounters(base, snapshot).gatewayProbes; // what a scrape sees while it runs
      base = foldIncarnation(base, snapshot);
      const after = addClusterCounters(base, EMPTY_CLUSTER_COUNTERS).gatewayProbes; // the next incarnation, before its first status
      for (const [key, counters] of Object.entries(after))
        assert.ok((counters.failures["refused"] ?? 0) >= (shown[key]?.failures["refused"] ?? 0), `${key} went back`);
      assert.deepEqual(after[`gw/gw-${epoch}`]?.failures, { refused: 2 }, "the ended incarnation's gateway is kept");
    }
    assert.ok(Object.keys(base.gatewayProbes).length <= BOUND, `${Object.keys(base.gatewayProbes).length} kept`);
  });
});
