/**
 * The benchmark figures in the docs, generated from the committed run so they cannot go
 * stale: README.md and docs/DESIGN.md each hold a table between marker lines
 *
 *   <!-- bench:begin short -->   (README: the figures with a target, both modes in one cell)
 *   <!-- bench:begin full -->    (DESIGN §7: every figure, its summary key, one column per mode)
 *   <!-- bench:end -->
 *
 * and this file rewrites what is between them from bench/results/summary.json and the
 * targets of bench/targets.ts. Everything outside the markers is prose, written by hand.
 *
 *   node bench/summary-docs.ts            rewrite the blocks
 *   node bench/summary-docs.ts --check    exit 1 (naming the files) if a block differs
 *
 * bench/run.ts calls `refreshBenchDocs` after a full run writes bench/results/summary.json;
 * test/unit/summary-docs.test.ts fails when a committed block differs from what this writes.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { SUMMARY_KEYS, type SummaryKey, TARGETS, verdict } from "./targets.ts";

/** The repository's root (this file is bench/summary-docs.ts). */
export const REPO_ROOT = join(import.meta.dirname, "..");

/** The files that hold marked blocks, relative to the root; each must hold at least one. */
export const DOC_FILES = ["README.md", "docs/DESIGN.md"] as const;

/** The summary the blocks are generated from, relative to the root. */
export const SUMMARY_FILE = "bench/results/summary.json";

export type BlockStyle = "short" | "full";

/** A summary.json as read: a figure per key, null where it was not measured. */
export type Summary = Readonly<Partial<Record<SummaryKey, number | null>>>;

/**
 * How the docs name each figure, in SUMMARY_KEYS order. `unit` follows the value
 * ("×" for a ratio). A key `<key>_endpoints_mode` is not a row: it is the `endpoints`
 * column of `<key>`'s row.
 */
const FIGURES: Readonly<Partial<Record<SummaryKey, { readonly label: string; readonly unit: string }>>> = {
  cold_converge_ratio: { label: "cold convergence, 50 clusters × 50 Services, against a bare client", unit: "×" },
  writes_per_mirror: { label: "local writes per created mirror", unit: "" },
  rss_mb_per_cluster_thread_mode: { label: "RSS per cluster, a thread per cluster (200 clusters)", unit: "MB" },
  rss_total_mb_packed_1000: { label: "RSS, 1 000 clusters packed on 8 threads (`--max-threads 8`)", unit: "MB" },
  rss_total_mb_1000_default: { label: "RSS, 1 000 clusters in the default placement", unit: "MB" },
  sync_200_clusters_s: { label: "200 clusters synced, default placement", unit: "s" },
  sync_200_clusters_s_thread_mode: { label: "200 clusters synced, a thread per cluster", unit: "s" },
  rss_mb_50_clusters_default: { label: "peak RSS, 50 clusters × 50 Services, default placement", unit: "MB" },
  restart_cpu_s_50_clusters_default: {
    label: "restart CPU until synced and idle, 50 × 50, default placement",
    unit: "CPU-s",
  },
  restart_cpu_ratio: {
    label: "… that restart CPU against a bare Node client listing and comparing the same",
    unit: "×",
  },
  idle_cpu_pct: { label: "idle CPU, 50 × 50 converged, nothing changing, probes answered", unit: "% of a core" },
  restart_writes: { label: "writes after a restart over 2 500 intact mirrors", unit: "" },
  steady_p99_ms: { label: "change latency p99, 50 mirror changes/s over 50 clusters", unit: "ms" },
  steady_p99_ratio: { label: "… that p99 against a bare watch-then-write client's", unit: "×" },
  gateway_fanout_ratio: { label: "a gateway change rewriting 2 000 mirrors, against a bare client", unit: "×" },
  remote_recovery_s: { label: "a remote API server back after 20 s down → a new Service mirrored", unit: "s" },
  failover_s: { label: "a gateway stops answering → its endpoints not ready everywhere (200 gateways)", unit: "s" },
  tier_failover_s: {
    label: "priority tiers: the serving tier's last gateway dies → 200 fleet-wide Services serve the next tier",
    unit: "s",
  },
  tier_switch_writes_per_service: { label: "… writes per fleet-wide Service for that switch", unit: "writes" },
  tier_steady_writes: { label: "… writes over 60 s with nothing changing", unit: "" },
  probe_cpu_ratio: { label: "CPU of probing 1 000 gateways every 3 s, against a bare Node HTTP client", unit: "×" },
  sharded_converge_ratio: { label: "3 replicas against 1, cold convergence, control plane on its own CPU", unit: "×" },
  sharded_converge_ratio_shared_cpus: { label: "… the same with every process on both CPUs", unit: "×" },
  shard_failover_s: { label: "kill -9 of 1 of 3 replicas → its clusters' new Service mirrored", unit: "s" },
  label_export_converge_ratio: { label: "cold convergence exported by label against by annotation", unit: "×" },
  links_converge_ratio: {
    label: "100 clusters × 20 Services registered by Links: cold convergence against annotated Secrets",
    unit: "×",
  },
  links_rss_ratio: { label: "… RSS of the controller with Links against with annotated Secrets", unit: "×" },
  headless_writes_per_host_mirror: { label: "writes per per-host mirror of a headless Service", unit: "" },
  headless_actor_heap_kb_per_service: {
    label: "remote actor heap per watched headless Service of 50 hosts",
    unit: "KB",
  },
  image_app_mb: { label: "the image's own layers, above its node:24-bookworm-slim base", unit: "MB" },
  image_total_mb: { label: "the whole image, base included", unit: "MB" },
  container_ready_s: { label: "a new Pod of the chart from the image, docker run → /readyz 200", unit: "s" },
  hostile_body_rss_mb: { label: "RSS growth while one remote streams 1.5 GiB lists (64 MiB body cap)", unit: "MB" },
  traffic_failover_s: {
    label: "real traffic: a gateway dies → every request via the fleet-wide name answered (kube-proxy, CoreDNS)",
    unit: "s",
  },
  noisy_neighbour_p99_ratio: {
    label: "quiet clusters' change p99 while one cluster churns 200 Services/s, against without it",
    unit: "×",
  },
  soak_rss_growth_pct: { label: "soak, 30 min of changes and faults: RSS growth from 10 min to the end", unit: "%" },
  soak_fd_growth: { label: "soak: open file descriptors, growth from 10 min to the end", unit: "" },
  soak_wrongful_deletes: { label: "soak: mirrors of Services exported throughout that were re-created", unit: "" },
  mcs_conformance_required_passed: { label: "MCS conformance: Required specs passed (restated suite)", unit: "specs" },
  mcs_conformance_required_total: {
    label: "MCS conformance: Required specs in all (one needs a container runtime)",
    unit: "specs",
  },
};

