/**
 * What the chaos oracles share (oracle.ts: mirrors; oracle-shared.ts: fleet-wide
 * Services and MCS imports): the observed remote shapes, the SPEC's keys, which gateway
 * a Service is exported through and what it gives as endpoints, and the comparison of
 * normalized values. Written from the SPEC alone: nothing here comes from `src/core`.
 */

export const P = "mirror.linkerd.io/";
export const GATEWAY_NAME = `${P}gateway-name`;
export const GATEWAY_NS = `${P}gateway-ns`;
export const GATEWAY_IDENTITY = `${P}gateway-identity`;
export const MIRRORED_SERVICE = `${P}mirrored-service`;
export const CLUSTER_NAME = `${P}cluster-name`;

/** SPEC §12: the default `--export-selector` and `--federated-selector` (SPEC §11). */
export const DEFAULT_EXPORT_SELECTOR = `${P}exported=true`;
export const DEFAULT_MEMBER_SELECTOR = `${P}federated=member`;
/** SPEC §1: a cluster's default gateway when its Secret names none. */
export const DEFAULT_GATEWAY = { namespace: "linkerd-multicluster", name: "linkerd-gateway" } as const;

export const DEFAULT_EXCLUDED_NAMESPACES: readonly string[] = ["kube-system", "kube-public", "kube-node-lease"];

/** A Service port as listed (a structural subset of V1ServicePort). */
export interface ServicePortShape {
  readonly name?: string;
  readonly protocol?: string;
  readonly port: number;
  readonly targetPort?: number | string;
}

/** Any object as listed, local or remote (a structural subset of its metadata). */
export interface LocalObject {
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
}

/** A remote Service as observed (a structural subset of V1Service). */
export interface RemoteService {
  readonly metadata?: LocalObject["metadata"] & { readonly resourceVersion?: string };
  readonly spec?: {
    readonly clusterIP?: string;
    readonly ports?: readonly ServicePortShape[];
  };
  readonly status?: { readonly loadBalancer?: { readonly ingress?: readonly { readonly ip?: string }[] } };
}

/** A remote EndpointSlice as observed (only what SPEC §12 reads of it: its Service and hostnames). */
export interface RemoteEndpointSlice {
  readonly metadata?: { readonly namespace?: string; readonly labels?: Readonly<Record<string, string>> };
  readonly endpoints?: readonly { readonly hostname?: string }[] | null;
}

/** A remote ServiceExport as observed (SPEC §12: only its name and namespace matter here). */
export interface RemoteServiceExport {
  readonly metadata?: { readonly name?: string; readonly namespace?: string; readonly creationTimestamp?: string };
}

export interface GatewayRef {
  readonly namespace: string;
  readonly name: string;
}

/**
 * One registered cluster. The list of clusters handed to an oracle is in registration
 * order (SPEC §11: the credentials Secrets' creation time, then their name).
 */
export interface RemoteCluster {
  readonly name: string;
  readonly domain: string;
  /** Every Service of the cluster, gateways included. */
  readonly services: readonly RemoteService[];
  /** The default gateway its Secret names (SPEC §1, §12); absent: DEFAULT_GATEWAY. */
  readonly defaultGateway?: GatewayRef;
  /** Every EndpointSlice of the cluster (SPEC §12 headless); absent: none. */
  readonly endpointSlices?: readonly RemoteEndpointSlice[];
  /** Its ServiceExports; absent: the cluster does not serve them (SPEC §12). */
  readonly serviceExports?: readonly RemoteServiceExport[];
}

export interface MirrorPort {
  readonly name: string;
  readonly protocol: string;
  readonly port: number;
}

export interface MirrorServicePort extends MirrorPort {
  /** Always a string here, so 8080 and "8080" compare equal. */
  readonly targetPort: string;
}

