/**
 * Where the time of a tier switch goes (failover-tiers): from the instant the last
 * serving gateway stops, when its cluster's actor found it dead, when the writer planned
 * each fleet-wide Service's switch, when the local watch saw the switch's writes land,
 * and when each Service served the next tier. Pure: the scenario hands in what it
 * recorded (the controller's log lines, the watch's change instants, the writer's
 * status samples) and gets the figures, in seconds from the stop.
 *
 * - `detectedS`: the actor's log line "… is dead after consecutive failed probes" for
 *   the stopped address (SPEC §10: the third failed probe);
 * - `plannedS`: the writer's log line of each Service's failover (the tier book's
 *   decision, made when its key's reconcile runs, before its writes): `first` − `detected`
 *   is the hop from the actor to the writer and the wait for a worker; `last` − `first`
 *   is the queue in front of the last Service;
 * - `writesS`: the first and last change the local watch saw of a part or a fleet-wide
 *   Service, and how many (`writesSeen`), so `writesPerS` is the rate the API took them in;
 * - `keyWriteS`: per Service, serving the next tier − its switch planned: how long one
 *   key's writes took once a worker had it;
 * - `writeLatencyMs`: the writer's own histogram of write requests over the switch (the
 *   API call only), mean and the bucket bounds of its p50 and p99;
 * - `writer`: the largest queue and writes in flight the writer's status showed (a status
 *   a second).
 */
import { WRITE_DURATION_BUCKETS } from "../src/protocol/messages.ts";
import { percentile, round } from "./harness.ts";

export interface LatencyHistogramReading {
  readonly buckets: readonly number[];
  readonly sum: number;
  readonly count: number;
}

export interface TimelineInput {
  /** The stop of the last serving gateway (ms since the epoch). */
  readonly stoppedAt: number;
  /** Its address (in the actor's "dead" line). */
  readonly address: string;
  /** The controller's log, one JSON line each (other lines are skipped). */
  readonly logLines: readonly string[];
  /** When each Service served the next tier (undefined: never). */
  readonly served: ReadonlyMap<string, number | undefined>;
  /** The instants the local watch saw a part or a fleet-wide Service change, after the stop. */
  readonly writesSeenAt: readonly number[];
  /** The writer's write-duration histogram before and after the switch. */
  readonly latencyBefore: LatencyHistogramReading | undefined;
  readonly latencyAfter: LatencyHistogramReading | undefined;
  /** The writer's status samples over the switch. */
  readonly samples: readonly { readonly queueDepth: number; readonly inFlight: number }[];
}

interface Spread {
  readonly first: number | null;
  readonly p50: number | null;
  readonly last: number | null;
}

export interface Timeline {
  readonly detectedS: number | null;
  readonly plannedS: Spread & { readonly services: number };
  readonly writesS: Spread;
  readonly writesSeen: number;
  readonly writesPerS: number | null;
  readonly servedS: Spread;
  readonly keyWriteS: Spread;
  readonly writeLatencyMs: { readonly requests: number; readonly mean: number | null; p50: string; p99: string };
  readonly writer: { readonly maxQueueDepth: number; readonly maxInFlight: number };
}

interface LogLine {
  readonly time?: number;
  readonly msg?: string;
  readonly key?: string;
  readonly direction?: string;
  readonly address?: string;
}

function parse(line: string): LogLine | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    return JSON.parse(line) as LogLine;
  } catch {
    return undefined;
  }
}

const seconds = (at: number, from: number): number => round((at - from) / 1000, 2);

function spread(values: readonly number[]): Spread {
  const s = (p: number) => {
    const v = percentile(values, p);
    return v === null ? null : round(v, 2);
  };
  return { first: s(0), p50: s(50), last: s(100) };
}

/** The bucket bound below which `p` % of the requests between the readings fell ("> 10" beyond the last). */
function bucketOf(before: LatencyHistogramReading, after: LatencyHistogramReading, p: number): string {
  const count = after.count - before.count;
  if (count <= 0) return "-";
  const rank = (p / 100) * count;
  for (let i = 0; i < WRITE_DURATION_BUCKETS.length; i++) {
    const within = (after.buckets[i] ?? 0) - (before.buckets[i] ?? 0);
    if (within >= rank) return `≤ ${round((WRITE_DURATION_BUCKETS[i] ?? 0) * 1000, 0)}`;
  }
  return `> ${round((WRITE_DURATION_BUCKETS.at(-1) ?? 0) * 1000, 0)}`;
}

export function tierSwitchTimeline(input: TimelineInput): Timeline {
  const { stoppedAt } = input;
  let detectedAt: number | undefined;
  const plannedAt = new Map<string, number>();
  for (const text of input.logLines) {
    const line = parse(text);
    if (line?.time === undefined || line.time < stoppedAt) continue;
    if (line.address === input.address && line.msg?.includes(" is dead ")) detectedAt ??= line.time;
    if (line.direction === "failover" && line.key !== undefined && !plannedAt.has(line.key))
      plannedAt.set(line.key, line.time);
  }
  const served = [...input.served.values()].filter((at): at is number => at !== undefined);
  const keyWrites: number[] = [];
  for (const [name, at] of input.served) {
    const planned = [...plannedAt].find(([key]) => key.endsWith(`/${name}`))?.[1];
    if (at !== undefined && planned !== undefined) keyWrites.push((at - planned) / 1000);
  }
  const writes = [...input.writesSeenAt].sort((a, b) => a - b);
  const firstWrite = writes[0];
  const lastWrite = writes.at(-1);
  const { latencyBefore: before, latencyAfter: after } = input;
  const requests = before && after ? after.count - before.count : 0;
  return {
    detectedS: detectedAt === undefined ? null : seconds(detectedAt, stoppedAt),
    plannedS: { ...spread([...plannedAt.values()].map((at) => (at - stoppedAt) / 1000)), services: plannedAt.size },
    writesS: spread(writes.map((at) => (at - stoppedAt) / 1000)),
    writesSeen: writes.length,
    writesPerS:
      firstWrite !== undefined && lastWrite !== undefined && lastWrite > firstWrite
        ? round((writes.length - 1) / ((lastWrite - firstWrite) / 1000), 1)
        : null,
    servedS: spread(served.map((at) => (at - stoppedAt) / 1000)),
    keyWriteS: spread(keyWrites),
    writeLatencyMs: {
      requests,
      mean: before && after && requests > 0 ? round(((after.sum - before.sum) / requests) * 1000, 1) : null,
      p50: before && after ? bucketOf(before, after, 50) : "-",
      p99: before && after ? bucketOf(before, after, 99) : "-",
    },
    writer: {
      maxQueueDepth: Math.max(0, ...input.samples.map((s) => s.queueDepth)),
      maxInFlight: Math.max(0, ...input.samples.map((s) => s.inFlight)),
    },
  };
}
