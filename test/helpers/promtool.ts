/**
 * Runs the pinned promtool (`build.sh promtool`, sandbox/binaries.ts) and names the metrics a
 * PromQL expression reads, for the monitoring tests: promtool is the judge of what parses,
 * lints and fires; the name list only says which series an expression selects.
 */
import { execFile } from "node:child_process";
import { before } from "node:test";
import { ensurePromtool } from "../../sandbox/binaries.ts";

/** promtool's first build: ≈ 4 min on 2 cores (module download apart); an hour leaves room for a slow machine and a slow proxy. */
const FIRST_BUILD_MS = 60 * 60_000;

/**
 * Builds promtool, if needed, in a `before` hook of the calling suite with room for a first
 * build (`npm test` builds it up front; this serves a file run on its own on a new machine),
 * so no test's own timeout is spent on it.
 */
export function promtoolBuiltFirst(): void {
  before(() => ensurePromtool(), { timeout: FIRST_BUILD_MS });
}

export interface PromtoolResult {
  readonly code: number;
  /** stdout and stderr together: promtool reports problems on either. */
  readonly output: string;
}

/** `promtool ...args`, with `stdin` written to its standard input; never rejects on a non-zero exit. */
export async function promtool(args: readonly string[], stdin?: string): Promise<PromtoolResult> {
  const binary = await ensurePromtool();
  return new Promise<PromtoolResult>((resolveRun, reject) => {
    const child = execFile(binary, [...args], { maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      if (error && code === -1) reject(error);
      else resolveRun({ code, output: `${stdout}${stderr}` });
    });
    child.stdin?.end(stdin ?? "");
  });
}

const KEYWORDS = new Set([
  "by",
  "without",
  "on",
  "ignoring",
  "group_left",
  "group_right",
  "bool",
  "and",
  "or",
  "unless",
  "offset",
  "inf",
  "nan",
]);

/**
 * The metric names a PromQL expression selects: identifiers that are neither functions,
 * aggregations, keywords, label names (inside `{}` or a `by (...)` list) nor durations.
 * Enough for the expressions of deploy/monitoring (no `__name__` matchers, no `@`).
 */
export function metricNames(expr: string): Set<string> {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // string literals
    .replace(/\{[^}]*\}/g, " ") // label matchers
    .replace(/\[[^\]]*\]/g, " ") // ranges and subqueries
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " "); // label lists
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const name = m[1] ?? "";
    if (m[2] || KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return names;
}
