/**
 * The desired mirrors of one remote cluster, as a pure function of what its actor
 * observes (SPEC §2–§4). No I/O, no clock, no mutation of its inputs.
 */
import {
  CLUSTER_NAME,
  GATEWAY_IDENTITY,
  GATEWAY_NAME,
  GATEWAY_NS,
  GATEWAY_PORT_NAME,
  MIRRORED_SERVICE,
  REMOTE_GATEWAY_IDENTITY,
  REMOTE_GATEWAY_NAME,
  REMOTE_GATEWAY_NS,
  REMOTE_GATEWAY_RESOURCE_VERSION,
  REMOTE_RESOURCE_VERSION,
  REMOTE_SVC_FQ_NAME,
} from "./labels.ts";
import { mirrorName, validateMirrorName } from "./naming.ts";
import { objectKey, type Service } from "./objects.ts";

/** One port of a mirror Service: only these four fields are carried (SPEC §3). */
export interface MirrorServicePort {
  readonly name?: string;
  readonly protocol: string;
  readonly port: number;
  readonly targetPort?: number | string;
}

export interface MirrorEndpointPort {
  readonly name?: string;
  readonly protocol: string;
  readonly port: number;
}

/**
 * Everything fleet-mirror owns of one mirror (a local Service + Endpoints pair).
 * Plain data: it crosses threads by structured clone.
 */
export interface DesiredMirror {
  readonly cluster: string;
  readonly namespace: string;
  /** Local name, `<remote name>-<cluster>`. */
  readonly name: string;
  /** Remote Service `namespace/name`, for logs and status. */
  readonly remote: string;
  /** Exactly the four mirror labels, shared by the Service and the Endpoints. */
  readonly labels: Readonly<Record<string, string>>;
  /** The `mirror.linkerd.io/*` annotations of the Service, exactly. */
  readonly serviceAnnotations: Readonly<Record<string, string>>;
  readonly ports: readonly MirrorServicePort[];
  /** The `mirror.linkerd.io/*` annotations of the Endpoints, exactly. */
  readonly endpointsAnnotations: Readonly<Record<string, string>>;
  /** Gateway IPs, sorted; empty when the gateway is not usable (then the Endpoints have no subsets). */
  readonly addresses: readonly string[];
  readonly endpointPorts: readonly MirrorEndpointPort[];
}

export type SkipReason = "mirror-name-invalid" | "no-ports" | "excluded-namespace";

/** A remote Service that is exported but cannot be mirrored; reported, never fatal. */
export interface MirrorProblem {
  readonly cluster: string;
  readonly remote: string;
  readonly reason: SkipReason;
  readonly message: string;
}

export interface ClusterSettings {
  readonly name: string;
  /** e.g. `cluster.local` */
  readonly domain: string;
  /** Local namespaces never mirrored into (SPEC §3). */
  readonly excludedNamespaces: readonly string[];
}

/**
 * How the gateway of a mirror stands. `addresses` is empty when it is unusable, and
 * `unusable` says why (for status and logs).
 */
export interface GatewayView {
  readonly exists: boolean;
  readonly resourceVersion?: string;
  readonly identity?: string;
  readonly addresses: readonly string[];
  readonly incomingPort?: number;
  readonly unusable?: string;
}

/** Looks up resolved IPs of an ingress hostname; undefined while unresolved or failing. */
export type HostnameLookup = (hostname: string) => readonly string[] | undefined;

/** A remote Service is exported when it carries BOTH gateway annotations (SPEC §2). */
export function exportedGateway(service: Service): { name: string; namespace: string } | undefined {
  const name = service.metadata.annotations?.[GATEWAY_NAME];
  const namespace = service.metadata.annotations?.[GATEWAY_NS];
  return name && namespace ? { name, namespace } : undefined;
}

/** Every hostname (no IP) in a gateway's ingress, for the resolver. */
export function ingressHostnames(gateway: Service): string[] {
  const names = new Set<string>();
  for (const ingress of gateway.status?.loadBalancer?.ingress ?? []) {
    if (!ingress.ip && ingress.hostname) names.add(ingress.hostname);
  }
  return [...names].sort();
}

const compareIps = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** What a gateway Service offers to the mirrors that use it (SPEC §2, §3). */
export function viewGateway(gateway: Service | undefined, lookup: HostnameLookup): GatewayView {
  if (!gateway) return { exists: false, addresses: [], unusable: "gateway Service not found" };
  const base = {
    exists: true,
    ...(gateway.metadata.resourceVersion ? { resourceVersion: gateway.metadata.resourceVersion } : {}),
    ...(gateway.metadata.annotations?.[GATEWAY_IDENTITY]
      ? { identity: gateway.metadata.annotations[GATEWAY_IDENTITY] }
      : {}),
  };
  const port = gateway.spec?.ports?.find((p) => p.name === GATEWAY_PORT_NAME)?.port;
  if (port === undefined) return { ...base, addresses: [], unusable: `gateway has no port named ${GATEWAY_PORT_NAME}` };
  const ingresses = gateway.status?.loadBalancer?.ingress ?? [];
  if (ingresses.length === 0)
    return { ...base, addresses: [], incomingPort: port, unusable: "gateway has no ingress yet" };
  const ips = new Set<string>();
  const unresolved: string[] = [];
  for (const ingress of ingresses) {
    if (ingress.ip) ips.add(ingress.ip);
    else if (ingress.hostname) {
      const resolved = lookup(ingress.hostname);
      if (resolved && resolved.length > 0) for (const ip of resolved) ips.add(ip);
      else unresolved.push(ingress.hostname);
    }
  }
  // A hostname is never copied into an address (SPEC §8): unresolved ones are left out,
  // and if nothing resolved the gateway is unusable until it does.
  if (ips.size === 0) {
    return {
      ...base,
      addresses: [],
      incomingPort: port,
      unusable: `gateway ingress hostname(s) ${unresolved.join(", ")} do not resolve`,
    };
  }
  return { ...base, addresses: [...ips].sort(compareIps), incomingPort: port };
}

