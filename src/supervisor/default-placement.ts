/**
 * The default placement (`--max-threads auto`, the default), as pure functions: how
 * many actor threads this process may use, decided from the CPUs it may run on and
 * the memory limit of its container, and how the placement in force is described in
 * `status` and /metrics.
 *
 * The rule (docs/DESIGN.md §1 "Placement"):
 * - `threads` = min(max(minThreads, CPUs × threadsPerCpu), maxThreads), and never
 *   more than the memory budget allows: threads may take at most threadMemoryShare of
 *   what the memory limit leaves above the base process (the other part is for the
 *   clusters' watch state, the writer's mirrors and GC headroom; it also leaves room
 *   for the moment a growing fleet switches to packed while its first threads still
 *   run, see below). At least 1.
 * - `isolatedUpTo` = max(isolatedMin, threads), bounded by the same memory budget: up
 *   to that many registered clusters, every cluster has a thread of its own, one per
 *   incarnation (as `--max-threads 0`); the blast radius is 1.
 * - beyond it, the actors are packed over `threads` threads (as `--max-threads N`): a
 *   cluster keeps its thread slot for as long as it is registered (placement.ts), and
 *   at most ⌈clusters / threads⌉ clusters share one thread's fate (the blast radius).
 *
 * Growth while running: the switch to packed happens once, the first time more than
 * `isolatedUpTo` clusters are registered, and holds until the process restarts. No
 * running actor is moved for it: the clusters that run on threads of their own keep
 * them until their actor restarts for a reason of its own (a crash, new credentials),
 * and then start on their slot; new clusters start packed at once. A fleet that shrinks
 * stays packed until the next restart. So while switching, at most `isolatedUpTo` +
 * `threads` actor threads run; the memory budget is halved for exactly that.
 *
 * Every number comes from RULE and COSTS below, one table, each with the measurement
 * behind it; they are re-tuned when a thread's cost changes.
 */

import type { PlacementStatus } from "../status/placement-status.ts";
import type { LifecycleState } from "./actor-lifecycle-state.ts";
import { slotSizes } from "./placement.ts";

/** What the process may use, read once at start (host-limits.ts). */
export interface HostLimits {
  /** `os.availableParallelism()`: the CPUs this process may run on. */
  readonly cpus: number;
  /** The container's memory limit (cgroup), bytes; undefined: no limit. */
  readonly memoryLimitBytes: number | undefined;
}

/**
 * Measured costs (a 2 vCPU VM shared with other work, Node 24, `fleet-mirror run` from
 * dist/; docs/DESIGN.md §1 "The default placement", figures in bench/results/): the basis
 * of the rule's thresholds. The ONE place these numbers
 * live; docs quote them from here and change with them.
 */
export const COSTS = {
  /** RSS of the process with no cluster registered (main thread, local writer, admin server): the memory scenario's baselines, 82.1–84.3 MB. */
  baseMb: 85,
  /** RSS of one more actor thread (its V8 isolate and bundle): bench/probes/thread-start-probe.ts --entry dist, 20 threads: 9.64 MB; 10.0–10.5 MB per cluster at K = 50 and 9.83–10.03 at K = 200 in thread mode. */
  threadMb: 10.5,
  /** CPU to start one actor thread alone (new Worker → actor.ready): thread-start-probe median 0.1 CPU-s; ≈ 0.2–0.3 while 200 start at once on 2 vCPUs. */
  threadStartCpuS: 0.1,
  /** RSS of one more cluster on a shared (packed) thread, its mirrors aside: ≈ 0.16 MB, 0.13 of it its TLS connection and context (docs/SCALING.md). Not an input of the rule; the sizing docs use it. */
  packedClusterMb: 0.16,
} as const;

/** The rule's thresholds (see the module comment), from COSTS and the targets. */
export const RULE = {
  /** Packed threads per CPU: threads beyond the CPUs buy a smaller blast radius, not speed, at COSTS.threadMb each. */
  threadsPerCpu: 1,
  /** Packed threads at least, even on one CPU: one thread's fate is never the whole fleet's when memory allows two. */
  minThreads: 2,
  /** Packed threads at most (a 16-CPU node: 16 × 10.5 MB ≈ 170 MB of isolates). */
  maxThreads: 16,
  /**
   * A thread per cluster up to this many clusters at least: ≈ 42 MB above the base and
   * ≈ 0.4–1.2 CPU-s at start (4 × COSTS), well inside the 50-cluster targets (RSS ≤ 250 MB,
   * restart ≤ 3 CPU-s) that the packed placement of a larger fleet must also meet.
   */
  isolatedMin: 4,
  /** Share of the memory limit above COSTS.baseMb that actor threads may take. */
  threadMemoryShare: 0.5,
} as const;

