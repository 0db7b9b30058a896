/**
 * What actors assert about themselves in `actor.status` and `writer.status`: types and
 * schemas from one definition. The latest status of an actor replaces the previous one.
 */
import * as v from "valibot";
import { MCS_STATES } from "../core/mcs.ts";
import { count, countRecord, type DeepReadonly, finite, name } from "./codec.ts";
import { SerializedErrorSchema } from "./error-schema.ts";
import { MirrorProblemSchema } from "./shapes.ts";

/**
 * Messages the hosting thread rejected as malformed (they did not decode and were
 * dropped), since the thread started. Absent means none.
 */
const protocolErrors = v.exactOptional(count);

/** A watch failure as the watcher reports it (plain data). */
export const WatchFailureInfoSchema = v.object({
  phase: v.picklist(["list", "watch"]),
  reason: v.string(),
  message: v.string(),
  attempt: count,
  retryInMs: finite,
});
export type WatchFailureInfo = DeepReadonly<v.InferOutput<typeof WatchFailureInfoSchema>>;

/**
 * Upper bounds (seconds) of the write latency histogram, defined once: the writer counts
 * into them and the metrics layer labels them (`le`). Ascending; +Inf is implicit.
 */
export const WRITE_DURATION_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * A latency histogram as cumulative counts since the writer started: `buckets[i]` counts
 * observations <= `WRITE_DURATION_BUCKETS[i]` (so it is non-decreasing in i and <= count);
 * `count` is the +Inf bucket; `sum` is in seconds.
 */
export const LatencyHistogramSchema = v.object({
  buckets: v.pipe(
    v.array(count),
    v.length(WRITE_DURATION_BUCKETS.length, `must have ${WRITE_DURATION_BUCKETS.length} buckets`),
  ),
  sum: finite,
  count,
});
export type LatencyHistogram = DeepReadonly<v.InferOutput<typeof LatencyHistogramSchema>>;

/**
 * One gateway's probe counters since the actor started: failures by reason (timeout,
 * refused, status, error) and the latency of the probes that got an answer, in the
 * buckets of WRITE_DURATION_BUCKETS.
 */
export const GatewayProbeCountersSchema = v.object({ failures: countRecord, latency: LatencyHistogramSchema });
export type GatewayProbeCounters = DeepReadonly<v.InferOutput<typeof GatewayProbeCountersSchema>>;

/**
 * Gateways of one cluster with probe counters of their own, and so metric series of their
 * own (about 18 each: 4 failure reasons, a histogram of 11 buckets, +Inf, sum and count).
 * Gateway keys come from the remote: beyond this many, the counters of gateways no longer
 * probed are dropped (least recently probed first), and probes of gateways that find no
 * room count under `OTHER_GATEWAY`. A counter that remains never goes back.
 */
export const MAX_GATEWAY_SERIES = 32;
/** The gateway label of the probes counted beyond MAX_GATEWAY_SERIES (no gateway key has parentheses). */
export const OTHER_GATEWAY = "(other)";

/** Dead addresses a gateway's probe status lists at most (its counts are complete). */
export const MAX_LISTED_DEAD_ADDRESSES = 16;

/** Refused addresses a gateway's status lists at most (its counts are complete). */
export const MAX_LISTED_REFUSED = 16;

/** How a probed gateway stands (SPEC §10). */
export const GatewayProbeStatusSchema = v.object({
  port: v.pipe(count, v.minValue(1), v.maxValue(65_535)),
  path: v.pipe(v.string(), v.maxLength(1_024)),
  periodSeconds: v.pipe(count, v.minValue(1)),
  /** Probed addresses alive / dead. */
  alive: count,
  dead: count,
  /** The dead addresses, sorted, at most MAX_LISTED_DEAD_ADDRESSES. */
  deadAddresses: v.pipe(v.array(v.string()), v.maxLength(MAX_LISTED_DEAD_ADDRESSES)),
  /** Why the first dead address failed last (cut short). */
  lastFailure: v.exactOptional(v.pipe(v.string(), v.maxLength(256))),
});
export type GatewayProbeStatus = DeepReadonly<v.InferOutput<typeof GatewayProbeStatusSchema>>;

