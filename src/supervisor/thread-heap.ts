/**
 * The heap limit of a remote-cluster actor thread (pure). A thread of its own gets
 * `--actor-max-old-space-mb`. A packed thread hosts several actors in one V8 heap, so
 * no limit can be charged to one of them: it gets the actor limit times the actors it
 * is expected to host, but never more than the packed-thread cap. Without that cap, a
 * thread of 100 clusters could grow to 100 × 96 MB before V8 stopped it, and a leak in
 * one actor (or a remote that makes one hold what it should not) would reach the
 * container's memory limit first: the kernel then kills the whole process, every
 * cluster's mirroring with it, instead of one thread that the supervisor restarts and
 * charges to the cluster that grew it (DESIGN §5).
 *
 * The cap (`--packed-thread-max-old-space-mb`, default `auto`): with a container memory
 * limit, the share of it above the base process that actor threads may take
 * (default-placement.ts RULE.threadMemoryShare), split among the packed threads, so
 * that every packed thread at its cap still leaves the main thread, the writer and the
 * GC their part; without a memory limit, NO_LIMIT_CAP_MB. Never below the actor limit
 * itself: a packed thread can always hold one actor's worth.
 */
import type { Config } from "../config.ts";
import { type AutoBudget, COSTS, type HostLimits, RULE } from "./default-placement.ts";

/**
 * Without a container memory limit: at 1 GiB a packed thread still holds ten times the
 * heap a 100-cluster thread uses in the soak benchmark (about 100 MB with 5 Services
 * each), and a runaway one costs the machine at most that much before it is stopped.
 */
export const NO_LIMIT_CAP_MB = 1024;

const MIB = 2 ** 20;

/**
 * The packed-thread cap in MB, from the flag's setting, the host and the packed threads
 * (the default placement's `budget`, else `--max-threads`).
 */
export function packedHeapCapMb(
  config: Pick<Config, "packedThreadMaxOldGenerationMb" | "actorMaxOldGenerationMb" | "maxThreads">,
  host: HostLimits | undefined,
  budget: Pick<AutoBudget, "threads"> | undefined,
): number {
  const actorMaxMb = config.actorMaxOldGenerationMb;
  const setting = config.packedThreadMaxOldGenerationMb;
  if (setting !== "auto") return Math.max(actorMaxMb, setting);
  const limit = host?.memoryLimitBytes;
  if (limit === undefined || !Number.isFinite(limit) || limit <= 0) return Math.max(actorMaxMb, NO_LIMIT_CAP_MB);
  const threads = budget?.threads ?? (config.maxThreads === "auto" ? 1 : config.maxThreads);
  const share = ((limit / MIB - COSTS.baseMb) * RULE.threadMemoryShare) / Math.max(1, threads);
  return Math.max(actorMaxMb, Math.floor(share));
}

/** The old-generation limit of a thread expected to host `actorsExpected` actors. */
export function threadHeapLimitMb(actorMaxMb: number, actorsExpected: number, capMb: number): number {
  if (actorsExpected <= 1) return actorMaxMb;
  return Math.min(actorMaxMb * actorsExpected, Math.max(actorMaxMb, capMb));
}
