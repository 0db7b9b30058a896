/**
 * Fleet-wide Services (SPEC §11), the pure parts: which remote Services are members,
 * what one member cluster contributes (computed by that cluster's actor with its own
 * gateway view only), and the writer's reduction of every member cluster's
 * contribution into one fleet-wide Service. No I/O, no clock, no mutation of inputs.
 */
import {
  type ClusterSettings,
  carryPorts,
  type GatewayView,
  type MirrorEndpointPort,
  type MirrorProblem,
  type MirrorServicePort,
  type SkipReason,
} from "./desired.ts";
import { type ExportSettings, exportedGateway, type GatewayRef } from "./export.ts";
import type { LabelRequirement } from "./label-requirement.ts";
import { type LabelSelector, selects } from "./label-selector.ts";
import { validateMirrorName } from "./naming.ts";
import { objectKey, type Service } from "./objects.ts";

/** On a fleet-wide Service (value `"true"`) and, by default, the member selector's key (SPEC §11). */
export const FEDERATED_LABEL = "mirror.linkerd.io/federated";
/** The member clusters of a fleet-wide Service, sorted, comma-separated (SPEC §11). */
export const FEDERATED_CLUSTERS = "mirror.linkerd.io/federated-clusters";
export const DEFAULT_MEMBER_SELECTOR = `${FEDERATED_LABEL}=member`;

/**
 * A member selector: one label that must equal one value (`--federated-selector`), or a
 * Link's `federatedServiceSelector` (SPEC §15; empty or absent selects nothing).
 */
export type MemberSelector = LabelRequirement | LabelSelector;

/** The local name of the fleet-wide Service of remote Services named `service` (SPEC §11). */
export function federatedName(service: string): string {
  return `${service}-federated`;
}

/** The gateway whose addresses a member contributes: its §2 annotations, else its cluster's default gateway (SPEC §12). */
export function memberGateway(settings: ExportSettings, service: Service): GatewayRef {
  // A Link's cluster: its gateway alone (SPEC §15); the §2 annotations are not read.
  return (settings.link ? undefined : exportedGateway(service)) ?? settings.defaultGateway;
}

export function isMember(selector: MemberSelector, service: Service): boolean {
  if ("key" in selector) return service.metadata.labels?.[selector.key] === selector.value;
  return selects(selector, service.metadata.labels);
}

/**
 * What one member cluster contributes to the fleet-wide Service `namespace/name`.
 * Plain data: it crosses threads by structured clone, like a DesiredMirror.
 */
export interface FederatedMember {
  readonly cluster: string;
  readonly namespace: string;
  /** Local name, `<remote name>-federated`. */
  readonly name: string;
  /** The remote Service, `namespace/name`, for logs and status. */
  readonly remote: string;
  readonly ports: readonly MirrorServicePort[];
  /** The member gateway's IPs, sorted; empty while it is unusable. */
  readonly addresses: readonly string[];
  /** Dead members of `addresses` (SPEC §10), sorted; a subset of `addresses`. */
  readonly notReadyAddresses: readonly string[];
  /** Ports of this cluster's part: the Service's names and protocols, its gateway's incoming port. */
  readonly endpointPorts: readonly MirrorEndpointPort[];
  /** The gateway's identity annotation, when non-empty. */
  readonly identity?: string;
  /**
   * A local cluster's part (a fleet-wide Service's local member, planned; SPEC §16's local exporter): the local
   * Service's own endpoints, copied as they are (pod addresses, conditions, hostname,
   * nodeName, zone), in place of gateway `addresses` (then empty); `endpointPorts` are
   * its slices' ports. Absent for a remote cluster's part.
   */
  readonly endpoints?: readonly PartEndpoint[];
  /** Outside the serving tiers (SPEC §14): set by the writer (federated-tiers.ts), never sent by an actor. */
  readonly standby?: true;
  /**
   * With `standby`: the ready endpoints the member holds, which its part does not show
   * (every endpoint written not ready); a sharded part states it (SPEC §14 "Sharded").
   */
  readonly standbyReady?: number;
}

