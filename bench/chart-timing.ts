/**
 * The two timing charts, as Vega-Lite specs from a result file (pure, as chart-specs.ts):
 * the change-latency distribution of steady-latency and the failover timeline.
 */
import {
  BARE,
  type ChartPlan,
  CLIENT_COLOR,
  CONFIG,
  FLEET_MIRROR,
  type Json,
  MODE_ORDER,
  modeLabel,
  num,
  numbers,
  obj,
  objects,
  runsOf,
  title,
} from "./chart-specs.ts";

/** The p99 bound of the steady-latency target (ms), drawn as a rule. */
const P99_TARGET_MS = 250;
const LATENCY_HEIGHT = 240;

interface LatencyPoint {
  readonly mode: string;
  readonly client: string;
  readonly ms: number;
  readonly pct: number;
}

/**
 * One client's per-mirror latency as (percentile, ms) points: the recorded distribution,
 * or else the p50/p95/p99/max that every steady-latency file holds (`partial`).
 */
function latencyPoints(run: Json, client: "fleetMirror" | "bare"): { points: LatencyPoint[]; partial: boolean } {
  const base = { mode: modeLabel(run), client: client === "bare" ? BARE : FLEET_MIRROR };
  const recorded = obj(run["latencyDistributionMs"]);
  const percentiles = numbers(recorded?.["percentiles"]);
  const ms = numbers(recorded?.[client]);
  if (percentiles && ms && ms.length === percentiles.length && ms.length > 0)
    return { points: ms.map((v, i) => ({ ...base, ms: v, pct: percentiles[i] ?? 0 })), partial: false };
  const stats = obj(obj(run[client === "bare" ? "bareLatencyMs" : "latencyMs"])?.["perMirror"]);
  const points = (
    [
      ["p50", 50],
      ["p95", 95],
      ["p99", 99],
      ["max", 100],
    ] as const
  ).flatMap(([key, pct]) => {
    const v = num(stats?.[key]);
    return v === null ? [] : [{ ...base, ms: v, pct }];
  });
  return { points, partial: true };
}

/** Change latency: remote change → mirror visible locally, per mirror, fleet-mirror against the bare client. */
export function latencyChart(data: Json): ChartPlan {
  const runs = runsOf(data);
  const drawn = runs.flatMap((r) => [latencyPoints(r, "fleetMirror"), latencyPoints(r, "bare")]);
  const values = drawn.flatMap((d) => d.points);
  if (values.length === 0) return { skipped: "no run with a per-mirror latency" };
  const first = runs[0] ?? {};
  const load = `${num(first["mirrorChangesPerS"]) ?? "?"} mirror changes/s over ${num(first["clusters"]) ?? "?"} clusters for ${num(first["durationS"]) ?? "?"} s`;
  const lines = [
    `Remote change sent → the mirror Service's change seen by a local watch, per mirror; ${load}.`,
    "The bare client (a watch per remote, one write per event at once) under the same load, fleet-mirror stopped.",
  ];
  if (drawn.some((d) => d.partial))
    lines.push("This result file holds only p50, p95, p99 and max (the whole distribution from the next full run on).");
  return {
    spec: {
      config: CONFIG,
      title: title("Change latency: share of mirror changes visible within a time", data, lines),
      data: { values },
      facet: { column: { field: "mode", type: "nominal", title: null, sort: MODE_ORDER } },
      spec: {
        width: 330,
        height: LATENCY_HEIGHT,
        layer: [
          {
            mark: { type: "line", strokeWidth: 2, point: { size: 30, filled: true } },
            encoding: {
              x: { field: "ms", type: "quantitative", title: "latency (ms)" },
              y: { field: "pct", type: "quantitative", title: "mirror changes visible (%)", scale: { zero: false } },
              color: { field: "client", type: "nominal", ...CLIENT_COLOR },
              order: { field: "pct", type: "quantitative" },
            },
          },
          // One row per panel (not one per point), so the rule and its label are drawn once.
          {
            transform: [{ aggregate: [{ op: "count", as: "points" }] }],
            mark: { type: "rule", color: "#c00", strokeDash: [4, 3] },
            encoding: { x: { datum: P99_TARGET_MS } },
          },
          {
            transform: [{ aggregate: [{ op: "count", as: "points" }] }],
            mark: { type: "text", color: "#c00", align: "left", baseline: "bottom", dx: 4, dy: -4, fontSize: 11 },
            encoding: {
              x: { datum: P99_TARGET_MS },
              y: { value: LATENCY_HEIGHT },
              text: { value: `p99 target ${P99_TARGET_MS} ms` },
            },
          },
        ],
      },
    },
  };
}

const FAILOVER_HEIGHT = 150;
const FAULT_LABEL: Readonly<Record<string, string>> = {
  stopped: "gateways refuse connections",
  hang: "gateways accept and never answer",
};

/**
 * One failover phase as a step curve of its failing gateways still ready everywhere,
 * from one second before the fault: each failover takes one away, each recovery (from
 * the instant they answered again) brings one back. The answer instant is the recorded
 * one, or else the last failover: the scenario lets them answer right after it.
 */
