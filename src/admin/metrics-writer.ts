/** Metrics of the local writer: readiness, queue, conflicts, writes (or planned writes in a dry run), logging. */
import { droppedLogLines } from "../log.ts";
import type { FederatedServiceStatus } from "../protocol/status.ts";
import type { MetricBuilders, MetricsSource } from "./metric-builders.ts";
import { countConflicts, plannedWriteSeries, SnapshotHistogram, writeLabels } from "./snapshot-series.ts";

/** One series per fleet-wide Service with tiers (SPEC §14), labelled by its namespace and name. */
function perFederated(
  source: MetricsSource,
  value: (f: FederatedServiceStatus) => number | undefined,
  set: (labels: Record<"namespace" | "service", string>, value: number) => void,
): void {
  for (const f of source.fleet()?.writer?.federated ?? []) {
    const v = value(f);
    if (v === undefined) continue;
    const [namespace = "", service = ""] = f.key.split("/");
    set({ namespace, service }, v);
  }
}

export function registerWriterMetrics(b: MetricBuilders): void {
  const { source, registry } = b;
  b.scalar("gauge", "fleet_mirror_writer_ready", "1 once the local writer listed the local mirrors, else 0.", () =>
    source.fleet()?.writer?.ready === true ? 1 : 0,
  );
  b.scalar(
    "gauge",
    "fleet_mirror_writer_queue_depth",
    "Mirror keys waiting in the local writer's work queue.",
    () => source.fleet()?.writer?.queueDepth ?? 0,
  );
  b.scalar(
    "gauge",
    "fleet_mirror_writer_in_flight_writes",
    "Write requests to the local API server in progress.",
    () => source.fleet()?.writer?.inFlight ?? 0,
  );
  b.scalar(
    "gauge",
    "fleet_mirror_conflicts",
    "Mirrors (and fleet-wide members) not written because a user's object or another cluster holds the name, or their ports conflict.",
    () => countConflicts(source.fleet()),
  );
  b.labelled(
    "gauge",
    "fleet_mirror_dry_run_planned_writes",
    "run --dry-run: writes to the local API server the controller would make now and does not, by verb and resource.",
    ["verb", "resource"],
    (set) => {
      for (const { labels, value } of plannedWriteSeries(source.fleet())) set(labels, value);
    },
  );
  b.labelled(
    "counter",
    "fleet_mirror_writes_total",
    "Write requests to the local API server by verb, resource and result (ok, HTTP status, or error).",
    ["verb", "resource", "result"],
    (set) => {
      for (const [key, n] of Object.entries(source.counters()?.writer.writes ?? {})) {
        const labels = writeLabels(key);
        if (labels) set(labels, n);
      }
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_federated_serving_priority",
    "The worst priority whose members serve a fleet-wide Service with priority tiers (SPEC §14).",
    ["namespace", "service"],
    (set) => perFederated(source, (f) => f.servingPriority, set),
  );
  b.labelled(
    "gauge",
    "fleet_mirror_federated_last_priority",
    "The priority of the last (worst) tier of a fleet-wide Service with priority tiers (SPEC §14); fleet_mirror_federated_serving_priority equal to it: every tier serves.",
    ["namespace", "service"],
    (set) => perFederated(source, (f) => f.tiers?.at(-1)?.priority, set),
  );
  b.labelled(
    "counter",
    "fleet_mirror_federated_switches_total",
    "Changes of a fleet-wide Service's serving tiers, by direction: failover (at once) or failback (after --failback-delay).",
    ["direction"],
    (set) => {
      for (const [direction, n] of Object.entries(source.counters()?.writer.tierSwitches ?? {})) set({ direction }, n);
    },
  );
  b.labelled(
    "counter",
    "fleet_mirror_writes_held_total",
    "Writes of a cluster that waited for the busy share (--busy-write-percent) while quieter clusters wrote.",
    ["cluster"],
    (set) => {
      // Registered clusters only: a cluster that is gone has no series (its count stays in the sum).
      const held = source.counters()?.writer.heldWrites ?? {};
      for (const { cluster } of source.fleet()?.clusters ?? []) {
        const n = held[cluster];
        if (n !== undefined) set({ cluster }, n);
      }
    },
  );
  b.scalar(
    "counter",
    "fleet_mirror_write_retries_total",
    "Reconciles of a mirror that failed and were retried with backoff.",
    () => source.counters()?.writer.retries ?? 0,
  );
  new SnapshotHistogram(
    "fleet_mirror_write_duration_seconds",
    "Latency of write requests to the local API server.",
    registry,
    () => {
      const h = source.counters()?.writer.writeDuration;
      return h ? [{ labels: {}, histogram: h }] : [];
    },
  );
  b.scalar(
    "counter",
    "fleet_mirror_writer_restarts_total",
    "Restarts of the local writer thread.",
    () => source.fleet()?.writerRestarts ?? 0,
  );

  b.scalar(
    "counter",
    "fleet_mirror_log_lines_dropped_total",
    "Log lines dropped because the log destination (a pipe nobody reads, a slow disk) did not take them in time.",
    droppedLogLines,
  );
}
