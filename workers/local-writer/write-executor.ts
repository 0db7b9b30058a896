/**
 * Sends the writes a plan asks for: one at a time per call, after the client-side rate
 * limit and right before sending, the write fence; counts each request by outcome and
 * latency; records what it wrote in the mutation cache; and turns API errors into
 * reconcile results (the work queue decides retry and backoff):
 * - create AlreadyExists of an object of a mirror (Service, Endpoints, EndpointSlice): the
 *   name is looked up; a user's object is reported as a conflict and left alone (SPEC §5),
 *   ours (a leftover) is adopted;
 * - create AlreadyExists of a Namespace: it exists, our store lags: go on;
 * - delete 404: already gone: go on;
 * - anything else: retry with backoff.
 * One create per namespace at a time: the other keys of a new namespace share its outcome
 * instead of racing it (each racer would cost a rejected POST). Replicas of a sharded
 * Deployment may still race each other for a namespace: one create wins, the others'
 * AlreadyExists is success, so a namespace is created once.
 *
 * Sharded: every write names the shard of its key; the fence of that shard is checked
 * right before sending, and the writes in flight are counted per shard, so a shard
 * given up can be awaited until none of its writes is in flight (`whenDrained`).
 */
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { FairTokenBucket } from "../../src/core/fair-bucket.ts";
import { CLUSTER_NAME } from "../../src/core/labels.ts";
import {
  actionApiVersion,
  type Blocked,
  MIRROR_KINDS,
  objectPath,
  type WriteAction,
} from "../../src/core/mirror-kinds.ts";
import { type KubeObject, objectKey, splitKey } from "../../src/core/objects.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import { KubeApiError, type KubeClient } from "../../src/kube/client.ts";
import type { Logger } from "../../src/log.ts";
import { describeError, serializeError } from "../../src/protocol/errors.ts";
import type { EventRequest } from "../../src/protocol/messages.ts";
import type { WriteFence } from "./fence.ts";
import type { MutationCache } from "./mutation-cache.ts";
import type { WriterStats } from "./status.ts";
import { SHARED_LANE } from "./write-lanes.ts";

export interface WriteExecutorDeps {
  readonly client: Pick<KubeClient, "request">;
  readonly bucket: Pick<FairTokenBucket, "take">;
  /** The lane (cluster) of a key, whose turn its writes take at the rate limit. Default: one lane. */
  readonly lane?: (key: string) => string;
  readonly fence: WriteFence;
  readonly cache: MutationCache;
  readonly stats: WriterStats;
  readonly log: Logger;
  /** A create found a user's object under the mirror's name: report it as blocked. */
  readonly block: (key: string, cluster: string, blocked: Blocked) => void;
  readonly blockedRecheckMs: number;
  /**
   * The client's own request timeout: a fenced write's timeout is the shorter of it and
   * the time left before its shard's deadline (a fence only ever shortens a wait).
   */
  readonly requestTimeoutMs?: number;
}

/** The outcome of one write: a reconcile result to stop at, or undefined to go on with the plan. */
export type WriteOutcome = ReconcileResult | undefined;

/** The Warning Event of a write that retrying cannot fix (invalid, forbidden), on the mirror; else undefined. */
export function writeFailedEvent(key: string, error: unknown): EventRequest | undefined {
  const { namespace, name } = splitKey(key);
  if (!(error instanceof KubeApiError) || error.retryable || !namespace) return undefined;
  return {
    involved: { kind: "Service", apiVersion: "v1", namespace, name },
    type: "Warning",
    reason: "MirrorWriteFailed",
    message: `fleet-mirror cannot write mirror ${key} (${error.status} ${error.reason}); retrying with backoff: ${error.message}`,
  };
}

/**
 * What reports a reconcile of a key that failed (it is retried with backoff by the work
 * queue, never given up): counted, logged, and, when retrying cannot fix it (invalid,
 * forbidden), a Warning Event on the mirror, since it needs a human (deduplicated by the
 * recorder).
 */
