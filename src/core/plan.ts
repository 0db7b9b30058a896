/**
 * What the local writer must do for one local key (`namespace/name`), as a pure
 * function of the desired mirror and the observed local objects (SPEC §3–§6).
 *
 * Guarantees (checked by unit tests):
 * - nothing is planned on an object fleet-mirror does not own (SPEC §5): a user's
 *   Service or Endpoints holding the name blocks the whole mirror;
 * - nothing is written when the observed objects already match (SPEC §4);
 * - deletions are planned only for objects owned by a cluster whose garbage collection
 *   is allowed (a complete list was seen, or the cluster is no longer registered), and
 *   carry the observed uid as a precondition;
 * - a namespace is only ever created, never updated or deleted;
 * - the Service is written before its Endpoints, and a failing Endpoints write never
 *   plans a Service deletion (SPEC §8).
 */
import type { DesiredMirror } from "./desired.ts";
import { CLUSTER_NAME, MIRROR_PREFIX, MIRRORED_SERVICE, ownerCluster } from "./labels.ts";
import type { EndpointSubset, Endpoints, ObjectMeta, Service, ServicePort } from "./objects.ts";

export type WriteAction =
  | { readonly verb: "create"; readonly kind: "Namespace"; readonly name: string; readonly body: object }
  | {
      readonly verb: "create";
      readonly kind: "Service" | "Endpoints";
      readonly namespace: string;
      readonly name: string;
      readonly body: object;
    }
  | {
      readonly verb: "update";
      readonly kind: "Service" | "Endpoints";
      readonly namespace: string;
      readonly name: string;
      /** The full object to PUT, carrying the observed resourceVersion (optimistic concurrency). */
      readonly body: object;
    }
  | {
      readonly verb: "delete";
      readonly kind: "Service" | "Endpoints";
      readonly namespace: string;
      readonly name: string;
      /** Precondition: only the object fleet-mirror observed as its own is deleted. */
      readonly uid: string | undefined;
      readonly cluster: string;
    };

export type BlockReason = "user-owned" | "owned-by-other-cluster" | "namespace-missing" | "excluded-namespace";

export interface Blocked {
  readonly reason: BlockReason;
  readonly message: string;
}

export interface MirrorPlan {
  readonly actions: readonly WriteAction[];
  /** Set when the desired mirror cannot be written; nothing of it is planned then. */
  readonly blocked?: Blocked;
}

export interface PlanInput {
  readonly key: string;
  /** The winning desired mirror for this key, if any cluster wants it. */
  readonly desired: DesiredMirror | undefined;
  readonly service: Service | undefined;
  readonly endpoints: Endpoints | undefined;
  readonly namespaceExists: boolean;
  readonly createNamespaces: boolean;
  readonly excludedNamespaces: readonly string[];
  /** May mirrors of this cluster that are no longer desired be deleted now? */
  readonly gcAllowed: (cluster: string) => boolean;
}

// ---------------------------------------------------------------------------------
// Normalization: compare what the API server returns with what we want, ignoring
// the defaults it fills in, so an unchanged mirror never causes a write.

type ComparablePort = Pick<ServicePort, "name" | "protocol" | "port" | "targetPort" | "nodePort">;

function normalizeServicePorts(ports: readonly ComparablePort[] | undefined): string {
  return JSON.stringify(
    (ports ?? []).map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port, p.targetPort ?? p.port, p.nodePort ?? null]),
  );
}

function mirrorAnnotations(annotations: Readonly<Record<string, string>> | undefined): string {
  const entries = Object.entries(annotations ?? {}).filter(([k]) => k.startsWith(MIRROR_PREFIX));
  return JSON.stringify(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

function sortedLabels(labels: Readonly<Record<string, string>> | undefined): string {
  return JSON.stringify(Object.entries(labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

function normalizeSubsets(subsets: readonly EndpointSubset[] | undefined): string {
  const normalized = (subsets ?? [])
    .map((s) => ({
      addresses: (s.addresses ?? []).map((a) => a.ip).sort(),
      notReady: (s.notReadyAddresses ?? []).map((a) => a.ip).sort(),
      ports: (s.ports ?? []).map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port]).sort(),
    }))
    .filter((s) => s.addresses.length + s.notReady.length > 0 || s.ports.length > 0);
  return JSON.stringify(normalized);
}

/** The Endpoints subsets a desired mirror stands for: none while the gateway is unusable. */
export function desiredSubsets(desired: DesiredMirror): EndpointSubset[] {
  if (desired.addresses.length === 0 || desired.endpointPorts.length === 0) return [];
  const notReady = new Set(desired.notReadyAddresses);
  const ready = desired.addresses.filter((ip) => !notReady.has(ip));
  return [
    {
      ...(ready.length > 0 ? { addresses: ready.map((ip) => ({ ip })) } : {}),
      ...(notReady.size > 0 ? { notReadyAddresses: desired.notReadyAddresses.map((ip) => ({ ip })) } : {}),
      ports: desired.endpointPorts.map((p) => ({
        ...(p.name ? { name: p.name } : {}),
        port: p.port,
        protocol: p.protocol,
      })),
    },
  ];
}

export function serviceMatches(desired: DesiredMirror, observed: Service): boolean {
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(desired.labels) &&
    mirrorAnnotations(observed.metadata.annotations) === mirrorAnnotations(desired.serviceAnnotations) &&
    (observed.spec?.type ?? "ClusterIP") === "ClusterIP" &&
    Object.keys(observed.spec?.selector ?? {}).length === 0 &&
    normalizeServicePorts(observed.spec?.ports) === normalizeServicePorts(desired.ports)
  );
}

export function endpointsMatch(desired: DesiredMirror, observed: Endpoints): boolean {
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(desired.labels) &&
    mirrorAnnotations(observed.metadata.annotations) === mirrorAnnotations(desired.endpointsAnnotations) &&
    normalizeSubsets(observed.subsets) === normalizeSubsets(desiredSubsets(desired))
  );
}

/** Foreign annotations (not `mirror.linkerd.io/*`) are kept; ours are replaced exactly. */
function mergeAnnotations(
  observed: ObjectMeta | undefined,
  ours: Readonly<Record<string, string>>,
): Record<string, string> {
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries(observed?.annotations ?? {})) if (!k.startsWith(MIRROR_PREFIX)) merged[k] = v;
  return Object.assign(merged, ours);
}

