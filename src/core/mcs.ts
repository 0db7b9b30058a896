/**
 * The Kubernetes MCS API (SPEC §12, §16), the remote side's pure parts: whether a remote
 * cluster serves ServiceExports (a state machine fed by discovery and the watch), and
 * what one ServiceExport contributes to the local ServiceImport of its name. No I/O,
 * no clock, no mutation of inputs.
 *
 * API version (SPEC §16): current releases of the MCS API serve `v1beta1` (stored) and
 * still `v1alpha1`; older ones only `v1alpha1`. Discovery tries the versions in
 * `MCS_VERSIONS` order and the first that serves the resource is the one read and
 * written (`McsAvailability.version`); the fields fleet-mirror uses are the same in both.
 */
import type { ClusterSettings, GatewayView, MirrorProblem, SkipReason } from "./desired.ts";
import { carryPorts } from "./desired.ts";
import { type FederatedMember, memberPart } from "./federated.ts";
import { type ExportedSpec, exportedSpecOf } from "./mcs-spec.ts";
import { type KubeObject, objectKey, type Service } from "./objects.ts";

export const MCS_GROUP = "multicluster.x-k8s.io";
/** The versions fleet-mirror reads and writes, preferred first (SPEC §16). */
export const MCS_VERSIONS = ["v1beta1", "v1alpha1"] as const;
export type McsVersion = (typeof MCS_VERSIONS)[number];
/** The preferred version: what fleet-mirror's own tools create. */
export const MCS_VERSION: McsVersion = "v1beta1";
export const MCS_API_VERSION = `${MCS_GROUP}/${MCS_VERSION}`;

/** A resource of the MCS API: where it is discovered and watched. */
export interface McsResource {
  readonly group: string;
  readonly plural: string;
  readonly kind: string;
  /** The preferred group-version's discovery document: lists `plural` when the CRD is installed. */
  readonly discoveryPath: string;
  /** Every object of the resource at the preferred version (list and watch). */
  readonly path: string;
  /** Who lacks the read when it is refused, for the message ("the remote role"). */
  readonly reader: string;
}

function mcsResource(plural: string, kind: string, reader: string): McsResource {
  const discoveryPath = mcsDiscoveryPath(MCS_VERSION);
  return Object.freeze({ group: MCS_GROUP, plural, kind, discoveryPath, path: `${discoveryPath}/${plural}`, reader });
}

/** The discovery document of the MCS group at `version`. */
export function mcsDiscoveryPath(version: string): string {
  return `/apis/${MCS_GROUP}/${version}`;
}

/** Every object of `resource` at `version` (list and watch). */
export function mcsCollectionPath(resource: McsResource, version: string): string {
  return `${mcsDiscoveryPath(version)}/${resource.plural}`;
}

/** ServiceExports, read in remote clusters (and in the local one: its own exports, SPEC §16). */
export const SERVICE_EXPORTS = mcsResource("serviceexports", "ServiceExport", "the remote role");
/** The local cluster's own ServiceExports (SPEC §16): read, and their status written. */
export const LOCAL_SERVICE_EXPORTS = mcsResource("serviceexports", "ServiceExport", "fleet-mirror's local role");
/** ServiceImports, written in the local cluster. */
export const SERVICE_IMPORTS = mcsResource("serviceimports", "ServiceImport", "fleet-mirror's local role");
/** The "resource" a problem names when the whole ServiceExport read is refused (SPEC §12). */
export const SERVICE_EXPORTS_REMOTE = `${MCS_GROUP}/${SERVICE_EXPORTS.plural}`;

/** Labels of MCS EndpointSlices (SPEC §12). */
export const MCS_SERVICE_NAME_LABEL = "multicluster.kubernetes.io/service-name";
export const MCS_SOURCE_CLUSTER_LABEL = "multicluster.kubernetes.io/source-cluster";

