/**
 * Reconcile of one local key (`namespace/name`): desired ⊕ observed → plan → writes.
 * Reads the desired store and the local stores (through the mutation cache, so our own
 * writes count before the watch delivers them), decides which cluster owns the name,
 * plans with the pure `planMirror`, reports conflicts, and hands each write to the
 * write executor. It never learns why it was called (level-triggered).
 */

import { ownerCluster } from "../../src/core/labels.ts";
import type { Endpoints, KubeObject, Namespace, Service } from "../../src/core/objects.ts";
import { splitKey } from "../../src/core/objects.ts";
import { type Blocked, planMirror, type WriteAction } from "../../src/core/plan.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import { KubeApiError, type KubeClient } from "../../src/kube/client.ts";
import type { Logger } from "../../src/log.ts";
import type { EventRequest, WriterOptions } from "../../src/protocol/messages.ts";
import type { DesiredStore } from "./desired-store.ts";
import type { MutationCache } from "./mutation-cache.ts";
import type { WriteExecutor } from "./write-executor.ts";

/** The read side of a local store (a Watcher). */
export interface Store<T> {
  get(key: string): T | undefined;
}

export interface ReconcilerDeps {
  readonly desired: DesiredStore;
  readonly services: Store<Service>;
  readonly endpoints: Store<Endpoints>;
  readonly namespaces: Store<Namespace>;
  readonly cache: MutationCache;
  readonly executor: WriteExecutor;
  readonly client: Pick<KubeClient, "request">;
  readonly options: Pick<WriterOptions, "createNamespaces" | "excludedNamespaces" | "blockedRecheckMs">;
  readonly log: Logger;
  readonly recordEvent: (event: EventRequest) => void;
}

/**
 * The plan's actions, with Endpoints deletes before Service deletes when the plan only
 * deletes (a mirror no longer wanted): the API server deletes a Service's same-named
 * Endpoints together with it, so an Endpoints DELETE sent after the Service's would
 * always answer 404 (a second, wasted DELETE). Any other plan keeps its order.
 */
export function deletesEndpointsFirst(actions: readonly WriteAction[]): readonly WriteAction[] {
  if (!actions.every((a) => a.verb === "delete")) return actions;
  return [...actions.filter((a) => a.kind === "Endpoints"), ...actions.filter((a) => a.kind !== "Endpoints")];
}

export interface BlockedMirror {
  readonly key: string;
  readonly reason: string;
  readonly message: string;
}

export class MirrorReconciler {
  readonly #deps: ReconcilerDeps;
  /** Keys whose mirror is not written, with the cluster that wants it and why. */
  readonly #blocked = new Map<string, Blocked & { cluster: string }>();

  constructor(deps: ReconcilerDeps) {
    this.#deps = deps;
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const { desired: store, cache, options } = this.#deps;
    const claimants = store.claimants(key);
    const service = cache.observed("Service", key, this.#deps.services.get(key));
    let endpoints = cache.observed("Endpoints", key, this.#deps.endpoints.get(key));
    const { namespace } = splitKey(key);
    const namespaceExists = namespace !== undefined && this.#deps.namespaces.get(namespace) !== undefined;
    // Our stores hold only labelled objects, so a user's Endpoints holding the name are
    // invisible to them. A failed create would reveal them only AFTER the mirror Service
    // was created next to them (and that Service would route to the user's addresses):
    // look the Endpoints up before creating a Service (SPEC §5).
    if (claimants.length > 0 && !service && !endpoints && namespaceExists) {
      endpoints = await this.#getUnlabelled<Endpoints>("endpoints", key);
    }
    // The current owner keeps the name; otherwise the first claimant in name order.
    const owner = ownerCluster(service?.metadata.labels) ?? ownerCluster(endpoints?.metadata.labels);
    const winner = owner && claimants.includes(owner) ? owner : claimants[0];
    const desired = winner ? store.get(winner, key) : undefined;
    const plan = planMirror({
      key,
      desired,
      service,
      endpoints,
      namespaceExists,
      createNamespaces: options.createNamespaces,
      excludedNamespaces: options.excludedNamespaces,
      gcAllowed: (cluster) => store.gcAllowed(cluster),
    });
    for (const loser of claimants) {
      if (loser === winner) continue;
      this.block(key, loser, {
        reason: "owned-by-other-cluster",
        message: `mirror name ${key} is also wanted by cluster ${winner}; cluster ${loser}'s mirror is not written`,
      });
    }
    if (plan.blocked && desired) {
      this.block(key, desired.cluster, plan.blocked);
      return { kind: "requeue-after", ms: options.blockedRecheckMs };
    }
    if (!claimants.some((c) => c !== winner)) this.#blocked.delete(key);
    for (const action of deletesEndpointsFirst(plan.actions)) {
      const target: KubeObject | undefined =
        action.kind === "Service" ? service : action.kind === "Endpoints" ? endpoints : undefined;
      const outcome = await this.#deps.executor.apply(key, action, desired, target);
      if (outcome) return outcome;
    }
    return { kind: "done" };
  }

  /** A mirror that is not written: logged (once per message) and reported as an Event. */
  block(key: string, cluster: string, blocked: Blocked): void {
    const previous = this.#blocked.get(key);
    this.#blocked.set(key, { ...blocked, cluster });
    if (previous?.message === blocked.message) return;
    this.#deps.log.warn({ key, cluster, reason: blocked.reason }, blocked.message);
    const { namespace, name } = splitKey(key);
    if (namespace && blocked.reason !== "namespace-missing" && blocked.reason !== "excluded-namespace") {
      this.#deps.recordEvent({
        involved: { kind: "Service", apiVersion: "v1", namespace, name },
        type: "Warning",
        reason: blocked.reason === "user-owned" ? "MirrorNameConflict" : "MirrorOwnedByOtherCluster",
        message: blocked.message,
      });
    }
  }

  /** Blocked mirrors by the cluster that wants them. */
  blockedByCluster(): Map<string, BlockedMirror[]> {
    const out = new Map<string, BlockedMirror[]>();
    for (const [key, b] of this.#blocked) {
      const list = out.get(b.cluster) ?? [];
      list.push({ key, reason: b.reason, message: b.message });
      out.set(b.cluster, list);
    }
    return out;
  }

  /** GETs an object our label-selected stores may not show; undefined when it does not exist. */
  async #getUnlabelled<T extends KubeObject>(resource: "services" | "endpoints", key: string): Promise<T | undefined> {
    const { namespace, name } = splitKey(key);
    try {
      return await this.#deps.client.request<T>("GET", `/api/v1/namespaces/${namespace}/${resource}/${name}`);
    } catch (error) {
      if (error instanceof KubeApiError && error.status === 404) return undefined;
      throw error;
    }
  }
}
