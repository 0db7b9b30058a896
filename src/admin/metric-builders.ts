/**
 * The shapes every fleet-mirror metric takes: a metric computed at scrape time from the
 * snapshot `source` gives (never state copied into metric objects on every change), and
 * labelled metrics whose series are rebuilt on every scrape, so a series of something
 * that is gone (a cluster unregistered, a gateway no longer used) vanishes with it.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { Leadership } from "../leader/leadership.ts";
import type { ClusterRow, FleetCounters, FleetStatus, ThreadHeap } from "../status/fleet-view.ts";

/** What the metrics read at scrape time; undefined fields: no controller runs (standby). */
export interface MetricsSource {
  fleet(): FleetStatus | undefined;
  counters(): FleetCounters | undefined;
  leadership(): Leadership;
  threadHeaps(): Promise<readonly ThreadHeap[]>;
}

/** One registered cluster's counters, summed over its actor's incarnations, and its restarts. */
export type FleetClusterCounters = NonNullable<ReturnType<FleetCounters["clusters"]["get"]>>;

/** Registers metrics of one kind into one registry, read from one source. */
export interface MetricBuilders {
  readonly registry: Registry;
  readonly source: MetricsSource;
  /** An unlabelled metric read from a snapshot (a counter: a total that never decreases, re-read). */
  scalar(kind: "gauge" | "counter", name: string, help: string, value: () => number): void;
  /** A labelled metric whose series are rebuilt on every scrape: series of what is gone vanish. */
  labelled<T extends string>(
    kind: "gauge" | "counter",
    name: string,
    help: string,
    labelNames: readonly T[],
    fill: (set: (labels: Record<T, string>, value: number) => void) => void,
  ): void;
  /** One series per registered cluster (rows of duplicate/invalid Secrets have no actor). */
  clusterGauge(name: string, help: string, value: (row: ClusterRow) => number | undefined): void;
  /** One series per registered cluster, from its counters summed over every actor incarnation. */
  clusterCounter(name: string, help: string, value: (c: FleetClusterCounters) => number): void;
}

export function metricBuilders(registry: Registry, source: MetricsSource): MetricBuilders {
  const registers = [registry];
  const scalar: MetricBuilders["scalar"] = (kind, name, help, value) => {
    if (kind === "gauge")
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(value());
        },
      });
    else
      new Counter({
        name,
        help,
        registers,
        collect() {
          this.reset(); // a total that never decreases (Supervisor.counters), re-read
          this.inc(value());
        },
      });
  };
  const labelled: MetricBuilders["labelled"] = (kind, name, help, labelNames, fill) => {
    if (kind === "gauge")
      new Gauge({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          fill((l, v) => this.set(l, v));
        },
      });
    else
      new Counter({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          fill((l, v) => this.inc(l, v));
        },
      });
  };
  return {
    registry,
    source,
    scalar,
    labelled,
    clusterGauge: (name, help, value) =>
      labelled("gauge", name, help, ["cluster"], (set) => {
        for (const row of source.fleet()?.clusters ?? []) {
          const v = row.state === "duplicate" || row.state === "invalid" ? undefined : value(row);
          if (v !== undefined) set({ cluster: row.cluster }, v);
        }
      }),
    clusterCounter: (name, help, value) =>
      labelled("counter", name, help, ["cluster"], (set) => {
        for (const [cluster, c] of source.counters()?.clusters ?? []) set({ cluster }, value(c));
      }),
  };
}
