/**
 * What the local writer must do for one fleet-wide Service (local key
 * `namespace/<svc>-federated`, SPEC §11), as a pure function of the reduction of its
 * members (federated.ts) and the observed local objects. It produces the same
 * `WriteAction`s as a mirror's plan and reuses its object bodies and comparisons.
 *
 * The objects: the Service (ports of the first member, the sorted `federated-clusters`
 * annotation: the only object every member cluster shares); in `endpointslices`/`both`
 * mode one part per member cluster, its own slices `<svc>-federated-<cluster>-ipv4|ipv6`
 * labelled with that cluster, written from that cluster's member alone; in
 * `endpoints`/`both` mode one Endpoints object with a subset per member cluster.
 *
 * Guarantees (unit tested):
 * - nothing is planned on an object fleet-mirror does not own as a fleet-wide object
 *   (labels `mirrored-service` and `federated`, and for slices its `managed-by`): a
 *   user's object under one of the names blocks the whole Service;
 * - the part of a kept (unknown) cluster is neither written nor deleted; while a kept
 *   cluster exists, the shared Endpoints object is left as observed;
 * - nothing is written when the observed objects match (a restart writes nothing);
 * - deletions carry the observed uid; `delete` removes every fleet-wide object observed;
 * - sharded (`shard` given): the Service and Endpoints are planned only by their owner;
 *   a part is written and deleted only by the host of its cluster, which writes one for
 *   each member it hosts: full when the member's ports are the Service's (the owner:
 *   the reduction's), empty (no endpoints, its ports annotation only) when they differ
 *   (the member is excluded) or, for a host that does not own the Service, when the
 *   Service does not exist yet (an announcement, without ownerReference).
 */
import { carryPorts, type DesiredMirror } from "./desired.ts";
import {
  desiredSliceContents,
  type SliceContent,
  sliceBody,
  sliceMatches,
  sliceMirrorName,
} from "./endpoint-slices.ts";
import {
  type ExcludedMember,
  FEDERATED_CLUSTERS,
  type FederatedMember,
  portsSignature,
  type Reduction,
} from "./federated.ts";
import { sharedEndpointsBody, sharedEndpointsMatch } from "./federated-endpoints.ts";
import {
  deleteFederated,
  type FederatedShard,
  FLEET_WIDE,
  isMirrorSlice,
  type SharedServiceFlavor,
  writesObject,
} from "./federated-objects.ts";
import { FEDERATED_PORTS, portsAnnotation } from "./federated-shards.ts";
import { CLUSTER_NAME, REMOTE_GATEWAY_IDENTITY } from "./labels.ts";
import { localPartSliceContents } from "./local-part.ts";
import { clusterIpMatches } from "./mirror-bodies.ts";
import type { Blocked, EndpointsApi, MirrorObjectKind, ObservedObject, WriteAction } from "./mirror-kinds.ts";
import type { EndpointSlice, Endpoints, Service } from "./objects.ts";
import { type NamespaceInput, namespaceGate, serviceBody, serviceMatches } from "./plan.ts";
import { READY_ANNOTATION, statedReady } from "./sharded-tiers.ts";
import { SERVING_PRIORITY_ANNOTATION, STANDBY_ANNOTATION } from "./tiers.ts";

export { federatedSubsets } from "./federated-endpoints.ts";

export interface FederatedPlanInput {
  readonly namespace: string;
  /** `<svc>-federated` */
  readonly name: string;
  readonly reduction: Reduction;
  /** The Service and Endpoints under the name, and every slice of the Service (its label) or under a wanted name. */
  readonly observed: readonly ObservedObject[];
  readonly endpointsApi: EndpointsApi;
  readonly namespaceExists: boolean;
  readonly createNamespaces: boolean;
  readonly excludedNamespaces: readonly string[];
  readonly namespaceQuota?: NamespaceInput["namespaceQuota"];
  /** How the writer is sharded; absent: it writes every object (no `--shards`, or one shard). */
  readonly shard?: FederatedShard;
  /** Default FLEET_WIDE. */
  readonly flavor?: SharedServiceFlavor;
  /** The Service is headless (`clusterIP: None`): an MCS import of type Headless (SPEC §16). */
  readonly headless?: boolean;
  /** The worst priority that serves (SPEC §14), stated on the Service; absent: no tiers. */
  readonly servingPriority?: number;
}

