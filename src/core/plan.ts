/**
 * What the local writer must do for one mirror (local key `namespace/name`), as a pure
 * function of the desired mirror and the observed local objects (SPEC §3–§6, §9).
 *
 * A mirror is a list of objects: its Service, its Endpoints, its EndpointSlices (one per
 * address family), each with a desired body, a "matches what was observed" check and an
 * ownership rule (MIRROR_KINDS, mirror-kinds.ts). Which of them a mirror has depends on the endpoints API
 * mode (`--endpoints-api`); the plan creates, updates and deletes them all the same way.
 *
 * Guarantees (checked by unit tests):
 * - nothing is planned on an object fleet-mirror does not own (SPEC §5): a user's
 *   Service, Endpoints or slice holding one of the mirror's names blocks the whole mirror;
 * - nothing is written when the observed objects already match (SPEC §4);
 * - owned objects the mode no longer chooses (Endpoints in `endpointslices` mode, slices
 *   in `endpoints` mode, the slice of a family the gateway no longer has) are deleted,
 *   after the objects that replace them are written;
 * - deletions of a mirror no longer desired are planned only for objects owned by a
 *   cluster whose garbage collection is allowed (a complete list was seen, or the cluster
 *   is no longer registered); every deletion carries the observed uid as a precondition;
 * - a namespace is only ever created, never updated or deleted;
 * - the Service is written before anything else of a new mirror, and a failing write of
 *   another object never plans a Service deletion (SPEC §8);
 * - slices point at the Service by an ownerReference, so they are planned only once the
 *   Service's uid is known (the writer plans again right after creating the Service).
 */
import { mergeAnnotations, mirrorAnnotations, sortedLabels } from "./compare.ts";
import type { DesiredMirror } from "./desired.ts";
import { desiredSliceContents, sliceBody, sliceMatches } from "./endpoint-slices.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE, SKIP_MIRROR_LABEL } from "./labels.ts";
import {
  type Blocked,
  deleteAction,
  type EndpointsApi,
  MIRROR_KINDS,
  type MirrorObjectKind,
  type ObservedObject,
  type WriteAction,
} from "./mirror-kinds.ts";
import type {
  EndpointAddress,
  EndpointPort,
  EndpointSlice,
  EndpointSubset,
  Endpoints,
  KubeObject,
  ObjectMeta,
  Service,
  ServicePort,
} from "./objects.ts";

export interface MirrorPlan {
  readonly actions: readonly WriteAction[];
  /** Set when the desired mirror cannot be written; nothing of it is planned then. */
  readonly blocked?: Blocked;
}

export interface PlanInput {
  readonly key: string;
  /** The winning desired mirror for this key, if any cluster wants it. */
  readonly desired: DesiredMirror | undefined;
  /** The local objects under the mirror's names (its Service, Endpoints and slices), any owner. */
  readonly observed: readonly ObservedObject[];
  readonly endpointsApi: EndpointsApi;
  readonly namespaceExists: boolean;
  readonly createNamespaces: boolean;
  readonly excludedNamespaces: readonly string[];
  readonly namespaceQuota?: NamespaceInput["namespaceQuota"];
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

function normalizeSubsets(subsets: readonly EndpointSubset[] | undefined): string {
  const normalized = (subsets ?? [])
    .map((s) => ({
      addresses: (s.addresses ?? []).map(addressKey).sort(),
      notReady: (s.notReadyAddresses ?? []).map(addressKey).sort(),
      ports: (s.ports ?? []).map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port]).sort(),
    }))
    .filter((s) => s.addresses.length + s.notReady.length > 0 || s.ports.length > 0);
  return JSON.stringify(normalized);
}

/** An address as compared: its IP, and its hostname when it has one (headless, SPEC §12). */
const addressKey = (a: EndpointAddress): string => (a.hostname ? `${a.ip} ${a.hostname}` : a.ip);

