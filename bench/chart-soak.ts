/**
 * The soak's chart, as a Vega-Lite spec from soak.json (pure, as chart-specs.ts): each
 * sampled figure over the run's minutes, one panel per figure on its own scale (RSS,
 * the V8 heaps of every thread, open file descriptors, threads, the writer's queue and
 * write rate), with the minute of every fault marked.
 */
import { type ChartPlan, CONFIG, type Json, num, objects, title } from "./chart-specs.ts";

/** The panels, top to bottom: a sample's field and how the panel names it. */
const FIGURES = [
  ["rssMb", "RSS, MB"],
  ["heapMb", "V8 heaps, MB"],
  ["fds", "open fds"],
  ["threads", "threads"],
  ["queueDepth", "queue, keys"],
  ["writesPerS", "writes/s"],
] as const;

export function soakChart(data: Json): ChartPlan {
  const samples = objects(data["samples"]);
  const values = samples.flatMap((s) => {
    const minute = num(s["minute"]);
    if (minute === null) return [];
    return FIGURES.flatMap(([field, label]) => {
      const value = num(s[field]);
      return value === null ? [] : [{ minute, figure: label, value }];
    });
  });
  if (values.length === 0) return { skipped: "no samples" };
  const faults = objects(data["faultLog"]).flatMap((f) => {
    const at = num(f["atS"]);
    return at === null ? [] : FIGURES.map(([, label]) => ({ minute: at / 60, figure: label, kind: String(f["kind"]) }));
  });
  const clusters = num(data["clusters"]);
  const minutes = num(data["minutes"]);
  const every = num((data["shape"] as Json | undefined)?.["faultEveryS"]);
  const cadence = every === null ? "" : every === 60 ? ", a fault every minute" : `, a fault every ${every} s`;
  return {
    spec: {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      config: CONFIG,
      title: title(`Soak: ${minutes ?? "?"} minutes, ${clusters ?? "?"} clusters${cadence}`, data, [
        "Sampled in the controller's process; dashed: a fault (watch cut, remote API restart, gateway down, actor crash).",
      ]),
      data: {
        values: [...values.map((v) => ({ ...v, layer: "sample" })), ...faults.map((f) => ({ ...f, layer: "fault" }))],
      },
      facet: {
        row: { field: "figure", type: "nominal", sort: FIGURES.map(([, label]) => label), header: { title: null } },
      },
      spec: {
        width: 640,
        height: 100,
        layer: [
          {
            transform: [{ filter: "datum.layer === 'fault'" }],
            mark: { type: "rule", strokeDash: [3, 3], color: "#bbb" },
            encoding: { x: { field: "minute", type: "quantitative" } },
          },
          {
            transform: [{ filter: "datum.layer === 'sample'" }],
            mark: { type: "line", color: "#4c78a8" },
            encoding: {
              x: { field: "minute", type: "quantitative", title: "minutes" },
              y: {
                field: "value",
                type: "quantitative",
                title: null,
                scale: { zero: false },
                axis: { format: ".4~r" },
              },
            },
          },
        ],
      },
      resolve: { scale: { y: "independent" } },
    },
  };
}
