/**
 * The benchmark charts: SVG files next to the result JSON they are drawn from.
 *
 *   node bench/charts.ts [results-dir]      (default bench/results)
 *
 * `npm run bench` renders them after its scenarios (bench/run.ts); this entry point
 * re-renders them from result files already on disk, without re-running anything. The
 * specs are Vega-Lite (chart-specs.ts, chart-timing.ts), rendered to SVG by Vega in Node
 * (no browser). A chart whose result file is missing, or holds nothing drawable, is
 * skipped with the reason, and a stale SVG of it removed: a chart never outlives its data.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse, View } from "vega";
import { compile } from "vega-lite";
import { soakChart } from "./chart-soak.ts";
import { type ChartPlan, coldConvergenceChart, type Json, memoryChart } from "./chart-specs.ts";
import { failoverChart, latencyChart } from "./chart-timing.ts";

export interface ChartDef {
  /** The SVG's file name, beside the result file. */
  readonly file: string;
  /** The scenario whose `<scenario>.json` it is drawn from. */
  readonly scenario: string;
  /** What the chart shows, for SUMMARY.md and the README. */
  readonly caption: string;
  readonly plan: (data: Json) => ChartPlan;
}

export const CHARTS: readonly ChartDef[] = [
  {
    file: "cold-convergence.svg",
    scenario: "cold-convergence",
    caption: "Cold convergence over time against the bare client",
    plan: coldConvergenceChart,
  },
  {
    file: "memory.svg",
    scenario: "memory",
    caption: "Memory against the number of clusters, per placement",
    plan: memoryChart,
  },
  {
    file: "steady-latency.svg",
    scenario: "steady-latency",
    caption: "Change-latency distribution against the bare client",
    plan: latencyChart,
  },
  { file: "failover.svg", scenario: "failover", caption: "Gateway failover timeline", plan: failoverChart },
  {
    file: "soak.svg",
    scenario: "soak",
    caption: "Soak: memory, descriptors, threads, queue and writes over time, under faults",
    plan: soakChart,
  },
];

export type ChartOutcome =
  | { readonly file: string; readonly written: string }
  | { readonly file: string; readonly skipped: string };

/** The SVG of a Vega-Lite spec, rendered headless. */
export async function renderSvg(spec: Extract<ChartPlan, { spec: unknown }>["spec"]): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Renders every chart of `dir` whose result file holds its data; see the module comment. */
export async function renderCharts(dir: string): Promise<ChartOutcome[]> {
  const outcomes: ChartOutcome[] = [];
  for (const chart of CHARTS) {
    const source = join(dir, `${chart.scenario}.json`);
    const target = join(dir, chart.file);
    let plan: ChartPlan;
    if (!existsSync(source)) plan = { skipped: `no ${chart.scenario}.json` };
    else {
      const data: unknown = JSON.parse(readFileSync(source, "utf8"));
      plan =
        typeof data === "object" && data !== null && !Array.isArray(data)
          ? chart.plan(data as Json)
          : { skipped: `${chart.scenario}.json is not an object` };
    }
    if ("skipped" in plan) {
      rmSync(target, { force: true });
      outcomes.push({ file: chart.file, skipped: plan.skipped });
      continue;
    }
    writeFileSync(target, `${await renderSvg(plan.spec)}\n`);
    outcomes.push({ file: chart.file, written: target });
  }
  return outcomes;
}

/** One line per chart, for the bench's output. */
export function describeOutcomes(outcomes: readonly ChartOutcome[]): string {
  return outcomes
    .map((o) => ("written" in o ? `chart ${o.written}` : `chart ${o.file} not drawn: ${o.skipped}`))
    .join("\n");
}

if (import.meta.main) {
  const dir = process.argv[2] ?? "bench/results";
  process.stdout.write(`${describeOutcomes(await renderCharts(dir))}\n`);
}
