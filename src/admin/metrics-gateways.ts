/** Metrics of gateways (SPEC §10) and of what each API server says back: probes, denied reads, warnings. */
import { REFUSAL_REASONS } from "../core/address-policy.ts";
import { MAX_GATEWAY_SERIES, OTHER_GATEWAY } from "../protocol/messages.ts";
import type { MetricBuilders } from "./metric-builders.ts";
import { gatewayAddressValues, SnapshotHistogram } from "./snapshot-series.ts";

export function registerGatewayMetrics(b: MetricBuilders): void {
  const { source, registry } = b;
  b.labelled(
    "gauge",
    "fleet_mirror_gateway_addresses",
    "Addresses of each probed gateway (SPEC §10) by liveness: alive, or dead after 3 failed probes in a row.",
    ["cluster", "gateway", "state"],
    (set) => {
      for (const { labels, value } of gatewayAddressValues(source.fleet())) set(labels, value);
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_cluster_reads_denied",
    "Reads denied (403) or not served: a remote's optional reads (SPEC §12: discovery.k8s.io/endpointslices for headless Services), and with cluster=\"\" the local cluster's own ranges (SPEC §10: networking.k8s.io/servicecidrs, nodes); 0 series: none.",
    ["cluster", "resource"],
    (set) => {
      const fleet = source.fleet();
      for (const row of fleet?.clusters ?? [])
        for (const d of row.deniedReads ?? []) set({ cluster: row.cluster, resource: d.resource }, 1);
      // cluster "": the local cluster's own ranges (SPEC §10), read by the main thread.
      for (const d of fleet?.localRanges?.deniedReads ?? []) set({ cluster: "", resource: d.resource }, 1);
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_gateway_addresses_refused",
    `Gateway ingress addresses neither probed nor written as endpoints (SPEC §10), by reason: ${REFUSAL_REASONS.join(", ")}; 0 series: none.`,
    ["cluster", "reason"],
    (set) => {
      for (const row of source.fleet()?.clusters ?? []) {
        const byReason: Record<string, number> = {};
        for (const g of row.gateways)
          for (const [reason, n] of Object.entries(g.refused?.byReason ?? {}))
            byReason[reason] = (byReason[reason] ?? 0) + n;
        for (const [reason, n] of Object.entries(byReason)) set({ cluster: row.cluster, reason }, n);
      }
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_gateways_unprobed",
    "Gateways with an mc-probe port left unprobed by --gateway-max-probed (they count alive); 0 series: none.",
    ["cluster"],
    (set) => {
      for (const row of source.fleet()?.clusters ?? []) {
        const n = row.gateways.filter((g) => g.unprobed !== undefined).length;
        if (n > 0) set({ cluster: row.cluster }, n);
      }
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_local_address_ranges",
    "The local cluster's own ranges read from its API, in which gateway addresses are refused (SPEC §10): source service-cidr (ServiceCIDRs) or pod-cidr (Nodes).",
    ["source"],
    (set) => {
      const ranges = source.fleet()?.localRanges;
      if (!ranges) return;
      set({ source: "service-cidr" }, ranges.serviceCidrs.length);
      set({ source: "pod-cidr" }, ranges.podCidrs);
    },
  );
  b.labelled(
    "gauge",
    "fleet_mirror_gateway_probe_config_invalid",
    "Bad probe annotations or mc-probe port of each gateway in use (SPEC §10), each replaced by its default; 0 series: none.",
    ["cluster", "gateway"],
    (set) => {
      for (const row of source.fleet()?.clusters ?? [])
        for (const g of row.gateways)
          if (g.probeProblems?.length) set({ cluster: row.cluster, gateway: g.key }, g.probeProblems.length);
    },
  );
  b.labelled(
    "counter",
    "fleet_mirror_gateway_probe_failures_total",
    `Failed gateway probes by reason: timeout, refused, status (an answer outside 2xx), error. At most ${MAX_GATEWAY_SERIES} gateways per cluster have series of their own; beyond them probes count under gateway="${OTHER_GATEWAY}", and the series of a gateway no longer probed may end.`,
    ["cluster", "gateway", "reason"],
    (set) => {
      for (const [cluster, c] of source.counters()?.clusters ?? [])
        for (const [gateway, probes] of Object.entries(c.gatewayProbes))
          for (const [reason, n] of Object.entries(probes.failures)) set({ cluster, gateway, reason }, n);
    },
  );
  new SnapshotHistogram(
    "fleet_mirror_gateway_probe_duration_seconds",
    `Latency of gateway probes that got an HTTP answer (timeouts and refused connections are failures only). At most ${MAX_GATEWAY_SERIES} gateways per cluster have series of their own; beyond them probes count under gateway="${OTHER_GATEWAY}".`,
    registry,
    () =>
      [...(source.counters()?.clusters ?? [])].flatMap(([cluster, c]) =>
        Object.entries(c.gatewayProbes).map(([gateway, probes]) => ({
          labels: { cluster, gateway },
          histogram: probes.latency,
        })),
      ),
    ["cluster", "gateway"],
  );

  b.labelled(
    "counter",
    "fleet_mirror_api_warnings_total",
    "Warning headers received from API servers: the local one (api=local) and each cluster's remote one (api=remote).",
    ["api", "cluster"],
    (set) => {
      const counters = source.counters();
      if (!counters) return;
      set({ api: "local", cluster: "" }, counters.writer.apiWarnings);
      for (const [cluster, c] of counters.clusters) set({ api: "remote", cluster }, c.apiWarnings);
    },
  );
}