/** A gateway in use: whether it is usable, why not, and its probe. */
export const GatewayStatusSchema = v.object({
  key: v.string(),
  usable: v.boolean(),
  reason: v.exactOptional(v.string()),
  /** Present while the gateway is probed (it has a valid `mc-probe` port and addresses). */
  probe: v.exactOptional(GatewayProbeStatusSchema),
  /** Bad probe annotations or port, with the fallback taken (SPEC §10). */
  probeProblems: v.exactOptional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(512))), v.maxLength(4))),
  /**
   * Ingress addresses left out by the address policy (SPEC §10): how many, by reason
   * (core/address-policy.ts), and the first MAX_LISTED_REFUSED as `address (why)`.
   */
  refused: v.exactOptional(
    v.object({
      total: count,
      byReason: countRecord,
      addresses: v.pipe(v.array(v.pipe(v.string(), v.maxLength(256))), v.maxLength(MAX_LISTED_REFUSED)),
    }),
  ),
  /** Why a gateway with a valid `mc-probe` port and addresses is not probed (the per-cluster cap). */
  unprobed: v.exactOptional(v.pipe(v.string(), v.maxLength(256))),
});
export type GatewayStatus = DeepReadonly<v.InferOutput<typeof GatewayStatusSchema>>;

export const CLUSTER_SYNC_STATES = ["starting", "syncing", "synced", "stale"] as const;
export type ClusterSyncState = (typeof CLUSTER_SYNC_STATES)[number];

export const ClusterStatusSchema = v.object({
  cluster: name,
  epoch: count,
  state: v.picklist(CLUSTER_SYNC_STATES),
  /** Epoch ms since when the cluster has been in `state`. */
  since: finite,
  lastSyncedAt: v.exactOptional(finite),
  exportedServices: count,
  /**
   * Exported Services by mode, and those whose export label declines (SPEC §12); absent:
   * an older actor. `mcs`: ServiceExports that export (absent: an actor without MCS).
   */
  exports: v.exactOptional(v.object({ annotation: count, label: count, declined: count, mcs: v.exactOptional(count) })),
  /** Whether MCS export is active in this cluster, and why not (SPEC §12). Absent: an actor without MCS. */
  mcs: v.exactOptional(
    v.object({
      state: v.picklist(MCS_STATES),
      message: v.exactOptional(v.string()),
      /** Discovery requests of this incarnation (the first and every recheck). */
      discoveries: v.exactOptional(count),
    }),
  ),
  mirrors: count,
  problems: v.array(MirrorProblemSchema),
  lastFailure: v.exactOptional(WatchFailureInfoSchema),
  /** Gateways (`namespace/name`) in use and why each is unusable, if it is. */
  gateways: v.array(GatewayStatusSchema),
  /**
   * Probe counters of every gateway this incarnation probed (also gateways no longer in
   * use: counters never go back), by `namespace/name`. Absent: none probed.
   */
  gatewayProbes: v.exactOptional(v.record(v.string(), GatewayProbeCountersSchema)),
  watch: v.object({ lists: count, watchesStarted: count, failures: count, relistsOnGone: count }),
  failuresByReason: countRecord,
  /** `Warning` headers the remote API server sent this incarnation (absent: none). */
  apiWarnings: v.exactOptional(count),
  /**
   * Optional remote reads the remote's RBAC denies (403), with what that costs (SPEC
   * §12: the other modes keep working); absent: none. At most 4, messages cut at 512.
   */
  deniedReads: v.exactOptional(
    v.pipe(v.array(v.object({ resource: v.string(), message: v.pipe(v.string(), v.maxLength(512)) })), v.maxLength(4)),
  ),
  protocolErrors,
});
/** What a remote-cluster actor asserts about itself; the latest one replaces the previous. */
export type ClusterStatus = DeepReadonly<v.InferOutput<typeof ClusterStatusSchema>>;

