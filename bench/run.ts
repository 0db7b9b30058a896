/**
 * `npm run bench`: the benchmark suite on real API servers (a local API server and a few
 * remote ones from the sandbox control plane; `npm run control-plane` builds them).
 *
 *   node --expose-gc bench/run.ts [--scenario <name>]... [--smoke] [--out bench/results]
 *
 * Every scenario prints a table and writes `<out>/<scenario>.json`. A full run (all
 * scenarios, not --smoke) also writes `<out>/summary.json` and `<out>/SUMMARY.md`; a
 * summary value is null when it was not measured, never invented. --out defaults to
 * bench/results, or a temporary directory with --smoke. `--summary-only` rebuilds the
 * summary from the scenario files already in --out (scenarios run one by one). Benchmarks measure;
 * they never fail on a missed target. Run them on a quiet machine.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { runColdConvergence } from "./cold-convergence.ts";
import { runFailover } from "./failover.ts";
import { runGatewayFanout } from "./gateway-fanout.ts";
import { type BenchOptions, machineString, type ScenarioResult } from "./harness.ts";
import { runMemory } from "./memory.ts";
import { runProbeCpu } from "./probe-cpu.ts";
import { runRemoteRecovery } from "./remote-recovery.ts";
import { runRestart } from "./restart.ts";
import { runSteadyLatency } from "./steady-latency.ts";

const SCENARIOS: Readonly<Record<string, (opts: BenchOptions) => Promise<ScenarioResult>>> = {
  "cold-convergence": runColdConvergence,
  restart: runRestart,
  "steady-latency": runSteadyLatency,
  "gateway-fanout": runGatewayFanout,
  memory: runMemory,
  "remote-recovery": runRemoteRecovery,
  failover: runFailover,
  "probe-cpu": runProbeCpu,
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
  "remote_recovery_s",
  "failover_s",
  "probe_cpu_ratio",
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
  remote_recovery_s: ["<=", 5, "s"],
  // 3 × the default probe period (3 s) + 1 s.
  failover_s: ["<=", 3 * 3 + 1, "s"],
  probe_cpu_ratio: ["<=", 1.5, "× bare client"],
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

/**
 * The summary keys from the per-scenario JSON files already in `out` (for scenarios run
 * one by one); a key is null when its file or value is missing.
 */
export function summaryFromResults(out: string): Record<string, number | null> {
  const read = (name: string): Record<string, unknown> | undefined => {
    const file = join(out, `${name}.json`);
    if (!existsSync(file)) return undefined;
    const data: unknown = JSON.parse(readFileSync(file, "utf8"));
    return typeof data === "object" && data !== null && !Array.isArray(data)
      ? (data as Record<string, unknown>)
      : undefined;
  };
  const num = (value: unknown): number | null => (typeof value === "number" ? value : null);
  const rows = (data: Record<string, unknown> | undefined): Record<string, unknown>[] =>
    Array.isArray(data?.["runs"]) ? (data["runs"] as Record<string, unknown>[]) : [];
  const full = (data: Record<string, unknown> | undefined) => (data?.["smoke"] === false ? data : undefined);
  const cold = rows(full(read("cold-convergence"))).find((r) => r["clusters"] === 50 && r["servicesPerCluster"] === 50);
  const restart = full(read("restart"));
  const steady = full(read("steady-latency"));
  const latency = steady?.["latencyMs"] as { perMirror?: { p99?: unknown } } | undefined;
  const fanout = full(read("gateway-fanout"));
  const memory = rows(full(read("memory")));
  const k200 = memory.find((r) => r["mode"] === "thread" && r["clusters"] === 200);
  const packed = memory.find((r) => String(r["mode"]).startsWith("packed") && r["clusters"] === 1000);
  const synced = num(k200?.["allSyncedMs"]);
  return {
    cold_converge_ratio: num(cold?.["ratio"]),
    writes_per_mirror: num(cold?.["writesPerMirror"]),
    rss_mb_per_cluster_thread_mode: num(k200?.["perClusterRssMb"]),
    rss_total_mb_packed_1000: num(packed?.["rssMb"]),
    sync_200_clusters_s: synced === null ? null : Math.round(synced / 10) / 100,
    restart_writes: num(restart?.["localWritesAfterRestart"]),
    steady_p99_ms: num(latency?.perMirror?.p99),
    gateway_fanout_ratio: num(fanout?.["ratio"]),
    remote_recovery_s: num(full(read("remote-recovery"))?.["remoteRecoveryS"]),
    failover_s: num(full(read("failover"))?.["failoverS"]),
    probe_cpu_ratio: num(full(read("probe-cpu"))?.["ratio"]),
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      scenario: { type: "string", multiple: true },
      smoke: { type: "boolean", default: false },
      out: { type: "string" },
      note: { type: "string" },
      "steady-rate": { type: "string" },
      "summary-only": { type: "boolean", default: false },
      "skip-packed": { type: "boolean", default: false },
      "memory-clusters": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(
      `usage: node --expose-gc bench/run.ts [--scenario <${Object.keys(SCENARIOS).join("|")}>]... [--smoke] [--out dir] [--note text] [--steady-rate mirror-changes-per-s] [--skip-packed] [--memory-clusters K,K...] | --summary-only [--out dir]\n`,
    );
    return;
  }
  if (values["summary-only"]) {
    const out = values.out ?? "bench/results";
    writeSummary(out, summaryFromResults(out), values.note);
    process.stdout.write(`summary written to ${join(out, "summary.json")} and SUMMARY.md\n`);
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
  const memoryClusters = values["memory-clusters"]?.split(",").map(Number);
  if (memoryClusters?.some((k) => !Number.isInteger(k) || k < 1))
    throw new Error("--memory-clusters: a comma-separated list of whole numbers >= 1");
  const opts: BenchOptions = {
    smoke: values.smoke,
    out,
    steadyRate,
    skipPacked: values["skip-packed"],
    memoryClusters,
  };
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
  const full = !opts.smoke && values.scenario === undefined && steadyRate === undefined && !memoryClusters;
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