/** One endpoint of a local part, as its EndpointSlice had it (local-part.ts). */
export interface PartEndpoint {
  readonly addresses: readonly string[];
  readonly conditions: { readonly ready: boolean; readonly serving: boolean; readonly terminating: boolean };
  readonly hostname?: string;
  readonly nodeName?: string;
  readonly zone?: string;
}

export type MemberOutcome =
  | { readonly kind: "member"; readonly member: FederatedMember }
  | { readonly kind: "problem"; readonly problem: MirrorProblem }
  | { readonly kind: "not-member" };

/** The member a remote Service stands for, given the view of its member gateway (SPEC §11). */
export function desiredMemberFor(
  settings: ClusterSettings,
  selector: MemberSelector,
  service: Service,
  gateway: GatewayView,
): MemberOutcome {
  if (!isMember(selector, service)) return { kind: "not-member" };
  const namespace = service.metadata.namespace ?? "default";
  const remote = objectKey({ namespace, name: service.metadata.name });
  const problem = (reason: SkipReason, message: string): MemberOutcome => ({
    kind: "problem",
    problem: { cluster: settings.name, remote, reason, message: `fleet-wide member: ${message}` },
  });
  if (settings.excludedNamespaces.includes(namespace))
    return problem("excluded-namespace", `namespace ${namespace} is excluded from mirroring`);
  const name = federatedName(service.metadata.name);
  const invalid = validateMirrorName(name);
  if (invalid) return problem("mirror-name-invalid", `fleet-wide name ${name} is not a valid Service name: ${invalid}`);
  const ports = carryPorts(service);
  if (ports.length === 0) return problem("no-ports", "remote Service has no ports");
  return { kind: "member", member: memberPart({ cluster: settings.name, namespace, name, remote, ports }, gateway) };
}

/**
 * A cluster's part of a Service shared by clusters (a fleet-wide member, an MCS export):
 * its ports and its gateway's addresses, none while the gateway is unusable.
 */
export function memberPart(
  fields: Pick<FederatedMember, "cluster" | "namespace" | "name" | "remote" | "ports">,
  gateway: GatewayView,
): FederatedMember {
  const usable = gateway.addresses.length > 0 && gateway.incomingPort !== undefined;
  return {
    ...fields,
    addresses: usable ? gateway.addresses : [],
    notReadyAddresses: usable ? (gateway.notReadyAddresses ?? []) : [],
    endpointPorts: usable
      ? fields.ports.map((p) => ({
          ...(p.name ? { name: p.name } : {}),
          protocol: p.protocol,
          port: gateway.incomingPort as number,
        }))
      : [],
    ...(gateway.identity ? { identity: gateway.identity } : {}),
  };
}

// ---------------------------------------------------------------------------------
// The writer's reduction

/** The ports that decide whether two members agree: what the fleet-wide Service carries. */
export function portsSignature(ports: readonly MirrorServicePort[]): string {
  return JSON.stringify(
    ports
      .map((p) => [p.name ?? "", p.protocol, p.port, p.targetPort ?? p.port])
      .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
  );
}

export interface ReduceInput {
  /** Members of the fleet-wide key, by cluster, from every cluster whose set the writer holds. */
  readonly members: ReadonlyMap<string, FederatedMember>;
  /** Every registered cluster, in registration order (Secret creation time, then name). */
  readonly order: readonly string[];
  /**
   * Registered clusters whose complete set the writer has not yet received (after a
   * writer start): their membership is unknown, which is not the same as absent.
   */
  readonly unknown: ReadonlySet<string>;
  /**
   * Whether the registered clusters are known at all (the supervisor sent them after a
   * complete list of the credentials Secrets). Until then a cluster not heard from yet
   * may be a member, so nothing is deleted.
   */
  readonly registrationKnown: boolean;
  /** The clusters the observed fleet-wide Service's annotation names (empty when there is none). */
  readonly observedClusters: readonly string[];
}