export function mirrorKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`: a cluster's shard is this mod S (SPEC §3). */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, "utf8")) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

/** `key=value` of a selector flag, as a pair. */
export function selectorPair(selector: string): readonly [string, string] | undefined {
  const at = selector.indexOf("=");
  return at <= 0 ? undefined : [selector.slice(0, at), selector.slice(at + 1)];
}

export function sortPorts<T extends MirrorPort>(ports: readonly T[]): T[] {
  return [...ports].sort((a, b) =>
    a.name !== b.name
      ? a.name < b.name
        ? -1
        : 1
      : a.protocol !== b.protocol
        ? a.protocol < b.protocol
          ? -1
          : 1
        : a.port - b.port,
  );
}

/** SPEC §3: a remote Service's ports with only name, protocol, port and targetPort kept (sorted). */
export function servicePorts(svc: RemoteService): MirrorServicePort[] {
  return sortPorts(
    (svc.spec?.ports ?? []).map((p) => ({
      name: p.name ?? "",
      protocol: p.protocol ?? "TCP",
      port: p.port,
      targetPort: String(p.targetPort ?? p.port),
    })),
  );
}

export function mirrorAnnotations(annotations: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [k, v] of Object.entries(annotations ?? {})) if (k.startsWith(P)) kept[k] = v;
  return kept;
}

/**
 * The gateway a Service is exported through, or undefined when it is not exported: its
 * §2 annotations (both), which win; else the export label's exact value (SPEC §12),
 * through its cluster's default gateway.
 */
export function exportGateway(
  svc: RemoteService,
  cluster: RemoteCluster,
  exportSelector: string,
): GatewayRef | undefined {
  const annotations = svc.metadata?.annotations ?? {};
  const name = annotations[GATEWAY_NAME];
  const namespace = annotations[GATEWAY_NS];
  if (name !== undefined && namespace !== undefined) return { namespace, name };
  const label = selectorPair(exportSelector);
  if (label && svc.metadata?.labels?.[label[0]] === label[1]) return cluster.defaultGateway ?? DEFAULT_GATEWAY;
  return undefined;
}

/** The Service `ref` of a cluster, if it exists. */
export function serviceOf(cluster: RemoteCluster, ref: GatewayRef): RemoteService | undefined {
  return cluster.services.find((s) => s.metadata?.namespace === ref.namespace && s.metadata?.name === ref.name);
}

/**
 * SPEC §2: a gateway is usable with ≥ 1 ingress entry and a port named incoming-port.
 * SPEC §10: a gateway with a port `mc-probe` numbered 1–65535 is probed; its dead
 * addresses are not ready (`notReady:<ip>`). The list is sorted.
 */
export function gatewayEndpoints(
  gateway: RemoteService | undefined,
  dead: ReadonlySet<string>,
): { ips: string[]; port: number } | undefined {
  if (!gateway) return undefined;
  const port = gateway.spec?.ports?.find((p) => p.name === "incoming-port");
  const ips = (gateway.status?.loadBalancer?.ingress ?? []).flatMap((i) => (i.ip ? [i.ip] : []));
  if (!port || ips.length === 0) return undefined;
  const probe = gateway.spec?.ports?.find((p) => p.name === "mc-probe");
  const probed = probe !== undefined && probe.port >= 1 && probe.port <= 65_535;
  const shown = [...new Set(ips)].map((ip) => (probed && dead.has(ip) ? `notReady:${ip}` : ip));
  return { ips: shown.sort(), port: port.port };
}

/** A valid Service name (SPEC §3, §12): a DNS-1035 label of at most 63 characters. */
export function validServiceName(name: string): boolean {
  return name.length <= 63 && /^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(name);
}

function show(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

/** Adds a diff line when `expected` and `actual` differ (keys compared in any order). */
export function compare(lines: string[], where: string, field: string, expected: unknown, actual: unknown): void {
  const e = show(expected);
  const a = show(actual);
  if (e !== a) lines.push(`${where}: ${field}\n    expected ${e}\n    actual   ${a}`);
}