const flavorOf = (input: FederatedPlanInput): SharedServiceFlavor => input.flavor ?? FLEET_WIDE;

export interface FederatedPlan {
  readonly actions: readonly WriteAction[];
  readonly blocked?: Blocked;
  /** Sharded: the hosted members whose part is written empty because their ports differ from the Service's. */
  readonly excluded?: readonly ExcludedMember[];
  /** Plan again once the actions are done: a mirror's slice held a part's name and is deleted, the part comes next. */
  readonly again?: boolean;
}

/** A mirror-shaped description of the fleet-wide Service, so the mirror's Service body and comparison apply. */
function serviceShape(input: FederatedPlanInput, ports: DesiredMirror["ports"], clusters: readonly string[]) {
  return shape(input, {
    labels: flavorOf(input).labels,
    serviceAnnotations: {
      [FEDERATED_CLUSTERS]: clusters.join(","),
      ...(input.servingPriority !== undefined ? { [SERVING_PRIORITY_ANNOTATION]: String(input.servingPriority) } : {}),
    },
    ports,
    ...(input.headless ? { headless: { hosts: [] } } : {}),
  });
}

/** A part's slices: a local part's copied endpoints (local-part.ts), else its gateway addresses. */
function partContents(part: DesiredMirror, member: FederatedMember, empty: boolean): SliceContent[] {
  return member.endpoints && !empty
    ? localPartSliceContents(part.name, member.endpoints, member.endpointPorts)
    : desiredSliceContents(part);
}

function shape(input: FederatedPlanInput, fields: Partial<DesiredMirror>): DesiredMirror {
  return {
    cluster: "",
    namespace: input.namespace,
    name: input.name,
    remote: "",
    labels: {},
    serviceAnnotations: {},
    ports: [],
    endpointsAnnotations: {},
    addresses: [],
    notReadyAddresses: [],
    endpointPorts: [],
    ...fields,
  };
}

/**
 * One member cluster's part as a mirror-shaped value: its slices are named
 * `<name>-<cluster>-<family>`. Sharded, it states the member's ports and, standing by
 * or `announced`, its ready endpoints (read by the owner); `empty`: no endpoints
 * (excluded, or announced before the Service exists).
 */
function partShape(
  input: FederatedPlanInput,
  member: FederatedMember,
  empty = false,
  announced = false,
): DesiredMirror {
  const annotations: Record<string, string> = member.identity ? { [REMOTE_GATEWAY_IDENTITY]: member.identity } : {};
  if (member.standby && !empty) annotations[STANDBY_ANNOTATION] = "true";
  if (input.shard) annotations[FEDERATED_PORTS] = portsAnnotation(member.ports);
  const ready = statedReady(member, empty, announced);
  if (input.shard && ready !== undefined) annotations[READY_ANNOTATION] = String(ready);
  return shape(input, {
    cluster: member.cluster,
    name: `${input.name}-${member.cluster}`,
    labels: {
      ...flavorOf(input).labels,
      [CLUSTER_NAME]: member.cluster,
      ...flavorOf(input).partLabels(member.cluster),
    },
    endpointsAnnotations: annotations,
    addresses: empty ? [] : member.addresses,
    notReadyAddresses: empty ? [] : member.notReadyAddresses,
    endpointPorts: empty ? [] : member.endpointPorts,
  });
}

