/**
 * Counters that survive restarts (pure). Threads count from zero: a remote-cluster actor
 * incarnation counts its watch activity, a writer counts its writes. Prometheus counters
 * must never go down, so the supervisor folds the last snapshot of every incarnation that
 * ended into a base and reports base + current snapshot.
 *
 * Invariant: for one key (a cluster while registered; the writer for the process's
 * life) `total = fold(base, last snapshot of every ended incarnation) + current snapshot`,
 * and each snapshot of one incarnation is >= the previous one, so `total` never
 * decreases. Increments made by an incarnation after its last snapshot (at most one
 * status interval before a crash) are lost: a counter may under-count, never go back.
 */
import type { GatewayProbeCounters, LatencyHistogram, WriterStatus } from "../protocol/messages.ts";
import { MAX_GATEWAY_SERIES, OTHER_GATEWAY, WRITE_DURATION_BUCKETS } from "../protocol/messages.ts";

export type Counts = Readonly<Record<string, number>>;

/** a + b, key by key. */
export function addCounts(a: Counts, b: Counts): Record<string, number> {
  const sum: Record<string, number> = { ...a };
  for (const [key, value] of Object.entries(b)) sum[key] = (sum[key] ?? 0) + value;
  return sum;
}

export const EMPTY_HISTOGRAM: LatencyHistogram = Object.freeze({
  buckets: Object.freeze(WRITE_DURATION_BUCKETS.map(() => 0)),
  sum: 0,
  count: 0,
});

export function addHistograms(a: LatencyHistogram, b: LatencyHistogram): LatencyHistogram {
  return {
    buckets: a.buckets.map((value, i) => value + (b.buckets[i] ?? 0)),
    sum: a.sum + b.sum,
    count: a.count + b.count,
  };
}

/** A remote cluster's counters across its actor incarnations. */
export interface ClusterCounters {
  /** Complete lists of the cluster's Services. */
  readonly lists: number;
  /** Watch requests started after each incarnation's first one (timeouts, errors, 410). */
  readonly watchReconnects: number;
  readonly relistsOnGone: number;
  /** List/watch failures by the watcher's reason. */
  readonly failuresByReason: Counts;
  /** `Warning` headers from the cluster's API server. */
  readonly apiWarnings: number;
  /** Gateway probe failures and latency by gateway `namespace/name` (SPEC §10). */
  readonly gatewayProbes: Readonly<Record<string, GatewayProbeCounters>>;
}

export const EMPTY_CLUSTER_COUNTERS: ClusterCounters = Object.freeze({
  lists: 0,
  watchReconnects: 0,
  relistsOnGone: 0,
  failuresByReason: Object.freeze({}),
  apiWarnings: 0,
  gatewayProbes: Object.freeze({}),
});

/** The counters of one incarnation's snapshot (`ClusterStatus` fields). */
export function clusterCountersOf(status: {
  readonly watch: { readonly lists: number; readonly watchesStarted: number; readonly relistsOnGone: number };
  readonly failuresByReason: Counts;
  readonly apiWarnings?: number | undefined;
  readonly gatewayProbes?: Readonly<Record<string, GatewayProbeCounters>> | undefined;
}): ClusterCounters {
  return {
    lists: status.watch.lists,
    watchReconnects: Math.max(0, status.watch.watchesStarted - 1),
    relistsOnGone: status.watch.relistsOnGone,
    failuresByReason: status.failuresByReason,
    apiWarnings: status.apiWarnings ?? 0,
    gatewayProbes: status.gatewayProbes ?? {},
  };
}

/** a + b, gateway by gateway. */
export function addGatewayProbes(
  a: Readonly<Record<string, GatewayProbeCounters>>,
  b: Readonly<Record<string, GatewayProbeCounters>>,
): Record<string, GatewayProbeCounters> {
  const sum: Record<string, GatewayProbeCounters> = { ...a };
  for (const [gateway, counters] of Object.entries(b)) {
    const base = sum[gateway];
    sum[gateway] = base
      ? {
          failures: addCounts(base.failures, counters.failures),
          latency: addHistograms(base.latency, counters.latency),
        }
      : counters;
  }
  return sum;
}

