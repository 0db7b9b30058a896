import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetrics, type MetricsSource } from "../../src/admin/metrics.ts";
import { runAdminSource } from "../../src/admin/run-source.ts";
import { checkText } from "../../src/admin/server.ts";
import { clustersByState, countConflicts, histogramValues, writeLabels } from "../../src/admin/snapshot-series.ts";
import { alwaysLeading, type Leadership } from "../../src/leader/leadership.ts";
import { WRITE_DURATION_BUCKETS } from "../../src/protocol/messages.ts";
import {
  addClusterCounters,
  addWriterCounters,
  type ClusterCounters,
  clusterCountersOf,
  EMPTY_CLUSTER_COUNTERS,
  EMPTY_WRITER_COUNTERS,
} from "../../src/status/counters.ts";
import type { ClusterRow, FleetCounters, FleetStatus } from "../../src/status/fleet-view.ts";

function row(cluster: string, state: string, mirrors = 0): ClusterRow {
  return {
    cluster,
    secret: `fleet-mirror/${cluster}`,
    state,
    mirrors,
    exportedServices: mirrors,
    restarts: 0,
    gateways: [],
    problems: [],
  };
}

function snapshot(lists: number, watchesStarted: number, failuresByReason: Record<string, number> = {}) {
  return { watch: { lists, watchesStarted, failures: 0, relistsOnGone: 0 }, failuresByReason };
}

const histogram = (count: number) => ({
  buckets: WRITE_DURATION_BUCKETS.map(() => count),
  sum: count / 100,
  count,
});

/** A leader's fleet with no cluster and an idle writer, but for `writer`'s fields. */
function fleetWithWriter(writer: Partial<NonNullable<FleetStatus["writer"]>>): FleetStatus {
  return {
    secretsListed: true,
    writerRestarts: 0,
    clusters: [],
    writer: {
      ready: true,
      queueDepth: 0,
      inFlight: 0,
      writes: {},
      retries: 0,
      writeDuration: histogram(0),
      clusters: {},
      ...writer,
    },
  };
}

describe("counters across restarts", () => {
  it("never go down when an incarnation ends and the next one counts from zero", () => {
    // Two incarnations: the first reaches 3 lists then crashes; the second starts at 0.
    const timeline: { epoch: number; status: ReturnType<typeof snapshot> }[] = [
      { epoch: 1, status: snapshot(1, 1, { timeout: 1 }) },
      { epoch: 1, status: snapshot(3, 4, { timeout: 2 }) },
      { epoch: 2, status: snapshot(0, 0) },
      { epoch: 2, status: snapshot(1, 1, { refused: 1 }) },
    ];
    let base: ClusterCounters = EMPTY_CLUSTER_COUNTERS;
    let current: (typeof timeline)[number] | undefined;
    let previousTotal = EMPTY_CLUSTER_COUNTERS;
    for (const next of timeline) {
      if (current && current.epoch !== next.epoch) base = addClusterCounters(base, clusterCountersOf(current.status));
      current = next;
      const total = addClusterCounters(base, clusterCountersOf(current.status));
      assert.ok(total.lists >= previousTotal.lists);
      assert.ok(total.watchReconnects >= previousTotal.watchReconnects);
      for (const [reason, n] of Object.entries(previousTotal.failuresByReason))
        assert.ok((total.failuresByReason[reason] ?? 0) >= n, reason);
      previousTotal = total;
    }
    assert.deepEqual(previousTotal, {
      lists: 4,
      watchReconnects: 3,
      relistsOnGone: 0,
      failuresByReason: { timeout: 2, refused: 1 },
      apiWarnings: 0,
      gatewayProbes: {},
    });
  });

  it("carry each incarnation's API warnings into the cluster's total", () => {
    const first = { ...snapshot(1, 1), apiWarnings: 4 };
    const second = { ...snapshot(1, 1), apiWarnings: 1 };
    const total = addClusterCounters(clusterCountersOf(first), clusterCountersOf(second));
    assert.equal(total.apiWarnings, 5);
    assert.equal(clusterCountersOf(snapshot(1, 1)).apiWarnings, 0, "a status without warnings counts 0");
  });

  it("count a watch as a reconnect only after the first watch of an incarnation", () => {
    assert.equal(clusterCountersOf(snapshot(0, 0)).watchReconnects, 0);
    assert.equal(clusterCountersOf(snapshot(1, 1)).watchReconnects, 0);
    assert.equal(clusterCountersOf(snapshot(2, 5)).watchReconnects, 4);
  });

  it("add writer writes key by key and histograms bucket by bucket", () => {
    const a = {
      writes: { "create/Service/ok": 2 },
      retries: 1,
      tierSwitches: { failover: 1 },
      writeDuration: histogram(2),
      apiWarnings: 2,
      heldWrites: { east: 3 },
    };
    const b = {
      writes: { "create/Service/ok": 1, "update/Endpoints/409": 1 },
      retries: 0,
      tierSwitches: { failover: 1, failback: 1 },
      writeDuration: histogram(1),
      apiWarnings: 1,
      heldWrites: { east: 1, west: 2 },
    };
    const sum = addWriterCounters(addWriterCounters(EMPTY_WRITER_COUNTERS, a), b);
    assert.deepEqual(sum.writes, { "create/Service/ok": 3, "update/Endpoints/409": 1 });
    assert.equal(sum.retries, 1);
    assert.deepEqual(sum.tierSwitches, { failover: 2, failback: 1 });
    assert.equal(sum.apiWarnings, 3);
    assert.deepEqual(sum.heldWrites, { east: 4, west: 2 }, "held writes add up by cluster across writer restarts");
    assert.deepEqual(sum.writeDuration, histogram(3));
  });
});

