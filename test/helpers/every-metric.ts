/**
 * A metrics source in which every metric family of `src/admin/metrics.ts` has series: a
 * sharded leader with a fleet in every failure a cluster can be in (failing, crash-loop,
 * stale, invalid), a dead and a misconfigured gateway, denied reads, MCS export, rejected
 * writes, packed placement, and heaps of every kind of thread. The monitoring tests read
 * it to know what the controller exports and to lint a scrape that has everything.
 */

import { createMetrics, type MetricsSource } from "../../src/admin/metrics.ts";
import { WRITE_DURATION_BUCKETS } from "../../src/protocol/messages.ts";
import { EMPTY_CLUSTER_COUNTERS } from "../../src/status/counters.ts";
import type { ClusterRow, FleetCounters, FleetStatus } from "../../src/status/fleet-view.ts";

const latency = (count: number) => ({
  buckets: WRITE_DURATION_BUCKETS.map((_, i) => Math.min(count, i)),
  sum: count / 50,
  count,
});

function row(cluster: string, state: string, extra: Partial<ClusterRow> = {}): ClusterRow {
  return {
    cluster,
    secret: `fleet-mirror/${cluster}`,
    state,
    mirrors: 2,
    exportedServices: 2,
    restarts: 0,
    gateways: [],
    problems: [],
    ...extra,
  };
}

const fleet: FleetStatus = {
  secretsListed: true,
  writerRestarts: 1,
  clusters: [
    row("east", "synced", {
      lastSyncedAt: Date.now(),
      exports: { annotation: 1, label: 1, declined: 1, mcs: 1 },
      mcs: { state: "active" },
      gateways: [
        {
          key: "mesh/gateway",
          usable: true,
          probe: { port: 4191, path: "/ready", periodSeconds: 3, alive: 1, dead: 1, deadAddresses: ["198.18.0.11"] },
          probeProblems: ["mirror.linkerd.io/probe-period: not a number"],
        },
        {
          key: "mesh/aimed-inside",
          usable: false,
          reason: "gateway ingress address(es) 10.96.0.1 (in the local Service CIDR 10.96.0.0/16) are refused",
          refused: {
            total: 1,
            byReason: { "local-service-cidr": 1 },
            addresses: ["10.96.0.1 (in the local Service CIDR 10.96.0.0/16)"],
          },
          unprobed: "not probed: over the cap of 64 probed gateways per cluster (--gateway-max-probed)",
        },
      ],
      deniedReads: [{ resource: "discovery.k8s.io/endpointslices", message: "forbidden" }],
    }),
    row("west", "failing", { reason: "ECONNREFUSED", mirrors: 1 }),
    row("north", "crash-loop", { restarts: 5 }),
    row("south", "stale", { lastSyncedAt: Date.now() - 3_600_000 }),
    row("", "invalid", { reason: "no kubeconfig" }),
  ],
  writer: {
    ready: true,
    queueDepth: 3,
    inFlight: 1,
    writes: { "create/Service/ok": 4, "create/Service/403": 2 },
    retries: 2,
    writeDuration: latency(6),
    clusters: {
      east: { mirrors: 2, complete: true, blocked: [{ key: "shop/web-east", reason: "user-owned", message: "taken" }] },
    },
    mcs: { state: "active" },
    // A fleet-wide Service with priority tiers (SPEC §14): its serving-priority gauge.
    federated: [
      {
        key: "shop/search-federated",
        clusters: ["east", "west"],
        kept: [],
        ready: 1,
        notReady: 1,
        tiers: [
          { priority: 10, ready: 1, serving: true },
          { priority: 20, ready: 1, serving: false },
        ],
        servingPriority: 10,
        servingSince: "2026-01-01T00:00:00.000Z",
      },
    ],
    apiWarnings: 1,
    // A dry run's plan (SPEC §13): its gauge has series only then.
    dryRun: {
      totals: { "create/Service": 1, "update/ServiceImport/status": 1 },
      planned: [{ verb: "create", kind: "Service", object: "shop/web-east", key: "shop/web-east", cluster: "east" }],
      omitted: 0,
    },
  },
  localRanges: {
    serviceCidrs: ["10.96.0.0/16"],
    podCidrs: 3,
    deniedReads: [{ resource: "nodes", message: "http-403: forbidden" }],
  },
  placement: {
    setting: "auto",
    mode: "packed",
    clusters: 4,
    threads: 2,
    packedThreads: 2,
    blastRadius: 2,
    reason: "test",
  },
};

const counters: FleetCounters = {
  clusters: new Map([
    [
      "east",
      {
        ...EMPTY_CLUSTER_COUNTERS,
        lists: 2,
        watchReconnects: 1,
        relistsOnGone: 1,
        failuresByReason: { gone: 1 },
        apiWarnings: 1,
        gatewayProbes: {
          "mesh/gateway": { failures: { timeout: 3, refused: 1, status: 0, error: 0 }, latency: latency(5) },
        },
        restarts: 0,
      },
    ],
    ["west", { ...EMPTY_CLUSTER_COUNTERS, failuresByReason: { ECONNREFUSED: 7 }, restarts: 0 }],
    ["north", { ...EMPTY_CLUSTER_COUNTERS, restarts: 5 }],
    ["south", { ...EMPTY_CLUSTER_COUNTERS, lists: 1, restarts: 0 }],
  ]),
  writer: {
    writes: { "create/Service/ok": 4, "create/Service/403": 2 },
    retries: 2,
    tierSwitches: { failover: 2, failback: 1 },
    writeDuration: latency(6),
    apiWarnings: 1,
    heldWrites: { east: 12 },
  },
};

export const EVERY_METRIC_SOURCE: MetricsSource = {
  fleet: () => fleet,
  counters: () => counters,
  leadership: () => ({
    enabled: true,
    leading: true,
    identity: "replica-a",
    sharding: { shards: 2, held: [0], wanted: [0], live: ["replica-a", "replica-b"], holders: ["replica-a", ""] },
  }),
  threadHeaps: async () => [
    { thread: "main", used: 10, limit: 20 },
    { thread: "local-writer", used: 10, limit: 20 },
    { thread: "remote-cluster/thread-0", used: 10, limit: 20 },
  ],
};

/** A /metrics text in which every family the controller registers has samples. */
export function everyMetricScrape(): Promise<string> {
  return createMetrics(EVERY_METRIC_SOURCE).metrics();
}

/** The metric family names of a Prometheus text exposition (from its `# TYPE` lines). */
export function familiesOf(text: string): Set<string> {
  return new Set([...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1] ?? ""));
}

/** The families of an exposition that have no sample (a histogram's samples carry suffixes). */
export function familiesWithoutSamples(text: string): string[] {
  const sampled = new Set(
    text
      .split("\n")
      .filter((l) => l !== "" && !l.startsWith("#"))
      .map((l) => /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(l)?.[0] ?? ""),
  );
  return [...familiesOf(text)].filter((f) => !["", "_bucket", "_sum", "_count"].some((s) => sampled.has(f + s)));
}

/** The metric names the controller exports: every family, and a histogram's sample names. */
export async function exportedMetricNames(): Promise<Set<string>> {
  const text = await everyMetricScrape();
  const names = new Set<string>();
  for (const family of familiesOf(text)) {
    names.add(family);
    if (text.includes(`\n# TYPE ${family} histogram\n`))
      for (const suffix of ["_bucket", "_sum", "_count"]) names.add(family + suffix);
  }
  return names;
}
