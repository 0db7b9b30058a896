/**
 * The executor the writer's plans go to: the WriteExecutor (token bucket, shard fence,
 * the local API) or, for `run --dry-run`, the DryRunExecutor that records the plan and
 * writes nothing. One of them, chosen once at start: the reconciler never knows which.
 */
import type { Clock } from "../../src/core/clock.ts";
import { FairTokenBucket } from "../../src/core/fair-bucket.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import type { Logger } from "../../src/log.ts";
import type { WriterOptions } from "../../src/protocol/messages.ts";
import { DryRunExecutor } from "./dry-run-executor.ts";
import type { WriteFence } from "./fence.ts";
import type { MutationCache } from "./mutation-cache.ts";
import type { WriterStats } from "./status.ts";
import { WriteExecutor, type WriteExecutorDeps } from "./write-executor.ts";

export interface WritePath {
  readonly executor: Pick<WriteExecutor, "apply" | "namespaceSeen" | "whenDrained">;
  /** `run --dry-run`: the executor that plans instead of writing (also `executor`). */
  readonly dryRun: DryRunExecutor | undefined;
  /** The write rate limit (none in a dry run): the work queue asks it whether a lane may start a key. */
  readonly bucket: FairTokenBucket | undefined;
}

export function createWritePath(deps: {
  readonly client: KubeClient;
  readonly options: WriterOptions;
  readonly clock: Clock;
  readonly fence: WriteFence;
  readonly cache: MutationCache;
  readonly stats: WriterStats;
  readonly log: Logger;
  readonly block: WriteExecutorDeps["block"];
  /** The lane (cluster) of a key: writes take the rate limit's tokens by lane in turn. */
  readonly lane: (key: string) => string;
}): WritePath {
  const { client, options, log, block } = deps;
  const common = { client, log, block, blockedRecheckMs: options.blockedRecheckMs };
  if (options.dryRun) {
    const dryRun = new DryRunExecutor({ ...common, cache: deps.cache });
    return { executor: dryRun, dryRun, bucket: undefined };
  }
  const bucket = new FairTokenBucket(options.qps, options.burst, deps.clock, options.busyWritePercent);
  const executor = new WriteExecutor({
    ...common,
    bucket,
    lane: deps.lane,
    fence: deps.fence,
    cache: deps.cache,
    stats: deps.stats,
    requestTimeoutMs: client.requestTimeoutMs,
  });
  return { executor, dryRun: undefined, bucket };
}
