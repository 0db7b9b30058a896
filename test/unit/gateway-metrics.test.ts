/**
 * Gateway health in the counters and the metrics (SPEC §10): per gateway, never going
 * back across actor restarts, and exported with cluster and gateway labels.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetrics } from "../../src/admin/metrics.ts";
import { rowsFromAdmin, type StatusRow } from "../../src/cli/status-rows.ts";
import { healthCell } from "../../src/cli/status-table.ts";
import {
  decodeFromRemoteActor,
  type GatewayProbeCounters,
  WRITE_DURATION_BUCKETS,
} from "../../src/protocol/messages.ts";
import {
  addClusterCounters,
  type ClusterCounters,
  clusterCountersOf,
  EMPTY_CLUSTER_COUNTERS,
  EMPTY_WRITER_COUNTERS,
} from "../../src/status/counters.ts";
import type { ClusterRow, FleetCounters, FleetStatus } from "../../src/status/fleet-view.ts";

const probes = (timeouts: number, answered: number): GatewayProbeCounters => ({
  failures: { timeout: timeouts, refused: 0, status: 0, error: 0 },
  latency: { buckets: WRITE_DURATION_BUCKETS.map(() => answered), sum: answered / 100, count: answered },
});

function snapshot(gatewayProbes: Record<string, GatewayProbeCounters> | undefined) {
  return {
    watch: { lists: 1, watchesStarted: 1, failures: 0, relistsOnGone: 0 },
    failuresByReason: {},
    ...(gatewayProbes ? { gatewayProbes } : {}),
  };
}

describe("gateway probe counters across actor restarts", () => {
  it("never go back when a new incarnation counts from zero, gateway by gateway", () => {
    const timeline = [
      { epoch: 1, gateways: { "gw/a": probes(1, 2) } },
      { epoch: 1, gateways: { "gw/a": probes(3, 5), "gw/b": probes(0, 1) } },
      { epoch: 2, gateways: undefined },
      { epoch: 2, gateways: { "gw/a": probes(1, 0) } },
    ];
    let base: ClusterCounters = EMPTY_CLUSTER_COUNTERS;
    let current: (typeof timeline)[number] | undefined;
    let previous = EMPTY_CLUSTER_COUNTERS;
    for (const next of timeline) {
      if (current && current.epoch !== next.epoch)
        base = addClusterCounters(base, clusterCountersOf(snapshot(current.gateways)));
      current = next;
      const total = addClusterCounters(base, clusterCountersOf(snapshot(current.gateways)));
      for (const [gateway, before] of Object.entries(previous.gatewayProbes)) {
        const now = total.gatewayProbes[gateway];
        assert.ok(now, `${gateway} is still counted`);
        assert.ok((now.failures["timeout"] ?? 0) >= (before.failures["timeout"] ?? 0), gateway);
        assert.ok(now.latency.count >= before.latency.count, gateway);
      }
      previous = total;
    }
    assert.deepEqual(previous.gatewayProbes["gw/a"]?.failures, { timeout: 4, refused: 0, status: 0, error: 0 });
    assert.equal(previous.gatewayProbes["gw/a"]?.latency.count, 5);
    assert.equal(previous.gatewayProbes["gw/b"]?.latency.count, 1, "a gateway no longer probed keeps its count");
  });
});

describe("gateway health in an actor's status", () => {
  const status = (gateway: Record<string, unknown>) => ({
    type: "actor.status",
    status: {
      cluster: "east",
      epoch: 1,
      state: "synced",
      since: 0,
      exportedServices: 1,
      mirrors: 1,
      problems: [],
      gateways: [{ key: "gw/gateway", usable: true, ...gateway }],
      watch: { lists: 1, watchesStarted: 1, failures: 0, relistsOnGone: 0 },
      failuresByReason: {},
      gatewayProbes: { "gw/gateway": probes(1, 1) },
    },
  });
  const probe = { port: 4191, path: "/ready", periodSeconds: 3, alive: 1, dead: 1, deadAddresses: ["198.51.100.2"] };

  it("decodes a probed gateway's state and counters", () => {
    const decoded = decodeFromRemoteActor(status({ probe, probeProblems: ["bad period"] }));
    assert.equal(decoded.type, "actor.status");
    if (decoded.type !== "actor.status") return;
    assert.deepEqual(decoded.status.gateways[0]?.probe, probe);
    assert.deepEqual(decoded.status.gateways[0]?.probeProblems, ["bad period"]);
    assert.equal(decoded.status.gatewayProbes?.["gw/gateway"]?.latency.count, 1);
  });

  it("refuses unbounded or nonsense probe data", () => {
    const many = Array.from({ length: 17 }, (_, i) => `198.51.100.${i}`);
    assert.throws(() => decodeFromRemoteActor(status({ probe: { ...probe, deadAddresses: many } })), /deadAddresses/);
    assert.throws(() => decodeFromRemoteActor(status({ probe: { ...probe, port: 0 } })), /port/);
    assert.throws(() => decodeFromRemoteActor(status({ probe: { ...probe, alive: -1 } })), /alive/);
    assert.throws(() => decodeFromRemoteActor(status({ probeProblems: ["x".repeat(600)] })), /probeProblems/);
  });
});

describe("gateway health metrics", () => {
  it("export addresses by liveness, bad probe config, failures by reason and a latency histogram per gateway", async () => {
    const row: ClusterRow = {
      cluster: "east",
      secret: "fleet-mirror/east",
      state: "synced",
      mirrors: 1,
      exportedServices: 1,
      restarts: 0,
      gateways: [
        {
          key: "gw/gateway",
          usable: true,
          probe: { port: 4191, path: "/ready", periodSeconds: 3, alive: 2, dead: 1, deadAddresses: ["198.51.100.3"] },
        },
        { key: "gw/unprobed", usable: true },
        { key: "gw/bad", usable: true, probeProblems: ["bad period", "bad path"] },
      ],
      problems: [],
    };
    const fleet: FleetStatus = { secretsListed: true, writer: undefined, writerRestarts: 0, clusters: [row] };
    const counters: FleetCounters = {
      clusters: new Map([
        ["east", { ...EMPTY_CLUSTER_COUNTERS, restarts: 0, gatewayProbes: { "gw/gateway": probes(7, 3) } }],
      ]),
      writer: EMPTY_WRITER_COUNTERS,
    };
    const text = await createMetrics({
      fleet: () => fleet,
      counters: () => counters,
      leadership: () => ({ enabled: false, leading: true, identity: "me" }),
      threadHeaps: async () => [],
    }).metrics();
    assert.match(text, /^fleet_mirror_gateway_addresses\{cluster="east",gateway="gw\/gateway",state="alive"\} 2$/m);
    assert.match(text, /^fleet_mirror_gateway_addresses\{cluster="east",gateway="gw\/gateway",state="dead"\} 1$/m);
    assert.doesNotMatch(text, /gateway="gw\/unprobed"/, "a gateway that is not probed has no liveness series");
    assert.match(text, /^fleet_mirror_gateway_probe_config_invalid\{cluster="east",gateway="gw\/bad"\} 2$/m);
    assert.doesNotMatch(
      text,
      /^fleet_mirror_gateway_probe_config_invalid\{[^}]*gateway="gw\/gateway"/m,
      "a gateway without probe problems has no series",
    );
    assert.match(
      text,
      /^fleet_mirror_gateway_probe_failures_total\{cluster="east",gateway="gw\/gateway",reason="timeout"\} 7$/m,
    );
    assert.match(
      text,
      /^fleet_mirror_gateway_probe_duration_seconds_bucket\{cluster="east",gateway="gw\/gateway",le="\+Inf"\} 3$/m,
    );
    assert.match(
      text,
      /^fleet_mirror_gateway_probe_duration_seconds_count\{cluster="east",gateway="gw\/gateway"\} 3$/m,
    );
    assert.match(text, /^# TYPE fleet_mirror_gateway_probe_duration_seconds histogram$/m);
    assert.match(text, /^fleet_mirror_write_duration_seconds_count 0$/m, "the unlabelled histogram is unchanged");
  });
});

describe("gateway health in fleet-mirror status", () => {
  const probe = { port: 4191, path: "/ready", periodSeconds: 3, alive: 1, dead: 0, deadAddresses: [] };
  const row = (gateways: NonNullable<StatusRow["gateways"]>): StatusRow => ({
    cluster: "east",
    secret: "fleet-mirror/east",
    state: "synced",
    mirrors: 1,
    gateways,
  });

  it("shows - when no gateway is probed, alive when every probed address is", () => {
    assert.equal(healthCell(row([{ gateway: "gw/a", usable: true }])), "-");
    assert.equal(healthCell(row([{ gateway: "gw/a", usable: true, probe }])), "alive");
    assert.equal(
      healthCell({ cluster: "east", secret: "fleet-mirror/east", state: "registered", mirrors: 0 }),
      "unknown",
    );
  });

  it("names each gateway with dead addresses or probe problems", () => {
    const cell = healthCell(
      row([
        {
          gateway: "gw/a",
          usable: true,
          probe: { ...probe, alive: 1, dead: 2, deadAddresses: ["198.51.100.2", "198.51.100.3"] },
        },
        { gateway: "gw/b", usable: true, probe },
        { gateway: "gw/c", usable: true, probeProblems: ["port mc-probe has number 0"] },
      ]),
    );
    assert.equal(cell, "gw/a 2/3 dead; gw/c: probe problem");
  });

  it("carries each gateway's probe into the rows read from the controller", () => {
    const rows = rowsFromAdmin({
      leadership: { enabled: false, leading: true, identity: "me" },
      time: 0,
      secretsListed: true,
      writer: undefined,
      writerRestarts: 0,
      clusters: [
        {
          cluster: "east",
          secret: "fleet-mirror/east",
          state: "synced",
          mirrors: 1,
          exportedServices: 1,
          restarts: 0,
          gateways: [{ key: "gw/a", usable: true, probe, probeProblems: ["bad"] }],
          problems: [],
        },
      ],
    });
    assert.deepEqual(rows[0]?.gateways, [{ gateway: "gw/a", usable: true, probe, probeProblems: ["bad"] }]);
  });
});
