/**
 * Compact series for the result files, drawn by bench/charts.ts: a progress curve
 * thinned to a bounded number of points, and a latency distribution as fixed
 * percentiles. Both keep the first and the last measured point, so a chart's ends are
 * the scenario's own figures.
 */
import { percentile } from "./harness.ts";

/** At most this many points per progress curve: enough for a smooth line, a few hundred bytes of JSON. */
export const MAX_SERIES_POINTS = 60;

/** The percentiles a latency distribution is kept at (0 = the fastest, 100 = the slowest). */
export const CDF_PERCENTILES = [0, 1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 98, 99, 99.5, 99.9, 100] as const;

/** A progress curve as two parallel arrays: at `ms[i]` after the start, `done[i]` items were done. */
export interface ProgressSeries {
  readonly ms: number[];
  readonly done: number[];
}

/**
 * Records a progress curve from its start (0 ms, 0 done). `mark` takes the count done
 * now; `series` thins the marks to at most `max` points, evenly spread over the marks
 * (always the first and the last).
 */
export class ProgressRecorder {
  readonly #started: number;
  readonly #ms: number[] = [0];
  readonly #done: number[] = [0];

  constructor(started = Date.now()) {
    this.#started = started;
  }

  mark(done: number, now = Date.now()): void {
    this.#ms.push(now - this.#started);
    this.#done.push(done);
  }

  series(max = MAX_SERIES_POINTS): ProgressSeries {
    const keep = thinIndices(this.#ms.length, max);
    return { ms: keep.map((i) => this.#ms[i] ?? 0), done: keep.map((i) => this.#done[i] ?? 0) };
  }
}

/** Up to `max` (>= 2) indices of `0..length-1`, evenly spread, the first and the last included. */
export function thinIndices(length: number, max: number): number[] {
  if (length <= max) return Array.from({ length }, (_, i) => i);
  const step = (length - 1) / (max - 1);
  return Array.from({ length: max }, (_, i) => Math.round(i * step));
}

/** `values` at CDF_PERCENTILES (nearest rank, as the scenarios' p50/p99); empty for no values. */
export function distribution(values: readonly number[]): number[] {
  if (values.length === 0) return [];
  return CDF_PERCENTILES.map((p) => percentile(values, p) ?? 0);
}