function phaseTimeline(phase: Json): { rows: Json[]; answerRecorded: boolean } {
  const name = FAULT_LABEL[String(phase["mode"])] ?? String(phase["mode"]);
  const gateways = objects(phase["perGateway"]);
  const failovers = gateways.flatMap((g) => num(g["failoverS"]) ?? []).sort((a, b) => a - b);
  const recorded = num(phase["answeredAgainAfterS"]);
  const answer = recorded ?? Math.max(0, ...failovers);
  const recoveries = gateways.flatMap((g) => {
    const r = num(g["recoveryS"]);
    return r === null ? [] : [answer + r];
  });
  recoveries.sort((a, b) => a - b);
  let ready = gateways.length;
  const step = (t: number) => ({ phase: name, kind: "ready", t, ready });
  const rows: Json[] = [step(-1), step(0)];
  for (const t of failovers) {
    ready -= 1;
    rows.push(step(t));
  }
  for (const t of recoveries) {
    ready += 1;
    rows.push(step(t));
  }
  rows.push(step(Math.max(answer, ...recoveries) + 1));
  rows.push({ phase: name, kind: "fault", t: 0, label: "fault" });
  rows.push({ phase: name, kind: "answer", t: answer, label: "answering again" });
  return { rows, answerRecorded: recorded !== null };
}

/** Failover: failing gateways still ready everywhere over time, one panel per kind of fault. */
export function failoverChart(data: Json): ChartPlan {
  const timelines = objects(data["phases"])
    .map(phaseTimeline)
    .filter((t) => t.rows.length > 4);
  if (timelines.length === 0)
    return { skipped: typeof data["note"] === "string" ? data["note"] : "no phase with per-gateway times" };
  // The target (failover_s) is the refused connections'; a hung gateway's probe first waits out its timeout.
  const target = num(data["targetS"]);
  const targetRows =
    target === null ? [] : [{ phase: FAULT_LABEL["stopped"], kind: "target", t: target, label: `target ${target} s` }];
  const values = [...timelines.flatMap((t) => t.rows), ...targetRows];
  const failing = num(data["failing"]) ?? "?";
  const period = num(data["periodS"]) ?? "?";
  const lines = [
    `${failing} of ${num(data["gateways"]) ?? "?"} probed gateways fail at once (probe period ${period} s), and answer again once all have failed over.`,
    "A local watch on the EndpointSlices sees each one's endpoints not ready, then ready, in every slice holding them.",
    "Target for refused connections: 3 × period + 1 s; a hung gateway's probe first waits out its timeout (one period).",
    `Endpoints of healthy gateways turned not ready meanwhile: ${num(data["healthyTurnedNotReady"]) ?? "not recorded"}.`,
  ];
  if (timelines.some((t) => !t.answerRecorded))
    lines.push(
      "This result file does not record when they answered again: drawn at the last failover, when the scenario lets them answer.",
    );
  const rule = (kind: string, color: string, dash: number[], at: "top" | "bottom") => ({
    transform: [{ filter: `datum.kind === '${kind}'` }],
    layer: [
      {
        mark: { type: "rule" as const, color, strokeDash: dash },
        encoding: { x: { field: "t", type: "quantitative" as const } },
      },
      {
        mark: {
          type: "text" as const,
          color,
          align: "left" as const,
          baseline: at,
          dx: 3,
          dy: at === "top" ? 3 : -3,
          fontSize: 11,
        },
        encoding: {
          x: { field: "t", type: "quantitative" as const },
          y: { value: at === "top" ? 0 : FAILOVER_HEIGHT },
          text: { field: "label", type: "nominal" as const },
        },
      },
    ],
  });
  return {
    spec: {
      config: CONFIG,
      title: title("Gateway failover timeline", data, lines),
      data: { values },
      facet: {
        row: {
          field: "phase",
          type: "nominal",
          title: null,
          sort: Object.values(FAULT_LABEL),
          header: { labelAngle: 0, labelAlign: "left", labelAnchor: "start", labelOrient: "top" },
        },
      },
      spec: {
        width: 720,
        height: FAILOVER_HEIGHT,
        layer: [
          rule("fault", "#333", [], "top"),
          rule("answer", "#2a7", [6, 3], "top"),
          rule("target", "#c00", [4, 3], "bottom"),
          {
            transform: [{ filter: "datum.kind === 'ready'" }],
            mark: { type: "line", interpolate: "step-after", strokeWidth: 2, color: "#4c78a8" },
            encoding: {
              x: {
                field: "t",
                type: "quantitative",
                title: "seconds since the fault",
                scale: { domainMin: -1, nice: false },
              },
              y: {
                field: "ready",
                type: "quantitative",
                title: `failing gateways ready (of ${failing})`,
                scale: { domainMin: 0 },
                // A count of gateways: whole ticks only.
                axis: { tickMinStep: 1, format: "d" },
              },
            },
          },
        ],
      },
    },
  };
}