/**
 * The name of the derived ClusterIP Service of ServiceImport `<svc>` in `<ns>` (SPEC §12):
 * `derived` and 16 hex digits of a 64-bit FNV-1a hash of `<ns>/<svc>`. Why: it has no
 * `-`, so it can never be a mirror's name (`<svc>-<cluster>`), a fleet-wide Service's
 * (`<svc>-federated`) or a slice's; it fits in 63 characters whatever `<svc>`'s length;
 * and it is a pure function of the ServiceImport, so every replica and restart finds it
 * again. A user's Service of that name is reported and never touched (SPEC §5).
 */
export function derivedServiceName(namespace: string, service: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(`${namespace}/${service}`)) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return `derived${hash.toString(16).padStart(16, "0")}`;
}

/** The writer's key of ServiceImport `namespace/name`: its derived Service's key. */
export function importKey(serviceImport: { readonly namespace: string; readonly name: string }): string {
  return `${serviceImport.namespace}/${derivedServiceName(serviceImport.namespace, serviceImport.name)}`;
}

/** A ServiceExport: only its name, namespace and creation time matter. */
export type ServiceExport = KubeObject;

// ---------------------------------------------------------------------------------
// Availability of ServiceExports in one remote cluster

/**
 * - `unknown`: not yet discovered (the actor just started);
 * - `watching`: served, the watch started, its first list not yet complete;
 * - `active`: served and listed: ServiceExports export;
 * - `not-installed`: the group-version does not serve `serviceexports` (no CRD);
 * - `forbidden`: served, but the list is refused (403): the remote's role lacks the read;
 * - `unavailable`: discovery failed otherwise (its message says why).
 * Every state but `unknown` and `watching` is re-checked: `active` by its watch, the
 * others by a discovery every recheck period (the CRDs or the rule can come later).
 */
export const MCS_STATES = ["unknown", "watching", "active", "not-installed", "forbidden", "unavailable"] as const;
export type McsState = (typeof MCS_STATES)[number];

/**
 * Three outcomes of the read are kept apart (SPEC §12): the objects are *known* (a list
 * completed: these exist; or the resource is not served: none exist), or they are
 * *unknown* (discovery failed, the read was refused or failed before any list). Unknown
 * is never "none": a caller that must say something meanwhile says "unknown".
 */
export interface McsAvailability {
  readonly state: McsState;
  /** Why the mode is not active (absent when active or not yet known). */
  readonly message?: string;
  /**
   * The read has answered once, one way or the other: the objects are known, or the
   * read failed (discovery failed, refused, a list failed). Sticky. Whoever waits for
   * the objects waits at most until this, so a read that keeps failing holds nothing up.
   */
  readonly settled: boolean;
  /**
   * The objects are known: a list completed (a refusal afterwards keeps that list), or
   * the resource is not served (none exist). Sticky within one incarnation: a new one
   * knows nothing until its own read says so.
   */
  readonly known: boolean;
  /** A watch of ServiceExports runs (started and not stopped). */
  readonly watching: boolean;
  /** The version discovery found serving the resource (SPEC §16); absent before, or when none does. */
  readonly version?: string;
}

export const INITIAL_MCS_AVAILABILITY: McsAvailability = Object.freeze({
  state: "unknown",
  settled: false,
  known: false,
  watching: false,
});

export type McsEvent =
  /**
   * The discovery documents were read: `served` whether one lists the resource (404: not
   * served), at `version`, the first of `MCS_VERSIONS` that does.
   */
  | { readonly kind: "discovered"; readonly served: boolean; readonly version?: string }
  /** Discovery failed in another way (transport, 5xx, 403 on discovery itself). */
  | { readonly kind: "discovery-failed"; readonly message: string }
  /** The watch's list completed. */
  | { readonly kind: "listed" }
  /**
   * The watch failed with HTTP `status` (0: not an HTTP answer, e.g. a timeout); 403 and
   * 404 change the state, any failure settles the read (others: the watcher retries).
   */
  | { readonly kind: "watch-failed"; readonly status: number; readonly message: string };