export interface AutoBudget {
  /** Up to this many registered clusters, a thread of its own each. */
  readonly isolatedUpTo: number;
  /** Beyond `isolatedUpTo`, the actors are packed over this many threads. */
  readonly threads: number;
  /** Why, in words: the CPUs and the memory limit that bound `threads`. */
  readonly basis: string;
}

const MIB = 2 ** 20;

/** The thread budget of `--max-threads auto` for this host. Total: any input gives at least 1 thread. */
export function autoBudget(host: HostLimits, costs = COSTS, rule = RULE): AutoBudget {
  const cpus = Number.isFinite(host.cpus) && host.cpus >= 1 ? Math.floor(host.cpus) : 1;
  const byCpu = Math.min(Math.max(rule.minThreads, cpus * rule.threadsPerCpu), rule.maxThreads);
  const limit = host.memoryLimitBytes;
  const cpuWords = `${cpus} CPU${cpus === 1 ? "" : "s"}`;
  if (limit === undefined || !Number.isFinite(limit) || limit <= 0)
    return { isolatedUpTo: Math.max(rule.isolatedMin, byCpu), threads: byCpu, basis: `${cpuWords}, no memory limit` };
  const byMemory = Math.floor(((limit / MIB - costs.baseMb) * rule.threadMemoryShare) / costs.threadMb);
  const threads = Math.max(1, Math.min(byCpu, byMemory));
  const isolatedUpTo = Math.max(1, Math.min(Math.max(rule.isolatedMin, threads), byMemory));
  const bound = byMemory < byCpu ? ", bound by the memory limit" : "";
  return { isolatedUpTo, threads, basis: `${cpuWords}, memory limit ${formatBytes(limit)}${bound}` };
}

/** "512 MiB", "1.5 GiB". */
export function formatBytes(bytes: number): string {
  if (bytes >= 2 ** 30) return `${Math.round((bytes / 2 ** 30) * 10) / 10} GiB`;
  return `${Math.round(bytes / MIB)} MiB`;
}

/** The setting of `--max-threads` as the status names it. */
export function placementSetting(maxThreads: number | "auto"): PlacementStatus["setting"] {
  return maxThreads === "auto" ? "auto" : maxThreads === 0 ? "isolated" : "fixed";
}

/**
 * The status of the placement in force, from the actor lifecycle's state (pure). The
 * blast radius: packed, the largest slot (every cluster assigned to it shares its
 * thread once running; a cluster still on a thread of its own from before the switch
 * counts in its slot); isolated, 1.
 */
export function placementStatus(
  setting: PlacementStatus["setting"],
  budget: AutoBudget | undefined,
  state: LifecycleState,
): PlacementStatus {
  const slots = state.packedSlots;
  const packed = slots > 0;
  const clusters = state.actors.size;
  const mode = packed ? "packed" : "isolated";
  const common = { setting, mode, clusters, threads: state.threads.size } as const;
  const largestSlot = packed ? Math.max(0, ...slotSizes(state.slots, slots)) : 0;
  const blastRadius = clusters === 0 ? 0 : Math.max(1, largestSlot);
  const n = (k: number, what: string) => `${k} ${what}${k === 1 ? "" : "s"}`;
  if (setting === "isolated")
    return { ...common, packedThreads: null, blastRadius, reason: "--max-threads 0: a thread per cluster" };
  if (setting === "fixed")
    return {
      ...common,
      packedThreads: slots,
      blastRadius,
      reason: `--max-threads ${slots}: a thread per cluster up to ${slots} clusters, then ${n(slots, "shared thread")}`,
    };
  const auto = budget ?? { isolatedUpTo: 0, threads: 1, basis: "" };
  // Packed with fewer clusters than the threshold: the fleet grew past it, then shrank.
  const reason = packed
    ? `auto: ${n(clusters, "cluster")}${clusters > auto.isolatedUpTo ? " >" : ", once more than"} ${auto.isolatedUpTo} → packed on ${n(slots, "thread")} (${auto.basis})`
    : `auto: ${n(clusters, "cluster")} ≤ ${auto.isolatedUpTo} → a thread per cluster; more are packed on ${n(auto.threads, "thread")} (${auto.basis})`;
  return { ...common, packedThreads: packed ? slots : null, blastRadius, reason };
}
