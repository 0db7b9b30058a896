/**
 * Metric series from status snapshots (pure, but for SnapshotHistogram's prom-client
 * base): which label sets and values the scrape-time collectors of metrics.ts export for
 * a FleetStatus or a cumulative LatencyHistogram. No registry, no source: metrics.ts
 * wires these to the registry.
 */
import { Histogram, type Registry } from "prom-client";
import type { LatencyHistogram } from "../protocol/messages.ts";
import { WRITE_DURATION_BUCKETS } from "../protocol/messages.ts";
import type { FleetStatus } from "../status/fleet-view.ts";

/** Every state a `ClusterRow` can have, so each is exported (as 0 when empty). */
export const CLUSTER_STATES = [
  "starting",
  "syncing",
  "synced",
  "stale",
  "failing",
  "crash-loop",
  "duplicate",
  "invalid",
] as const;

/** Clusters by row state; states outside CLUSTER_STATES are counted under their own name. */
export function clustersByState(fleet: FleetStatus | undefined): Map<string, number> {
  const counts = new Map<string, number>(CLUSTER_STATES.map((s) => [s, 0]));
  for (const row of fleet?.clusters ?? []) counts.set(row.state, (counts.get(row.state) ?? 0) + 1);
  return counts;
}

/** `verb/Kind/result` keys of `WriterStatus.writes` as labels; malformed keys are skipped. */
export function writeLabels(
  key: string,
): { readonly verb: string; readonly resource: string; readonly result: string } | undefined {
  const [verb, kind, result, ...rest] = key.split("/");
  if (!verb || !kind || !result || rest.length > 0) return undefined;
  // The API's resource names (plural, lower case), as in apiserver_request_total.
  const resource = kind === "Endpoints" ? "endpoints" : `${kind.toLowerCase()}s`;
  return { verb, resource, result };
}

/**
 * The series of a dry run's plan (`WriterStatus.dryRun.totals`, keys `verb/Kind` or
 * `verb/Kind/status`): the resource named as in `writeLabels`, a status subresource as
 * `<resource>/status`. Not a dry run: none.
 */
export function plannedWriteSeries(
  fleet: FleetStatus | undefined,
): { readonly labels: { readonly verb: string; readonly resource: string }; readonly value: number }[] {
  const series = [];
  for (const [key, value] of Object.entries(fleet?.writer?.dryRun?.totals ?? {})) {
    const [verb, kind, subresource] = key.split("/");
    const labels = verb && kind ? writeLabels(`${verb}/${kind}/planned`) : undefined;
    if (!labels) continue;
    const resource = subresource ? `${labels.resource}/${subresource}` : labels.resource;
    series.push({ labels: { verb: labels.verb, resource }, value });
  }
  return series;
}

const CONFLICTS = new Set(["user-owned", "owned-by-other-cluster", "owned-by-other-service", "port-conflict"]);

/**
 * Mirrors blocked by a user's object, by another cluster, or by a fleet-wide or import
 * part holding a slice name (SPEC §11, §12), and fleet-wide members left out (a user's
 * object holds the name, or their ports conflict, SPEC §11): problems of the writer, one
 * per cluster and key.
 */
export function countConflicts(fleet: FleetStatus | undefined): number {
  let n = 0;
  for (const cluster of Object.values(fleet?.writer?.clusters ?? {}))
    for (const b of cluster.blocked) if (CONFLICTS.has(b.reason)) n += 1;
  return n;
}

type HistogramValue = { metricName: string; labels: Record<string, string | number>; value: number };

/**
 * A histogram's exposition values (`_bucket{le}` cumulative, `_sum`, `_count`) from a
 * snapshot; `labels` are added to every value (a labelled histogram's series).
 */
export function histogramValues(
  name: string,
  h: LatencyHistogram,
  labels: Readonly<Record<string, string>> = {},
): HistogramValue[] {
  const values: HistogramValue[] = WRITE_DURATION_BUCKETS.map((le, i) => ({
    metricName: `${name}_bucket`,
    labels: { ...labels, le },
    value: h.buckets[i] ?? 0,
  }));
  values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: "+Inf" }, value: h.count });
  values.push({ metricName: `${name}_sum`, labels: { ...labels }, value: h.sum });
  values.push({ metricName: `${name}_count`, labels: { ...labels }, value: h.count });
  return values;
}

/** The gateway liveness series of `fleet`: addresses alive and dead per probed gateway (SPEC §10). */
export function gatewayAddressValues(
  fleet: FleetStatus | undefined,
): { labels: { cluster: string; gateway: string; state: "alive" | "dead" }; value: number }[] {
  const out: { labels: { cluster: string; gateway: string; state: "alive" | "dead" }; value: number }[] = [];
  for (const row of fleet?.clusters ?? []) {
    for (const g of row.gateways) {
      if (!g.probe) continue;
      out.push({ labels: { cluster: row.cluster, gateway: g.key, state: "alive" }, value: g.probe.alive });
      out.push({ labels: { cluster: row.cluster, gateway: g.key, state: "dead" }, value: g.probe.dead });
    }
  }
  return out;
}

type Exposition = Awaited<ReturnType<Histogram<string>["get"]>>;

/**
 * A histogram whose buckets are counted elsewhere (the writer thread) and read as a
 * cumulative snapshot at scrape time; `observe()` is never used. It extends prom-client's
 * Histogram so the registry takes it, and replaces what the registry reads from it.
 */
export class SnapshotHistogram extends Histogram<string> {
  readonly #name: string;
  readonly #help: string;
  readonly #read: () => readonly { labels: Readonly<Record<string, string>>; histogram: LatencyHistogram }[];

  /** `read` gives one snapshot per series (none: no series), each with its labels. */
  constructor(
    name: string,
    help: string,
    registry: Registry,
    read: () => readonly { labels: Readonly<Record<string, string>>; histogram: LatencyHistogram }[],
    labelNames: readonly string[] = [],
  ) {
    super({ name, help, buckets: [...WRITE_DURATION_BUCKETS], labelNames, registers: [registry] });
    this.#name = name;
    this.#help = help;
    this.#read = read;
  }

  override async get(): Promise<Exposition> {
    return this.getForPromString();
  }

  /** prom-client's text exposition calls this when present (it is not in its typings). */
  async getForPromString(): Promise<Exposition> {
    const series = this.#read();
    return {
      name: this.#name,
      help: this.#help,
      // The typings declare an enum; at run time prom-client writes this string as the TYPE.
      type: "histogram" as unknown as Exposition["type"],
      aggregator: "sum",
      collect: () => undefined,
      values: series.flatMap((s) => histogramValues(this.#name, s.histogram, s.labels)),
    };
  }
}