export type McsEffect =
  | "start-watch"
  /** Stop the watch and keep what it holds (forbidden: a refused read is no answer). */
  | "stop-watch"
  /** Stop the watch and forget what it holds (not installed: no ServiceExport exists). */
  | "drop-watch"
  | "schedule-recheck"
  /**
   * Discovery failed and nothing is known (`unavailable`): try again soon, with backoff
   * up to the recheck period. A transient failure (a 503 while the remote API server
   * restarts) must not leave the cluster's exports unknown, and what it holds of imports
   * kept, for a whole recheck period.
   */
  | "schedule-retry";

export interface McsTransition {
  readonly availability: McsAvailability;
  readonly effects: readonly McsEffect[];
  /** The state changed: log it and publish the status. */
  readonly changed: boolean;
}

const notInstalled = (r: McsResource): string =>
  `the cluster does not serve ${r.plural}.${r.group} (${MCS_VERSIONS.join(" or ")}): the MCS API's CRDs are not installed`;
const forbiddenMessage = (r: McsResource, detail: string): string =>
  `reading ${r.plural}.${r.group} is forbidden (403): ${r.reader} lacks get/list/watch on them; the other export modes go on (${detail})`;

/**
 * One step of the availability of ServiceExports (unit tested). Invariants: a watch is
 * started only when discovery says served, and only if none runs; every state a
 * discovery must leave has a recheck scheduled; a `forbidden` cluster stays `forbidden`
 * through its rechecks until a list succeeds (so it is reported once, not per recheck);
 * `known` turns true only on a completed list or a "not served" answer, never on a
 * failure or a refusal; `settled` turns true on the first answer of either kind.
 */
export function mcsTransition(
  current: McsAvailability,
  event: McsEvent,
  resource: McsResource = SERVICE_EXPORTS,
): McsTransition {
  const next = (
    state: McsState,
    effects: McsEffect[],
    changes: { message?: string; known?: boolean; watching?: boolean; answered?: boolean; version?: string } = {},
  ): McsTransition => {
    const version = changes.watching === false ? undefined : (changes.version ?? current.version);
    const availability: McsAvailability = {
      state,
      ...(changes.message !== undefined ? { message: changes.message } : {}),
      ...(version !== undefined ? { version } : {}),
      // A step is an answer of the read (known or not) unless it says otherwise.
      settled: current.settled || (changes.answered ?? true),
      known: current.known || (changes.known ?? false),
      watching: changes.watching ?? current.watching,
    };
    return {
      availability,
      effects,
      changed:
        availability.state !== current.state ||
        availability.message !== current.message ||
        availability.version !== current.version,
    };
  };
  switch (event.kind) {
    case "discovered":
      if (!event.served)
        return next("not-installed", [...(current.watching ? (["drop-watch"] as const) : []), "schedule-recheck"], {
          message: notInstalled(resource),
          known: true,
          watching: false,
        });
      if (current.watching) return { availability: current, effects: [], changed: false };
      // Forbidden stays forbidden (with its message) until the new watch lists. "Served"
      // says nothing yet about which objects exist: the list answers that.
      return current.state === "forbidden"
        ? next("forbidden", ["start-watch"], {
            message: current.message ?? forbiddenMessage(resource, ""),
            watching: true,
            answered: false,
            ...(event.version ? { version: event.version } : {}),
          })
        : next("watching", ["start-watch"], {
            watching: true,
            answered: false,
            ...(event.version ? { version: event.version } : {}),
          });
    case "discovery-failed":
      if (current.watching) return { availability: current, effects: [], changed: false };
      // Unknown, not absent: what was known stays known (a recheck of "not installed"
      // that fails leaves it not installed), nothing becomes known. While nothing is
      // known the next discovery comes soon (backoff); a known state waits its period.
      return next(
        current.state === "unknown" ? "unavailable" : current.state,
        current.state === "unknown" || current.state === "unavailable" ? ["schedule-retry"] : ["schedule-recheck"],
        {
          message:
            current.state === "unknown"
              ? `discovery of ${resource.discoveryPath} failed: ${event.message}`
              : (current.message ?? ""),
        },
      );
    case "listed":
      if (!current.watching) return { availability: current, effects: [], changed: false };
      return next("active", [], { known: true });
    case "watch-failed":
      if (!current.watching) return { availability: current, effects: [], changed: false };
      if (event.status === 403)
        return next("forbidden", ["stop-watch", "schedule-recheck"], {
          message: forbiddenMessage(resource, event.message),
          watching: false,
        });
      if (event.status === 404)
        return next("not-installed", ["drop-watch", "schedule-recheck"], {
          message: notInstalled(resource),
          known: true,
          watching: false,
        });
      // Any other failure (5xx, a timeout): the watcher retries; the first one answers the
      // read as "unknown", so whoever waited for it waits no longer (said once).
      return current.settled
        ? { availability: current, effects: [], changed: false }
        : next(current.state, [], {
            message: `listing ${resource.plural}.${resource.group} failed (${event.message.slice(0, 200)}): they are unknown, not none, until a list succeeds`,
          });
  }
}