/**
 * The Endpoints subsets a desired mirror stands for: none while the gateway is unusable.
 * A headless mirror's are its hosts that have an address, each with its hostname.
 */
export function desiredSubsets(desired: DesiredMirror): EndpointSubset[] {
  if (desired.headless) {
    const addresses = desired.headless.hosts.flatMap((h) =>
      h.address ? [{ ip: h.address, hostname: h.hostname }] : [],
    );
    if (addresses.length === 0 || desired.endpointPorts.length === 0) return [];
    return [{ addresses, ports: endpointsPorts(desired) }];
  }
  if (desired.addresses.length === 0 || desired.endpointPorts.length === 0) return [];
  const notReady = new Set(desired.notReadyAddresses);
  const ready = desired.addresses.filter((ip) => !notReady.has(ip));
  return [
    {
      ...(ready.length > 0 ? { addresses: ready.map((ip) => ({ ip })) } : {}),
      ...(notReady.size > 0 ? { notReadyAddresses: desired.notReadyAddresses.map((ip) => ({ ip })) } : {}),
      ports: endpointsPorts(desired),
    },
  ];
}

function endpointsPorts(desired: DesiredMirror): EndpointPort[] {
  return desired.endpointPorts.map((p) => ({
    ...(p.name ? { name: p.name } : {}),
    port: p.port,
    protocol: p.protocol,
  }));
}

/**
 * Whether an observed Service's `clusterIP` is what `desired` needs: `None` for a
 * headless mirror, an IP (or not yet allocated) for any other. `clusterIP` is
 * immutable: a Service on the wrong side is deleted and created again.
 */
export function clusterIpMatches(desired: DesiredMirror, observed: Service): boolean {
  return (observed.spec?.clusterIP === "None") === (desired.headless !== undefined);
}

/** The labels of the mirror Endpoints: in `both` mode they also say "do not derive slices from us". */
export function endpointsLabels(desired: DesiredMirror, mode: EndpointsApi): Record<string, string> {
  return mode === "both" ? { ...desired.labels, [SKIP_MIRROR_LABEL]: "true" } : { ...desired.labels };
}

export function serviceMatches(desired: DesiredMirror, observed: Service): boolean {
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(desired.labels) &&
    mirrorAnnotations(observed.metadata.annotations) === mirrorAnnotations(desired.serviceAnnotations) &&
    (observed.spec?.type ?? "ClusterIP") === "ClusterIP" &&
    clusterIpMatches(desired, observed) &&
    Object.keys(observed.spec?.selector ?? {}).length === 0 &&
    normalizeServicePorts(observed.spec?.ports) === normalizeServicePorts(desired.ports)
  );
}

export function endpointsMatch(desired: DesiredMirror, observed: Endpoints, mode: EndpointsApi = "endpoints"): boolean {
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(endpointsLabels(desired, mode)) &&
    mirrorAnnotations(observed.metadata.annotations) === mirrorAnnotations(desired.endpointsAnnotations) &&
    normalizeSubsets(observed.subsets) === normalizeSubsets(desiredSubsets(desired))
  );
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
      spec: { type: "ClusterIP", ...(desired.headless ? { clusterIP: "None" } : {}), ports },
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

