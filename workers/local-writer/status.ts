/**
 * The writer's counters and its status report: writes by `verb/Kind/result`, retries,
 * requests in flight, the write latency histogram and the last error. Counted here,
 * sent to the supervisor as `WriterStatus` (the metrics layer turns it into metrics).
 */

import type { McsAvailability } from "../../src/core/mcs.ts";
import type { SerializedError } from "../../src/protocol/errors.ts";
import {
  type FederatedServiceStatus,
  WRITE_DURATION_BUCKETS,
  type WriterClusterStatus,
  type WriterStatus,
} from "../../src/protocol/messages.ts";

export class WriterStats {
  readonly #writes: Record<string, number> = {};
  /** Write latency, cumulative per bucket of WRITE_DURATION_BUCKETS (see LatencyHistogram). */
  readonly #writeDuration = { buckets: WRITE_DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 };
  readonly #tierSwitches: Record<string, number> = {};
  retries = 0;
  inFlight = 0;
  lastError: SerializedError | undefined;

  /** One request's outcome: `result` is ok, an HTTP status, error, or dropped (an Event). */
  count(verb: string, kind: string, result: string): void {
    const k = `${verb}/${kind}/${result}`;
    this.#writes[k] = (this.#writes[k] ?? 0) + 1;
  }

  /** One change of a fleet-wide Service's serving tiers (SPEC §14). */
  switched(direction: "failover" | "failback"): void {
    this.#tierSwitches[direction] = (this.#tierSwitches[direction] ?? 0) + 1;
  }

  observeWriteDuration(seconds: number): void {
    const h = this.#writeDuration;
    h.count += 1;
    h.sum += seconds;
    for (let i = 0; i < WRITE_DURATION_BUCKETS.length; i++) {
      if (seconds <= (WRITE_DURATION_BUCKETS[i] ?? 0)) h.buckets[i] = (h.buckets[i] ?? 0) + 1;
    }
  }

  /**
   * The whole report: these counters, and what the writer's parts hold now: the
   * clusters' desired sets and blocked keys, fleet-wide Services and MCS imports, and
   * whether ServiceImports are served (SPEC §11, §12).
   */
  report(fields: {
    ready: boolean;
    queueDepth: number;
    desired: ReadonlyMap<string, { mirrors: number; complete: boolean }>;
    blocked: ReadonlyMap<string, WriterClusterStatus["blocked"]>;
    /** Writes held by the busy share, by cluster (FairTokenBucket.held). */
    held?: ReadonlyMap<string, number>;
    federated: readonly FederatedServiceStatus[];
    imports: readonly FederatedServiceStatus[];
    mcs: McsAvailability;
    apiWarnings: number;
    dryRun?: WriterStatus["dryRun"];
  }): WriterStatus {
    const clusters: Record<string, WriterClusterStatus> = {};
    for (const [cluster, summary] of fields.desired) {
      const heldWrites = fields.held?.get(cluster) ?? 0;
      clusters[cluster] = {
        ...summary,
        blocked: fields.blocked.get(cluster) ?? [],
        ...(heldWrites > 0 ? { heldWrites } : {}),
      };
    }
    const { state, message } = fields.mcs;
    return {
      ready: fields.ready,
      queueDepth: fields.queueDepth,
      inFlight: this.inFlight,
      writes: { ...this.#writes },
      retries: this.retries,
      ...(Object.keys(this.#tierSwitches).length > 0 ? { tierSwitches: { ...this.#tierSwitches } } : {}),
      writeDuration: { ...this.#writeDuration, buckets: [...this.#writeDuration.buckets] },
      clusters,
      ...(fields.federated.length > 0 ? { federated: [...fields.federated] } : {}),
      ...(fields.imports.length > 0 ? { imports: [...fields.imports] } : {}),
      mcs: { state, ...(message ? { message } : {}) },
      ...(this.lastError ? { lastError: this.lastError } : {}),
      ...(fields.apiWarnings > 0 ? { apiWarnings: fields.apiWarnings } : {}),
      ...(fields.dryRun ? { dryRun: fields.dryRun } : {}),
    };
  }
}
