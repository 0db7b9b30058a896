/**
 * Prometheus metrics of `fleet-mirror run` (docs/DESIGN.md "Admin server and metrics").
 *
 * Everything but the process metrics is computed at scrape time from snapshots
 * (`collect()` callbacks): the state lives in the supervisor and in worker threads, and
 * copying it into metric objects on every change would cost more than a scrape. Counters
 * come from `Supervisor.counters()`, which sums every incarnation of an actor or the
 * writer, so they never go down. Per-cluster series are rebuilt on every scrape from
 * the clusters registered at that moment: a cluster that is gone has no series.
 * Own registry (never prom-client's global one), so tests and embedders can have several.
 * The metrics of each domain are registered by a file of their own (metrics-*.ts).
 */
import { collectDefaultMetrics, Registry } from "prom-client";
import { type MetricsSource, metricBuilders } from "./metric-builders.ts";
import { registerFleetMetrics } from "./metrics-fleet.ts";
import { registerGatewayMetrics } from "./metrics-gateways.ts";
import { registerThreadMetrics } from "./metrics-threads.ts";
import { registerWriterMetrics } from "./metrics-writer.ts";

export type { MetricsSource } from "./metric-builders.ts";

/** prom-client default metrics left out: `sum(nodejs_active_handles)` and so on give the same. */
const GAUGES_NAMED_TOTAL = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/** Builds the registry; every value is read from `source` when scraped. */
export function createMetrics(source: MetricsSource): Registry {
  const registry = new Registry();
  // process_resident_memory_bytes, CPU, event loop lag, GC, Node version.
  collectDefaultMetrics({ register: registry });
  // prom-client's totals of active handles, requests and resources are gauges named
  // *_total, which `promtool check metrics` rejects (only counters end in _total); each
  // is the sum over its by-type gauge (nodejs_active_handles, ...), which stays.
  for (const name of GAUGES_NAMED_TOTAL) registry.removeSingleMetric(name);
  const builders = metricBuilders(registry, source);
  registerFleetMetrics(builders);
  registerGatewayMetrics(builders);
  registerWriterMetrics(builders);
  registerThreadMetrics(builders);
  return registry;
}