const ENDPOINTS_SUFFIX = "_endpoints_mode";

/** The `endpoints` mode's key of a row, when the summary has one. */
function endpointsKeyOf(key: SummaryKey): SummaryKey | undefined {
  const other = `${key}${ENDPOINTS_SUFFIX}`;
  return SUMMARY_KEYS.find((k) => k === other);
}

/** The row keys: every summary key but the `endpoints` columns, in SUMMARY_KEYS order. */
function rowKeys(): SummaryKey[] {
  return SUMMARY_KEYS.filter((key) => !key.endsWith(ENDPOINTS_SUFFIX));
}

function figureOf(key: SummaryKey): { readonly label: string; readonly unit: string } {
  const figure = FIGURES[key];
  // A key added to SUMMARY_KEYS must be named here before the docs can show it.
  if (!figure) throw new Error(`bench/summary-docs.ts: no label for summary key ${key}`);
  return figure;
}

function valueCell(value: number | null | undefined, unit: string): string {
  if (value === null || value === undefined) return "not measured";
  return unit === "" ? String(value) : `${value} ${unit}`;
}

function targetCell(key: SummaryKey): string {
  const target = TARGETS[key];
  if (!target) return "reported";
  const [op, bound, unit] = target;
  return `${op === ">=" ? "≥" : op === "<=" ? "≤" : "="} ${bound} ${unit}`;
}

/** "met", or which mode missed (bold), or "—" for a reported figure. */
function verdictCell(key: SummaryKey, summary: Summary): string {
  const endpointsKey = endpointsKeyOf(key);
  const verdicts = [verdict(key, summary[key] ?? null)];
  if (endpointsKey) verdicts.push(verdict(endpointsKey, summary[endpointsKey] ?? null));
  if (verdicts.every((v) => v === "—")) return "—";
  if (verdicts.every((v) => v === "met")) return "met";
  if (verdicts.some((v) => v === "not measured")) return "not measured";
  const modes = ["`endpointslices`", "`endpoints`"].filter((_, i) => verdicts[i] === "MISSED");
  return endpointsKey ? `**missed** (${modes.join(", ")})` : "**missed**";
}

