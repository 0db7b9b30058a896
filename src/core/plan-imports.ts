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
import type { SharedServiceFlavor } from "./federated-objects.ts";
import { MANAGED_BY_FLEET_MIRROR, MANAGED_BY_LABEL, MIRRORED_SERVICE, SERVICE_IMPORT_LABEL } from "./labels.ts";
import { MCS_SERVICE_NAME_LABEL, MCS_SOURCE_CLUSTER_LABEL, type McsExport } from "./mcs.ts";
import type { ExportedSpec } from "./mcs-spec.ts";
import { type Blocked, deleteAction, type MirrorObjectKind, type WriteAction } from "./mirror-kinds.ts";
import type { KubeObject } from "./objects.ts";

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

/** What the writer knows of the registered clusters, that ranks exports (SPEC §12, §16). */
export interface ExportRegistration {
  /** When `cluster` was registered: its credentials Secret's creation time, as the local API server set it. */
  readonly registeredAt: (cluster: string) => string | undefined;
  /** The local cluster's name (`--cluster-name`): its own exports' times are the local API server's, never clamped. */
  readonly local?: string;
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
 * export wins); the merge's order (SPEC §12, §16). An export's age is what this
 * controller observed, not only what a remote claims: a remote ServiceExport's creation
 * time, but never earlier than its cluster's registration (a remote cannot claim to be
 * older than the moment fleet-mirror could first know it). The local cluster's own
 * export is the local API server's word and is taken as it is. An unparsable time counts
 * as later than any valid one. Ties (one second is the timestamps' precision) go by
 * cluster name: a total order that every replica, every restart and every fleet-mirror
 * of a clusterset computes alike.
 */
export function exportOrder(
  exports: ReadonlyMap<string, Pick<McsExport, "cluster" | "exportedAt">>,
  registration: ExportRegistration = { registeredAt: () => undefined },
): string[] {
  const keyed = [...exports.values()].map((e) => {
    const exportedAt = parseTimestamp(e.exportedAt);
    const registeredAt =
      e.cluster === registration.local ? undefined : parseTimestamp(registration.registeredAt(e.cluster));
    const at = exportedAt === undefined ? undefined : Math.max(exportedAt, registeredAt ?? exportedAt);
    return { cluster: e.cluster, at: at ?? Number.POSITIVE_INFINITY };
  });
  return keyed
    .sort(
      (a, b) =>
        (a.at === b.at ? 0 : a.at < b.at ? -1 : 1) || (a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0),
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
  /** What the ServiceImport carries (SPEC §16): the exports merged (`mergeExports`); absent unless `write`. */
  readonly spec: ExportedSpec | undefined;
  /** The ServiceImport under the name, if any (ours or not). */
  readonly observed: KubeObject | undefined;
  /** The derived Service's cluster IPs and their families, once it has them (none for a Headless import). */
  readonly clusterIPs: { readonly ips: readonly string[]; readonly families: readonly string[] } | undefined;
  /** The group-version the cluster serves ServiceImports at (SPEC §16). */
  readonly apiVersion: string;
}

export interface ServiceImportPlan {
  readonly actions: readonly WriteAction[];
  readonly blocked?: Blocked;
}

interface ServiceImportObject extends KubeObject {
  readonly spec?: { readonly [field: string]: unknown };
  readonly status?: { readonly clusters?: readonly { readonly cluster: string }[]; readonly [field: string]: unknown };
}

/** The fields of a ServiceImport's spec that fleet-mirror sets (SPEC §16), in a canonical form. */
const SPEC_FIELDS = [
  "type",
  "ports",
  "ips",
  "ipFamilies",
  "sessionAffinity",
  "sessionAffinityConfig",
  "internalTrafficPolicy",
  "trafficDistribution",
] as const;

function specOf(spec: ExportedSpec, clusterIPs: ServiceImportPlanInput["clusterIPs"]): Record<string, unknown> {
  const headless = spec.type === "Headless";
  return {
    type: spec.type,
    ports: spec.ports.map((p) => ({ ...p })),
    ...(headless || !clusterIPs ? {} : { ips: [...clusterIPs.ips], ipFamilies: [...clusterIPs.families] }),
    sessionAffinity: spec.sessionAffinity,
    ...(spec.sessionAffinityConfig ? { sessionAffinityConfig: spec.sessionAffinityConfig } : {}),
    ...(spec.internalTrafficPolicy ? { internalTrafficPolicy: spec.internalTrafficPolicy } : {}),
    ...(spec.trafficDistribution ? { trafficDistribution: spec.trafficDistribution } : {}),
  };
}

/** A port as compared: the API server fills in protocol TCP. */
const portText = (p: { name?: string; protocol?: string; port?: number; appProtocol?: string }): string =>
  [p.name ?? "", p.protocol ?? "TCP", p.port ?? 0, p.appProtocol ?? ""].join("/");

function canonicalSpec(spec: Readonly<Record<string, unknown>>): string {
  return JSON.stringify(
    SPEC_FIELDS.map((field) => {
      const value = spec[field];
      if (field === "ports") return ((value as { name?: string }[] | undefined) ?? []).map(portText).sort();
      if (field === "ips" || field === "ipFamilies") return value ?? [];
      return value ?? null;
    }),
  );
}

/** The fields fleet-mirror sets, as compared: labels and annotation it owns, and the spec fields above. */
function specMatches(wanted: Record<string, unknown>, input: ServiceImportPlanInput, observed: ServiceImportObject) {
  const labels = observed.metadata.labels ?? {};
  return (
    canonicalSpec(observed.spec ?? {}) === canonicalSpec(wanted) &&
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
  if (reduction.kind === "wait" || input.spec === undefined) return { actions: [] };
  // A ClusterSetIP import is written once its derived Service has its IPs; a Headless one has none.
  if (input.spec.type !== "Headless" && input.clusterIPs === undefined) return { actions: [] };
  const spec = specOf(input.spec, input.clusterIPs);
  const clusters = reduction.clusters.map((cluster) => ({ cluster }));
  const annotations = { [DERIVED_SERVICE_ANNOTATION]: input.derived };
  if (!observed)
    return {
      actions: [
        {
          verb: "create",
          ...target,
          body: {
            apiVersion: input.apiVersion,
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
            apiVersion: input.apiVersion,
            metadata: {
              ...observed.metadata,
              labels: { ...observed.metadata.labels, ...importLabels(name) },
              annotations: { ...observed.metadata.annotations, ...annotations },
            },
            spec: { ...withoutFields(observed.spec), ...spec },
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
          body: { ...observed, apiVersion: input.apiVersion, status: { ...observed.status, clusters } },
        },
      ],
    };
  return { actions: [] };
}

/** An observed spec without the fields fleet-mirror sets (an unset one must not linger). */
function withoutFields(spec: { readonly [field: string]: unknown } | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = { ...spec };
  for (const field of SPEC_FIELDS) delete out[field];
  return out;
}