/** Whether `observed` is this shared Service's own: of its flavor, and a slice only of this Service. */
function ownsObject(input: FederatedPlanInput, observed: ObservedObject): boolean {
  const { kind, object } = observed;
  return flavorOf(input).owns(kind, object) && (kind !== "EndpointSlice" || sliceMirrorName(object) === input.name);
}

function ownershipConflict(input: FederatedPlanInput): Blocked | undefined {
  for (const observed of input.observed) {
    const { kind, object } = observed;
    if (ownsObject(input, observed)) continue;
    // Taken over (deleted) by the host of its cluster, the part's (see isMirrorSlice).
    if (isMirrorSlice(observed) && writesObject(input.shard, observed)) continue;
    const key = `${object.metadata.namespace ?? input.namespace}/${object.metadata.name}`;
    if (flavorOf(input).owns(kind, object))
      return {
        reason: "owned-by-other-service",
        message: `${kind} ${key} is fleet-mirror's slice of Service ${input.namespace}/${sliceMirrorName(object)}, which keeps the name; ${input.namespace}/${input.name} is not written`,
      };
    return {
      reason: "user-owned",
      message: `${kind} ${key} exists and is not a fleet-mirror ${flavorOf(input).what}; it is left as is`,
    };
  }
  return undefined;
}

