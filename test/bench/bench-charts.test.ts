/**
 * The benchmark charts (bench/charts.ts): each is rendered from a small results directory
 * and judged by resvg, a strict SVG parser and renderer (malformed XML throws), then
 * checked for its series, axis and panel titles. A result file from before a series was
 * recorded still gives a chart, with a note saying what it lacks; a missing or empty one
 * gives none, with the reason, and removes a stale SVG.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Resvg } from "@resvg/resvg-js";
import { CHARTS, type ChartOutcome, renderCharts } from "../../bench/charts.ts";

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const machine = { cpus: 2, memGb: 24, node: "v24.21.0", kernel: "6.0" };
const meta = (scenario: string) => ({ scenario, smoke: false, machine, date: "2026-12-04T18:00:00.000Z" });

/** One mode's cold-convergence row; `curves` adds the recorded mirrors-over-time. */
function coldRow(endpointsApi: string, curves: boolean) {
  return {
    endpointsApi,
    clusters: 5,
    servicesPerCluster: 4,
    mirrors: 20,
    convergeMs: 3000,
    bareMs: 3600,
    ...(curves
      ? {
          mirrorsOverTime: {
            fleetMirror: { ms: [0, 1000, 2000, 3000], done: [0, 5, 12, 20] },
            bare: { ms: [0, 1200, 3600], done: [0, 8, 20] },
          },
        }
      : {}),
  };
}

function steadyRow(endpointsApi: string, distribution: boolean) {
  const stats = (p50: number) => ({ perMirror: { n: 100, p50, p95: p50 * 2, p99: p50 * 3, max: p50 * 4 } });
  return {
    endpointsApi,
    clusters: 50,
    mirrorChangesPerS: 50,
    durationS: 60,
    latencyMs: stats(70),
    bareLatencyMs: stats(50),
    ...(distribution
      ? {
          latencyDistributionMs: {
            percentiles: [0, 50, 90, 99, 100],
            fleetMirror: [10, 70, 150, 210, 280],
            bare: [8, 50, 120, 150, 200],
          },
        }
      : {}),
  };
}

function failoverPhase(mode: string, answered: boolean) {
  return {
    mode,
    ...(answered ? { answeredAgainAfterS: 9.5 } : {}),
    perGateway: [
      { cluster: "east", gateway: "gw-0", failoverS: 7.1, recoveryS: 1.2 },
      { cluster: "west", gateway: "gw-0", failoverS: 8.8, recoveryS: 3.3 },
    ],
  };
}

/** A results directory: `latest` gives every series recorded today, else the older file shapes. */
function resultsDir(latest: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), "bench-charts-"));
  dirs.push(dir);
  const files: Record<string, unknown> = {
    "cold-convergence": {
      ...meta("cold-convergence"),
      runs: [coldRow("endpointslices", latest), coldRow("endpoints", latest)],
    },
    memory: {
      ...meta("memory"),
      runs: [
        {
          mode: "thread",
          endpointsApi: "endpointslices",
          clusters: 50,
          threads: 50,
          servicesPerCluster: 10,
          rssMb: 528,
        },
        {
          mode: "thread",
          endpointsApi: "endpointslices",
          clusters: 200,
          threads: 200,
          servicesPerCluster: 10,
          rssMb: 1778,
        },
        { mode: "thread", endpointsApi: "endpoints", clusters: 200, threads: 200, servicesPerCluster: 10, rssMb: 9999 },
        {
          mode: "packed(8)",
          endpointsApi: "endpointslices",
          clusters: 1000,
          threads: 8,
          servicesPerCluster: 10,
          rssMb: 504,
        },
      ],
    },
    "steady-latency": {
      ...meta("steady-latency"),
      runs: [steadyRow("endpointslices", latest), steadyRow("endpoints", latest)],
    },
    failover: {
      ...meta("failover"),
      gateways: 200,
      failing: 2,
      periodS: 3,
      targetS: 10,
      healthyTurnedNotReady: 0,
      phases: [failoverPhase("stopped", latest), failoverPhase("hang", latest)],
    },
    soak: {
      ...meta("soak"),
      minutes: 2,
      clusters: 10,
      samples: [0, 0.5, 1, 1.5, 2].map((minute, i) => ({
        minute,
        rssMb: 300 + i,
        heapMb: 80 + i,
        fds: 120,
        threads: 30,
        queueDepth: i % 2,
        writesPerS: 10 + i,
      })),
      faultLog: [{ atS: 60, kind: "watch-cut", target: "s1", ok: true }],
    },
  };
  for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, `${name}.json`), JSON.stringify(body));
  return dir;
}