function carryPorts(service: Service): MirrorServicePort[] {
  return (service.spec?.ports ?? []).map((p) => ({
    ...(p.name ? { name: p.name } : {}),
    protocol: p.protocol ?? "TCP",
    port: p.port,
    ...(p.targetPort !== undefined ? { targetPort: p.targetPort } : {}),
  }));
}

export type MirrorOutcome =
  | { readonly kind: "mirror"; readonly mirror: DesiredMirror }
  | { readonly kind: "problem"; readonly problem: MirrorProblem }
  | { readonly kind: "not-exported" };

/** The mirror of one remote Service, given the view of its gateway. */
export function desiredMirrorFor(settings: ClusterSettings, service: Service, gateway: GatewayView): MirrorOutcome {
  const gw = exportedGateway(service);
  if (!gw) return { kind: "not-exported" };
  const namespace = service.metadata.namespace ?? "default";
  const remote = objectKey({ namespace, name: service.metadata.name });
  const problem = (reason: SkipReason, message: string): MirrorOutcome => ({
    kind: "problem",
    problem: { cluster: settings.name, remote, reason, message },
  });
  if (settings.excludedNamespaces.includes(namespace)) {
    return problem("excluded-namespace", `namespace ${namespace} is excluded from mirroring`);
  }
  const name = mirrorName(service.metadata.name, settings.name);
  const invalid = validateMirrorName(name);
  if (invalid) return problem("mirror-name-invalid", `mirror name ${name} is not a valid Service name: ${invalid}`);
  const ports = carryPorts(service);
  if (ports.length === 0) return problem("no-ports", "remote Service has no ports");

  const labels = {
    [MIRRORED_SERVICE]: "true",
    [CLUSTER_NAME]: settings.name,
    [REMOTE_GATEWAY_NAME]: gw.name,
    [REMOTE_GATEWAY_NS]: gw.namespace,
  };
  const fqName = `${service.metadata.name}.${namespace}.svc.${settings.domain}`;
  const serviceAnnotations: Record<string, string> = {
    [REMOTE_RESOURCE_VERSION]: service.metadata.resourceVersion ?? "",
    [REMOTE_SVC_FQ_NAME]: fqName,
  };
  if (gateway.exists && gateway.resourceVersion) {
    serviceAnnotations[REMOTE_GATEWAY_RESOURCE_VERSION] = gateway.resourceVersion;
  }
  const endpointsAnnotations: Record<string, string> = { [REMOTE_SVC_FQ_NAME]: fqName };
  if (gateway.identity) endpointsAnnotations[REMOTE_GATEWAY_IDENTITY] = gateway.identity;

  const usable = gateway.addresses.length > 0 && gateway.incomingPort !== undefined;
  const endpointPorts: MirrorEndpointPort[] = usable
    ? ports.map((p) => ({
        ...(p.name ? { name: p.name } : {}),
        protocol: p.protocol,
        port: gateway.incomingPort as number,
      }))
    : [];
  return {
    kind: "mirror",
    mirror: {
      cluster: settings.name,
      namespace,
      name,
      remote,
      labels,
      serviceAnnotations,
      ports,
      endpointsAnnotations,
      addresses: usable ? gateway.addresses : [],
      endpointPorts,
    },
  };
}

export interface DesiredState {
  /** Keyed by local `namespace/name`. */
  readonly mirrors: ReadonlyMap<string, DesiredMirror>;
  readonly problems: readonly MirrorProblem[];
}

/**
 * The full desired state of one cluster: every exported remote Service's mirror,
 * with each gateway looked up in the same cluster only (SPEC §4: a gateway change
 * never touches another cluster's mirrors).
 */
export function desiredMirrors(
  settings: ClusterSettings,
  services: Iterable<Service>,
  getService: (key: string) => Service | undefined,
  lookup: HostnameLookup,
): DesiredState {
  const mirrors = new Map<string, DesiredMirror>();
  const problems: MirrorProblem[] = [];
  const gatewayViews = new Map<string, GatewayView>();
  for (const service of services) {
    const gw = exportedGateway(service);
    if (!gw) continue;
    const gwKey = objectKey(gw);
    let view = gatewayViews.get(gwKey);
    if (!view) {
      view = viewGateway(getService(gwKey), lookup);
      gatewayViews.set(gwKey, view);
    }
    const outcome = desiredMirrorFor(settings, service, view);
    if (outcome.kind === "mirror") mirrors.set(objectKey(outcome.mirror), outcome.mirror);
    else if (outcome.kind === "problem") problems.push(outcome.problem);
  }
  return { mirrors, problems };
}
