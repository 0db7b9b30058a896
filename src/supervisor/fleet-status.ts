/**
 * Status and counters of the fleet, aggregated from what the actors and the writer
 * report: one `ClusterStatus` per cluster (its current incarnation's latest), the
 * counters of the incarnations that ended (so totals never go down), and the problems
 * already reported (so a MirrorSkipped, InvalidProbeConfig or RemoteReadDenied Event is
 * sent when a problem appears, not again when an actor restarts and finds the same problem).
 */

import type { MirrorProblem } from "../core/desired.ts";
import { describeError } from "../protocol/errors.ts";
import type { ClusterStatus, WriterStatus } from "../protocol/messages.ts";
import {
  addClusterCounters,
  type ClusterCounters,
  clusterCountersOf,
  EMPTY_CLUSTER_COUNTERS,
  foldIncarnation,
  type WriterCounters,
} from "../status/counters.ts";
import type { ClusterRow, FleetCounters } from "../status/fleet-view.ts";
import type { LifecycleState } from "./actor-lifecycle-state.ts";
import type { RegistryState } from "./registry.ts";

interface ClusterBook {
  epoch: number;
  status: ClusterStatus | undefined;
  counterBase: ClusterCounters;
  /** `remote/reason` of the problems in the last listed status of any incarnation. */
  problems: ReadonlySet<string>;
  /** `gateway\nproblem` of the probe problems in the last listed status of any incarnation. */
  probeProblems: ReadonlySet<string>;
  /**
   * Remote resources whose read was reported denied (SPEC §12), with the epoch of the
   * incarnation that last said so: only that incarnation's saying it is allowed again
   * forgets it (a new incarnation reports a denial only once its reads have been tried).
   */
  deniedReads: Map<string, number>;
}

const problemKey = (p: MirrorProblem): string => `${p.remote}/${p.reason}`;

/** A gateway's bad probe annotation or port (SPEC §10), with the fallback taken. */
export interface ProbeConfigProblem {
  /** The gateway, `namespace/name`. */
  readonly gateway: string;
  readonly problem: string;
}

/** What a status brought that was not reported yet. */
export interface NewProblems {
  readonly mirrors: readonly MirrorProblem[];
  readonly probeConfig: readonly ProbeConfigProblem[];
  readonly deniedReads: NonNullable<ClusterStatus["deniedReads"]>;
}

const NOTHING_NEW: NewProblems = { mirrors: [], probeConfig: [], deniedReads: [] };

const probeProblemsOf = (status: ClusterStatus): ProbeConfigProblem[] =>
  status.gateways.flatMap((g) => (g.probeProblems ?? []).map((problem) => ({ gateway: g.key, problem })));
const probeKey = (p: ProbeConfigProblem): string => `${p.gateway}\n${p.problem}`;

export class FleetStatusBook {
  readonly #clusters = new Map<string, ClusterBook>();

