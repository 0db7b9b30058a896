/**
 * The desired mirrors of one remote cluster, as a pure function of what its actor
 * observes (SPEC §2–§4). No I/O, no clock, no mutation of its inputs.
 */
import { type ExportDecision, type ExportSettings, exportOf } from "./export.ts";
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
}

export type SkipReason =
  | "mirror-name-invalid"
  | "no-ports"
  | "excluded-namespace"
  | "export-label-value"
  | "headless-hostname-invalid"
  /** A ServiceExport without the Service of its name (SPEC §12). */
  | "service-export-without-service"
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

const compareIps = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function parseIpv4(text: string): number[] | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const octets = parts.map((p) => (/^\d{1,3}$/.test(p) ? Number(p) : Number.NaN));
  return octets.every((o) => o >= 0 && o <= 255) ? octets : undefined;
}

/** The eight 16-bit groups of an IPv6 address (an embedded IPv4 tail included), or undefined. */
function parseIpv6(text: string): number[] | undefined {
  if (!text.includes(":") || text.includes("%")) return undefined;
  let tail: number[] = [];
  let head = text;
  const lastColon = text.lastIndexOf(":");
  if (text.slice(lastColon + 1).includes(".")) {
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (!v4) return undefined;
    tail = [((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0)];
    head = `${text.slice(0, lastColon + 1)}0`;
  }
  const halves = head.split("::");
  if (halves.length > 2) return undefined;
  const group = (g: string): number => (/^[0-9a-fA-F]{1,4}$/.test(g) ? Number.parseInt(g, 16) : Number.NaN);
  const left = halves[0] ? halves[0].split(":").map(group) : [];
  const right = halves.length === 2 && halves[1] ? halves[1].split(":").map(group) : [];
  // Drop the placeholder group that stood for the IPv4 tail.
  if (tail.length > 0) (halves.length === 2 ? right : left).pop();
  const explicit = left.length + right.length + tail.length;
  if (halves.length === 1 ? explicit !== 8 : explicit > 7) return undefined;
  const groups = [...left, ...new Array<number>(8 - explicit).fill(0), ...right, ...tail];
  return groups.every((g) => Number.isInteger(g)) ? groups : undefined;
}

/**
 * Why the API server refuses `ip` as an Endpoints address (Kubernetes' validation of
 * endpoint IPs: a valid IP that is not unspecified, loopback, link-local or link-local
 * multicast), or undefined when it accepts it. A gateway hostname resolving to
 * 127.0.0.1 would otherwise make every Endpoints write fail forever.
 */
export function endpointIpProblem(ip: string): string | undefined {
  let v4 = parseIpv4(ip);
  if (!v4) {
    const v6 = parseIpv6(ip);
    if (!v6) return "not an IP address";
    const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = v6;
    if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0 && g4 === 0 && g5 === 0xffff) {
      v4 = [g6 >> 8, g6 & 0xff, g7 >> 8, g7 & 0xff]; // IPv4-mapped: the IPv4 rules apply
    } else {
      if (v6.every((g) => g === 0)) return "unspecified";
      if (v6.slice(0, 7).every((g) => g === 0) && g7 === 1) return "loopback";
      if ((g0 & 0xffc0) === 0xfe80) return "link-local";
      if ((g0 & 0xff0f) === 0xff02) return "link-local multicast";
      return undefined;
    }
  }
  const [a = 0, b = 0, c = 0, d = 0] = v4;
  if (a === 0 && b === 0 && c === 0 && d === 0) return "unspecified";
  if (a === 127) return "loopback";
  if (a === 169 && b === 254) return "link-local";
  if (a === 224 && b === 0 && c === 0) return "link-local multicast";
  return undefined;
}

/**
 * What a gateway Service offers to the mirrors that use it (SPEC §2, §3). `dead`: the
 * addresses its probe found dead (SPEC §10), undefined when it is not probed; those of
 * them among the view's addresses become `notReadyAddresses`.
 */
export function viewGateway(
  gateway: Service | undefined,
  lookup: HostnameLookup,
  dead?: ReadonlySet<string>,
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
  const ips = new Set<string>();
  const unresolved: string[] = [];
  const refused = new Map<string, string>();
  const add = (ip: string): void => {
    const problem = endpointIpProblem(ip);
    if (problem) refused.set(ip, problem);
    else ips.add(ip);
  };
  for (const ingress of ingresses) {
    if (ingress.ip) add(ingress.ip);
    else if (ingress.hostname) {
      const resolved = lookup(ingress.hostname);
      if (resolved && resolved.length > 0) for (const ip of resolved) add(ip);
      else unresolved.push(ingress.hostname);
    }
  }
  // A hostname is never copied into an address (SPEC §8): unresolved ones are left out,
  // and if nothing resolved the gateway is unusable until it does. Addresses the API
  // server refuses in Endpoints (loopback, link-local, ...) are left out as well.
  if (ips.size === 0) {
    const why = [
      ...(unresolved.length > 0 ? [`gateway ingress hostname(s) ${unresolved.join(", ")} do not resolve`] : []),
      ...(refused.size > 0
        ? [
            `gateway ingress address(es) ${[...refused]
              .sort(([a], [b]) => compareIps(a, b))
              .map(([ip, problem]) => `${ip} (${problem})`)
              .join(", ")} cannot be Endpoints addresses`,
          ]
        : []),
    ];
    return { ...base, addresses: [], incomingPort: port, unusable: why.join("; ") };
  }
  const addresses = [...ips].sort(compareIps);
  const notReady = dead && dead.size > 0 ? addresses.filter((ip) => dead.has(ip)) : [];
  return { ...base, addresses, ...(notReady.length > 0 ? { notReadyAddresses: notReady } : {}), incomingPort: port };
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
