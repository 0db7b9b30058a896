/**
 * The benchmark charts as Vega-Lite specs, built from a scenario's result file (pure: a
 * parsed JSON in, a spec or the reason there is none out; bench/charts.ts renders them).
 *
 * A chart draws only what the file measured. When a file predates a series (the
 * convergence curve, the full latency distribution, the failover's answer instant), the
 * chart falls back to the figures the file does hold and says so in its subtitle; when
 * nothing drawable is there, the plan is skipped with the reason.
 */
import type { TopLevelSpec } from "vega-lite";

export type Json = Record<string, unknown>;
export type ChartPlan = { readonly spec: TopLevelSpec } | { readonly skipped: string };

export const FLEET_MIRROR = "fleet-mirror";
export const BARE = "bare client";
/** One colour per client on every chart: fleet-mirror blue, the bare client orange. */
export const CLIENT_COLOR = { scale: { domain: [FLEET_MIRROR, BARE], range: ["#4c78a8", "#f58518"] }, title: null };

export const CONFIG = {
  font: "DejaVu Sans, Verdana, sans-serif",
  background: "white",
  padding: 12,
  title: { fontSize: 15, subtitleFontSize: 11, subtitleColor: "#444", anchor: "start", offset: 12 },
  axis: { labelFontSize: 11, titleFontSize: 12, titleFontWeight: "normal", gridColor: "#e8e8e8" },
  legend: { labelFontSize: 12, orient: "bottom", direction: "horizontal", symbolStrokeWidth: 3 },
  header: { labelFontSize: 12, labelFontWeight: "bold" },
  view: { stroke: "#ccc" },
} as const;

export const num = (value: unknown): number | null =>
  typeof value === "number" && Number.isFinite(value) ? value : null;
export const obj = (value: unknown): Json | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
export const numbers = (value: unknown): number[] | null =>
  Array.isArray(value) && value.every((v) => num(v) !== null) ? (value as number[]) : null;
/** The objects of an array (a non-array: none). */
export const objects = (value: unknown): Json[] =>
  Array.isArray(value) ? value.map(obj).filter((o): o is Json => o !== undefined) : [];
export const runsOf = (data: Json): Json[] => objects(data["runs"]);
const SLICES_MODE = "EndpointSlices mode (default)";
const ENDPOINTS_MODE = "Endpoints mode";
/** The default mode first, as the scenarios run them. */
export const MODE_ORDER = [SLICES_MODE, ENDPOINTS_MODE];
export const modeLabel = (row: Json): string => (row["endpointsApi"] === "endpoints" ? ENDPOINTS_MODE : SLICES_MODE);

/** The subtitle's last line: the machine and date of the run, and a warning for a smoke run. */
function provenance(data: Json): string[] {
  const m = obj(data["machine"]);
  const machine = m ? `${m["cpus"]} CPUs, ${m["memGb"]} GB RAM, Node ${m["node"]}` : "machine not recorded";
  const date = typeof data["date"] === "string" ? data["date"].slice(0, 10) : "date not recorded";
  const lines = [`Measured ${date} on ${machine} (${data["scenario"]}.json).`];
  if (data["smoke"] !== false) lines.push("SMOKE RUN: tiny sizes, to check the code, not for publishing.");
  return lines;
}

export function title(text: string, data: Json, lines: readonly string[]): { text: string; subtitle: string[] } {
  return { text, subtitle: [...lines, ...provenance(data)] };
}

