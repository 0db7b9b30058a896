/**
 * The desired mirrors of one remote cluster, as a pure function of what its actor
 * observes (SPEC §2–§4). No I/O, no clock, no mutation of its inputs.
 */
import { type AddressPolicy, DEFAULT_ADDRESS_POLICY, filterAddresses, type Refusal } from "./address-policy.ts";
import { type ExportDecision, type ExportSettings, exportOf } from "./export.ts";
import { endpointIpProblem } from "./ip.ts";
import {
  CLUSTER_NAME,
  GATEWAY_IDENTITY,
  GATEWAY_PORT_NAME,
  MIRRORED_SERVICE,
  REMOTE_GATEWAY_IDENTITY,
  REMOTE_GATEWAY_NAME,
  REMOTE_GATEWAY_NS,
  REMOTE_GATEWAY_RESOURCE_VERSION,
  REMOTE_RESOURCE_VERSION,
  REMOTE_SVC_FQ_NAME,
} from "./labels.ts";
import { linkMirrorShape } from "./link-mirror.ts";
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

/** One host of a headless mirror (SPEC §12): a remote hostname and its per-host mirror Service. */
export interface HeadlessHost {
  readonly hostname: string;
  /** The per-host mirror's name, `<hostname>-<cluster>`, in the mirror's namespace. */
  readonly service: string;
  /**
   * The per-host Service's cluster IP: filled in by the local writer from what it
   * observes (`resolveHeadless`, core/headless.ts), never by an actor (the writer
   * replaces whatever a batch carries).
   */
  readonly address?: string;
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
  /**
   * Exactly the four mirror labels, shared by the Service and the Endpoints (a sharded
   * writer adds the shard label before planning, core/shard-label.ts).
   */
  readonly labels: Readonly<Record<string, string>>;
  /** The `mirror.linkerd.io/*` annotations of the Service, exactly. */
  readonly serviceAnnotations: Readonly<Record<string, string>>;
  readonly ports: readonly MirrorServicePort[];
  /** The `mirror.linkerd.io/*` annotations of the Endpoints, exactly. */
  readonly endpointsAnnotations: Readonly<Record<string, string>>;
  /** Gateway IPs, sorted; empty when the gateway is not usable (then the Endpoints have no subsets). */
  readonly addresses: readonly string[];
  /**
   * The members of `addresses` whose gateway probe says dead (SPEC §10), sorted. They stay
   * endpoints, not ready: `notReadyAddresses` in Endpoints, `ready: false` in slices.
   * Invariant: a subset of `addresses`; empty when the gateway is not probed.
   */
  readonly notReadyAddresses: readonly string[];
  readonly endpointPorts: readonly MirrorEndpointPort[];
  /**
   * Set on the headless mirror of a headless Service with hostnames (SPEC §12): a
   * Service with `clusterIP: None` whose addresses are its hosts' per-host Services'
   * cluster IPs, each with its hostname (`addresses` and `notReadyAddresses` are empty
   * then). Absent: an ordinary mirror.
   */
  readonly headless?: { readonly hosts: readonly HeadlessHost[] };
  /**
   * Set on the ordinary mirror of an exported headless Service whose hosts are not
   * known (its remote slices not read yet, refused, or empty with nothing known before;
   * SPEC §12): where the local Service of this name is this cluster's headless mirror,
   * the writer keeps it and its per-host mirrors exactly as they are (unknown is not
   * "no hosts"); anywhere else it is this ordinary mirror. Absent otherwise.
   */
  readonly hostsUnknown?: true;
  /**
   * A Link's cluster (SPEC §15): every annotation of the Service but kubectl's
   * last-applied configuration is the mirror's (linkerd's shape: the remote's own are
   * copied), compared and written whole; absent: only the `mirror.linkerd.io/*` ones are.
   */
  readonly serviceAnnotationsExact?: true;
  /** A Link's remote-discovery mirror (SPEC §15): the Service alone, no Endpoints and no slices. */
  readonly serviceOnly?: true;
}

export type SkipReason =
  | "mirror-name-invalid"
  | "no-ports"
  | "excluded-namespace"
  | "export-label-value"
  | "headless-hostname-invalid"
  /** A ServiceExport without the Service of its name (SPEC §12). */
  | "service-export-without-service"
  /** A ServiceExport of an ExternalName Service, which the MCS API cannot export (SPEC §16). */
  | "service-export-invalid-type"
  /** The cluster refuses the read of ServiceExports (403): MCS export is off there, reported once (SPEC §12). */
  | "export-mode-forbidden"
  /** Its cluster's exports ask for more local Services than `--max-mirrors-per-cluster` (core/cluster-quota.ts). */
  | "cluster-quota";

