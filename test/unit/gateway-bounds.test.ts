/**
 * What one remote can make a cluster's gateway probing cost, whatever it sends: the
 * probe counters and their metric series stay bounded per cluster while gateway keys
 * come and go (folded into gateway "(other)", no count lost, no series going back),
 * across actor incarnations too. A fake probe on a manual clock; no network.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_MAX_GATEWAY_ADDRESSES } from "../../src/core/address-policy.ts";
import { ManualClock } from "../../src/core/clock.ts";
import type { Service } from "../../src/core/objects.ts";
import type { ProbeSpec } from "../../src/core/probe-spec.ts";
import { DEFAULT_MAX_PROBED_GATEWAYS, DEFAULT_MAX_PROBES_IN_FLIGHT } from "../../src/core/probe-spec.ts";
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
import { GatewayHealth, type GatewayHealthDeps } from "../../workers/remote-cluster/gateway-health.ts";
import { GatewayProber } from "../../workers/remote-cluster/gateway-prober.ts";
import type { ProbeRequest, ProbeResult } from "../../workers/remote-cluster/http-probe.ts";

const SPEC: ProbeSpec = { port: 4191, path: "/ready", periodMs: 1_000 };
const refused: ProbeResult = { ok: false, reason: "refused", message: "connection refused", latencyMs: 0 };
/** Gateways with counters of their own, plus the aggregate. */
const BOUND = MAX_GATEWAY_SERIES + 1;

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The prober's dependencies a test does not watch, on `clock`. */
function quiet(clock: ManualClock) {
  return {
    clock,
    random: () => 0.5,
    userAgent: "test",
    log: silentLogger(),
    guard: <A extends unknown[]>(fn: (...args: A) => void) => fn,
    livenessChanged: () => {},
    probed: () => {},
  };
}

/** A prober whose probe fails at once (refused), on a manual clock. */
function prober(): { clock: ManualClock; prober: GatewayProber } {
  const clock = new ManualClock();
  return { clock, prober: new GatewayProber({ ...quiet(clock), probe: async () => refused }) };
}

const failuresOf = (counters: Readonly<Record<string, GatewayProbeCounters>>): number =>
  Object.values(counters).reduce((n, c) => n + Object.values(c.failures).reduce((a, b) => a + b, 0), 0);

/** A probed gateway Service `gw/<name>` with these ingress IPs. */
function gateway(name: string, ips: readonly string[]): Service {
  return {
    metadata: { name, namespace: "gw", resourceVersion: "1" },
    spec: {
      ports: [
        { name: "incoming-port", port: 4143, protocol: "TCP" },
        { name: "mc-probe", port: 4191, protocol: "TCP" },
      ],
    },
    status: { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } },
  };
}

/** Gateway health whose probes never answer (until aborted), recording every request. */
function health() {
  const clock = new ManualClock();
  const requests: ProbeRequest[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const deps: GatewayHealthDeps = {
    ...quiet(clock),
    problemsChanged: () => {},
    lookupHostname: () => undefined,
    probe: (request) => {
      requests.push(request);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      return new Promise<ProbeResult>((resolve) =>
        request.signal?.addEventListener("abort", () => {
          inFlight -= 1;
          resolve({ ok: false, reason: "error", message: "aborted", latencyMs: 0 });
        }),
      );
    },
  };
  return { clock, deps, health: new GatewayHealth(deps), requests, maxInFlight: () => maxInFlight };
}

describe("bounded gateway probing", () => {
  it("probes a bounded number of a gateway's 10 000 ingress addresses", () => {
    const h = health();
    const ips = Array.from({ length: 10_000 }, (_, i) => `2001:db8::${(i + 1).toString(16)}`);
    h.health.sync("gw/many", gateway("many", ips));
    h.clock.advance(1_000 * 3); // every loop starts within its first period (3 s by default)
    const probed = new Set(h.requests.map((r) => r.address));
    assert.equal(probed.size, DEFAULT_MAX_GATEWAY_ADDRESSES, `${probed.size} addresses probed`);
    assert.deepEqual([...probed].sort(), [...ips].sort().slice(0, DEFAULT_MAX_GATEWAY_ADDRESSES), "the first, sorted");
    const [row] = h.health.rows(["gw/many"], () => gateway("many", ips));
    assert.equal(row?.refused?.byReason["over-cap"], 10_000 - DEFAULT_MAX_GATEWAY_ADDRESSES);
    h.health.stop();
  });

  it("keeps a bounded number of probes in flight however many gateways hang", () => {
    const h = health();
    for (let g = 0; g < 64; g++) {
      const ips = Array.from({ length: 32 }, (_, i) => `2001:db8:${g.toString(16)}::${(i + 1).toString(16)}`);
      h.health.sync(`gw/hung-${g}`, gateway(`hung-${g}`, ips));
    }
    h.clock.advance(1_000 * 3);
    assert.equal(h.maxInFlight(), DEFAULT_MAX_PROBES_IN_FLIGHT, `${h.maxInFlight()} probes in flight at once`);
    h.health.stop();
  });

  it("starts a probe that waited for a free slot as soon as one frees, oldest first", async () => {
    const clock = new ManualClock();
    const pending: { address: string; answer: (r: ProbeResult) => void }[] = [];
    const p = new GatewayProber({
      ...quiet(clock),
      maxInFlight: 2,
      probe: (request) => new Promise<ProbeResult>((answer) => pending.push({ address: request.address, answer })),
    });
    p.set("gw/a", SPEC, ["198.51.100.1", "198.51.100.2", "198.51.100.3"]);
    clock.advance(SPEC.periodMs);
    assert.deepEqual(
      pending.map((c) => c.address),
      ["198.51.100.1", "198.51.100.2"],
      "two in flight, the third waits",
    );
    pending.shift()?.answer({ ok: true, status: 200, latencyMs: 1 });
    await settle();
    assert.deepEqual(
      pending.map((c) => c.address),
      ["198.51.100.2", "198.51.100.3"],
    );
    p.stop();
  });

  it("probes a bounded number of gateways, and one held back once another stops", () => {
    const h = health();
    const keys = Array.from({ length: DEFAULT_MAX_PROBED_GATEWAYS + 1 }, (_, g) => `gw/g-${g}`);
    const services = new Map(keys.map((key, g) => [key, gateway(`g-${g}`, [`198.51.100.${(g % 250) + 1}`])]));
    h.health = new GatewayHealth({ ...h.deps, gatewayOf: (key) => services.get(key) });
    for (const key of keys) h.health.sync(key, services.get(key));
    const last = keys.at(-1) ?? "";
    assert.equal(h.health.status(last).probe, undefined, "the gateway past the cap is not probed");
    assert.match(h.health.status(last).unprobed ?? "", /over the cap of 64 probed gateways/);
    h.health.sync("gw/g-0", undefined); // no Service uses it any more
    assert.notEqual(h.health.status(last).probe, undefined, "probed once another stopped");
    assert.equal(h.health.status(last).unprobed, undefined);
    h.health.stop();
  });
});

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
