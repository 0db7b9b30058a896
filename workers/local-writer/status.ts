/**
 * The writer's counters and its status report: writes by `verb/Kind/result`, retries,
 * requests in flight, the write latency histogram and the last error. Counted here,
 * sent to the supervisor as `WriterStatus` (the metrics layer turns it into metrics).
 */
import type { SerializedError } from "../../src/protocol/errors.ts";
import { WRITE_DURATION_BUCKETS, type WriterClusterStatus, type WriterStatus } from "../../src/protocol/messages.ts";

export class WriterStats {
  readonly #writes: Record<string, number> = {};
  /** Write latency, cumulative per bucket of WRITE_DURATION_BUCKETS (see LatencyHistogram). */
  readonly #writeDuration = { buckets: WRITE_DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 };
  retries = 0;
  inFlight = 0;
  lastError: SerializedError | undefined;

  /** One request's outcome: `result` is ok, an HTTP status, error, or dropped (an Event). */
  count(verb: string, kind: string, result: string): void {
    const k = `${verb}/${kind}/${result}`;
    this.#writes[k] = (this.#writes[k] ?? 0) + 1;
  }

  observeWriteDuration(seconds: number): void {
    const h = this.#writeDuration;
    h.count += 1;
    h.sum += seconds;
    for (let i = 0; i < WRITE_DURATION_BUCKETS.length; i++) {
      if (seconds <= (WRITE_DURATION_BUCKETS[i] ?? 0)) h.buckets[i] = (h.buckets[i] ?? 0) + 1;
    }
  }

  report(fields: {
    ready: boolean;
    queueDepth: number;
    clusters: Readonly<Record<string, WriterClusterStatus>>;
  }): WriterStatus {
    return {
      ready: fields.ready,
      queueDepth: fields.queueDepth,
      inFlight: this.inFlight,
      writes: { ...this.#writes },
      retries: this.retries,
      writeDuration: { ...this.#writeDuration, buckets: [...this.#writeDuration.buckets] },
      clusters: fields.clusters,
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
  }
}
