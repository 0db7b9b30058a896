/**
 * What the local writer does for one MCS import (SPEC §12), as pure functions: the
 * exports of every cluster reduce like a fleet-wide Service's members (federated.ts:
 * the oldest export's ports win; an exporter whose ports differ is left out and
 * reported), the derived ClusterIP Service and each exporting cluster's slices are
 * planned by `planFederated` with this flavor's labels, and the ServiceImport itself
 * (type ClusterSetIP, ports, `spec.ips` = the derived Service's cluster IP,
 * `status.clusters`) is planned here.
 *
 * Guarantees (unit tested):
 * - only objects labelled `mirrored-service` and `service-import` (slices also with
 *   fleet-mirror's `managed-by`) are fleet-mirror's: a user's ServiceImport under the
 *   name is never touched and blocks the import;
 * - the ServiceImport is written only once the derived Service has a cluster IP, and
 *   its spec and status in separate writes (the status is a subresource);
 * - nothing is written when the observed ServiceImport matches.
 */
import { sortedLabels } from "./compare.ts";
import type { MirrorServicePort } from "./desired.ts";
import { portsSignature, type Reduction } from "./federated.ts";
import { MANAGED_BY_FLEET_MIRROR, MANAGED_BY_LABEL, MIRRORED_SERVICE, SERVICE_IMPORT_LABEL } from "./labels.ts";
import { MCS_API_VERSION, MCS_SERVICE_NAME_LABEL, MCS_SOURCE_CLUSTER_LABEL, type McsExport } from "./mcs.ts";
import { type Blocked, deleteAction, type MirrorObjectKind, type WriteAction } from "./mirror-kinds.ts";
import type { KubeObject } from "./objects.ts";
import type { SharedServiceFlavor } from "./plan-federated.ts";

/** On fleet-mirror's ServiceImport: the name of its derived Service. */
export const DERIVED_SERVICE_ANNOTATION = "mirror.linkerd.io/derived-service";

/** A derived Service's name (`derivedServiceName`): how a writer key is told to be an import's. */
export const DERIVED_NAME = /^derived[0-9a-f]{16}$/;

/** The labels of every fleet-mirror object of ServiceImport `service`. */
export function importLabels(service: string): Readonly<Record<string, string>> {
  return { [MIRRORED_SERVICE]: "true", [SERVICE_IMPORT_LABEL]: service };
}

/** Whether fleet-mirror owns `object` of `kind` as an object of an MCS import (SPEC §5, §12). */
export function isImportObject(kind: MirrorObjectKind, object: KubeObject): boolean {
  const labels = object.metadata.labels;
  if (labels?.[MIRRORED_SERVICE] !== "true" || !labels[SERVICE_IMPORT_LABEL]) return false;
  return kind !== "EndpointSlice" || labels[MANAGED_BY_LABEL] === MANAGED_BY_FLEET_MIRROR;
}

/** The derived Service's flavor: its slices carry the MCS labels that name the import and the exporting cluster. */
export function importFlavor(service: string): SharedServiceFlavor {
  return {
    labels: importLabels(service),
    partLabels: (cluster) => ({ [MCS_SERVICE_NAME_LABEL]: service, [MCS_SOURCE_CLUSTER_LABEL]: cluster }),
    owns: isImportObject,
    what: "MCS import object",
  };
}

/** What the writer knows of the registered clusters, that ranks exports (SPEC §12). */
export interface ExportRegistration {
  /** The registered clusters in registration order (credentials Secret creation time, then name). */
  readonly order: readonly string[];
  /** When `cluster` was registered: its credentials Secret's creation time, as the local API server set it. */
  readonly registeredAt: (cluster: string) => string | undefined;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** Milliseconds of an RFC 3339 timestamp, or undefined when `text` is not one. */
export function parseTimestamp(text: string | undefined): number | undefined {
  if (text === undefined || !RFC3339.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * The exporting clusters, oldest export first (the MCS API's conflict rule: the oldest
 * export's ports win); the reduction's `order`. An export's age is what this controller
 * observed, not only what a remote claims: its ServiceExport's creation time, but never
 * earlier than its cluster's registration (a remote cannot claim to be older than the
 * moment fleet-mirror could first know it). An unparsable time counts as later than any
 * valid one. Ties go to the cluster registered first, then by name. A total order: the
 * same whatever the map's order, on every replica and after every restart.
 */
export function exportOrder(
  exports: ReadonlyMap<string, McsExport>,
  registration: ExportRegistration = { order: [], registeredAt: () => undefined },
): string[] {
  const rank = (cluster: string): number => {
    const i = registration.order.indexOf(cluster);
    return i < 0 ? registration.order.length : i;
  };
  const keyed = [...exports.values()].map((e) => {
    const exportedAt = parseTimestamp(e.exportedAt);
    const registeredAt = parseTimestamp(registration.registeredAt(e.cluster));
    const at = exportedAt === undefined ? undefined : Math.max(exportedAt, registeredAt ?? exportedAt);
    return { cluster: e.cluster, at: at ?? Number.POSITIVE_INFINITY, rank: rank(e.cluster) };
  });
  return keyed
    .sort(
      (a, b) =>
        (a.at === b.at ? 0 : a.at < b.at ? -1 : 1) ||
        a.rank - b.rank ||
        (a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0),
    )
    .map((e) => e.cluster);
}

/**
 * The reduction an import writes, given the ports its derived Service has now: while a
 * cluster it names is unknown (kept after a writer start), a reduction that would change
 * those ports waits instead. An unknown cluster's export time is not known, so it may be
 * the oldest exporter: the known first one does not get to set the ports meanwhile (a
 * restart would otherwise flip the ports and the parts, then flip them back).
 */
export function holdWhileKept(
  reduction: Reduction,
  observedPorts: readonly MirrorServicePort[] | undefined,
): Reduction {
  if (reduction.kind !== "write" || reduction.kept.length === 0 || observedPorts === undefined) return reduction;
  return portsSignature(observedPorts) === portsSignature(reduction.ports)
    ? reduction
    : { kind: "wait", kept: reduction.kept };
}

export interface ServiceImportPlanInput {
  readonly namespace: string;
  /** The ServiceImport's name (the exported Services' name). */
  readonly name: string;
  readonly derived: string;
  readonly reduction: Reduction;
  /** The ServiceImport under the name, if any (ours or not). */
  readonly observed: KubeObject | undefined;
  /** The derived Service's cluster IP, once it has one. */
  readonly clusterIP: string | undefined;
}

export interface ServiceImportPlan {
  readonly actions: readonly WriteAction[];
  readonly blocked?: Blocked;
}

interface ServiceImportObject extends KubeObject {
  readonly spec?: { readonly [field: string]: unknown };
  readonly status?: { readonly clusters?: readonly { readonly cluster: string }[]; readonly [field: string]: unknown };
}

/** A ServiceImport's port: what the MCS API carries of a Service port. */
function importPorts(ports: readonly MirrorServicePort[]): { name?: string; protocol: string; port: number }[] {
  return ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), protocol: p.protocol, port: p.port }));
}

