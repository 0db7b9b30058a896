/**
 * The benchmark figures in README.md and docs/DESIGN.md (bench/summary-docs.ts): the
 * committed blocks must be exactly what the generator writes from
 * bench/results/summary.json, so a new committed run, or a target changed in
 * bench/targets.ts, cannot leave the docs showing older figures.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { expectedDocs, renderBlock, rewriteBlocks, type Summary } from "../../bench/summary-docs.ts";
import { SUMMARY_KEYS } from "../../bench/targets.ts";

/** The first lines where `current` and `expected` differ, each as "file:line: is … / want …". */
function differingLines(file: string, current: string, expected: string): string[] {
  const is = current.split("\n");
  const want = expected.split("\n");
  const lines: string[] = [];
  for (let i = 0; i < Math.max(is.length, want.length) && lines.length < 5; i++) {
    if (is[i] !== want[i]) lines.push(`${file}:${i + 1}: is ${is[i] ?? "(no line)"} / want ${want[i] ?? "(no line)"}`);
  }
  return lines;
}

describe("the bench figures in the docs", () => {
  it("are those of bench/results/summary.json (else run `node bench/summary-docs.ts`)", () => {
    const stale = [...expectedDocs()].flatMap(([file, { current, expected }]) =>
      differingLines(file, current, expected),
    );
    assert.deepEqual(stale, [], `bench figures differ from bench/results/summary.json:\n${stale.join("\n")}`);
  });
});

describe("DESIGN's Measurements section", () => {
  it("stays a page a reader takes in (at most 150 lines): the history goes to bench/HISTORY.md", () => {
    const design = readFileSync(new URL("../../docs/DESIGN.md", import.meta.url), "utf8");
    const start = design.indexOf("\n## 7. Measurements");
    assert.ok(start >= 0, "DESIGN.md has a '## 7. Measurements' section");
    const next = design.indexOf("\n## ", start + 1);
    const lines = design
      .slice(start + 1, next < 0 ? undefined : next)
      .trimEnd()
      .split("\n").length;
    assert.ok(lines <= 150, `§7 is ${lines} lines`);
  });
});

describe("renderBlock", () => {
  const summary: Summary = {
    cold_converge_ratio: 0.9,
    cold_converge_ratio_endpoints_mode: 0.7,
    restart_writes: 0,
    restart_writes_endpoints_mode: 0,
    rss_total_mb_1000_default: 300,
  };

  it("puts both modes of a figure in one row and names the mode that missed", () => {
    const row = renderBlock("short", summary)
      .split("\n")
      .find((line) => line.startsWith("| cold convergence, 50"));
    assert.equal(
      row,
      "| cold convergence, 50 clusters × 50 Services, against a bare client | ≥ 0.8 × bare client | 0.9 × / 0.7 × | **missed** (`endpoints`) |",
    );
    assert.match(
      renderBlock("short", summary),
      /\| writes after a restart over 2 500 intact mirrors \| = 0 writes \| 0 \/ 0 \| met \|/,
    );
  });

  it("says 'not measured' for a figure the summary lacks, never a number", () => {
    assert.match(
      renderBlock("short", summary),
      /\| RSS, 1 000 clusters packed on 8 threads .* \| not measured \| not measured \|/,
    );
  });

  it("shows figures without a target only in the full table, as reported", () => {
    assert.doesNotMatch(renderBlock("short", summary), /default placement \| reported/);
    assert.match(
      renderBlock("full", summary),
      /\| RSS, 1 000 clusters in the default placement \| `rss_total_mb_1000_default` \| reported \| 300 MB \| — \| — \|/,
    );
  });

  it("has a row for every summary key but the endpoints-mode columns", () => {
    const rows = renderBlock("full", {}).split("\n").slice(2);
    const keys = rows.map((row) => /`([a-z0-9_]+)`/.exec(row)?.[1]);
    assert.deepEqual(
      keys,
      SUMMARY_KEYS.filter((key) => !key.endsWith("_endpoints_mode")),
    );
  });
});

describe("rewriteBlocks", () => {
  it("replaces what is between the markers and leaves the rest", () => {
    const text = "before\n<!-- bench:begin short -->\nold table\n<!-- bench:end -->\nafter\n";
    const out = rewriteBlocks(text, {}, "doc.md");
    assert.ok(out.startsWith("before\n<!-- bench:begin short -->\n| figure | target |"));
    assert.ok(out.endsWith("\n<!-- bench:end -->\nafter\n"));
    assert.doesNotMatch(out, /old table/);
    assert.equal(rewriteBlocks(out, {}, "doc.md"), out);
  });

  it("refuses a block without its end, an unknown marker, and a file without a block", () => {
    assert.throws(
      () => rewriteBlocks("<!-- bench:begin full -->\n", {}, "a.md"),
      /a\.md:1: .* without <!-- bench:end -->/,
    );
    assert.throws(
      () => rewriteBlocks("<!-- bench:begin wide -->\n<!-- bench:end -->\n", {}, "b.md"),
      /b\.md:1: unknown/,
    );
    assert.throws(() => rewriteBlocks("no block\n", {}, "c.md"), /c\.md: no/);
  });
});