export function planFederated(input: FederatedPlanInput): FederatedPlan {
  const { reduction, shard } = input;
  const owned = input.observed.filter(
    (o) => ownsObject(input, o) && !o.object.metadata.deletionTimestamp && writesObject(shard, o),
  );
  if (reduction.kind === "wait") return { actions: [] };
  if (reduction.kind === "delete") {
    // Slices and Endpoints before the Service (reconcile orders deletes that way too).
    const ordered = [...owned.filter((o) => o.kind !== "Service"), ...owned.filter((o) => o.kind === "Service")];
    return { actions: ordered.map(deleteFederated) };
  }
  const writesShared = !shard || shard.owner;
  const parts = shard ? shard.members : reduction.parts;
  const actions: WriteAction[] = [];
  if (writesShared || parts.length > 0) {
    const cluster = (writesShared ? reduction.parts[0]?.cluster : parts[0]?.cluster) ?? "";
    const gate = namespaceGate(input, input.namespace, cluster, () => ownershipConflict(input));
    if ("blocked" in gate) return { actions: [], blocked: gate.blocked };
    actions.push(...gate.actions);
  }
  const find = (kind: MirrorObjectKind, name: string): ObservedObject | undefined =>
    input.observed.find((o) => o.kind === kind && o.object.metadata.name === name);
  const { namespace } = input;
  const writes: WriteAction[] = [];
  const deletes: WriteAction[] = [];
  const takeovers: WriteAction[] = [];
  /** Names of objects that stay: wanted, or a kept cluster's. */
  const staying = new Set<string>();

  const service = find("Service", input.name)?.object as Service | undefined;
  const serviceWanted = serviceShape(input, reduction.ports, reduction.clusters);
  staying.add(`Service/${input.name}`);
  // Sharded, the Service is its owner's alone. `clusterIP` is immutable: a Service on the
  // wrong side of headless (an import whose type changed, SPEC §16) is deleted first and
  // created again by the next plan.
  if (writesShared && service && !clusterIpMatches(serviceWanted, service)) {
    if (!service.metadata.deletionTimestamp) actions.push(deleteFederated({ kind: "Service", object: service }));
    return { actions, again: true };
  }
  if (writesShared && !service)
    writes.push({ verb: "create", kind: "Service", namespace, name: input.name, body: serviceBody(serviceWanted) });
  else if (writesShared && service && !serviceMatches(serviceWanted, service))
    writes.push({
      verb: "update",
      kind: "Service",
      namespace,
      name: input.name,
      body: serviceBody(serviceWanted, service),
    });

  const mode = input.endpointsApi;
  if (mode !== "endpointslices" && writesShared) {
    staying.add(`Endpoints/${input.name}`);
    const shared = { namespace, name: input.name, labels: flavorOf(input).labels };
    // One object shared by every member cluster: while a kept cluster's part is unknown
    // it cannot be told apart from the others', so the object waits as observed.
    const endpoints = find("Endpoints", input.name)?.object as Endpoints | undefined;
    if (reduction.kept.length === 0) {
      const target = { kind: "Endpoints" as const, namespace, name: input.name };
      if (!endpoints)
        writes.push({ verb: "create", ...target, body: sharedEndpointsBody(shared, mode, reduction.parts, undefined) });
      else if (!sharedEndpointsMatch(shared.labels, mode, reduction.parts, endpoints))
        writes.push({ verb: "update", ...target, body: sharedEndpointsBody(shared, mode, reduction.parts, endpoints) });
    }
  }

  const excluded: ExcludedMember[] = [];
  if (input.endpointsApi !== "endpoints") {
    const uid = service?.metadata.uid;
    // The Service's ports decide which hosted member is in: the owner's are the
    // reduction's, a host that does not own the Service follows the observed Service.
    const authority = writesShared ? reduction.ports : service ? carryPorts(service) : undefined;
    for (const member of parts) {
      const agrees = authority !== undefined && portsSignature(authority) === portsSignature(member.ports);
      if (shard && authority !== undefined && !agrees)
        excluded.push({
          cluster: member.cluster,
          message:
            reduction.excluded.find((e) => e.cluster === member.cluster)?.message ??
            `ports of ${member.remote} in cluster ${member.cluster} differ from those of the fleet-wide Service ${namespace}/${input.name}: left out of it`,
        });
      const part = partShape(input, member, shard !== undefined && !agrees, shard !== undefined && !authority);
      for (const content of partContents(part, member, shard !== undefined && !agrees)) {
        staying.add(`EndpointSlice/${content.name}`);
        // Written once the Service's uid is known, except by a host that does not own
        // it: its part announces the member to the owner, which then creates the Service.
        if (uid === undefined && writesShared) continue;
        const found = find("EndpointSlice", content.name);
        // A mirror's slice under the part's name: deleted first; the part is created by
        // the next plan, once the delete is seen (see isMirrorSlice).
        if (found && isMirrorSlice(found)) {
          if (!found.object.metadata.deletionTimestamp) takeovers.push(deleteFederated(found));
          continue;
        }
        const observed = found?.object as EndpointSlice | undefined;
        const target = { kind: "EndpointSlice" as const, namespace, name: content.name };
        if (!observed)
          writes.push({ verb: "create", ...target, body: sliceBody(part, content, uid, undefined, input.name) });
        else if (observed.addressType !== content.addressType)
          deletes.push(deleteFederated({ kind: "EndpointSlice", object: observed }));
        else if (!sliceMatches(part, content, uid, observed, input.name))
          writes.push({ verb: "update", ...target, body: sliceBody(part, content, uid, observed, input.name) });
      }
    }
  }
  for (const observed of owned) {
    const { metadata } = observed.object;
    if (staying.has(`${observed.kind}/${metadata.name}`)) continue;
    // A kept (unknown) cluster's part stays exactly as observed.
    const cluster = metadata.labels?.[CLUSTER_NAME];
    if (observed.kind === "EndpointSlice" && cluster !== undefined && reduction.kept.includes(cluster)) continue;
    deletes.push(deleteFederated(observed));
  }
  // As for a mirror: a new Service first; an existing one gets its addresses first.
  const serviceWrites = writes.filter((a) => a.kind === "Service");
  const otherWrites = writes.filter((a) => a.kind !== "Service");
  actions.push(
    ...takeovers,
    ...(service ? [...otherWrites, ...serviceWrites] : [...serviceWrites, ...otherWrites]),
    ...deletes,
  );
  const again = takeovers.length > 0 ? { again: true } : {};
  return shard ? { actions, excluded, ...again } : { actions, ...again };
}
