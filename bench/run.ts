/**
 * `npm run bench`: the benchmark suite on real API servers (a local API server and a few
 * remote ones from the sandbox control plane; `npm run control-plane` builds them).
 *
 *   node --expose-gc bench/run.ts [--scenario <name>]... [--smoke] [--out bench/results]
 *
 * Every scenario prints a table and writes `<out>/<scenario>.json`; every run then draws
 * the charts of the result files in `<out>` (bench/charts.ts). A full run (all
 * scenarios, not --smoke) also writes `<out>/summary.json` and `<out>/SUMMARY.md`; a
 * summary value is null when it was not measured, never invented. --out defaults to
 * bench/results, or a temporary directory with --smoke. `--summary-only` rebuilds the
 * summary from the scenario files already in --out (scenarios run one by one). A summary written
 * to bench/results (the committed run) also rewrites the figures tables of README.md and
 * docs/DESIGN.md (bench/summary-docs.ts), so the docs show the committed run. Benchmarks measure;
 * they never fail on a missed target. Run them on a quiet machine.
 *
 * `npm run bench -- soak [--minutes N] [--smoke] [--out dir]` runs the soak alone
 * (bench/soak.ts; never part of the default run): its result file, its chart, and, in
 * bench/results, the summary rebuilt from the result files there (as --summary-only).
 * A full default run keeps the soak keys of the soak.json already in its --out.
 *
 * Scenarios run in both `--endpoints-api` modes side by side: a plain summary key is the
 * default (EndpointSlices) mode's figure, `<key>_endpoints_mode` the same figure in
 * `endpoints` mode, with the same target.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { load as loadYaml } from "js-yaml";
import { CHARTS, describeOutcomes, renderCharts } from "./charts.ts";
import { runColdConvergence } from "./cold-convergence.ts";
import { defaultConfigSummary, runDefaultConfig } from "./default-config.ts";
import { runExportModes } from "./export-modes.ts";
import { runFailover } from "./failover.ts";
import { runFailoverTiers } from "./failover-tiers.ts";
import { runGatewayFanout } from "./gateway-fanout.ts";
import { type BenchOptions, machineString, type ScenarioResult } from "./harness.ts";
import { runHeadless } from "./headless.ts";
import { runHostileBody } from "./hostile-body.ts";
import { runImage } from "./image.ts";
import { runLinks } from "./links.ts";
import { runMemory } from "./memory.ts";
import { runNoisyNeighbour } from "./noisy-neighbour.ts";
import { runProbeCpu } from "./probe-cpu.ts";
import { runRemoteRecovery } from "./remote-recovery.ts";
import { runRestart } from "./restart.ts";
import { runSharded } from "./sharded.ts";
import { runSoak, soakSummary } from "./soak.ts";
import { runSteadyLatency } from "./steady-latency.ts";
import { REPO_ROOT, refreshBenchDocs, SUMMARY_FILE } from "./summary-docs.ts";
import { SUMMARY_KEYS, TARGETS, verdict } from "./targets.ts";
import { runTraffic } from "./traffic.ts";

const SCENARIOS: Readonly<Record<string, (opts: BenchOptions) => Promise<ScenarioResult>>> = {
  "cold-convergence": runColdConvergence,
  restart: runRestart,
  "steady-latency": runSteadyLatency,
  "gateway-fanout": runGatewayFanout,
  memory: runMemory,
  "remote-recovery": runRemoteRecovery,
  failover: runFailover,
  "failover-tiers": runFailoverTiers,
  "probe-cpu": runProbeCpu,
  "default-config": runDefaultConfig,
  sharded: runSharded,
  "export-modes": runExportModes,
  links: runLinks,
  headless: runHeadless,
  image: runImage,
  "hostile-body": runHostileBody,
  traffic: runTraffic,
  "noisy-neighbour": runNoisyNeighbour,
};

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
      const target = TARGETS[key];
      const value = body[key];
      const bound = target ? `${target[0]} ${target[1]} ${target[2]}` : "—";
      return `| ${key} | ${value === null ? "null" : String(value)} | ${bound} | ${verdict(key, summary[key] ?? null)} |`;
    }),
    "",
    ...chartSection(out),
  ];
  writeFileSync(join(out, "SUMMARY.md"), lines.join("\n"));
}

/** SUMMARY.md's charts: those drawn in `out` (bench/charts.ts), each under its caption. */
function chartSection(out: string): string[] {
  const drawn = CHARTS.filter((chart) => existsSync(join(out, chart.file)));
  if (drawn.length === 0) return [];
  return [
    "## Charts",
    "",
    "Drawn from the JSON files next to this one (`node bench/charts.ts` re-renders them).",
    "",
    ...drawn.flatMap((chart) => [`### ${chart.caption}`, "", `![${chart.caption}](${chart.file})`, ""]),
  ];
}

