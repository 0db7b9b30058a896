/**
 * Export modes side by side (SPEC §12: "the mode must cost nothing"): cold convergence of
 * the same world, K clusters × S Services (one remote API server, K Secrets), exported by
 * the §2 annotations and by the export label through each cluster's default gateway.
 * The runs alternate, annotation, label, label, annotation, each on a fresh world shaped
 * the same, so a drift of the machine's load over the scenario weighs on both modes
 * alike. ratio = mean annotation time / mean label time (≥ 0.95: label export costs
 * nothing). Default `--endpoints-api` (EndpointSlices), no write limit, as
 * cold-convergence.ts.
 */
import { converge } from "./cold-convergence.ts";
import { type BenchOptions, printTable, round, type ScenarioResult, writeResult } from "./harness.ts";

type ExportBy = "annotation" | "label";
const ORDER: readonly ExportBy[] = ["annotation", "label", "label", "annotation"];

export async function runExportModes(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke ? { clusters: 5, services: 5 } : { clusters: 50, services: 50 };
  const rows: Record<string, unknown>[] = [];
  for (const exportBy of opts.smoke ? (["annotation", "label"] as const) : ORDER) {
    const run = await converge(size.clusters, size.services, "endpointslices", exportBy);
    try {
      rows.push({
        exportBy,
        clusters: size.clusters,
        servicesPerCluster: size.services,
        mirrors: run.mirrors,
        convergeMs: run.convergeMs,
        firstMirrorMs: run.firstMirrorMs,
        syncedMs: run.syncedMs,
        writesPerMirror: round(run.fleetWrites / run.mirrors, 2),
      });
    } finally {
      await run.supervisor.stop();
      await run.fleet.stop();
    }
  }
  const mean = (by: ExportBy): number => {
    const times = rows.filter((r) => r["exportBy"] === by).map((r) => Number(r["convergeMs"]));
    return times.reduce((a, b) => a + b, 0) / times.length;
  };
  const ratio = round(mean("annotation") / mean("label"), 3);
  printTable("cold convergence by export mode (ratio = mean annotation time / mean label time)", rows);
  writeResult(opts.out, "export-modes", {
    smoke: opts.smoke,
    endpointsApi: "endpointslices",
    writeQps: "unlimited",
    order: rows.map((r) => r["exportBy"]),
    meanAnnotationMs: Math.round(mean("annotation")),
    meanLabelMs: Math.round(mean("label")),
    ratio,
    runs: rows,
  });
  return { result: { runs: rows, ratio }, summary: opts.smoke ? {} : { label_export_converge_ratio: ratio } };
}