export function addClusterCounters(a: ClusterCounters, b: ClusterCounters): ClusterCounters {
  return {
    lists: a.lists + b.lists,
    watchReconnects: a.watchReconnects + b.watchReconnects,
    relistsOnGone: a.relistsOnGone + b.relistsOnGone,
    failuresByReason: addCounts(a.failuresByReason, b.failuresByReason),
    apiWarnings: a.apiWarnings + b.apiWarnings,
    gatewayProbes: addGatewayProbes(a.gatewayProbes, b.gatewayProbes),
  };
}

/**
 * The base after an incarnation ended: `base` + its last snapshot, with the gateways'
 * probe counters bounded as an actor bounds them (MAX_GATEWAY_SERIES gateways of their
 * own, and OTHER_GATEWAY): the gateways of the snapshot are kept, then the others most
 * recently added first; the rest are dropped (their series end), so that a cluster whose
 * gateways are renamed at every restart does not grow the base for ever. A gateway
 * whose series was dropped starts a new one from zero if it is probed again (a counter
 * reset, as after a restart); every series kept stays >= what it was.
 */
export function foldIncarnation(base: ClusterCounters, snapshot: ClusterCounters): ClusterCounters {
  const sum = addClusterCounters(base, snapshot);
  const keys = Object.keys(sum.gatewayProbes).filter((k) => k !== OTHER_GATEWAY);
  if (keys.length <= MAX_GATEWAY_SERIES) return sum;
  const latest = new Set(Object.keys(snapshot.gatewayProbes));
  const order = [...keys.filter((k) => latest.has(k)), ...keys.filter((k) => !latest.has(k)).reverse()];
  const kept: Record<string, GatewayProbeCounters> = {};
  for (const key of [...order.slice(0, MAX_GATEWAY_SERIES), OTHER_GATEWAY]) {
    const counters = sum.gatewayProbes[key];
    if (counters) kept[key] = counters;
  }
  return { ...sum, gatewayProbes: kept };
}

/** The writer's counters across its restarts. */
export interface WriterCounters {
  /** By `verb/Kind/result`, as in `WriterStatus.writes`. */
  readonly writes: Counts;
  readonly retries: number;
  /** Changes of fleet-wide Services' serving tiers, by direction (SPEC §14). */
  readonly tierSwitches: Counts;
  readonly writeDuration: LatencyHistogram;
  /** `Warning` headers from the local API server. */
  readonly apiWarnings: number;
  /** Writes held by the busy share, by cluster (`WriterClusterStatus.heldWrites`). */
  readonly heldWrites: Counts;
}

export const EMPTY_WRITER_COUNTERS: WriterCounters = Object.freeze({
  writes: Object.freeze({}),
  retries: 0,
  tierSwitches: Object.freeze({}),
  writeDuration: EMPTY_HISTOGRAM,
  apiWarnings: 0,
  heldWrites: Object.freeze({}),
});

export function writerCountersOf(status: WriterStatus): WriterCounters {
  return {
    writes: status.writes,
    retries: status.retries,
    tierSwitches: status.tierSwitches ?? {},
    writeDuration: status.writeDuration,
    apiWarnings: status.apiWarnings ?? 0,
    heldWrites: Object.fromEntries(
      Object.entries(status.clusters).flatMap(([cluster, c]) =>
        c.heldWrites === undefined ? [] : [[cluster, c.heldWrites] as const],
      ),
    ),
  };
}

export function addWriterCounters(a: WriterCounters, b: WriterCounters): WriterCounters {
  return {
    writes: addCounts(a.writes, b.writes),
    retries: a.retries + b.retries,
    tierSwitches: addCounts(a.tierSwitches, b.tierSwitches),
    writeDuration: addHistograms(a.writeDuration, b.writeDuration),
    apiWarnings: a.apiWarnings + b.apiWarnings,
    heldWrites: addCounts(a.heldWrites, b.heldWrites),
  };
}