/**
 * The summary keys from the per-scenario JSON files already in `out` (for scenarios run
 * one by one); a key is null when its file or value is missing. A scenario file holds
 * `runs[]`, one row per size and `endpointsApi` mode; a file from before the modes ran
 * side by side (a flat result, or rows without `endpointsApi`) was measured in
 * `endpoints` mode and fills only the `_endpoints_mode` keys.
 */
export function summaryFromResults(
  out: string,
  mcsReport: string = MCS_CONFORMANCE_REPORT,
): Record<string, number | null> {
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
    data === undefined ? [] : Array.isArray(data["runs"]) ? (data["runs"] as Record<string, unknown>[]) : [data];
  const full = (data: Record<string, unknown> | undefined) => (data?.["smoke"] === false ? data : undefined);
  const inMode = (mode: string) => (r: Record<string, unknown>) => (r["endpointsApi"] ?? "endpoints") === mode;
  const cold = rows(full(read("cold-convergence"))).filter(
    (r) => r["clusters"] === 50 && r["servicesPerCluster"] === 50,
  );
  const restart = rows(full(read("restart")));
  const steady = rows(full(read("steady-latency")));
  const p99 = (row: Record<string, unknown> | undefined) =>
    num((row?.["latencyMs"] as { perMirror?: { p99?: unknown } } | undefined)?.perMirror?.p99);
  const fanout = rows(full(read("gateway-fanout")));
  const memory = rows(full(read("memory")));
  const k200 = memory.filter((r) => r["mode"] === "thread" && r["clusters"] === 200);
  // Packed K = 1000 runs in the default mode only.
  const packed = memory
    .filter(inMode("endpointslices"))
    .find((r) => String(r["mode"]).startsWith("packed") && r["clusters"] === 1000);
  const default1000 = memory
    .filter(inMode("endpointslices"))
    .find((r) => r["mode"] === "default" && r["clusters"] === 1000);
  const seconds = (row: Record<string, unknown> | undefined) => {
    const ms = num(row?.["allSyncedMs"]);
    return ms === null ? null : Math.round(ms / 10) / 100;
  };
  const figures = (mode: string, suffix: string) => ({
    [`cold_converge_ratio${suffix}`]: num(cold.find(inMode(mode))?.["ratio"]),
    [`writes_per_mirror${suffix}`]: num(cold.find(inMode(mode))?.["writesPerMirror"]),
    [`rss_mb_per_cluster_thread_mode${suffix}`]: num(k200.find(inMode(mode))?.["perClusterRssMb"]),
    [`restart_writes${suffix}`]: num(restart.find(inMode(mode))?.["localWritesAfterRestart"]),
    [`steady_p99_ms${suffix}`]: p99(steady.find(inMode(mode))),
    [`steady_p99_ratio${suffix}`]: num(steady.find(inMode(mode))?.["p99Ratio"]),
    [`gateway_fanout_ratio${suffix}`]: num(fanout.find(inMode(mode))?.["ratio"]),
  });
  return {
    ...figures("endpointslices", ""),
    ...figures("endpoints", "_endpoints_mode"),
    rss_total_mb_packed_1000: num(packed?.["rssMb"]),
    rss_total_mb_1000_default: num(default1000?.["rssMb"]),
    sync_200_clusters_s_thread_mode: seconds(k200.find(inMode("endpointslices"))),
    // The default configuration's figures (sync_200_clusters_s in both modes, the 50-cluster RSS and restart CPU).
    ...defaultConfigSummary(rows(full(read("default-config")))),
    remote_recovery_s: num(full(read("remote-recovery"))?.["remoteRecoveryS"]),
    failover_s: num(full(read("failover"))?.["failoverS"]),
    tier_failover_s: num(full(read("failover-tiers"))?.["tierFailoverS"]),
    tier_switch_writes_per_service: num(full(read("failover-tiers"))?.["tierSwitchWritesPerService"]),
    tier_steady_writes: num(full(read("failover-tiers"))?.["tierSteadyWrites"]),
    probe_cpu_ratio: num(full(read("probe-cpu"))?.["ratio"]),
    ...shardedFigures(rows(full(read("sharded")))[0]),
    label_export_converge_ratio: num(full(read("export-modes"))?.["ratio"]),
    links_converge_ratio: num(full(read("links"))?.["convergeRatio"]),
    links_rss_ratio: num(full(read("links"))?.["rssRatio"]),
    headless_writes_per_host_mirror: num(
      (full(read("headless"))?.["convergence"] as Record<string, unknown> | undefined)?.["writesPerHostMirror"],
    ),
    headless_actor_heap_kb_per_service: num(full(read("headless"))?.["actorHeapKbPerHeadlessService"]),
    image_app_mb: num(full(read("image"))?.["imageAppMb"]),
    image_total_mb: num(full(read("image"))?.["imageTotalMb"]),
    container_ready_s: num(full(read("image"))?.["containerReadyS"]),
    hostile_body_rss_mb: num(full(read("hostile-body"))?.["hostileBodyRssMb"]),
    traffic_failover_s: num(full(read("traffic"))?.["trafficFailoverS"]),
    noisy_neighbour_p99_ratio: num(full(read("noisy-neighbour"))?.["p99Ratio"]),
    ...soakSummary(full(read("soak"))),
    ...mcsConformanceFigures(mcsReport),
  };
}