describe("metric values", () => {
  it("map writer keys to verb, API resource and result, skipping malformed keys", () => {
    assert.deepEqual(writeLabels("create/Service/ok"), { verb: "create", resource: "services", result: "ok" });
    assert.deepEqual(writeLabels("update/Endpoints/409"), { verb: "update", resource: "endpoints", result: "409" });
    assert.deepEqual(writeLabels("create/Namespace/error"), {
      verb: "create",
      resource: "namespaces",
      result: "error",
    });
    assert.equal(writeLabels("create/Service"), undefined);
    assert.equal(writeLabels("a/b/c/d"), undefined);
  });

  it("count clusters by state, every known state present even at zero", () => {
    const counts = clustersByState({
      secretsListed: true,
      writer: undefined,
      writerRestarts: 0,
      clusters: [row("a", "synced"), row("b", "synced"), row("c", "stale"), row("", "invalid")],
    });
    assert.equal(counts.get("synced"), 2);
    assert.equal(counts.get("stale"), 1);
    assert.equal(counts.get("invalid"), 1);
    assert.equal(counts.get("crash-loop"), 0);
  });

  it("count conflicts: mirrors blocked by a user's object or another cluster, members whose ports conflict, not a missing namespace", () => {
    const blocked = (reason: string) => ({ key: `ns/${reason}`, reason, message: reason });
    const fleet = fleetWithWriter({
      clusters: {
        a: { mirrors: 3, complete: true, blocked: [blocked("user-owned"), blocked("namespace-missing")] },
        b: { mirrors: 1, complete: true, blocked: [blocked("owned-by-other-cluster"), blocked("port-conflict")] },
        // A mirror whose slice name a fleet-wide or import part holds (SPEC §11, §12).
        c: { mirrors: 1, complete: true, blocked: [blocked("owned-by-other-service")] },
      },
    });
    assert.equal(countConflicts(fleet), 4);
    assert.equal(countConflicts(undefined), 0);
  });

  it("expose a histogram snapshot as cumulative buckets ending in +Inf = count, with sum and count", () => {
    const values = histogramValues("x", { buckets: [0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3], sum: 12.5, count: 4 });
    const buckets = values.filter((v) => v.metricName === "x_bucket");
    assert.deepEqual(
      buckets.map((b) => b.labels.le),
      [...WRITE_DURATION_BUCKETS, "+Inf"],
    );
    assert.deepEqual(buckets.at(-1)?.value, 4);
    assert.deepEqual(values.find((v) => v.metricName === "x_sum")?.value, 12.5);
    assert.deepEqual(values.find((v) => v.metricName === "x_count")?.value, 4);
  });
});

describe("the metrics registry", () => {
  function source(clusters: string[], leading = true): MetricsSource {
    const fleet: FleetStatus = {
      secretsListed: true,
      writer: undefined,
      writerRestarts: 0,
      clusters: clusters.map((c) => row(c, "synced", 2)),
    };
    const counters: FleetCounters = {
      clusters: new Map(clusters.map((c) => [c, { ...EMPTY_CLUSTER_COUNTERS, lists: 1, restarts: 0, apiWarnings: 3 }])),
      // The writer's sum keeps a held count of every cluster ever held, gone ones included.
      writer: { ...EMPTY_WRITER_COUNTERS, apiWarnings: 5, heldWrites: { east: 4, west: 7 } },
    };
    return {
      fleet: () => (leading ? fleet : undefined),
      counters: () => (leading ? counters : undefined),
      leadership: () => ({ enabled: true, leading, identity: "me" }),
      threadHeaps: async () => [{ thread: "main", used: 10, limit: 20 }],
    };
  }

  it("drops the series of a cluster that is gone at the next scrape", async () => {
    let current = source(["east", "west"]);
    const registry = createMetrics({
      fleet: () => current.fleet(),
      counters: () => current.counters(),
      leadership: () => current.leadership(),
      threadHeaps: () => current.threadHeaps(),
    });
    const first = await registry.metrics();
    assert.match(first, /^fleet_mirror_cluster_mirrored_services\{cluster="west"\} 2$/m);
    assert.match(first, /^fleet_mirror_cluster_lists_total\{cluster="west"\} 1$/m);
    assert.match(first, /^fleet_mirror_api_warnings_total\{api="local",cluster=""\} 5$/m);
    assert.match(first, /^fleet_mirror_api_warnings_total\{api="remote",cluster="west"\} 3$/m);
    assert.match(first, /^fleet_mirror_writes_held_total\{cluster="west"\} 7$/m);
    current = source(["east"]);
    const second = await registry.metrics();
    assert.doesNotMatch(second, /cluster="west"/);
    assert.match(second, /^fleet_mirror_cluster_mirrored_services\{cluster="east"\} 2$/m);
    assert.match(second, /^fleet_mirror_writes_held_total\{cluster="east"\} 4$/m);
    assert.match(second, /^fleet_mirror_thread_heap_used_bytes\{thread="main"\} 10$/m);
    assert.match(second, /^process_resident_memory_bytes \d+/m);
  });

  it("reports a standby as not leading, with no cluster series", async () => {
    const text = await createMetrics(source(["east"], false)).metrics();
    assert.match(text, /^fleet_mirror_leader 0$/m);
    assert.doesNotMatch(text, /cluster="east"/);
    assert.match(text, /^fleet_mirror_write_retries_total 0$/m);
  });
});