export function serviceBody(desired: DesiredMirror, observed?: Service): object {
  const ports = desired.ports.map((p) => ({ ...p }));
  if (!observed) {
    return {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: desired.name,
        namespace: desired.namespace,
        labels: { ...desired.labels },
        annotations: { ...desired.serviceAnnotations },
      },
      spec: { type: "ClusterIP", ports },
    };
  }
  const { selector: _selector, ...spec } = observed.spec ?? {};
  return {
    ...observed,
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      ...observed.metadata,
      labels: { ...desired.labels },
      annotations: mergeAnnotations(observed.metadata, desired.serviceAnnotations),
    },
    spec: { ...spec, type: "ClusterIP", ports },
  };
}

export function endpointsBody(desired: DesiredMirror, observed?: Endpoints): object {
  const metadata = observed
    ? {
        ...observed.metadata,
        labels: { ...desired.labels },
        annotations: mergeAnnotations(observed.metadata, desired.endpointsAnnotations),
      }
    : {
        name: desired.name,
        namespace: desired.namespace,
        labels: { ...desired.labels },
        annotations: { ...desired.endpointsAnnotations },
      };
  return { ...(observed ?? {}), apiVersion: "v1", kind: "Endpoints", metadata, subsets: desiredSubsets(desired) };
}

export function namespaceBody(name: string, cluster: string): object {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name, labels: { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: cluster } },
  };
}

// ---------------------------------------------------------------------------------

function planAbsent(input: PlanInput): MirrorPlan {
  const actions: WriteAction[] = [];
  for (const [kind, observed] of [
    ["Service", input.service],
    ["Endpoints", input.endpoints],
  ] as const) {
    if (!observed || observed.metadata.deletionTimestamp) continue;
    const owner = ownerCluster(observed.metadata.labels);
    if (owner === undefined || !input.gcAllowed(owner)) continue;
    actions.push({
      verb: "delete",
      kind,
      namespace: observed.metadata.namespace ?? "",
      name: observed.metadata.name,
      uid: observed.metadata.uid,
      cluster: owner,
    });
  }
  return { actions };
}

export function planMirror(input: PlanInput): MirrorPlan {
  const { desired } = input;
  if (!desired) return planAbsent(input);

  // Defence in depth: the remote actor already skips these, but nothing a remote
  // cluster sends may make the writer write into an excluded namespace (SPEC §7).
  if (input.excludedNamespaces.includes(desired.namespace)) {
    return {
      actions: [],
      blocked: { reason: "excluded-namespace", message: `namespace ${desired.namespace} is excluded from mirroring` },
    };
  }
  for (const [kind, observed] of [
    ["Service", input.service],
    ["Endpoints", input.endpoints],
  ] as const) {
    if (!observed) continue;
    const owner = ownerCluster(observed.metadata.labels);
    if (owner === undefined) {
      return {
        actions: [],
        blocked: {
          reason: "user-owned",
          message: `${kind} ${input.key} exists and is not a fleet-mirror mirror; it is left as is`,
        },
      };
    }
    if (owner !== desired.cluster) {
      return {
        actions: [],
        blocked: {
          reason: "owned-by-other-cluster",
          message: `${kind} ${input.key} is the mirror of cluster ${owner}; cluster ${desired.cluster} wants the same name`,
        },
      };
    }
  }

  const actions: WriteAction[] = [];
  if (!input.namespaceExists) {
    if (!input.createNamespaces) {
      return {
        actions: [],
        blocked: {
          reason: "namespace-missing",
          message: `namespace ${desired.namespace} does not exist and namespace creation is off`,
        },
      };
    }
    actions.push({
      verb: "create",
      kind: "Namespace",
      name: desired.namespace,
      body: namespaceBody(desired.namespace, desired.cluster),
    });
  }
  const { namespace, name } = desired;
  let serviceAction: WriteAction | undefined;
  if (!input.service) serviceAction = { verb: "create", kind: "Service", namespace, name, body: serviceBody(desired) };
  else if (!serviceMatches(desired, input.service)) {
    serviceAction = { verb: "update", kind: "Service", namespace, name, body: serviceBody(desired, input.service) };
  }
  let endpointsAction: WriteAction | undefined;
  if (!input.endpoints)
    endpointsAction = { verb: "create", kind: "Endpoints", namespace, name, body: endpointsBody(desired) };
  else if (!endpointsMatch(desired, input.endpoints)) {
    endpointsAction = {
      verb: "update",
      kind: "Endpoints",
      namespace,
      name,
      body: endpointsBody(desired, input.endpoints),
    };
  }
  // A new mirror gets its Service first (Endpoints never exist without their Service).
  // An existing one gets its Endpoints first: the addresses are what traffic follows
  // (a gateway change also rewrites the Service's gateway-resource-version annotation,
  // SPEC §3, which routes nothing).
  const ordered = input.service ? [endpointsAction, serviceAction] : [serviceAction, endpointsAction];
  for (const action of ordered) if (action) actions.push(action);
  return { actions };
}
