/**
 * Fleet-wide Services across shards (SPEC §11, DESIGN §3 "Across shards"), the pure
 * parts: what a member cluster's part says about its member, so that the replica owning
 * the fleet-wide Service learns the members of clusters it does not host from the local
 * API alone, and which `--endpoints-api` mode cannot be sharded.
 *
 * Invariants:
 * - a part written by a sharded writer carries its member's Service ports in the
 *   annotation `mirror.linkerd.io/federated-ports` (canonical JSON: sorted, defaults
 *   filled), so every replica reads the same ports from it;
 * - a member is read back from its part slices only (one or two, by address family): the
 *   ports from the annotation, the addresses and readiness from the endpoints, the
 *   gateway's port from the slice ports; a part without a readable annotation (written
 *   before sharding, or by hand) yields no member: its cluster is treated as unknown.
 */
import type { MirrorServicePort } from "./desired.ts";
import type { FederatedMember } from "./federated.ts";
import { CLUSTER_NAME, REMOTE_GATEWAY_IDENTITY } from "./labels.ts";
import type { EndpointsApi } from "./mirror-kinds.ts";
import type { EndpointSlice } from "./objects.ts";

/** On each part slice of a sharded writer: its member's Service ports (SPEC §11). */
export const FEDERATED_PORTS = "mirror.linkerd.io/federated-ports";

/** The annotation value for `ports`: sorted, protocol and targetPort filled in, so equal ports give equal text. */
export function portsAnnotation(ports: readonly MirrorServicePort[]): string {
  return JSON.stringify(
    ports
      .map((p) => ({
        ...(p.name ? { name: p.name } : {}),
        protocol: p.protocol,
        port: p.port,
        targetPort: p.targetPort ?? p.port,
      }))
      .sort((a, b) => a.port - b.port || (a.protocol < b.protocol ? -1 : a.protocol > b.protocol ? 1 : 0)),
  );
}

const isPort = (value: unknown): value is number => Number.isInteger(value) && (value as number) > 0;

/** The ports an annotation states, or undefined when it is absent or not a non-empty list of valid ports. */
export function parsePortsAnnotation(text: string | undefined): MirrorServicePort[] | undefined {
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length === 0) return undefined;
  const ports: MirrorServicePort[] = [];
  for (const entry of parsed as unknown[]) {
    if (typeof entry !== "object" || entry === null) return undefined;
    const { name, protocol, port, targetPort } = entry as Record<string, unknown>;
    if (name !== undefined && typeof name !== "string") return undefined;
    if (typeof protocol !== "string" || !isPort(port)) return undefined;
    if (!isPort(targetPort) && (typeof targetPort !== "string" || targetPort.length === 0)) return undefined;
    ports.push({ ...(name ? { name } : {}), protocol, port, targetPort });
  }
  return ports;
}

/**
 * The member that the part slices of `cluster` (all labelled with it) stand for, as its
 * host wrote it; undefined when no slice carries a readable ports annotation.
 */
export function memberFromPart(
  namespace: string,
  name: string,
  cluster: string,
  slices: readonly EndpointSlice[],
): FederatedMember | undefined {
  const mine = slices.filter((s) => s.metadata.labels?.[CLUSTER_NAME] === cluster);
  let ports: MirrorServicePort[] | undefined;
  for (const slice of mine) ports ??= parsePortsAnnotation(slice.metadata.annotations?.[FEDERATED_PORTS]);
  if (!ports) return undefined;
  const addresses = new Set<string>();
  const notReady = new Set<string>();
  let endpointPorts: FederatedMember["endpointPorts"] = [];
  let identity: string | undefined;
  for (const slice of mine) {
    for (const endpoint of slice.endpoints ?? [])
      for (const ip of endpoint.addresses) {
        addresses.add(ip);
        if (endpoint.conditions?.ready === false) notReady.add(ip);
      }
    if ((slice.endpoints ?? []).length > 0 && endpointPorts.length === 0)
      endpointPorts = (slice.ports ?? []).flatMap((p) =>
        p.port === undefined || p.port === null
          ? []
          : [{ ...(p.name ? { name: p.name } : {}), protocol: p.protocol ?? "TCP", port: p.port }],
      );
    identity ??= slice.metadata.annotations?.[REMOTE_GATEWAY_IDENTITY];
  }
  return {
    cluster,
    namespace,
    name,
    remote: `${namespace}/${name.replace(/-federated$/, "")}`,
    ports,
    addresses: [...addresses].sort(),
    notReadyAddresses: [...notReady].sort(),
    endpointPorts: addresses.size > 0 ? endpointPorts : [],
    ...(identity ? { identity } : {}),
  };
}

/**
 * Why fleet-wide Services cannot be written by a writer of `shards` shards in mode
 * `endpointsApi`, or undefined when they can: in `endpoints` mode every member's
 * addresses live in one Endpoints object, which no slice carries for the owner to read.
 */
export function shardedFederatedProblem(shards: number, endpointsApi: EndpointsApi): string | undefined {
  if (shards <= 1 || endpointsApi !== "endpoints") return undefined;
  return `fleet-wide Services are not written with --shards ${shards} and --endpoints-api endpoints: one Endpoints object holds every member cluster's addresses and no replica hosts them all; use --endpoints-api endpointslices or both`;
}

export interface ShardedMembersInput {
  readonly namespace: string;
  /** `<svc>-federated` */
  readonly name: string;
  /** The known members of the clusters this replica hosts (its desired store). */
  readonly hosted: ReadonlyMap<string, FederatedMember>;
  /** The fleet-wide slices of the Service observed (any cluster's). */
  readonly slices: readonly EndpointSlice[];
  /** Whether this replica hosts `cluster`. */
  readonly hosts: (cluster: string) => boolean;
}

export interface ShardedMembers {
  /** The hosted members and those read from the parts of clusters this replica does not host. */
  readonly members: ReadonlyMap<string, FederatedMember>;
  /** Clusters not hosted here whose part states no readable ports: unknown, so kept. */
  readonly unreadable: ReadonlySet<string>;
  /** Every cluster with an observed part, hosted or not (their parts are "observed clusters" of the reduction). */
  readonly partClusters: ReadonlySet<string>;
}

/**
 * The members a sharded replica reduces a fleet-wide Service from: its hosted members
 * (they win over their own parts, which may lag) and, for every other cluster with a
 * part, the member that part states. Guarantee: the same observed parts give the same
 * members of non-hosted clusters in every replica.
 */
export function shardedMembers(input: ShardedMembersInput): ShardedMembers {
  const members = new Map(input.hosted);
  const unreadable = new Set<string>();
  const partClusters = new Set<string>();
  for (const slice of input.slices) {
    const cluster = slice.metadata.labels?.[CLUSTER_NAME];
    if (cluster === undefined) continue;
    partClusters.add(cluster);
    if (input.hosts(cluster) || members.has(cluster) || unreadable.has(cluster)) continue;
    const member = memberFromPart(input.namespace, input.name, cluster, input.slices);
    if (member) members.set(cluster, member);
    else unreadable.add(cluster);
  }
  return { members, unreadable, partClusters };
}