describe("priority tier metrics", () => {
  it("give each fleet-wide Service with tiers its serving priority and its last tier's priority; one without tiers has neither", async () => {
    const tiered = (key: string, serving: number, priorities: readonly number[]) => ({
      key,
      clusters: ["east", "west"],
      kept: [],
      ready: 1,
      notReady: 1,
      tiers: priorities.map((priority) => ({
        priority,
        ready: priority <= serving ? 1 : 0,
        serving: priority <= serving,
      })),
      servingPriority: serving,
      servingSince: "2026-01-01T00:00:00.000Z",
    });
    const fleet = fleetWithWriter({
      federated: [
        tiered("shop/search-federated", 0, [0, 10, 20]),
        tiered("shop/cart-federated", 20, [0, 20]),
        { key: "shop/flat-federated", clusters: ["east"], kept: [], ready: 1, notReady: 0 },
      ],
    });
    const text = await createMetrics({
      fleet: () => fleet,
      counters: () => undefined,
      leadership: () => alwaysLeading("me", 0),
      threadHeaps: async () => [],
    }).metrics();
    assert.match(text, /^fleet_mirror_federated_serving_priority\{namespace="shop",service="search-federated"\} 0$/m);
    assert.match(text, /^fleet_mirror_federated_last_priority\{namespace="shop",service="search-federated"\} 20$/m);
    assert.match(text, /^fleet_mirror_federated_serving_priority\{namespace="shop",service="cart-federated"\} 20$/m);
    assert.match(text, /^fleet_mirror_federated_last_priority\{namespace="shop",service="cart-federated"\} 20$/m);
    assert.doesNotMatch(text, /flat-federated/);
  });
});

describe("sharding metrics", () => {
  it("report the shards held and each shard's holder when sharded; not sharded, the leader holds the one shard", async () => {
    const base = { fleet: () => undefined, counters: () => undefined, threadHeaps: async () => [] };
    const sharded = await createMetrics({
      ...base,
      leadership: () => ({
        enabled: true,
        leading: true,
        identity: "replica-a",
        sharding: {
          shards: 3,
          held: [0, 2],
          wanted: [0, 2],
          live: ["replica-a", "replica-b"],
          holders: ["replica-a", "replica-b", "replica-a"],
        },
      }),
    }).metrics();
    assert.match(sharded, /^fleet_mirror_shards_held 2$/m);
    assert.match(sharded, /^fleet_mirror_shard_holder\{shard="1",holder="replica-b"\} 1$/m);
    assert.match(sharded, /^fleet_mirror_shard_holder\{shard="2",holder="replica-a"\} 1$/m);
    const plain = await createMetrics({ ...base, leadership: () => alwaysLeading("me", 0) }).metrics();
    assert.match(plain, /^fleet_mirror_shards_held 1$/m, "not sharded: the leader holds the one shard");
    assert.doesNotMatch(plain, /^fleet_mirror_shard_holder\{/m);
  });
});

describe("health and readiness", () => {
  it("say ok, or the reason; verbose names the check", () => {
    assert.equal(checkText("readyz", { ok: true }, false), "ok\n");
    assert.equal(checkText("readyz", { ok: false, reason: "not yet" }, false), "not yet\n");
    assert.equal(
      checkText("readyz", { ok: false, reason: "not yet" }, true),
      "[-]readyz failed: not yet\nreadyz check failed\n",
    );
    assert.equal(checkText("healthz", { ok: true }, true), "[+]healthz ok\nhealthz check passed\n");
  });

  it("a standby is ready and healthy; a leader without a controller yet is healthy but not ready", () => {
    let leadership: Leadership = { enabled: true, leading: false, identity: "me" };
    const admin = runAdminSource(
      () => undefined,
      () => leadership,
    );
    assert.deepEqual(admin.ready(), { ok: true, reason: "standby: not leading" });
    assert.deepEqual(admin.healthy(), { ok: true });
    assert.equal(admin.fleet(), undefined);
    leadership = alwaysLeading("me", 0);
    assert.equal(admin.ready().ok, false);
    assert.deepEqual(admin.healthy(), { ok: true });
  });
});