/** The committed MCS conformance report (SPEC §16), written by the suite in `npm test`. */
const MCS_CONFORMANCE_REPORT = resolve(import.meta.dirname, "..", "test", "conformance", "mcs", "report.yaml");

/** The report's counts: Required specs passed and in all. Read, never run. */
function mcsConformanceFigures(path: string): Record<string, number | null> {
  if (!existsSync(path)) return { mcs_conformance_required_passed: null, mcs_conformance_required_total: null };
  const report = loadYaml(readFileSync(path, "utf8")) as { Groups?: { Name: string; Tests: { Passed: boolean }[] }[] };
  const required = report.Groups?.find((g) => g.Name === "Required")?.Tests ?? [];
  return {
    mcs_conformance_required_passed: required.filter((t) => t.Passed).length,
    mcs_conformance_required_total: required.length,
  };
}

/** The sharded scenario's summary keys from its row (bench/sharded.ts). */
function shardedFigures(row: Record<string, unknown> | undefined): Record<string, number | null> {
  const ratio = row?.["ratio"];
  const splitRatio = row?.["splitRatio"];
  const movedMs = row?.["failoverMovedMs"];
  return {
    sharded_converge_ratio: typeof splitRatio === "number" ? splitRatio : null,
    sharded_converge_ratio_shared_cpus: typeof ratio === "number" ? ratio : null,
    shard_failover_s: typeof movedMs === "number" ? Math.round(movedMs / 10) / 100 : null,
  };
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    options: {
      scenario: { type: "string", multiple: true },
      smoke: { type: "boolean", default: false },
      out: { type: "string" },
      note: { type: "string" },
      "steady-rate": { type: "string" },
      "summary-only": { type: "boolean", default: false },
      "skip-packed": { type: "boolean", default: false },
      "memory-clusters": { type: "string" },
      "links-pairs": { type: "string" },
      minutes: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    process.stdout.write(
      `usage: node --expose-gc bench/run.ts [[--scenario] <${Object.keys(SCENARIOS).join("|")}>]... [--smoke] [--out dir] [--note text] [--steady-rate mirror-changes-per-s] [--skip-packed] [--memory-clusters K,K...] [--links-pairs 1-5] | --summary-only [--out dir] | soak [--minutes N] [--smoke] [--out dir]\n`,
    );
    return;
  }
  if (positionals[0] === "soak") {
    if (positionals.length > 1) throw new Error(`unknown argument ${JSON.stringify(positionals.slice(1).join(" "))}`);
    await soak(values.out, values.smoke, values.minutes, values.note);
    return;
  }
  // A scenario's name alone (`npm run bench -- failover-tiers`) is the same as --scenario.
  for (const name of positionals)
    if (!SCENARIOS[name])
      throw new Error(`unknown argument ${JSON.stringify(name)}; \`soak\` or a scenario: ${Object.keys(SCENARIOS)}`);
  if (values["summary-only"]) {
    const out = values.out ?? "bench/results";
    await drawCharts(out);
    writeSummary(out, summaryFromResults(out), values.note);
    process.stdout.write(`summary written to ${join(out, "summary.json")} and SUMMARY.md\n`);
    refreshDocs(out);
    return;
  }
  const named = [...(values.scenario ?? []), ...positionals];
  const selected = named.length > 0 ? named : Object.keys(SCENARIOS);
  for (const name of selected) {
    if (!SCENARIOS[name]) throw new Error(`unknown scenario ${JSON.stringify(name)}; one of ${Object.keys(SCENARIOS)}`);
  }
  if (!globalThis.gc) process.stderr.write("warning: run with --expose-gc for meaningful memory numbers\n");
  // A smoke run never overwrites the committed results.
  const out = values.out ?? (values.smoke ? join(tmpdir(), "fleet-mirror-bench-smoke") : "bench/results");
  const steadyRate = values["steady-rate"] === undefined ? undefined : Number(values["steady-rate"]);
  if (steadyRate !== undefined && !(steadyRate > 0)) throw new Error("--steady-rate: must be a number > 0");
  const linksPairs = values["links-pairs"] === undefined ? undefined : Number(values["links-pairs"]);
  if (linksPairs !== undefined && ![1, 2, 3, 4, 5].includes(linksPairs)) throw new Error("--links-pairs: 1 to 5");
  const memoryClusters = values["memory-clusters"]?.split(",").map(Number);
  if (memoryClusters?.some((k) => !Number.isInteger(k) || k < 1))
    throw new Error("--memory-clusters: a comma-separated list of whole numbers >= 1");
  const opts: BenchOptions = {
    smoke: values.smoke,
    out,
    steadyRate,
    skipPacked: values["skip-packed"],
    memoryClusters,
    linksPairs,
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
  await drawCharts(opts.out);
  const full =
    !opts.smoke && named.length === 0 && steadyRate === undefined && !memoryClusters && linksPairs === undefined;
  if (full) {
    // The soak is run on its own (`soak`): its keys come from the soak.json already here.
    const onDisk = summaryFromResults(opts.out);
    const soakKeys = Object.fromEntries(
      ["soak_rss_growth_pct", "soak_fd_growth", "soak_wrongful_deletes"].map((key) => [key, onDisk[key] ?? null]),
    );
    writeSummary(opts.out, { ...soakKeys, ...summary }, values.note);
    process.stdout.write(`summary written to ${join(opts.out, "summary.json")} and SUMMARY.md\n`);
    refreshDocs(opts.out);
  }
  if (failed.length > 0) {
    process.stderr.write(`failed scenarios: ${failed.join(", ")}\n`);
    process.exitCode = 1;
  }
}

/** `soak`: the soak alone; a full one written to bench/results rebuilds the summary there. */
async function soak(
  outArg: string | undefined,
  smoke: boolean,
  minutesArg: string | undefined,
  note: string | undefined,
) {
  const minutes = minutesArg === undefined ? undefined : Number(minutesArg);
  if (minutes !== undefined && !(minutes > 0)) throw new Error("--minutes: must be a number > 0");
  const out = outArg ?? (smoke ? join(tmpdir(), "fleet-mirror-bench-smoke") : "bench/results");
  mkdirSync(out, { recursive: true });
  process.stdout.write(`fleet-mirror soak on ${machineString()}${smoke ? " (smoke: tiny sizes)" : ""}\n`);
  await runSoak({ smoke, out, minutes });
  await drawCharts(out);
  if (!smoke && resolve(out) === resolve(REPO_ROOT, SUMMARY_FILE, "..")) {
    writeSummary(out, summaryFromResults(out), note);
    process.stdout.write(`summary rebuilt in ${join(out, "summary.json")} and SUMMARY.md\n`);
    refreshDocs(out);
  }
}

/**
 * The docs' figures tables from the summary just written, when it is the committed one
 * (bench/results): a summary elsewhere (--out) is not what the docs describe.
 */
function refreshDocs(out: string): void {
  if (resolve(out) !== resolve(REPO_ROOT, SUMMARY_FILE, "..")) {
    process.stdout.write(`docs not rewritten: they show ${SUMMARY_FILE}, not ${join(out, "summary.json")}\n`);
    return;
  }
  const written = refreshBenchDocs();
  process.stdout.write(
    written.length > 0 ? `figures rewritten in ${written.join(", ")}\n` : "figures in the docs already current\n",
  );
}

/** The charts of every result file in `out`; a chart that cannot be drawn fails the run, after the results are written. */
async function drawCharts(out: string): Promise<void> {
  try {
    process.stdout.write(`${describeOutcomes(await renderCharts(out))}\n`);
  } catch (error) {
    process.stderr.write(`charts FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  }
}

// Imported by the unit tests for summaryFromResults: run only as the entry point.
if (import.meta.main) await main();