  /** A new incarnation of `cluster` starts: the previous one's counters become the base. */
  incarnationStarted(cluster: string, epoch: number): void {
    const book = this.#clusters.get(cluster);
    if (!book) {
      this.#clusters.set(cluster, {
        epoch,
        status: undefined,
        counterBase: EMPTY_CLUSTER_COUNTERS,
        problems: new Set(),
        probeProblems: new Set(),
        deniedReads: new Map(),
      });
      return;
    }
    if (book.status) book.counterBase = foldIncarnation(book.counterBase, clusterCountersOf(book.status));
    book.status = undefined;
    book.epoch = epoch;
  }

  /**
   * The current incarnation's status. Returns the problems that are new: not in the
   * last listed status, whichever incarnation sent it. A status sent before the
   * incarnation first listed says nothing about problems and changes nothing.
   */
  update(status: ClusterStatus): NewProblems {
    const book = this.#clusters.get(status.cluster);
    if (!book || book.epoch !== status.epoch) return NOTHING_NEW;
    book.status = status;
    if (status.lastSyncedAt === undefined) return NOTHING_NEW;
    const mirrors = status.problems.filter((p) => !book.problems.has(problemKey(p)));
    book.problems = new Set(status.problems.map(problemKey));
    const probes = probeProblemsOf(status);
    const probeConfig = probes.filter((p) => !book.probeProblems.has(probeKey(p)));
    book.probeProblems = new Set(probes.map(probeKey));
    const denied = status.deniedReads ?? [];
    const deniedReads = denied.filter((d) => !book.deniedReads.has(d.resource));
    for (const [resource, epoch] of book.deniedReads)
      if (epoch === status.epoch && !denied.some((d) => d.resource === resource)) book.deniedReads.delete(resource);
    for (const d of denied) book.deniedReads.set(d.resource, status.epoch);
    return { mirrors, probeConfig, deniedReads };
  }

  /** Drops what is kept about clusters no longer registered. */
  retain(registered: ReadonlyMap<string, unknown>): void {
    for (const cluster of this.#clusters.keys()) if (!registered.has(cluster)) this.#clusters.delete(cluster);
  }

  rows(lifecycle: LifecycleState, registry: RegistryState, writer: WriterStatus | undefined): ClusterRow[] {
    const rows: ClusterRow[] = [];
    for (const actor of lifecycle.actors.values()) {
      const book = this.#clusters.get(actor.cluster);
      const s = book?.epoch === actor.epoch || actor.epoch === undefined ? book?.status : undefined;
      const writerCluster = writer?.clusters[actor.cluster];
      // A priority annotation that is not valid (SPEC §14): the cluster runs at the default.
      const priorityProblem = registry.registered.get(actor.cluster)?.priorityProblem;
      let state: string = s?.state ?? "starting";
      let reason: string | undefined;
      if (actor.phase === "crash-loop") {
        state = "crash-loop";
        reason = actor.lastError ? describeError(actor.lastError) : undefined;
      } else if (actor.phase === "backoff") {
        state = "failing";
        reason = actor.lastError ? describeError(actor.lastError) : undefined;
      } else if (s?.state === "stale" || (s?.state === "syncing" && s.lastFailure)) {
        reason = s.lastFailure?.message;
      }
      rows.push({
        cluster: actor.cluster,
        secret: actor.registration.secretKey,
        state,
        ...(s?.since !== undefined ? { since: s.since } : {}),
        ...(reason ? { reason } : {}),
        mirrors: writerCluster?.mirrors ?? s?.mirrors ?? 0,
        exportedServices: s?.exportedServices ?? 0,
        ...(s?.exports ? { exports: s.exports } : {}),
        ...(s?.mcs ? { mcs: s.mcs } : {}),
        ...(s?.lastSyncedAt !== undefined ? { lastSyncedAt: s.lastSyncedAt } : {}),
        restarts: actor.restarts,
        gateways: s?.gateways ?? [],
        ...(s?.deniedReads ? { deniedReads: s.deniedReads } : {}),
        problems: [
          ...(s?.problems ?? []).map((p) => ({ remote: p.remote, reason: p.reason, message: p.message })),
          ...(writerCluster?.blocked ?? []).map((b) => ({ key: b.key, reason: b.reason, message: b.message })),
          ...(priorityProblem
            ? [{ key: actor.registration.secretKey, reason: "invalid-priority", message: priorityProblem }]
            : []),
        ],
      });
    }
    const none = { mirrors: 0, exportedServices: 0, restarts: 0, gateways: [], problems: [] } as const;
    for (const d of registry.duplicates)
      rows.push({
        cluster: d.cluster,
        secret: d.secretKey,
        state: "duplicate",
        reason: `cluster already registered by ${d.winner}`,
        ...none,
      });
    for (const i of registry.invalid)
      rows.push({
        cluster: i.cluster ?? "",
        secret: i.secretKey,
        state: "invalid",
        reason: `${i.reason}: ${i.message}`,
        ...none,
      });
    rows.sort((a, b) => (a.cluster === b.cluster ? (a.secret < b.secret ? -1 : 1) : a.cluster < b.cluster ? -1 : 1));
    return rows;
  }

  /** Per registered cluster, the sum over every incarnation so far (never decreasing while registered). */
  counters(lifecycle: LifecycleState, writer: WriterCounters): FleetCounters {
    const clusters = new Map<string, ClusterCounters & { readonly restarts: number }>();
    for (const actor of lifecycle.actors.values()) {
      const book = this.#clusters.get(actor.cluster);
      const live = book?.status ? clusterCountersOf(book.status) : EMPTY_CLUSTER_COUNTERS;
      clusters.set(actor.cluster, {
        ...addClusterCounters(book?.counterBase ?? EMPTY_CLUSTER_COUNTERS, live),
        restarts: actor.restarts,
      });
    }
    return { clusters, writer };
  }
}