function specOf(ports: readonly MirrorServicePort[], clusterIP: string): Record<string, unknown> {
  return { type: "ClusterSetIP", ports: importPorts(ports), ips: [clusterIP] };
}

/** The fields fleet-mirror sets, as compared: labels and annotation it owns, type, ports, ips. */
function specMatches(wanted: Record<string, unknown>, input: ServiceImportPlanInput, observed: ServiceImportObject) {
  const spec = observed.spec ?? {};
  const ports = ((spec["ports"] as { name?: string; protocol?: string; port: number }[] | undefined) ?? []).map((p) =>
    [p.name ?? "", p.protocol ?? "TCP", p.port].join("/"),
  );
  const wantedPorts = (wanted["ports"] as { name?: string; protocol: string; port: number }[]).map((p) =>
    [p.name ?? "", p.protocol, p.port].join("/"),
  );
  const labels = observed.metadata.labels ?? {};
  return (
    spec["type"] === wanted["type"] &&
    JSON.stringify(ports) === JSON.stringify(wantedPorts) &&
    JSON.stringify(spec["ips"] ?? []) === JSON.stringify(wanted["ips"]) &&
    sortedLabels(Object.fromEntries(Object.entries(labels).filter(([k]) => k in importLabels(input.name)))) ===
      sortedLabels(importLabels(input.name)) &&
    observed.metadata.annotations?.[DERIVED_SERVICE_ANNOTATION] === input.derived
  );
}

/** The ServiceImport's own plan (SPEC §12); the derived Service's is `planFederated` with `importFlavor`. */
export function planServiceImport(input: ServiceImportPlanInput): ServiceImportPlan {
  const { reduction, namespace, name } = input;
  const observed = input.observed as ServiceImportObject | undefined;
  if (observed && !isImportObject("ServiceImport", observed))
    return {
      actions: [],
      blocked: {
        reason: "user-owned",
        message: `ServiceImport ${namespace}/${name} exists and is not fleet-mirror's; it is left as is and nothing of the import is written`,
      },
    };
  const target = { kind: "ServiceImport" as const, namespace, name };
  if (reduction.kind === "delete")
    return {
      actions:
        observed && !observed.metadata.deletionTimestamp
          ? [deleteAction({ kind: "ServiceImport", object: observed }, "")]
          : [],
    };
  if (reduction.kind === "wait" || input.clusterIP === undefined) return { actions: [] };
  const spec = specOf(reduction.ports, input.clusterIP);
  const clusters = reduction.clusters.map((cluster) => ({ cluster }));
  const annotations = { [DERIVED_SERVICE_ANNOTATION]: input.derived };
  if (!observed)
    return {
      actions: [
        {
          verb: "create",
          ...target,
          body: {
            apiVersion: MCS_API_VERSION,
            kind: "ServiceImport",
            metadata: { name, namespace, labels: importLabels(name), annotations },
            spec,
          },
        },
      ],
    };
  if (!specMatches(spec, input, observed))
    return {
      actions: [
        {
          verb: "update",
          ...target,
          body: {
            ...observed,
            metadata: {
              ...observed.metadata,
              labels: { ...observed.metadata.labels, ...importLabels(name) },
              annotations: { ...observed.metadata.annotations, ...annotations },
            },
            spec: { ...observed.spec, ...spec },
          },
        },
      ],
    };
  const observedClusters = (observed.status?.clusters ?? []).map((c) => c.cluster);
  if (JSON.stringify(observedClusters) !== JSON.stringify(reduction.clusters))
    return {
      actions: [
        {
          verb: "update",
          ...target,
          subresource: "status",
          body: { ...observed, status: { ...observed.status, clusters } },
        },
      ],
    };
  return { actions: [] };
}