export function reconcileErrorReporter(deps: {
  readonly stats: WriterStats;
  readonly log: Logger;
  readonly recordEvent: (event: EventRequest) => void;
}): (key: string, error: unknown, requeues: number) => void {
  return (key, error, requeues) => {
    deps.stats.retries += 1;
    deps.stats.lastError = serializeError(error, `local-writer: reconcile ${key}`);
    deps.log.warn(
      { key, requeues, err: deps.stats.lastError },
      `write failed, retrying with backoff: ${describeError(deps.stats.lastError)}`,
    );
    const event = writeFailedEvent(key, error);
    if (event) deps.recordEvent(event);
  };
}

/**
 * A create of `action` found `existing` under its name (SPEC §5): a user's object is
 * reported as blocked and left alone (re-checked later); ours (a leftover, or not yet
 * delivered by the label-selected watch) is adopted, and the key reconciled again at once.
 */
export function nameTaken(
  deps: Pick<WriteExecutorDeps, "cache" | "block" | "blockedRecheckMs">,
  key: string,
  action: WriteAction & { readonly verb: "create" },
  desired: DesiredMirror | undefined,
  existing: KubeObject,
): WriteOutcome {
  if (action.kind === "Namespace") return undefined;
  const owner = MIRROR_KINDS[action.kind].owner(existing.metadata.labels);
  if (owner === undefined && desired) {
    deps.block(key, desired.cluster, {
      reason: "user-owned",
      message: `${action.kind} ${objectKey(action)} exists and is not a fleet-mirror mirror; it is left as is`,
    });
    return { kind: "requeue-after", ms: deps.blockedRecheckMs };
  }
  deps.cache.written(action.kind, objectKey(action), existing);
  return { kind: "requeue-after", ms: 0 };
}

export class WriteExecutor {
  readonly #deps: WriteExecutorDeps;
  /** Namespace creates in flight, or done but not yet seen by the namespace watch, by name. */
  readonly #namespaceCreates = new Map<string, Promise<WriteOutcome>>();
  /** Writes sent and not answered, by shard. */
  readonly #inFlight = new Map<number, number>();
  #drainWaiters: { readonly shards: ReadonlySet<number>; readonly resolve: () => void }[] = [];

  constructor(deps: WriteExecutorDeps) {
    this.#deps = deps;
  }

  /** The namespace watch reported `name`: its create is settled. */
  namespaceSeen(name: string): void {
    this.#namespaceCreates.delete(name);
  }