/** A remote Service that is exported but cannot be mirrored; reported, never fatal. */
export interface MirrorProblem {
  readonly cluster: string;
  readonly remote: string;
  readonly reason: SkipReason;
  readonly message: string;
}

/** One cluster's settings, fixed for an actor's life (a change restarts the actor). */
export interface ClusterSettings extends ExportSettings {
  readonly name: string;
  /** e.g. `cluster.local` */
  readonly domain: string;
  /** Local namespaces never mirrored into (SPEC §3). */
  readonly excludedNamespaces: readonly string[];
  /** Local Services the cluster's exports may ask for (`--max-mirrors-per-cluster`); absent or 0: no quota. */
  readonly maxMirrors?: number;
  /** Per-host Services of one headless Service (`--max-hosts-per-headless-service`); absent: MAX_HEADLESS_HOSTS. */
  readonly maxHeadlessHosts?: number;
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
  /** Members of `addresses` that the gateway probe found dead (SPEC §10); absent when not probed. */
  readonly notReadyAddresses?: readonly string[];
  readonly incomingPort?: number;
  readonly unusable?: string;
  /** Ingress addresses left out (address-policy.ts), sorted; absent when none. */
  readonly refused?: readonly Refusal[];
}

/** Looks up resolved IPs of an ingress hostname; undefined while unresolved or failing. */
export type HostnameLookup = (hostname: string) => readonly string[] | undefined;

/** Every hostname (no IP) in a gateway's ingress, for the resolver. */
export function ingressHostnames(gateway: Service): string[] {
  const names = new Set<string>();
  for (const ingress of gateway.status?.loadBalancer?.ingress ?? []) {
    if (!ingress.ip && ingress.hostname) names.add(ingress.hostname);
  }
  return [...names].sort();
}

/**
 * What a gateway Service offers to the mirrors that use it (SPEC §2, §3). `dead`: the
 * addresses its probe found dead (SPEC §10), undefined when it is not probed; those of
 * them among the view's addresses become `notReadyAddresses`. `policy` decides which
 * addresses may be used at all (address-policy.ts; SPEC §10): the others are left out
 * and listed in `refused`, and a gateway left without addresses is unusable.
 */
export function viewGateway(
  gateway: Service | undefined,
  lookup: HostnameLookup,
  dead?: ReadonlySet<string>,
  policy: AddressPolicy = DEFAULT_ADDRESS_POLICY,
): GatewayView {
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
  const ips: string[] = [];
  const unresolved: string[] = [];
  for (const ingress of ingresses) {
    if (ingress.ip) ips.push(ingress.ip);
    else if (ingress.hostname) {
      const resolved = lookup(ingress.hostname);
      if (resolved && resolved.length > 0) ips.push(...resolved);
      else unresolved.push(ingress.hostname);
    }
  }
  // A hostname is never copied into an address (SPEC §8): unresolved ones are left out,
  // and if nothing resolved the gateway is unusable until it does. Addresses the API
  // server refuses in Endpoints (loopback, link-local, ...) and those the policy refuses
  // are left out as well.
  const { accepted: addresses, refused } = filterAddresses(policy, ips);
  const withRefused = refused.length > 0 ? { ...base, refused } : base;
  if (addresses.length === 0) {
    const list = (rs: readonly Refusal[]): string => rs.map((r) => `${r.address} (${r.why})`).join(", ");
    const invalid = refused.filter((r) => endpointIpProblem(r.address) !== undefined);
    const denied = refused.filter((r) => endpointIpProblem(r.address) === undefined);
    const why = [
      ...(unresolved.length > 0 ? [`gateway ingress hostname(s) ${unresolved.join(", ")} do not resolve`] : []),
      ...(invalid.length > 0 ? [`gateway ingress address(es) ${list(invalid)} cannot be Endpoints addresses`] : []),
      ...(denied.length > 0 ? [`gateway ingress address(es) ${list(denied)} are refused`] : []),
    ];
    return { ...withRefused, addresses: [], incomingPort: port, unusable: why.join("; ") };
  }
  const notReady = dead && dead.size > 0 ? addresses.filter((ip) => dead.has(ip)) : [];
  return {
    ...withRefused,
    addresses,
    ...(notReady.length > 0 ? { notReadyAddresses: notReady } : {}),
    incomingPort: port,
  };
}

