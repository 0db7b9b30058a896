/**
 * The local cluster as a member of its own clusterset (SPEC §16), the pure parts: what a
 * ServiceExport in the local cluster contributes to the local ServiceImport of its name
 * (`localExportFor`: its Service's own endpoints, copied as a local part), and the
 * conditions fleet-mirror writes on it (`exportConditions`, `conditionsUpdate`). No I/O;
 * the clock is an input.
 *
 * Guarantees (unit tested):
 * - a ServiceExport without its Service, or of an ExternalName Service, exports nothing
 *   and is `Valid: False` with the reason the MCS API names (`NoService`,
 *   `InvalidServiceType`);
 * - `Conflict` is True with the first conflict's reason and every conflict's message when
 *   the merge names this cluster (mcs-spec.ts), else False `NoConflicts`;
 * - `conditionsUpdate` returns nothing when type, status, reason and message of every
 *   condition fleet-mirror sets already match (a restart over a converged world writes
 *   nothing); a condition whose status is unchanged keeps its `lastTransitionTime`.
 */
import type { MirrorServicePort } from "./desired.ts";
import { carryPorts } from "./desired.ts";
import { localPartOf } from "./local-part.ts";
import type { McsExport } from "./mcs.ts";
import { CONFLICT_REASONS, exportedSpecOf, type ImportConflict } from "./mcs-spec.ts";
import type { EndpointSlice, KubeObject, Service } from "./objects.ts";

export type LocalExportOutcome =
  | { readonly kind: "export"; readonly export: McsExport }
  | { readonly kind: "invalid"; readonly reason: "NoService" | "InvalidServiceType"; readonly message: string };

/** What local ServiceExport `serviceExport` contributes, given its Service and that Service's slices. */
export function localExportFor(
  cluster: string,
  serviceExport: KubeObject,
  service: Service | undefined,
  slices: readonly EndpointSlice[],
): LocalExportOutcome {
  const namespace = serviceExport.metadata.namespace ?? "default";
  const name = serviceExport.metadata.name;
  if (!service) return { kind: "invalid", reason: "NoService", message: `no Service ${namespace}/${name} to export` };
  if (service.spec?.type === "ExternalName")
    return {
      kind: "invalid",
      reason: "InvalidServiceType",
      message: `Service ${namespace}/${name} is of type ExternalName, which the MCS API cannot export`,
    };
  const ports: MirrorServicePort[] = carryPorts(service);
  const part = localPartOf(slices);
  return {
    kind: "export",
    export: {
      cluster,
      namespace,
      name,
      remote: `${namespace}/${name}`,
      ports,
      addresses: [],
      notReadyAddresses: [],
      endpointPorts: part.endpointPorts,
      endpoints: part.endpoints,
      exportedAt: serviceExport.metadata.creationTimestamp ?? "",
      spec: exportedSpecOf(service),
    },
  };
}

/** A condition as the MCS API defines it (metav1.Condition). */
export interface ExportCondition {
  readonly type: "Valid" | "Ready" | "Conflict";
  readonly status: "True" | "False" | "Unknown";
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime?: string;
  readonly observedGeneration?: number;
}

export interface ConditionInput {
  readonly outcome: LocalExportOutcome;
  /** The local ServiceImport lists this cluster: the export is in effect. */
  readonly imported: boolean;
  /** Why the import is not written, when it is not (not served, a user's ServiceImport, waiting). */
  readonly pending?: string;
  /** Every conflict of the merge that names this cluster (`conflictsOf`). */
  readonly conflicts: readonly ImportConflict[];
}

/** The three conditions fleet-mirror sets on a local ServiceExport (SPEC §16), without times. */
export function exportConditions(input: ConditionInput): ExportCondition[] {
  const { outcome } = input;
  if (outcome.kind === "invalid")
    return [
      { type: "Valid", status: "False", reason: outcome.reason, message: outcome.message },
      { type: "Ready", status: "False", reason: "Failed", message: `not exported: ${outcome.message}` },
      { type: "Conflict", status: "False", reason: "NoConflicts", message: "no conflict" },
    ];
  const [first] = input.conflicts;
  return [
    { type: "Valid", status: "True", reason: "Valid", message: "the Service can be exported" },
    input.imported
      ? { type: "Ready", status: "True", reason: "Exported", message: "exported to the clusterset's ServiceImport" }
      : {
          type: "Ready",
          status: "False",
          reason: "Pending",
          message: input.pending ?? "waiting for the ServiceImport to be written",
        },
    first
      ? {
          type: "Conflict",
          status: "True",
          reason: CONFLICT_REASONS[first.field],
          message: input.conflicts.map((c) => c.message).join("; "),
        }
      : { type: "Conflict", status: "False", reason: "NoConflicts", message: "no conflict" },
  ];
}

interface ServiceExportObject extends KubeObject {
  readonly status?: { readonly conditions?: readonly ExportCondition[]; readonly [field: string]: unknown };
}

/**
 * The status update that sets `wanted` on `observed` (other conditions kept), or
 * undefined when nothing differs. `now`: RFC 3339, the transition time of a changed status.
 */
export function conditionsUpdate(
  observed: KubeObject,
  wanted: readonly ExportCondition[],
  now: string,
): object | undefined {
  const current = (observed as ServiceExportObject).status?.conditions ?? [];
  const generation = (observed.metadata as { generation?: unknown }).generation;
  const same = wanted.every((w) => {
    const c = current.find((x) => x.type === w.type);
    return c && c.status === w.status && c.reason === w.reason && c.message === w.message;
  });
  if (same) return undefined;
  const conditions = [
    ...current.filter((c) => !wanted.some((w) => w.type === c.type)),
    ...wanted.map((w) => {
      const c = current.find((x) => x.type === w.type);
      return {
        ...w,
        lastTransitionTime: c && c.status === w.status && c.lastTransitionTime ? c.lastTransitionTime : now,
        ...(typeof generation === "number" ? { observedGeneration: generation } : {}),
      };
    }),
  ];
  const status = (observed as ServiceExportObject).status ?? {};
  return { ...observed, status: { ...status, conditions } };
}