  /** Resolves once no write of any of `shards` is in flight (at once when none is). */
  whenDrained(shards: Iterable<number>): Promise<void> {
    const set = new Set(shards);
    if (![...set].some((s) => (this.#inFlight.get(s) ?? 0) > 0)) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push({ shards: set, resolve }));
  }

  /**
   * Performs one write of `key`'s plan. `observed` is the object the action applies to
   * as reconcile saw it (a DELETE's tombstone remembers which object was deleted).
   * `shard`: the shard of `key` (0 when not sharded), whose fence the write passes.
   */
  async apply(
    key: string,
    action: WriteAction,
    desired: DesiredMirror | undefined,
    observed: KubeObject | undefined,
    shard = 0,
    steers = false,
  ): Promise<WriteOutcome> {
    if (action.verb !== "create" || action.kind !== "Namespace")
      return this.#write(key, action, desired, observed, shard, steers);
    const pending = this.#namespaceCreates.get(action.name);
    if (pending) return pending;
    const created = this.#write(key, action, desired, observed, shard, steers);
    this.#namespaceCreates.set(action.name, created);
    const outcome = await created;
    if (outcome && this.#namespaceCreates.get(action.name) === created) this.#namespaceCreates.delete(action.name);
    return outcome;
  }

  async #write(
    key: string,
    action: WriteAction,
    desired: DesiredMirror | undefined,
    observed: KubeObject | undefined,
    shard: number,
    steers: boolean,
  ): Promise<WriteOutcome> {
    const { client, cache, stats, log } = this.#deps;
    // The busy share (core/fair-bucket.ts) never holds back a plan that moves traffic,
    // nor the objects all clusters share: a failover goes at the whole rate.
    const lane = this.#deps.lane?.(key) ?? SHARED_LANE;
    await this.#deps.bucket.take(lane, steers || lane === SHARED_LANE);
    // Checked after the rate-limit wait, right before sending: the wait may cross the fence.
    if (!this.#deps.fence.writableFor(shard)) return this.#deps.fence.held(`${action.verb} ${action.kind} ${key}`);
    stats.inFlight += 1;
    this.#inFlight.set(shard, (this.#inFlight.get(shard) ?? 0) + 1);
    const startedAt = performance.now();
    const path =
      action.kind === "Namespace"
        ? "/api/v1/namespaces"
        : objectPath(action.kind, action.namespace, undefined, actionApiVersion(action));
    // The mutation cache holds each object under its own key (a slice's is not its mirror's).
    const objectId = action.kind === "Namespace" ? action.name : objectKey(action);
    // Fenced: the request is aborted at the shard's deadline, so that none of it reaches
    // the server once another replica may hold the shard (fence.ts, `msLeftFor`).
    const left = this.#deps.fence.msLeftFor(shard);
    const ceiling = this.#deps.requestTimeoutMs ?? Number.POSITIVE_INFINITY;
    const bounds = left < ceiling ? { timeoutMs: Math.max(1, Math.floor(left)) } : {};
    try {
      switch (action.verb) {
        case "create": {
          const created = await client.request<KubeObject>("POST", path, { body: action.body, ...bounds });
          if (action.kind !== "Namespace") cache.written(action.kind, objectId, created);
          // A Namespace outlives the mirror that needed it (SPEC §3): say whose it is.
          else
            log.info(
              { key, namespace: action.name, cluster: created?.metadata?.labels?.[CLUSTER_NAME] },
              `created Namespace ${action.name} for ${key} (labelled with its cluster; fleet-mirror never deletes it)`,
            );
          break;
        }
        case "update": {
          const status = action.subresource === "status" ? "/status" : "";
          const updated = await client.request<KubeObject>("PUT", `${path}/${action.name}${status}`, {
            body: action.body,
            ...bounds,
          });
          cache.written(action.kind, objectId, updated);
          break;
        }
        case "delete": {
          await client.request("DELETE", `${path}/${action.name}`, {
            body: {
              apiVersion: "v1",
              kind: "DeleteOptions",
              ...(action.uid ? { preconditions: { uid: action.uid } } : {}),
            },
            ...bounds,
          });
          cache.deleted(action.kind, objectId, observed);
          log.info({ key, kind: action.kind, cluster: action.cluster }, `deleted mirror ${action.kind} ${objectId}`);
          break;
        }
      }
      stats.count(action.verb, action.kind, "ok");
      return undefined;
    } catch (error) {
      stats.count(action.verb, action.kind, error instanceof KubeApiError ? String(error.status) : "error");
      return this.#onError(key, action, desired, error);
    } finally {
      stats.inFlight -= 1;
      this.#settled(shard);
      stats.observeWriteDuration((performance.now() - startedAt) / 1000);
    }
  }

  #settled(shard: number): void {
    const left = (this.#inFlight.get(shard) ?? 1) - 1;
    if (left > 0) {
      this.#inFlight.set(shard, left);
      return;
    }
    this.#inFlight.delete(shard);
    const waiting = this.#drainWaiters;
    this.#drainWaiters = [];
    for (const waiter of waiting) {
      if ([...waiter.shards].some((s) => (this.#inFlight.get(s) ?? 0) > 0)) this.#drainWaiters.push(waiter);
      else waiter.resolve();
    }
  }

  async #onError(
    key: string,
    action: WriteAction,
    desired: DesiredMirror | undefined,
    error: unknown,
  ): Promise<WriteOutcome> {
    if (!(error instanceof KubeApiError)) return { kind: "retry", error };
    if (action.verb === "create" && error.reason === "AlreadyExists") {
      if (action.kind === "Namespace") return undefined; // exists: our store lags, go on
      // Not in our label-selected store: a user's object, or ours not yet delivered.
      try {
        const existing = await this.#deps.client.request<KubeObject>(
          "GET",
          objectPath(action.kind, action.namespace, action.name, actionApiVersion(action)),
        );
        return nameTaken(this.#deps, key, action, desired, existing);
      } catch (getError) {
        return { kind: "retry", error: getError };
      }
    }
    if (action.verb === "delete" && error.status === 404) return undefined; // already gone
    return { kind: "retry", error };
  }
}