export function endpointsBody(desired: DesiredMirror, observed?: Endpoints, mode: EndpointsApi = "endpoints"): object {
  const labels = endpointsLabels(desired, mode);
  const metadata: ObjectMeta = observed
    ? { ...observed.metadata, labels, annotations: mergeAnnotations(observed.metadata, desired.endpointsAnnotations) }
    : { name: desired.name, namespace: desired.namespace, labels, annotations: { ...desired.endpointsAnnotations } };
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
// The objects of a mirror.

/** One local object a desired mirror wants. */
interface DesiredObject {
  readonly kind: MirrorObjectKind;
  readonly name: string;
  /**
   * Not writable yet: a slice before its Service's uid is known. Neither written nor
   * deleted (an observed one stays until it can be updated).
   */
  readonly deferred: boolean;
  /** True when `observed` needs no write. */
  matches(observed: KubeObject): boolean;
  /** True when `observed` can only be replaced (a field the API server never updates differs). */
  replaced(observed: KubeObject): boolean;
  /** The body to POST, or to PUT over `observed`. */
  body(observed?: KubeObject): object;
}

/** Every object `desired` has in `mode`, the Service first. */
function desiredObjects(desired: DesiredMirror, mode: EndpointsApi, serviceUid: string | undefined): DesiredObject[] {
  const never = (): boolean => false;
  const objects: DesiredObject[] = [
    {
      kind: "Service",
      name: desired.name,
      deferred: false,
      matches: (o) => serviceMatches(desired, o as Service),
      // A mirror turning headless or back (SPEC §12): clusterIP is immutable.
      replaced: (o) => !clusterIpMatches(desired, o as Service),
      body: (o) => serviceBody(desired, o as Service | undefined),
    },
  ];
  if (mode !== "endpointslices") {
    objects.push({
      kind: "Endpoints",
      name: desired.name,
      deferred: false,
      matches: (o) => endpointsMatch(desired, o as Endpoints, mode),
      replaced: never,
      body: (o) => endpointsBody(desired, o as Endpoints | undefined, mode),
    });
  }
  if (mode !== "endpoints") {
    for (const content of desiredSliceContents(desired)) {
      const uid = serviceUid ?? "";
      objects.push({
        kind: "EndpointSlice",
        name: content.name,
        deferred: serviceUid === undefined,
        matches: (o) => sliceMatches(desired, content, uid, o as EndpointSlice),
        // addressType is immutable: a slice of another type under our name is recreated.
        replaced: (o) => (o as EndpointSlice).addressType !== content.addressType,
        body: (o) => sliceBody(desired, content, uid, o as EndpointSlice | undefined),
      });
    }
  }
  return objects;
}

function planAbsent(input: PlanInput): MirrorPlan {
  const actions: WriteAction[] = [];
  for (const observed of input.observed) {
    if (observed.object.metadata.deletionTimestamp) continue;
    const owner = MIRROR_KINDS[observed.kind].owner(observed.object.metadata.labels);
    if (owner === undefined || !input.gcAllowed(owner)) continue;
    actions.push(deleteAction(observed, owner));
  }
  return { actions };
}

/** Why the objects under the mirror's names stop `desired` from being written, if they do. */
function ownershipConflict(input: PlanInput, desired: DesiredMirror): Blocked | undefined {
  for (const { kind, object } of input.observed) {
    const owner = MIRROR_KINDS[kind].owner(object.metadata.labels);
    const key = `${object.metadata.namespace ?? desired.namespace}/${object.metadata.name}`;
    if (owner === undefined) {
      return {
        reason: "user-owned",
        message: `${kind} ${key} exists and is not a fleet-mirror mirror; it is left as is`,
      };
    }
    if (owner !== desired.cluster) {
      return {
        reason: "owned-by-other-cluster",
        message: `${kind} ${key} is the mirror of cluster ${owner}; cluster ${desired.cluster} wants the same name`,
      };
    }
  }
  return undefined;
}

/** What a planner needs to know of a namespace before it writes into it. */
export interface NamespaceInput {
  readonly namespaceExists: boolean;
  readonly createNamespaces: boolean;
  readonly excludedNamespaces: readonly string[];
  /** Why creating `namespace` for `cluster` would pass its quota (namespace-quota.ts); absent: no quota. */
  readonly namespaceQuota?: ((namespace: string, cluster: string) => string | undefined) | undefined;
}

/**
 * The checks every write into `namespace` passes first, in order: never an excluded
 * namespace (defence in depth: the remote actor already skips these, but nothing a
 * remote cluster sends may make the writer write there, SPEC §7), then `ownership` (a
 * name held by someone else blocks everything), then the namespace itself: created
 * (labelled for `cluster`) when missing, allowed and within the cluster's quota, else
 * blocked.
 */
export function namespaceGate(
  input: NamespaceInput,
  namespace: string,
  cluster: string,
  ownership: () => Blocked | undefined,
): { readonly blocked: Blocked } | { readonly actions: readonly WriteAction[] } {
  if (input.excludedNamespaces.includes(namespace)) {
    return { blocked: { reason: "excluded-namespace", message: `namespace ${namespace} is excluded from mirroring` } };
  }
  const conflict = ownership();
  if (conflict) return { blocked: conflict };
  if (input.namespaceExists) return { actions: [] };
  if (!input.createNamespaces) {
    return {
      blocked: {
        reason: "namespace-missing",
        message: `namespace ${namespace} does not exist and namespace creation is off`,
      },
    };
  }
  const overQuota = input.namespaceQuota?.(namespace, cluster);
  if (overQuota) return { blocked: { reason: "namespace-quota", message: overQuota } };
  return { actions: [{ verb: "create", kind: "Namespace", name: namespace, body: namespaceBody(namespace, cluster) }] };
}

export function planMirror(input: PlanInput): MirrorPlan {
  const { desired } = input;
  if (!desired) return planAbsent(input);

  const gate = namespaceGate(input, desired.namespace, desired.cluster, () => ownershipConflict(input, desired));
  if ("blocked" in gate) return { actions: [], blocked: gate.blocked };
  const actions: WriteAction[] = [...gate.actions];
  const find = (kind: MirrorObjectKind, name: string): ObservedObject | undefined =>
    input.observed.find((o) => o.kind === kind && o.object.metadata.name === name);
  const service = find("Service", desired.name)?.object;
  const wanted = desiredObjects(desired, input.endpointsApi, service?.metadata.uid);
  // A Service that can only be replaced goes first, alone: deleting it takes its
  // Endpoints and (by their ownerReference) its slices along; the next pass, once the
  // delete is seen, creates the mirror anew. One being deleted already is waited for.
  const serviceObserved = find("Service", desired.name);
  if (serviceObserved && wanted[0]?.replaced(serviceObserved.object)) {
    const deleting = serviceObserved.object.metadata.deletionTimestamp !== undefined;
    return { actions: deleting ? actions : [...actions, deleteAction(serviceObserved, desired.cluster)] };
  }

  const { namespace } = desired;
  const writes: WriteAction[] = [];
  const deletes: WriteAction[] = [];
  for (const want of wanted) {
    if (want.deferred) continue;
    const observed = find(want.kind, want.name);
    const target = { kind: want.kind, namespace, name: want.name };
    if (!observed) writes.push({ verb: "create", ...target, body: want.body() });
    else if (want.replaced(observed.object)) deletes.push(deleteAction(observed, desired.cluster));
    else if (!want.matches(observed.object))
      writes.push({ verb: "update", ...target, body: want.body(observed.object) });
  }
  // Owned objects of the mirror the mode no longer chooses (the ownership check above
  // passed, so every observed object is this cluster's).
  for (const observed of input.observed) {
    if (observed.object.metadata.deletionTimestamp) continue;
    if (wanted.some((w) => w.kind === observed.kind && w.name === observed.object.metadata.name)) continue;
    deletes.push(deleteAction(observed, desired.cluster));
  }
  // A new mirror gets its Service first (nothing else exists without it). An existing
  // one gets its addresses first: they are what traffic follows (a gateway change also
  // rewrites the Service's gateway-resource-version annotation, SPEC §3, which routes
  // nothing). Deletions come last, so a mode change writes the replacing objects before
  // it removes the replaced ones.
  const serviceWrites = writes.filter((a) => a.kind === "Service");
  const otherWrites = writes.filter((a) => a.kind !== "Service");
  const ordered = service ? [...otherWrites, ...serviceWrites] : [...serviceWrites, ...otherWrites];
  actions.push(...ordered, ...deletes);
  return { actions };
}
