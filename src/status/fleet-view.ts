/**
 * The supervisor's status and counters as data: what the admin server, the metrics,
 * `fleet-mirror status` and the demo read. Types only (and the main thread's heap), so
 * readers import them without importing the Supervisor, which implements FleetView.
 */
import { getHeapStatistics } from "node:v8";
import type { ClusterStatus, WriterStatus } from "../protocol/messages.ts";
import type { ClusterCounters, WriterCounters } from "./counters.ts";
import type { LinkRow, LinksProblem } from "./link-row.ts";
import type { PlacementStatus } from "./placement-status.ts";

/** What the supervisor read of the local cluster's own address ranges (SPEC §10). */
export interface LocalRangesStatus {
  readonly serviceCidrs: readonly string[];
  /** Pod CIDRs of the local Nodes (how many). */
  readonly podCidrs: number;
  /** Local reads denied (403) or not served (404), with why: the flags and built-in ranges still apply. */
  readonly deniedReads: readonly { readonly resource: string; readonly message: string }[];
}

export interface ClusterRow {
  readonly cluster: string;
  readonly secret: string;
  /** syncing / synced / stale / failing / crash-loop / starting / duplicate / invalid */
  readonly state: string;
  readonly since?: number;
  readonly reason?: string;
  readonly mirrors: number;
  readonly exportedServices: number;
  /** Exported Services by mode, and those whose export label declines (SPEC §12); absent: unknown. */
  readonly exports?: ClusterStatus["exports"];
  /** Whether MCS export is active in the cluster and why not (SPEC §12); absent: unknown. */
  readonly mcs?: ClusterStatus["mcs"];
  readonly lastSyncedAt?: number;
  readonly restarts: number;
  readonly gateways: ClusterStatus["gateways"];
  /** Optional remote reads the remote denies (SPEC §12); absent: none. */
  readonly deniedReads?: ClusterStatus["deniedReads"];
  readonly problems: readonly {
    readonly remote?: string;
    readonly key?: string;
    readonly reason: string;
    readonly message: string;
  }[];
}

/** Counters that never go down across restarts (see counters.ts). */
export interface FleetCounters {
  /** Registered clusters only: a cluster that is gone has no counters. */
  readonly clusters: ReadonlyMap<string, ClusterCounters & { readonly restarts: number }>;
  readonly writer: WriterCounters;
}

export interface FleetStatus {
  readonly secretsListed: boolean;
  readonly writer: WriterStatus | undefined;
  readonly writerRestarts: number;
  readonly clusters: readonly ClusterRow[];
  /** Where the actors run: mode, threads, blast radius, and why (default-placement.ts). */
  readonly placement?: PlacementStatus;
  /** The local cluster's own ranges, in which gateway addresses are refused (SPEC §10; supervisor/local-ranges.ts). */
  readonly localRanges?: LocalRangesStatus;
  /** With `--links` (SPEC §15): one row per Link, registered or why not. */
  readonly links?: readonly LinkRow[];
  /** With `--links`: why the Links cannot be listed now (the Link CRD not installed). */
  readonly linksProblem?: LinksProblem;
}

/** Heap of one thread of this process (bytes). */
export interface ThreadHeap {
  /** `main`, `local-writer`, `remote-cluster/<cluster>` or `remote-cluster/thread-<slot>`. */
  readonly thread: string;
  readonly used: number;
  readonly limit: number;
}

/** The heap of the calling thread, reported as `main`. */
export function mainThreadHeap(): ThreadHeap {
  const stats = getHeapStatistics();
  return { thread: "main", used: stats.used_heap_size, limit: stats.heap_size_limit };
}

/** The local writer's liveness, as the supervisor sees it. */
export interface WriterHealth {
  readonly ready: boolean;
  /** Exits within the restart policy's window without becoming ready in between. */
  readonly recentFailures: number;
  /** `recentFailures` reached the policy's `crashLoopAfter`. */
  readonly crashLooping: boolean;
  /** Events waiting for a writer to take them. */
  readonly eventsWaiting: number;
  /** Events dropped since start because too many waited. */
  readonly eventsDropped: number;
}

/** What readers of a running controller (admin server, metrics) may ask of it. */
export interface FleetView {
  readonly writerReady: boolean;
  status(): FleetStatus;
  counters(): FleetCounters;
  writerHealth(): WriterHealth;
  threadHeapStatistics(): Promise<ThreadHeap[]>;
}
