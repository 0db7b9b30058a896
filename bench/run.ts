/**
 * `npm run bench`: the benchmark suite on real API servers (a local API server and a few
 * remote ones from the sandbox control plane; `npm run control-plane` builds them).
 *
 *   node --expose-gc bench/run.ts [--scenario <name>]... [--smoke] [--out bench/results]
 *
 * Every scenario prints a table and writes `<out>/<scenario>.json`. A full run (all
 * scenarios, not --smoke) also writes `<out>/summary.json` and `<out>/SUMMARY.md`; a
 * summary value is null when it was not measured, never invented. --out defaults to
 * bench/results, or a temporary directory with --smoke. Benchmarks measure;
 * they never fail on a missed target. Run them on a quiet machine.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runColdConvergence } from "./cold-convergence.ts";
import { runGatewayFanout } from "./gateway-fanout.ts";
import { type BenchOptions, machineString, type ScenarioResult } from "./harness.ts";
import { runMemory } from "./memory.ts";
import { runRestart } from "./restart.ts";
import { runSteadyLatency } from "./steady-latency.ts";

const SCENARIOS: Readonly<Record<string, (opts: BenchOptions) => Promise<ScenarioResult>>> = {
  "cold-convergence": runColdConvergence,
  restart: runRestart,
  "steady-latency": runSteadyLatency,
  "gateway-fanout": runGatewayFanout,
  memory: runMemory,
};

const SUMMARY_KEYS = [
  "cold_converge_ratio",
  "writes_per_mirror",
  "rss_mb_per_cluster_thread_mode",
  "rss_total_mb_packed_1000",
  "sync_200_clusters_s",
  "restart_writes",
  "steady_p99_ms",
  "gateway_fanout_ratio",
] as const;

/** The targets, for SUMMARY.md: [comparison, bound, unit]. */
const TARGETS: Readonly<Record<(typeof SUMMARY_KEYS)[number], readonly [">=" | "<=" | "==", number, string]>> = {
  cold_converge_ratio: [">=", 0.8, "× bare client"],
  writes_per_mirror: ["<=", 2, "writes"],
  rss_mb_per_cluster_thread_mode: ["<=", 16, "MB"],
  rss_total_mb_packed_1000: ["<=", 2048, "MB"],
  sync_200_clusters_s: ["<=", 15, "s"],
  restart_writes: ["==", 0, "writes"],
  steady_p99_ms: ["<=", 250, "ms"],
  gateway_fanout_ratio: [">=", 0.8, "× bare client"],
};

function verdict(key: (typeof SUMMARY_KEYS)[number], value: number | null): string {
  if (value === null) return "not measured";
  const [op, bound] = TARGETS[key];
  const met = op === ">=" ? value >= bound : op === "<=" ? value <= bound : value === bound;
  return met ? "met" : "MISSED";
}

function writeSummary(out: string, summary: Record<string, number | null>, note: string | undefined): void {
  const date = new Date().toISOString();
  const machine = machineString();
  const body: Record<string, string | number | null> = { machine, date };
  for (const key of SUMMARY_KEYS) body[key] = summary[key] ?? null;
  writeFileSync(join(out, "summary.json"), `${JSON.stringify(body, null, 2)}\n`);
  const lines = [
    "# fleet-mirror benchmark summary",
    "",
    `Machine: ${machine}  `,
    `Date: ${date}  `,
    "Command: `npm run bench` (per-scenario details in the JSON files next to this one)",
    ...(note ? ["", `Note: ${note}`] : []),
    "",
    "| metric | value | target | |",
    "|---|---|---|---|",
    ...SUMMARY_KEYS.map((key) => {
      const [op, bound, unit] = TARGETS[key];
      const value = body[key];
      return `| ${key} | ${value === null ? "null" : String(value)} | ${op} ${bound} ${unit} | ${verdict(key, summary[key] ?? null)} |`;
    }),
    "",
  ];
  writeFileSync(join(out, "SUMMARY.md"), lines.join("\n"));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      scenario: { type: "string", multiple: true },
      smoke: { type: "boolean", default: false },
      out: { type: "string" },
      note: { type: "string" },
      "steady-rate": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(
      `usage: node --expose-gc bench/run.ts [--scenario <${Object.keys(SCENARIOS).join("|")}>]... [--smoke] [--out dir] [--note text] [--steady-rate remote-changes-per-s]\n`,
    );
    return;
  }
  const selected = values.scenario ?? Object.keys(SCENARIOS);
  for (const name of selected) {
    if (!SCENARIOS[name]) throw new Error(`unknown scenario ${JSON.stringify(name)}; one of ${Object.keys(SCENARIOS)}`);
  }
  if (!globalThis.gc) process.stderr.write("warning: run with --expose-gc for meaningful memory numbers\n");
  // A smoke run never overwrites the committed results.
  const out = values.out ?? (values.smoke ? join(tmpdir(), "fleet-mirror-bench-smoke") : "bench/results");
  const steadyRate = values["steady-rate"] === undefined ? undefined : Number(values["steady-rate"]);
  if (steadyRate !== undefined && !(steadyRate > 0)) throw new Error("--steady-rate: must be a number > 0");
  const opts: BenchOptions = { smoke: values.smoke, out, steadyRate };
  mkdirSync(opts.out, { recursive: true });
  process.stdout.write(`fleet-mirror bench on ${machineString()}${opts.smoke ? " (smoke: tiny sizes)" : ""}\n`);
  const summary: Record<string, number | null> = {};
  const failed: string[] = [];
  for (const name of selected) {
    const scenario = SCENARIOS[name];
    if (!scenario) continue;
    const started = Date.now();
    try {
      const { summary: part } = await scenario(opts);
      Object.assign(summary, part);
      process.stdout.write(`-- ${name} done in ${Math.round((Date.now() - started) / 1000)} s\n`);
    } catch (error) {
      failed.push(name);
      process.stderr.write(
        `-- ${name} FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
    }
  }
  const full = !opts.smoke && values.scenario === undefined && steadyRate === undefined;
  if (full) {
    writeSummary(opts.out, summary, values.note);
    process.stdout.write(`summary written to ${join(opts.out, "summary.json")} and SUMMARY.md\n`);
  }
  if (failed.length > 0) {
    process.stderr.write(`failed scenarios: ${failed.join(", ")}\n`);
    process.exitCode = 1;
  }
}

await main();