export interface ExcludedMember {
  readonly cluster: string;
  readonly message: string;
}

export type Reduction =
  /** Write the fleet-wide Service: `parts` are the members written from their own cluster's state. */
  | {
      readonly kind: "write";
      readonly ports: readonly MirrorServicePort[];
      /** Included members, in cluster order. */
      readonly parts: readonly FederatedMember[];
      /** Clusters named by the observed annotation whose state is unknown: their observed part is kept. */
      readonly kept: readonly string[];
      /** The `federated-clusters` annotation: parts and kept, sorted. */
      readonly clusters: readonly string[];
      readonly excluded: readonly ExcludedMember[];
    }
  /** Only unknown clusters may still be members: leave every observed object as it is. */
  | { readonly kind: "wait"; readonly kept: readonly string[] }
  /** No member, every registered cluster known: the fleet-wide Service goes. */
  | { readonly kind: "delete" };

/**
 * Reduces the members of one fleet-wide Service (SPEC §11). Guarantees (unit tested):
 * - the result does not depend on the iteration order of `members`: the first member in
 *   `order` (then by name, for a cluster missing from `order`) sets the ports;
 * - a member whose ports differ is excluded, with a message naming both clusters; no
 *   member changes another's part;
 * - a cluster in `unknown` that the observed annotation names is kept (its observed part
 *   stays), and nothing is deleted while any registered cluster is unknown;
 * - `delete` only when no member remains, the registered clusters are known and none is unknown.
 */
export function reduceFederated(input: ReduceInput): Reduction {
  const rank = (cluster: string): number => {
    const i = input.order.indexOf(cluster);
    return i < 0 ? input.order.length : i;
  };
  const members = [...input.members.values()]
    .filter((m) => !input.unknown.has(m.cluster))
    .sort((a, b) => rank(a.cluster) - rank(b.cluster) || (a.cluster < b.cluster ? -1 : a.cluster > b.cluster ? 1 : 0));
  const kept = [...new Set(input.observedClusters)]
    .filter((c) => input.unknown.has(c) && !members.some((m) => m.cluster === c))
    .sort();
  const first = members[0];
  if (!first) return input.unknown.size > 0 || !input.registrationKnown ? { kind: "wait", kept } : { kind: "delete" };
  const signature = portsSignature(first.ports);
  const parts: FederatedMember[] = [];
  const excluded: ExcludedMember[] = [];
  for (const member of members) {
    if (portsSignature(member.ports) === signature) parts.push(member);
    else
      excluded.push({
        cluster: member.cluster,
        message: `ports of ${member.remote} in cluster ${member.cluster} differ from those of cluster ${first.cluster}, the first member: left out of ${member.namespace}/${member.name}`,
      });
  }
  const clusters = [...new Set([...parts.map((m) => m.cluster), ...kept])].sort();
  return { kind: "write", ports: first.ports, parts, kept, clusters, excluded };
}

/** What a reduction writes, in numbers: its member clusters and the addresses of its parts (SPEC §11). */
export interface ReductionSummary {
  /** Sorted; includes `kept`. Empty for `delete`. */
  readonly clusters: readonly string[];
  readonly kept: readonly string[];
  readonly ready: number;
  readonly notReady: number;
}

export function summarizeReduction(reduction: Reduction): ReductionSummary {
  if (reduction.kind === "delete") return { clusters: [], kept: [], ready: 0, notReady: 0 };
  if (reduction.kind === "wait") return { clusters: reduction.kept, kept: reduction.kept, ready: 0, notReady: 0 };
  let ready = 0;
  let notReady = 0;
  for (const part of reduction.parts) {
    notReady += part.notReadyAddresses.length;
    ready += part.addresses.length - part.notReadyAddresses.length;
  }
  return { clusters: reduction.clusters, kept: reduction.kept, ready, notReady };
}
