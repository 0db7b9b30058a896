/**
 * The objects a mirror is made of and the writes on them, as plain data: the endpoints
 * API modes (SPEC §9), each kind's API path and ownership rule (SPEC §5), an observed
 * object, a write action and why a mirror is blocked. The vocabulary shared by the
 * planners (plan.ts, plan-federated.ts) and the writer that performs their actions.
 */
import { sliceOwner } from "./endpoint-slices.ts";
import { MIRRORED_SERVICE, ownerCluster, SERVICE_IMPORT_LABEL } from "./labels.ts";
import type { KubeObject } from "./objects.ts";

/** Which API carries a mirror's addresses (SPEC §9, `--endpoints-api`). */
export const ENDPOINTS_APIS = ["endpointslices", "endpoints", "both"] as const;
export type EndpointsApi = (typeof ENDPOINTS_APIS)[number];

export type MirrorObjectKind = "Service" | "Endpoints" | "EndpointSlice" | "ServiceImport" | "ServiceExport";

export interface MirrorKindInfo {
  readonly apiVersion: string;
  /** The API prefix and plural resource name: `${prefix}/namespaces/<ns>/${resource}`. */
  readonly prefix: string;
  readonly resource: string;
  /** The cluster that owns an object of this kind, or undefined when fleet-mirror does not (SPEC §5). */
  readonly owner: (labels: Readonly<Record<string, string>> | undefined) => string | undefined;
}

/**
 * A ServiceImport is fleet-mirror's with `mirrored-service` and its `service-import` label
 * (SPEC §12); it belongs to no one cluster ("": no cluster, but owned).
 */
function serviceImportOwner(labels: Readonly<Record<string, string>> | undefined): string | undefined {
  return labels?.[MIRRORED_SERVICE] === "true" && labels[SERVICE_IMPORT_LABEL] ? "" : undefined;
}

/** The kinds of object a mirror (or an MCS import, SPEC §12) is made of. */
export const MIRROR_KINDS: Readonly<Record<MirrorObjectKind, MirrorKindInfo>> = {
  Service: { apiVersion: "v1", prefix: "/api/v1", resource: "services", owner: ownerCluster },
  Endpoints: { apiVersion: "v1", prefix: "/api/v1", resource: "endpoints", owner: ownerCluster },
  EndpointSlice: {
    apiVersion: "discovery.k8s.io/v1",
    prefix: "/apis/discovery.k8s.io/v1",
    resource: "endpointslices",
    owner: sliceOwner,
  },
  ServiceImport: {
    apiVersion: "multicluster.x-k8s.io/v1beta1",
    prefix: "/apis/multicluster.x-k8s.io/v1beta1",
    resource: "serviceimports",
    owner: serviceImportOwner,
  },
  // The local cluster's own ServiceExports (SPEC §16): never fleet-mirror's; only their
  // status (the conditions) is written.
  ServiceExport: {
    apiVersion: "multicluster.x-k8s.io/v1beta1",
    prefix: "/apis/multicluster.x-k8s.io/v1beta1",
    resource: "serviceexports",
    owner: () => undefined,
  },
};

/**
 * The collection path of `kind` in `namespace`, or of one object when `name` is given.
 * `apiVersion`: the group-version an MCS kind is served at (SPEC §16: whichever the
 * cluster serves, v1beta1 preferred); ignored for the core kinds.
 */
export function objectPath(kind: MirrorObjectKind, namespace: string, name?: string, apiVersion?: string): string {
  const { prefix, resource } = MIRROR_KINDS[kind];
  const at = apiVersion && (kind === "ServiceImport" || kind === "ServiceExport") ? `/apis/${apiVersion}` : prefix;
  return `${at}/namespaces/${namespace}/${resource}${name === undefined ? "" : `/${name}`}`;
}

/** The group-version a write of an MCS kind goes to: its body's `apiVersion`, or the delete's. */
export function actionApiVersion(action: WriteAction): string | undefined {
  if (action.verb === "delete") return action.apiVersion;
  const apiVersion = (action.body as { apiVersion?: unknown }).apiVersion;
  return typeof apiVersion === "string" ? apiVersion : undefined;
}

/** One local object of a mirror as observed (from a store, the mutation cache or a GET). */
export interface ObservedObject {
  readonly kind: MirrorObjectKind;
  readonly object: KubeObject;
}

export type WriteAction =
  | { readonly verb: "create"; readonly kind: "Namespace"; readonly name: string; readonly body: object }
  | {
      readonly verb: "create";
      readonly kind: MirrorObjectKind;
      readonly namespace: string;
      readonly name: string;
      readonly body: object;
    }
  | {
      readonly verb: "update";
      readonly kind: MirrorObjectKind;
      readonly namespace: string;
      readonly name: string;
      /** The full object to PUT, carrying the observed resourceVersion (optimistic concurrency). */
      readonly body: object;
      /** PUT to the object's `status` subresource (a ServiceImport's `status.clusters`). */
      readonly subresource?: "status";
    }
  | {
      readonly verb: "delete";
      readonly kind: MirrorObjectKind;
      readonly namespace: string;
      readonly name: string;
      /** Precondition: only the object fleet-mirror observed as its own is deleted. */
      readonly uid: string | undefined;
      readonly cluster: string;
      /** An MCS kind's group-version (`objectPath`); absent: the kind's default. */
      readonly apiVersion?: string;
    };

/** The delete of an observed object, preconditioned on its uid; `cluster` names whose write it is. */
export function deleteAction(observed: ObservedObject, cluster: string): WriteAction {
  const { metadata } = observed.object;
  const apiVersion = (observed.object as { apiVersion?: unknown }).apiVersion;
  return {
    verb: "delete",
    kind: observed.kind,
    namespace: metadata.namespace ?? "",
    name: metadata.name,
    uid: metadata.uid,
    cluster,
    ...(typeof apiVersion === "string" && observed.kind === "ServiceImport" ? { apiVersion } : {}),
  };
}

export type BlockReason =
  | "user-owned"
  | "owned-by-other-cluster"
  | "owned-by-other-service"
  | "namespace-missing"
  | "excluded-namespace"
  /** Creating the namespace would pass the cluster's `--max-namespaces-per-cluster` (core/namespace-quota.ts). */
  | "namespace-quota";

export interface Blocked {
  readonly reason: BlockReason;
  readonly message: string;
}
