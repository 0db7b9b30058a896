/**
 * Reconcile of one MCS import (SPEC §12): its key is its derived Service's
 * (`importKey`), where the exports of every cluster meet. The exports reduce like a
 * fleet-wide Service's members (the oldest export sets the ports), the derived Service
 * and each exporting cluster's slices are planned by `planFederated` (flavor
 * `importFlavor`), and the ServiceImport by `planServiceImport`.
 *
 * Invariants:
 * - nothing of an import is written while the local cluster's ServiceImports are not
 *   known (their watch has not listed), and nothing at all where they are not served or
 *   not readable: the exporting clusters are told why (status `blocked`, one Event);
 * - a user's ServiceImport, Service, Endpoints or slice under one of the import's names
 *   blocks the whole import: nothing is written, each exporting cluster is told;
 * - the ServiceImport is written after its derived Service has a cluster IP, and deleted
 *   before it.
 * Sharded writers (`--shards` > 1) do not write imports yet (planned, SPEC §12): each
 * exporting cluster is told so.
 */
import { carryPorts } from "../../src/core/desired.ts";
import { sliceNames } from "../../src/core/endpoint-slices.ts";
import { type ReductionSummary, summarizeReduction } from "../../src/core/federated.ts";
import { annotatedClusters } from "../../src/core/federated-objects.ts";
import { CLUSTER_NAME, SERVICE_IMPORT_LABEL } from "../../src/core/labels.ts";
import { conditionsUpdate, exportConditions } from "../../src/core/local-exports.ts";
import { derivedServiceName, MCS_GROUP, MCS_VERSION, type McsExport } from "../../src/core/mcs.ts";
import { conflictsOf, type ImportConflict } from "../../src/core/mcs-spec.ts";
import type { ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, Endpoints, KubeObject, Service } from "../../src/core/objects.ts";
import { objectKey, splitKey } from "../../src/core/objects.ts";
import { planFederated } from "../../src/core/plan-federated.ts";
import { DERIVED_NAME, importFlavor, isImportObject, planServiceImport } from "../../src/core/plan-imports.ts";
import { reduceImport } from "../../src/core/reduce-imports.ts";
import type { ReconcileResult } from "../../src/core/workqueue.ts";
import type { FederatedServiceStatus } from "../../src/protocol/messages.ts";
import { type FleetProblem, reportProblems } from "./problem-events.ts";
import {
  applyActions,
  getUnlabelled,
  ownershipOf,
  type ReconcilerDeps,
  type ServiceImportSource,
  slicesOfService,
} from "./reconcile-io.ts";

/** The Warning Event of each import problem reason. */
const IMPORT_EVENT_REASONS: Readonly<Record<string, string>> = {
  "port-conflict": "ServiceImportPortConflict",
  "import-conflict": "ServiceImportConflict",
  "user-owned": "ServiceImportNameConflict",
  "mcs-not-served": "ServiceImportNotServed",
  "mcs-not-sharded": "ServiceImportNotSharded",
};

/** Passes of one reconcile at most: Service, then ServiceImport spec, then its status. */
const MAX_PASSES = 4;

export class ImportReconciler {
  readonly #deps: ReconcilerDeps;
  readonly #imports: ServiceImportSource;
  /** Import keys → exporting cluster → why its export is not (wholly) written. */
  readonly #problems = new Map<string, ReadonlyMap<string, FleetProblem>>();
  /** Import keys → their last reduction, for status. */
  readonly #summaries = new Map<string, ReductionSummary & { name: string }>();
  /** Import keys whose last reduction waited (as `FederatedReconciler.waiting`). */
  readonly #waiting = new Set<string>();

  constructor(deps: ReconcilerDeps, imports: ServiceImportSource) {
    this.#deps = deps;
    this.#imports = imports;
  }

  /** Whether `key` is an import's (its name is a derived Service's). */
  isImport(key: string): boolean {
    return DERIVED_NAME.test(splitKey(key).name);
  }

  problems(): ReadonlyMap<string, ReadonlyMap<string, FleetProblem>> {
    return this.#problems;
  }

  /** Keys whose last reduction waited for unknown clusters. */
  waiting(): Iterable<string> {
    return this.#waiting;
  }