/** A remote Service's ports as a mirror carries them: only these four fields (SPEC §3). */
export function carryPorts(service: Service): MirrorServicePort[] {
  return (service.spec?.ports ?? []).map((p) => ({
    ...(p.name ? { name: p.name } : {}),
    protocol: p.protocol ?? "TCP",
    port: p.port,
    ...(p.targetPort !== undefined ? { targetPort: p.targetPort } : {}),
  }));
}

/** A mirror's endpoint ports: the Service's names and protocols, all at the gateway's incoming port (SPEC §3). */
function endpointPortsOf(ports: readonly MirrorServicePort[], incomingPort: number): MirrorEndpointPort[] {
  return ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), protocol: p.protocol, port: incomingPort }));
}

export type MirrorOutcome =
  | { readonly kind: "mirror"; readonly mirror: DesiredMirror }
  | { readonly kind: "problem"; readonly problem: MirrorProblem }
  | { readonly kind: "not-exported" };

/**
 * The mirror of one remote Service, given the view of the gateway its export names
 * (`decision`: `exportOf`, SPEC §2 and §12; a caller that needed it to pick the gateway
 * passes it in rather than have it computed twice).
 */
export function desiredMirrorFor(
  settings: ClusterSettings,
  service: Service,
  gateway: GatewayView,
  decision: ExportDecision = exportOf(settings, service),
): MirrorOutcome {
  if (decision.kind === "not-exported" || decision.kind === "declined") return { kind: "not-exported" };
  const namespace = service.metadata.namespace ?? "default";
  const remote = objectKey({ namespace, name: service.metadata.name });
  const problem = (reason: SkipReason, message: string): MirrorOutcome => ({
    kind: "problem",
    problem: { cluster: settings.name, remote, reason, message },
  });
  if (decision.kind === "label-value") return problem("export-label-value", decision.message);
  const gw = decision.gateway;
  if (settings.excludedNamespaces.includes(namespace)) {
    return problem("excluded-namespace", `namespace ${namespace} is excluded from mirroring`);
  }
  const name = mirrorName(service.metadata.name, settings.name);
  const invalid = validateMirrorName(name);
  if (invalid) return problem("mirror-name-invalid", `mirror name ${name} is not a valid Service name: ${invalid}`);
  const ports = carryPorts(service);
  if (ports.length === 0) return problem("no-ports", "remote Service has no ports");

  const fqName = `${service.metadata.name}.${namespace}.svc.${settings.domain}`;
  if (settings.link) {
    // linkerd's current shape (core/link-mirror.ts): the remote's labels and annotations.
    const shape = linkMirrorShape(settings.link, settings.name, service, fqName);
    const usable = !shape.serviceOnly && gateway.addresses.length > 0 && gateway.incomingPort !== undefined;
    return {
      kind: "mirror",
      mirror: {
        ...{ cluster: settings.name, namespace, name, remote, ports },
        ...{ labels: shape.labels, serviceAnnotations: shape.serviceAnnotations },
        endpointsAnnotations: shape.endpointsAnnotations,
        addresses: usable ? gateway.addresses : [],
        notReadyAddresses: usable ? (gateway.notReadyAddresses ?? []) : [],
        endpointPorts: usable ? endpointPortsOf(ports, gateway.incomingPort as number) : [],
        serviceAnnotationsExact: true,
        ...(shape.serviceOnly ? { serviceOnly: true } : {}),
      },
    };
  }
  const labels = {
    [MIRRORED_SERVICE]: "true",
    [CLUSTER_NAME]: settings.name,
    [REMOTE_GATEWAY_NAME]: gw.name,
    [REMOTE_GATEWAY_NS]: gw.namespace,
  };
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
  const endpointPorts = usable ? endpointPortsOf(ports, gateway.incomingPort as number) : [];
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
      notReadyAddresses: usable ? (gateway.notReadyAddresses ?? []) : [],
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
    const decision = exportOf(settings, service);
    if (decision.kind === "not-exported" || decision.kind === "declined") continue;
    const gwKey = decision.kind === "exported" ? objectKey(decision.gateway) : "";
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