/** Cold convergence: mirrors right over time, fleet-mirror against the bare client, per size and mode. */
export function coldConvergenceChart(data: Json): ChartPlan {
  const runs = runsOf(data).filter((r) => num(r["convergeMs"]) !== null && num(r["bareMs"]) !== null);
  if (runs.length === 0) return { skipped: "no run with convergeMs and bareMs" };
  const size = (r: Json) => `${r["clusters"]} clusters × ${r["servicesPerCluster"]} Services (${r["mirrors"]} mirrors)`;
  const series = (r: Json, client: "fleetMirror" | "bare") => {
    const s = obj(obj(r["mirrorsOverTime"])?.[client]);
    const ms = numbers(s?.["ms"]);
    const done = numbers(s?.["done"]);
    return ms && done && ms.length === done.length && ms.length > 1 ? { ms, done } : null;
  };
  const heading = "Cold convergence: fleet-mirror against a bare client writing the same objects";
  const setting =
    "Every mirror Service and its address object right; the bare client POSTs them with the same concurrency.";
  if (runs.every((r) => series(r, "fleetMirror") && series(r, "bare"))) {
    const values = runs.flatMap((r) =>
      (["fleetMirror", "bare"] as const).flatMap((client) => {
        const s = series(r, client);
        const mirrors = num(r["mirrors"]) ?? 1;
        return (s?.ms ?? []).map((ms, i) => ({
          size: size(r),
          mode: modeLabel(r),
          client: client === "bare" ? BARE : FLEET_MIRROR,
          s: ms / 1000,
          pct: ((s?.done[i] ?? 0) / mirrors) * 100,
        }));
      }),
    );
    return {
      spec: {
        config: CONFIG,
        title: title(heading, data, [
          setting,
          "Each curve from its own start: the controller's start, the bare client's first request.",
        ]),
        data: { values },
        facet: {
          row: { field: "mode", type: "nominal", title: null, sort: MODE_ORDER },
          column: { field: "size", type: "nominal", title: null, sort: [...new Set(runs.map(size))] },
        },
        spec: {
          width: 320,
          height: 170,
          mark: { type: "line", strokeWidth: 2, interpolate: "linear" },
          encoding: {
            x: { field: "s", type: "quantitative", title: "seconds since start" },
            y: { field: "pct", type: "quantitative", title: "mirrors right (%)", scale: { domain: [0, 100] } },
            color: { field: "client", type: "nominal", ...CLIENT_COLOR },
          },
        },
        resolve: { scale: { x: "independent" } },
      },
    };
  }
  // A file from before the curves were recorded: the times to converge, side by side.
  const values = runs.flatMap((r) => [
    { run: `${size(r)}|${modeLabel(r)}`, client: FLEET_MIRROR, s: (num(r["convergeMs"]) ?? 0) / 1000 },
    { run: `${size(r)}|${modeLabel(r)}`, client: BARE, s: (num(r["bareMs"]) ?? 0) / 1000 },
  ]);
  const note =
    "This result file has no convergence curves (recorded from the next full run on): the time to converge instead.";
  return {
    spec: {
      config: CONFIG,
      title: title(heading, data, [setting, note]),
      data: { values },
      width: 520,
      encoding: {
        y: {
          field: "run",
          type: "nominal",
          title: null,
          sort: null,
          axis: { labelLimit: 0, labelExpr: "split(datum.label, '|')", labelFontSize: 12 },
        },
        yOffset: { field: "client", type: "nominal", sort: [FLEET_MIRROR, BARE] },
        x: { field: "s", type: "quantitative", title: "seconds to converge (less is better)" },
      },
      layer: [
        {
          mark: { type: "bar", height: { band: 0.4 } },
          encoding: { color: { field: "client", type: "nominal", ...CLIENT_COLOR } },
        },
        {
          mark: { type: "text", align: "left", baseline: "middle", dx: 4, fontSize: 11 },
          encoding: { text: { field: "s", type: "quantitative", format: ".1f" } },
        },
      ],
    },
  };
}

/** A memory row's placement, as an operator would name it. */
function placement(row: Json, cpus: unknown): string {
  const mode = String(row["mode"]);
  const threads = row["threads"];
  if (mode === "thread") return "a thread per cluster (--max-threads 0)";
  if (mode.startsWith("packed")) return `packed on ${threads} threads (--max-threads ${threads})`;
  if (mode === "default") return `default placement (${threads} threads on ${cpus} CPUs)`;
  return mode;
}

/** Memory: process RSS against cluster count, one line per placement (the default EndpointSlices mode). */
export function memoryChart(data: Json): ChartPlan {
  const rows = runsOf(data).filter(
    (r) => (r["endpointsApi"] ?? "endpointslices") === "endpointslices" && num(r["rssMb"]) !== null,
  );
  if (rows.length === 0) return { skipped: "no EndpointSlices-mode row with rssMb" };
  const cpus = obj(data["machine"])?.["cpus"];
  const values = rows.map((r) => ({ placement: placement(r, cpus), clusters: r["clusters"], rssMb: r["rssMb"] }));
  const clusters = [...new Set(values.flatMap((v) => num(v.clusters) ?? []))];
  const services = [...new Set(rows.map((r) => r["servicesPerCluster"]))].join(", ");
  return {
    spec: {
      config: { ...CONFIG, legend: { ...CONFIG.legend, direction: "vertical", labelLimit: 0 } },
      title: title("Memory: process RSS against the number of clusters, per placement", data, [
        `The fleet-mirror process (dist/src/main.js run), ${services} Services per cluster, EndpointSlices mode:`,
        "the RSS of the whole process (every thread) once every cluster is synced and the writer idle.",
      ]),
      data: { values },
      width: 520,
      height: 300,
      encoding: {
        x: {
          field: "clusters",
          type: "quantitative",
          title: "clusters (log scale)",
          // A little room either side of the measured sizes, and no rounding out to powers of ten.
          scale: { type: "log", domain: [Math.min(...clusters) / 1.5, Math.max(...clusters) * 1.5], nice: false },
          axis: { values: clusters, grid: false },
        },
        y: { field: "rssMb", type: "quantitative", title: "process RSS (MB)" },
        color: { field: "placement", type: "nominal", title: null },
      },
      layer: [
        { mark: { type: "line", strokeWidth: 2, point: { size: 60, filled: true } } },
        {
          mark: { type: "text", align: "left", dx: 7, dy: -8, fontSize: 11 },
          encoding: { text: { field: "rssMb", type: "quantitative", format: ".0f" } },
        },
      ],
    },
  };
}
