/**
 * The write executor of a dry run (`run --dry-run`): takes the same calls as
 * `WriteExecutor` and sends nothing but GETs. Each write a reconcile hands it is added
 * to the dry run's plan (DryRunPlan, src/core/dry-run.ts) instead of being sent.
 *
 * What the real run would learn only from the API server's answer is found out by
 * reading: a create of a mirror's object whose name is taken (invisible to the
 * label-selected stores) is looked up first, and the answer goes through the same
 * `nameTaken` as a real AlreadyExists (SPEC §5: a user's object is a conflict, reported
 * as blocked and never planned over; ours is adopted and planned again). A Service the
 * plan creates is imagined for the rest of its key's reconcile (with a placeholder uid),
 * so that the slices the real run would write right after it (second pass) are planned too.
 */
import type { DesiredMirror } from "../../src/core/desired.ts";
import {
  DryRunPlan,
  type DryRunReport,
  describePlanned,
  type PlannedWrite,
  plannedWrite,
} from "../../src/core/dry-run.ts";
import { actionApiVersion, type MirrorObjectKind, objectPath, type WriteAction } from "../../src/core/mirror-kinds.ts";
import { type KubeObject, objectKey } from "../../src/core/objects.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import { KubeApiError, type KubeClient } from "../../src/kube/client.ts";
import type { Logger } from "../../src/log.ts";
import type { MutationCache } from "./mutation-cache.ts";
import { nameTaken, type WriteExecutorDeps, type WriteOutcome } from "./write-executor.ts";

/** The uid of a Service a dry run would create (the real one is the API server's). */
const IMAGINED_UID = "dry-run-not-created";

export interface DryRunExecutorDeps extends Pick<WriteExecutorDeps, "cache" | "block" | "blockedRecheckMs"> {
  /** Reads only: the executor GETs names a create would find taken. */
  readonly client: Pick<KubeClient, "request">;
  readonly log: Logger;
}

export class DryRunExecutor {
  readonly #deps: DryRunExecutorDeps;
  readonly #plan = new DryRunPlan();
  /** Services planned for creation, by key, while that key's reconcile runs. */
  readonly #imagined = new Map<string, KubeObject>();

  constructor(deps: DryRunExecutorDeps) {
    this.#deps = deps;
  }

  namespaceSeen(_name: string): void {}

  /** Nothing is ever in flight. */
  whenDrained(_shards: Iterable<number>): Promise<void> {
    return Promise.resolve();
  }

  /**
   * One reconcile of `key` (the work queue hands out a key once at a time): the key's
   * plan is made afresh, kept at the end, and each write that entered or left it logged.
   */
  async reconcile(
    key: string,
    reconciler: { reconcile(key: string): Promise<ReconcileResult> },
  ): Promise<ReconcileResult> {
    this.#plan.begin(key);
    try {
      return await reconciler.reconcile(key);
    } finally {
      this.#imagined.delete(key);
      const { added, gone } = this.#plan.end(key);
      const fields = (w: PlannedWrite) => ({ key, verb: w.verb, kind: w.kind, object: w.object });
      for (const w of added) this.#deps.log.info(fields(w), describePlanned(w));
      for (const w of gone) this.#deps.log.info(fields(w), `${describePlanned(w)}: no longer`);
    }
  }

  report(): DryRunReport {
    return this.#plan.report();
  }

  /** The mutation cache as reconcile reads it, with the Services this reconcile would have created. */
  readonly cache: Pick<MutationCache, "observed"> = {
    observed: <T extends KubeObject>(kind: MirrorObjectKind, key: string, fromWatch: T | undefined) => {
      const imagined = kind === "Service" ? this.#imagined.get(key) : undefined;
      return (imagined as T | undefined) ?? this.#deps.cache.observed(kind, key, fromWatch);
    },
  };

  async apply(
    key: string,
    action: WriteAction,
    desired: DesiredMirror | undefined,
    _observed?: KubeObject,
    _shard?: number,
  ): Promise<WriteOutcome> {
    if (action.verb === "create" && action.kind !== "Namespace") {
      let existing: KubeObject | undefined;
      try {
        existing = await this.#deps.client.request<KubeObject>(
          "GET",
          objectPath(action.kind, action.namespace, action.name, actionApiVersion(action)),
        );
      } catch (error) {
        if (!(error instanceof KubeApiError && error.status === 404)) return { kind: "retry", error };
      }
      if (existing) return nameTaken(this.#deps, key, action, desired, existing);
      if (action.kind === "Service") {
        const body = action.body as KubeObject;
        this.#imagined.set(objectKey(action), { ...body, metadata: { ...body.metadata, uid: IMAGINED_UID } });
      }
    }
    this.#plan.add(plannedWrite(key, action, action.verb === "delete" ? action.cluster : (desired?.cluster ?? "")));
    return undefined;
  }
}