/** Whether a discovery document (`APIResourceList`) lists `resource`. */
export function serves(document: unknown, resource: McsResource = SERVICE_EXPORTS): boolean {
  if (typeof document !== "object" || document === null) return false;
  const resources = (document as { resources?: unknown }).resources;
  return (
    Array.isArray(resources) &&
    resources.some((r) => typeof r === "object" && r !== null && (r as { name?: unknown }).name === resource.plural)
  );
}

// ---------------------------------------------------------------------------------
// What one ServiceExport contributes

/**
 * One cluster's export of `namespace/name` to the local ServiceImport of that name: a
 * fleet-wide member (its cluster's ports and gateway addresses) plus the export's
 * creation time, which orders exporters when their ports conflict (the oldest wins).
 * Plain data: crosses threads by structured clone. `name` is the ServiceImport's (the
 * remote Service's) name.
 */
export interface McsExport extends FederatedMember {
  /** The ServiceExport's `metadata.creationTimestamp` (RFC 3339, second precision). */
  readonly exportedAt: string;
  /** What the ServiceImport carries of the exported Service (SPEC §16): type, ports, affinity, policies. */
  readonly spec: ExportedSpec;
}

export type McsExportOutcome =
  | { readonly kind: "export"; readonly export: McsExport }
  | { readonly kind: "problem"; readonly problem: MirrorProblem };

/**
 * What ServiceExport `serviceExport` contributes, given the Service of the same name
 * (undefined when it does not exist) and the view of the cluster's default gateway
 * (SPEC §12: an MCS export always goes through it).
 */
export function mcsExportFor(
  settings: ClusterSettings,
  serviceExport: ServiceExport,
  service: Service | undefined,
  gateway: GatewayView,
): McsExportOutcome {
  const namespace = serviceExport.metadata.namespace ?? "default";
  const name = serviceExport.metadata.name;
  const remote = objectKey({ namespace, name });
  const problem = (reason: SkipReason, message: string): McsExportOutcome => ({
    kind: "problem",
    problem: { cluster: settings.name, remote, reason, message: `ServiceExport: ${message}` },
  });
  if (settings.excludedNamespaces.includes(namespace))
    return problem("excluded-namespace", `namespace ${namespace} is excluded from mirroring`);
  if (!service) return problem("service-export-without-service", `no Service ${remote} to export`);
  if (service.spec?.type === "ExternalName")
    return problem(
      "service-export-invalid-type",
      `Service ${remote} is of type ExternalName, which cannot be exported`,
    );
  const ports = carryPorts(service);
  if (ports.length === 0) return problem("no-ports", "remote Service has no ports");
  return {
    kind: "export",
    export: {
      ...memberPart({ cluster: settings.name, namespace, name, remote, ports }, gateway),
      exportedAt: serviceExport.metadata.creationTimestamp ?? "",
      spec: exportedSpecOf(service),
    },
  };
}

/** The problem that stands for a refused ServiceExport read, so it is reported like a skipped Service (once). */
export function mcsForbiddenProblem(cluster: string, availability: McsAvailability): MirrorProblem | undefined {
  return availability.state === "forbidden"
    ? {
        cluster,
        remote: SERVICE_EXPORTS_REMOTE,
        reason: "export-mode-forbidden",
        message: availability.message ?? forbiddenMessage(SERVICE_EXPORTS, ""),
      }
    : undefined;
}
