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
import type { DesiredMirror } from "./desired.ts";
import { desiredSliceContents, sliceBody, sliceMatches, sliceMirrorName } from "./endpoint-slices.ts";
import {
  clusterIpMatches,
  endpointsBody,
  endpointsMatch,
  namespaceBody,
  serviceBody,
  serviceMatches,
} from "./mirror-bodies.ts";
import {
  type Blocked,
  deleteAction,
  type EndpointsApi,
  MIRROR_KINDS,
  type MirrorObjectKind,
  type ObservedObject,
  type WriteAction,
} from "./mirror-kinds.ts";
import { type EndpointSlice, type Endpoints, type KubeObject, type Service, splitKey } from "./objects.ts";

// The bodies and comparisons of a mirror's objects live in mirror-bodies.ts; they are
// part of this module's interface for the planners and tools that build on it.
export {
  clusterIpMatches,
  desiredSubsets,
  endpointsBody,
  endpointsLabels,
  endpointsMatch,
  namespaceBody,
  serviceBody,
  serviceMatches,
} from "./mirror-bodies.ts";

export interface MirrorPlan {
  readonly actions: readonly WriteAction[];
  /** Set when the desired mirror cannot be written; nothing of it is planned then. */
  readonly blocked?: Blocked;
  /**
   * A cluster that held the name without claiming it any more: `actions` delete its
   * objects (only those), and the desired mirror is planned again once they are gone.
   */
  readonly released?: string;
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
  /**
   * The clusters that want this key (default: the desired mirror's cluster alone). An
   * observed owner that is not among them no longer wants the name: when its garbage
   * collection is allowed, its objects are deleted first and the name is released.
   */
  readonly claimants?: readonly string[];
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
  // A remote-discovery mirror (SPEC §15) is its Service alone: owned Endpoints and slices
  // under its names are objects it does not choose, and are deleted like another mode's.
  if (mode !== "endpointslices" && !desired.serviceOnly) {
    objects.push({
      kind: "Endpoints",
      name: desired.name,
      deferred: false,
      matches: (o) => endpointsMatch(desired, o as Endpoints, mode),
      replaced: never,
      body: (o) => endpointsBody(desired, o as Endpoints | undefined, mode),
    });
  }
  if (mode !== "endpoints" && !desired.serviceOnly) {
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

/**
 * Whether `observed` is one of mirror `name`'s objects. A Service and its Endpoints are
 * named as the mirror; a slice belongs to the Service its `kubernetes.io/service-name`
 * names (SPEC §9), and to no other, whatever its name: a fleet-wide or import part may
 * sit under a mirror's slice name (`<svc>-federated-<c>-ipv4` is both), and a slice of
 * ours under another name than today's is still the mirror's.
 */
export function belongsToMirror(observed: ObservedObject, name: string): boolean {
  return observed.kind !== "EndpointSlice" || sliceMirrorName(observed.object) === name;
}

const ownerOf = (observed: ObservedObject): string | undefined =>
  MIRROR_KINDS[observed.kind].owner(observed.object.metadata.labels);

/** The deletes of the mirror's objects whose owner may be garbage-collected (SPEC §6). */
function planAbsent(input: PlanInput): MirrorPlan {
  const { name } = splitKey(input.key);
  const actions: WriteAction[] = [];
  for (const observed of input.observed) {
    if (observed.object.metadata.deletionTimestamp || !belongsToMirror(observed, name)) continue;
    const owner = ownerOf(observed);
    if (owner === undefined || !input.gcAllowed(owner)) continue;
    actions.push(deleteAction(observed, owner));
  }
  return { actions };
}

/**
 * The cluster whose objects hold the mirror's name although it no longer claims the
 * name and may be garbage-collected: its objects go first, then the name is the
 * claimant's. Undefined when there is none.
 */
function staleOwner(input: PlanInput, desired: DesiredMirror): string | undefined {
  const claimants = input.claimants ?? [desired.cluster];
  for (const observed of input.observed) {
    if (observed.object.metadata.deletionTimestamp || !belongsToMirror(observed, desired.name)) continue;
    const owner = ownerOf(observed);
    if (owner !== undefined && owner !== desired.cluster && !claimants.includes(owner) && input.gcAllowed(owner))
      return owner;
  }
  return undefined;
}

/** Why the objects under the mirror's names stop `desired` from being written, if they do. */
function ownershipConflict(input: PlanInput, desired: DesiredMirror): Blocked | undefined {
  for (const observed of input.observed) {
    const { kind, object } = observed;
    const owner = ownerOf(observed);
    const key = `${object.metadata.namespace ?? desired.namespace}/${object.metadata.name}`;
    if (owner === undefined) {
      return {
        reason: "user-owned",
        message: `${kind} ${key} exists and is not a fleet-mirror mirror; it is left as is`,
      };
    }
    if (!belongsToMirror(observed, desired.name)) {
      const service = `${object.metadata.namespace ?? desired.namespace}/${sliceMirrorName(object)}`;
      return {
        reason: "owned-by-other-service",
        message: `${kind} ${key} is fleet-mirror's slice of Service ${service}, which keeps the name; cluster ${desired.cluster}'s mirror ${desired.name} is not written`,
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
  // A stale owner's objects are collected first (uid preconditions); the writer plans
  // again once they are deleted, and the claimant's mirror is created then.
  const released = staleOwner(input, desired);
  if (released !== undefined)
    return { ...planAbsent({ ...input, observed: input.observed.filter((o) => ownerOf(o) === released) }), released };

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