export const WriterClusterStatusSchema = v.object({
  mirrors: count,
  blocked: v.array(v.object({ key: v.string(), reason: v.string(), message: v.string() })),
  complete: v.boolean(),
  /** Writes that waited for the busy share (`--busy-write-percent`) since the writer started; absent: none. */
  heldWrites: v.exactOptional(count),
});
export type WriterClusterStatus = DeepReadonly<v.InferOutput<typeof WriterClusterStatusSchema>>;

/**
 * One fleet-wide Service as the writer last reduced it (SPEC §11): its member clusters
 * (sorted; those in `kept` are unknown since a writer start and keep their observed
 * part) and the addresses of the parts it writes, ready and not ready. Its conflicts are
 * in the member clusters' `blocked`.
 */
export const FederatedServiceStatusSchema = v.object({
  key: v.string(),
  clusters: v.array(v.string()),
  kept: v.array(v.string()),
  ready: count,
  notReady: count,
  /** Its priority tiers (SPEC §14), best first; absent: fewer than two. */
  tiers: v.exactOptional(v.array(v.object({ priority: count, ready: count, serving: v.boolean() }))),
  /** The worst priority that serves, and since when (RFC 3339); absent with `tiers`. */
  servingPriority: v.exactOptional(count),
  servingSince: v.exactOptional(v.string()),
});
export type FederatedServiceStatus = DeepReadonly<v.InferOutput<typeof FederatedServiceStatusSchema>>;

/** One write a dry run would make (src/core/dry-run.ts `PlannedWrite`). */
export const PlannedWriteSchema = v.object({
  verb: v.picklist(["create", "update", "delete"]),
  kind: v.string(),
  object: v.string(),
  key: v.string(),
  cluster: v.string(),
});

export const WriterStatusSchema = v.object({
  ready: v.boolean(),
  queueDepth: count,
  inFlight: count,
  /** Writes since the writer started, by `verb/Kind/result` (result: ok, an HTTP status, or error). */
  writes: countRecord,
  retries: count,
  /** Changes of fleet-wide Services' serving tiers since the writer started, by direction (SPEC §14); absent: none. */
  tierSwitches: v.exactOptional(countRecord),
  /** Latency of every write request (the API call only, not the rate-limit wait). */
  writeDuration: LatencyHistogramSchema,
  clusters: v.record(v.string(), WriterClusterStatusSchema),
  /** Fleet-wide Services by key order (absent: none). */
  federated: v.exactOptional(v.array(FederatedServiceStatusSchema)),
  /** MCS imports (SPEC §12) by ServiceImport key order, reduced like fleet-wide Services (absent: none). */
  imports: v.exactOptional(v.array(FederatedServiceStatusSchema)),
  /** Whether the local cluster serves and lets fleet-mirror read ServiceImports (SPEC §12); absent: an older writer. */
  mcs: v.exactOptional(v.object({ state: v.picklist(MCS_STATES), message: v.exactOptional(v.string()) })),
  lastError: v.exactOptional(SerializedErrorSchema),
  /** `Warning` headers the local API server sent since the writer started (absent: none). */
  apiWarnings: v.exactOptional(count),
  /**
   * `run --dry-run`: the writes planned now (none is sent): totals by `verb/Kind`, the
   * first of them in key order, and how many were left out of `planned`. Absent: not a dry run.
   */
  dryRun: v.exactOptional(v.object({ totals: countRecord, planned: v.array(PlannedWriteSchema), omitted: count })),
  protocolErrors,
});
export type WriterStatus = DeepReadonly<v.InferOutput<typeof WriterStatusSchema>>;