  /** Every import reduced and not deleted, by ServiceImport key (`namespace/<svc>`). */
  status(): FederatedServiceStatus[] {
    return [...this.#summaries]
      .map(([key, s]) => ({
        key: `${splitKey(key).namespace ?? ""}/${s.name}`,
        clusters: [...s.clusters],
        kept: [...s.kept],
        ready: s.ready,
        notReady: s.notReady,
      }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const { namespace = "", name: derived } = splitKey(key);
    const named = this.#deps.desired.exports(key);
    const service = this.#serviceName(key, namespace, derived, named);
    const exports = service === undefined ? named : this.#exportsOf(key, namespace, service).exports;
    const exporters = [...exports.keys()].sort();
    const { state, settled, message } = this.#imports.availability;
    if (service === undefined) {
      this.#summaries.delete(key);
      this.#problems.delete(key);
      this.#waiting.delete(key);
      return { kind: "done" };
    }
    const blockedFor = async (reason: string, text: string): Promise<ReconcileResult> => {
      this.#setProblems(key, service, new Map(exporters.map((cluster) => [cluster, { reason, message: text }])));
      const outcome = await this.#writeConditions(key, namespace, service, {
        imported: false,
        pending: text,
        conflicts: [],
      });
      if (outcome) return outcome;
      return exporters.length > 0
        ? { kind: "requeue-after", ms: this.#deps.options.blockedRecheckMs }
        : { kind: "done" };
    };
    // The ServiceImports are not known yet (a first list under way or failing: retried).
    if (!settled || state === "watching") return { kind: "requeue-after", ms: 1_000 };
    if (state !== "active")
      return blockedFor("mcs-not-served", `ServiceImport ${namespace}/${service} is not written: ${message ?? state}`);
    if (ownershipOf(this.#deps).shards > 1)
      return blockedFor(
        "mcs-not-sharded",
        `ServiceImport ${namespace}/${service} is not written by a sharded writer yet`,
      );
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const { actions, observed, blocked, again, outcome: ended } = await this.#plan(key, namespace, derived, service);
      if (ended) return ended;
      if (blocked) return blockedFor(blocked.reason, blocked.message);
      if (actions.length === 0) return { kind: "done" };
      const outcome = await applyActions(this.#deps, key, actions, undefined, observed, 0);
      if (outcome) return outcome;
      // Another pass when the write changed what the next step needs (the Service's IP,
      // the ServiceImport's resourceVersion, a part's name freed of a mirror's slice);
      // the mutation cache shows it at once.
      if (!again && !actions.some((a) => a.verb !== "delete" && (a.kind === "Service" || a.kind === "ServiceImport")))
        return { kind: "done" };
    }
    return { kind: "done" };
  }

  /**
   * Every cluster's export of ServiceImport `namespace/service`: the remote clusters' (the
   * desired store) and the local cluster's own (SPEC §16; it wins over a remote cluster
   * registered under the same name). `localUnknown`: the local export is not known.
   */
  #exportsOf(
    key: string,
    namespace: string,
    service: string,
  ): { exports: Map<string, McsExport>; localUnknown: boolean } {
    const exports = new Map(this.#deps.desired.exports(key));
    const local = this.#deps.localExports;
    if (!local) return { exports, localUnknown: false };
    exports.delete(local.cluster);
    const answer = local.exportOf(namespace, service);
    if (answer.kind === "exported" && answer.outcome.kind === "export")
      exports.set(local.cluster, answer.outcome.export);
    return { exports, localUnknown: answer.kind === "unknown" };
  }

  /**
   * Sets the conditions of the local ServiceExport of `namespace/service` (SPEC §16), if
   * there is one, when they differ from what it has: a status write, never more often
   * than its content changes.
   */
  async #writeConditions(
    key: string,
    namespace: string,
    service: string,
    state: { imported: boolean; pending?: string; conflicts: readonly ImportConflict[] },
  ): Promise<ReconcileResult | undefined> {
    const local = this.#deps.localExports;
    const answer = local?.exportOf(namespace, service);
    if (!local || answer?.kind !== "exported") return undefined;
    const exportKey = objectKey({ namespace, name: service });
    const observed = this.#deps.cache.observed("ServiceExport", exportKey, answer.serviceExport);
    if (!observed) return undefined;
    const conditions = exportConditions({
      outcome: answer.outcome,
      imported: state.imported,
      ...(state.pending ? { pending: state.pending } : {}),
      conflicts: conflictsOf(state.conflicts, local.cluster),
    });
    const body = conditionsUpdate(observed, conditions, new Date().toISOString().replace(/\.\d+Z$/, "Z"));
    if (!body) return undefined;
    const action: WriteAction = {
      verb: "update",
      kind: "ServiceExport",
      namespace,
      name: service,
      subresource: "status",
      body,
    };
    return applyActions(this.#deps, key, [action], undefined, [{ kind: "ServiceExport", object: observed }], 0);
  }

  /** The ServiceImport's name: from an export, else from fleet-mirror's objects of the key. */
  #serviceName(
    key: string,
    namespace: string,
    derived: string,
    exports: ReadonlyMap<string, { readonly name: string }>,
  ): string | undefined {
    for (const e of exports.values()) return e.name;
    const local = this.#deps.localExports?.nameFor(namespace, derived);
    if (local) return local;
    const observed = this.#deps.cache.observed("Service", key, this.#deps.services.get(key));
    const label =
      observed && isImportObject("Service", observed) ? observed.metadata.labels?.[SERVICE_IMPORT_LABEL] : undefined;
    if (label) return label;
    for (const si of this.#imports.values())
      if (si.metadata.namespace === namespace && derivedServiceName(namespace, si.metadata.name) === derived)
        return si.metadata.name;
    for (const slice of slicesOfService(this.#deps, namespace, derived))
      return slice.metadata.labels?.[SERVICE_IMPORT_LABEL];
    return undefined;
  }

  async #plan(
    key: string,
    namespace: string,
    derived: string,
    service: string,
  ): Promise<{
    actions: WriteAction[];
    observed: ObservedObject[];
    blocked?: { reason: string; message: string };
    again?: boolean;
    /** The conditions' write ended the pass with this result. */
    outcome?: ReconcileResult;
  }> {
    const { desired: store, cache, options } = this.#deps;
    const importKey = objectKey({ namespace, name: service });
    const apiVersion = `${MCS_GROUP}/${this.#imports.availability.version ?? MCS_VERSION}`;
    let derivedService = cache.observed("Service", key, this.#deps.services.get(key));
    let endpoints = cache.observed("Endpoints", key, this.#deps.endpoints.get(key));
    let serviceImport = cache.observed("ServiceImport", importKey, this.#imports.get(importKey));
    const namespaceExists = this.#deps.namespaces.get(namespace) !== undefined;
    // Objects without our labels are invisible to the stores: looked up before creating.
    if (this.#exportsOf(key, namespace, service).exports.size > 0 && namespaceExists) {
      derivedService ??= await getUnlabelled<Service>(this.#deps, "Service", key);
      endpoints ??= await getUnlabelled<Endpoints>(this.#deps, "Endpoints", key);
      serviceImport ??= await getUnlabelled<KubeObject>(this.#deps, "ServiceImport", importKey, apiVersion);
    }
    // The desired state is read after the GETs, in one go (exports, unknown clusters):
    // a batch absorbed meanwhile must not leave a snapshot of one next to the other.
    const { exports, localUnknown } = this.#exportsOf(key, namespace, service);
    const sliceKeys = new Set<string>();
    const partClusters = new Set<string>();
    for (const slice of slicesOfService(this.#deps, namespace, derived)) {
      sliceKeys.add(objectKey(slice.metadata));
      const cluster = isImportObject("EndpointSlice", slice) ? slice.metadata.labels?.[CLUSTER_NAME] : undefined;
      if (cluster) partClusters.add(cluster);
    }
    const observedClusters = [
      ...(derivedService && isImportObject("Service", derivedService) ? annotatedClusters(derivedService) : []),
      ...partClusters,
    ];
    // As for a fleet-wide Service (SPEC §11): before the registered clusters are known, a
    // cluster the observed objects name that has not sent its complete set may still be
    // registered: unknown, not absent, so its part is kept (a restart writes nothing).
    const unknown = store.unknownClusters();
    if (!store.registrationKnown) for (const c of observedClusters) if (!store.exportsKnown(c)) unknown.add(c);
    // A cluster whose ServiceExport read failed (SPEC §12) is unknown for the imports it
    // is seen in or was known to export to: its part is kept, the import never deleted
    // for it. Elsewhere it holds nothing up (a role that never reads ServiceExports).
    const involved = new Set([...observedClusters, ...exports.keys()]);
    for (const c of store.exportsUnknown()) if (involved.has(c)) unknown.add(c);
    // The local cluster's own export (SPEC §16) under the same rule: unknown is kept.
    const localCluster = this.#deps.localExports?.cluster;
    if (localCluster !== undefined) {
      unknown.delete(localCluster);
      if (localUnknown && involved.has(localCluster)) unknown.add(localCluster);
    }
    const ours = derivedService && isImportObject("Service", derivedService) ? derivedService : undefined;
    const { reduction, merged } = reduceImport({
      exports,
      registration: {
        registeredAt: (c) => store.registeredAt(c),
        ...(localCluster !== undefined ? { local: localCluster } : {}),
      },
      unknown,
      registrationKnown: store.registrationKnown,
      observedClusters,
      observedPorts: ours ? carryPorts(ours) : undefined,
    });
    if (reduction.kind === "wait") this.#waiting.add(key);
    else this.#waiting.delete(key);
    if (reduction.kind === "delete") this.#summaries.delete(key);
    else this.#summaries.set(key, { ...summarizeReduction(reduction), name: service });
    const observed: ObservedObject[] = [];
    if (derivedService) observed.push({ kind: "Service", object: derivedService });
    if (endpoints) observed.push({ kind: "Endpoints", object: endpoints });
    if (serviceImport) observed.push({ kind: "ServiceImport", object: serviceImport });
    if (reduction.kind === "write")
      for (const part of reduction.parts)
        for (const sliceName of sliceNames(`${derived}-${part.cluster}`)) sliceKeys.add(`${namespace}/${sliceName}`);
    for (const sliceKey of sliceKeys) {
      const slice =
        cache.observed("EndpointSlice", sliceKey, this.#deps.slices.get(sliceKey)) ??
        (exports.size > 0 && !derivedService && namespaceExists && options.endpointsApi !== "endpoints"
          ? await getUnlabelled<EndpointSlice>(this.#deps, "EndpointSlice", sliceKey)
          : undefined);
      if (slice) observed.push({ kind: "EndpointSlice", object: slice });
    }
    const importPlan = planServiceImport({
      namespace,
      name: service,
      derived,
      reduction,
      observed: serviceImport,
      spec: reduction.kind === "write" ? merged?.spec : undefined,
      clusterIPs: clusterIPsOf(derivedService),
      apiVersion,
    });
    if (importPlan.blocked) return { actions: [], observed, blocked: importPlan.blocked };
    const servicePlan = planFederated({
      namespace,
      name: derived,
      reduction,
      observed: observed.filter((o) => o.kind !== "ServiceImport"),
      endpointsApi: options.endpointsApi,
      namespaceExists,
      createNamespaces: options.createNamespaces,
      excludedNamespaces: options.excludedNamespaces,
      namespaceQuota: this.#deps.namespaceQuota,
      flavor: importFlavor(service),
      headless: merged?.spec.type === "Headless",
    });
    if (servicePlan.blocked) return { actions: [], observed, blocked: servicePlan.blocked };
    const problems = new Map<string, FleetProblem>();
    // A conflict is reported on the clusters whose value lost (the local cluster's own on
    // its ServiceExport's conditions, below): their endpoints serve less, or their fields
    // are not the ServiceImport's.
    for (const c of reduction.kind === "write" ? (merged?.conflicts ?? []) : [])
      for (const cluster of c.clusters)
        if (cluster !== c.winner && !problems.has(cluster))
          problems.set(cluster, {
            reason: c.field === "ports" ? "port-conflict" : "import-conflict",
            message: `ServiceImport ${importKey}: ${c.message}`,
          });
    this.#setProblems(key, service, problems);
    // The local ServiceExport's conditions (SPEC §16): once nothing else is left to write.
    const pendingWrites = importPlan.actions.length + servicePlan.actions.length;
    const listed = (serviceImport as { status?: { clusters?: { cluster: string }[] } } | undefined)?.status?.clusters;
    if (pendingWrites === 0 && localCluster !== undefined) {
      const imported = reduction.kind === "write" && (listed ?? []).some((c) => c.cluster === localCluster);
      const outcome = await this.#writeConditions(key, namespace, service, {
        imported,
        ...(reduction.kind === "wait" ? { pending: "waiting for clusters whose exports are not known yet" } : {}),
        conflicts: reduction.kind === "write" ? (merged?.conflicts ?? []) : [],
      });
      if (outcome) return { actions: [], observed, outcome };
    }
    // The ServiceImport is deleted before its Service, and written after it.
    const actions =
      reduction.kind === "delete"
        ? [...importPlan.actions, ...servicePlan.actions]
        : [...servicePlan.actions, ...importPlan.actions];
    return servicePlan.again ? { actions, observed, again: true } : { actions, observed };
  }

  /** Replaces the problems of import `key` (ServiceImport `name`), and reports them (see reportProblems). */
  #setProblems(key: string, name: string, problems: Map<string, FleetProblem>): void {
    const { namespace = "" } = splitKey(key);
    reportProblems(this.#deps, this.#problems, {
      key,
      problems,
      involved: { kind: "ServiceImport", apiVersion: "multicluster.x-k8s.io/v1alpha1", namespace, name },
      eventReasons: IMPORT_EVENT_REASONS,
      otherReason: "ServiceImportConflict",
    });
  }
}

/** The derived Service's cluster IPs and their families (SPEC §16: the ServiceImport's `ips` and `ipFamilies`). */
function clusterIPsOf(service: Service | undefined): { ips: string[]; families: string[] } | undefined {
  const spec = service?.spec;
  const ip = spec?.clusterIP;
  if (!service || !ip || ip === "None" || !isImportObject("Service", service)) return undefined;
  const ips = Array.isArray(spec["clusterIPs"]) ? (spec["clusterIPs"] as string[]) : [ip];
  const declared = Array.isArray(spec["ipFamilies"]) ? (spec["ipFamilies"] as string[]) : [];
  const families = ips.map((a, i) => declared[i] ?? (a.includes(":") ? "IPv6" : "IPv4"));
  return { ips, families };
}