/** The table of one block, without its marker lines. */
export function renderBlock(style: BlockStyle, summary: Summary): string {
  const lines: string[] = [];
  if (style === "short") {
    lines.push("| figure | target | measured (`endpointslices` / `endpoints`) | |", "|---|---|---|---|");
    for (const key of rowKeys()) {
      if (!TARGETS[key]) continue;
      const { label, unit } = figureOf(key);
      const endpointsKey = endpointsKeyOf(key);
      const measured = endpointsKey
        ? `${valueCell(summary[key], unit)} / ${valueCell(summary[endpointsKey], unit)}`
        : valueCell(summary[key], unit);
      lines.push(`| ${label} | ${targetCell(key)} | ${measured} | ${verdictCell(key, summary)} |`);
    }
  } else {
    lines.push("| figure | summary key | target | `endpointslices` | `endpoints` | |", "|---|---|---|---|---|---|");
    for (const key of rowKeys()) {
      const { label, unit } = figureOf(key);
      const endpointsKey = endpointsKeyOf(key);
      const endpoints = endpointsKey ? valueCell(summary[endpointsKey], unit) : "—";
      lines.push(
        `| ${label} | \`${key}\` | ${targetCell(key)} | ${valueCell(summary[key], unit)} | ${endpoints} | ${verdictCell(key, summary)} |`,
      );
    }
  }
  return lines.join("\n");
}

const BEGIN = /^<!-- bench:begin (short|full) -->$/;
const END = "<!-- bench:end -->";

/**
 * `text` with every marked block rewritten from `summary`. Throws on a begin marker
 * without its end, an unknown style, or a text with no block (`name` says which file).
 */
export function rewriteBlocks(text: string, summary: Summary, name: string): string {
  const lines = text.split("\n");
  const out: string[] = [];
  let blocks = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    out.push(line);
    const begin = BEGIN.exec(line);
    if (!begin) {
      if (line.startsWith("<!-- bench:")) throw new Error(`${name}:${i + 1}: unknown bench marker ${line}`);
      continue;
    }
    const end = lines.indexOf(END, i + 1);
    if (end < 0) throw new Error(`${name}:${i + 1}: ${line} without ${END}`);
    out.push(renderBlock(begin[1] as BlockStyle, summary), END);
    i = end;
    blocks++;
  }
  if (blocks === 0) throw new Error(`${name}: no <!-- bench:begin … --> block`);
  return out.join("\n");
}

/** summary.json as the docs read it: the figures only (machine and date are SUMMARY.md's). */
export function readSummary(file: string): Summary {
  const data: unknown = JSON.parse(readFileSync(file, "utf8"));
  if (typeof data !== "object" || data === null || Array.isArray(data)) throw new Error(`${file}: not an object`);
  const record = data as Record<string, unknown>;
  const summary: Partial<Record<SummaryKey, number | null>> = {};
  for (const key of SUMMARY_KEYS) {
    const value = record[key];
    summary[key] = typeof value === "number" ? value : null;
  }
  return summary;
}

/** Each doc file (relative path) with its text as it should be: the committed summary's blocks. */
export function expectedDocs(root = REPO_ROOT): Map<string, { current: string; expected: string }> {
  const summary = readSummary(join(root, SUMMARY_FILE));
  const docs = new Map<string, { current: string; expected: string }>();
  for (const file of DOC_FILES) {
    const current = readFileSync(join(root, file), "utf8");
    docs.set(file, { current, expected: rewriteBlocks(current, summary, file) });
  }
  return docs;
}

/** Rewrites the blocks that differ; returns the files written. */
export function refreshBenchDocs(root = REPO_ROOT): string[] {
  const written: string[] = [];
  for (const [file, { current, expected }] of expectedDocs(root)) {
    if (current === expected) continue;
    writeFileSync(join(root, file), expected);
    written.push(file);
  }
  return written;
}

function main(): void {
  const { values } = parseArgs({ options: { check: { type: "boolean", default: false } }, strict: true });
  if (values.check) {
    const stale = [...expectedDocs()].filter(([, doc]) => doc.current !== doc.expected).map(([file]) => file);
    if (stale.length > 0) {
      process.stderr.write(`bench figures differ from ${SUMMARY_FILE} in: ${stale.join(", ")}\n`);
      process.stderr.write("run `node bench/summary-docs.ts` to rewrite them\n");
      process.exitCode = 1;
    }
    return;
  }
  const written = refreshBenchDocs();
  process.stdout.write(
    written.length > 0 ? `rewrote the bench figures in ${written.join(", ")}\n` : "bench figures up to date\n",
  );
}

// Imported by bench/run.ts and the unit test: run only as the entry point.
if (import.meta.main) main();