/** The SVG of `file` in `dir`, after resvg has parsed and rendered it to a non-empty picture. */
function judgedSvg(dir: string, file: string): string {
  const svg = readFileSync(join(dir, file), "utf8");
  const picture = new Resvg(svg).render();
  assert.ok(picture.width > 300 && picture.height > 200, `${file}: rendered ${picture.width} × ${picture.height}`);
  return svg;
}

/** Whether the SVG shows `text` as a text element (or one line of one). */
const shows = (svg: string, text: string): boolean => svg.includes(`>${text}</`);

function assertShows(svg: string, file: string, texts: readonly string[]): void {
  for (const text of texts) assert.ok(shows(svg, text), `${file} shows ${JSON.stringify(text)}`);
}

const written = (outcomes: readonly ChartOutcome[]) => outcomes.filter((o) => "written" in o).map((o) => o.file);

describe("bench charts", () => {
  it("renders every chart from the latest result shapes, with its series, axes and panels", async () => {
    const dir = resultsDir(true);
    assert.deepEqual(
      written(await renderCharts(dir)),
      CHARTS.map((c) => c.file),
    );
    const cold = judgedSvg(dir, "cold-convergence.svg");
    assertShows(cold, "cold-convergence.svg", [
      "seconds since start",
      "mirrors right (%)",
      "fleet-mirror",
      "bare client",
      "EndpointSlices mode (default)",
      "Endpoints mode",
      "5 clusters × 4 Services (20 mirrors)",
    ]);
    assert.ok(!cold.includes("no convergence curves"), "a file with curves draws them, with no fallback note");
    const memory = judgedSvg(dir, "memory.svg");
    assertShows(memory, "memory.svg", [
      "clusters (log scale)",
      "process RSS (MB)",
      "a thread per cluster (--max-threads 0)",
      "packed on 8 threads (--max-threads 8)",
      "1778",
    ]);
    assert.ok(!shows(memory, "9999"), "memory draws the default EndpointSlices mode only");
    const latency = judgedSvg(dir, "steady-latency.svg");
    assertShows(latency, "steady-latency.svg", [
      "latency (ms)",
      "mirror changes visible (%)",
      "fleet-mirror",
      "bare client",
      "p99 target 250 ms",
      "EndpointSlices mode (default)",
      "Endpoints mode",
    ]);
    assert.ok(!latency.includes("holds only p50"), "a full distribution draws no fallback note");
    const failover = judgedSvg(dir, "failover.svg");
    assertShows(failover, "failover.svg", [
      "seconds since the fault",
      "failing gateways ready (of 2)",
      "gateways refuse connections",
      "gateways accept and never answer",
      "answering again",
      "target 10 s",
      "fault",
    ]);
    assertShows(judgedSvg(dir, "soak.svg"), "soak.svg", ["minutes", "RSS, MB", "open fds", "queue, keys", "writes/s"]);
  });

  it("draws older result files from the figures they hold, and says what they lack", async () => {
    const dir = resultsDir(false);
    assert.deepEqual(
      written(await renderCharts(dir)),
      CHARTS.map((c) => c.file),
    );
    const cold = judgedSvg(dir, "cold-convergence.svg");
    assertShows(cold, "cold-convergence.svg", ["seconds to converge (less is better)", "fleet-mirror", "bare client"]);
    assert.ok(cold.includes("This result file has no convergence curves"));
    assert.ok(judgedSvg(dir, "steady-latency.svg").includes("This result file holds only p50, p95, p99 and max"));
    assert.ok(judgedSvg(dir, "failover.svg").includes("This result file does not record when they answered again"));
  });

  it("skips a chart whose result file is missing or holds nothing drawable, and removes its stale SVG", async () => {
    const dir = resultsDir(true);
    await renderCharts(dir);
    rmSync(join(dir, "memory.json"));
    writeFileSync(
      join(dir, "failover.json"),
      JSON.stringify({ ...meta("failover"), failoverS: null, note: "not measured: no route" }),
    );
    const outcomes = await renderCharts(dir);
    assert.deepEqual(
      outcomes.filter((o) => "skipped" in o),
      [
        { file: "memory.svg", skipped: "no memory.json" },
        { file: "failover.svg", skipped: "not measured: no route" },
      ],
    );
    assert.equal(existsSync(join(dir, "memory.svg")), false);
    assert.equal(existsSync(join(dir, "failover.svg")), false);
    assert.ok(existsSync(join(dir, "cold-convergence.svg")));
  });

  it("marks a smoke run's charts as not for publishing", async () => {
    const dir = resultsDir(true);
    const file = join(dir, "memory.json");
    writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, "utf8")), smoke: true }));
    await renderCharts(dir);
    assert.ok(judgedSvg(dir, "memory.svg").includes("SMOKE RUN: tiny sizes"));
  });
});
