/**
 * An independent oracle of SPEC §2–§5: from what the remote clusters finally hold, the
 * local mirrors that must exist, field by field. Written from the SPEC alone — it imports
 * nothing from `src/core` (not `desired.ts`, not `plan.ts`), so a bug there cannot hide
 * itself by being repeated here.
 *
 * Pure and synchronous: `expectedMirrors(remotes, options) → Map<key, ExpectedMirror>`,
 * `actualMirrors(services, endpoints) → Map<key, ActualMirror>`, `diffMirrors(…) → lines`.
 *
 * Not modelled (the chaos schedule never produces them): ingress hostnames (resolved through
 * DNS by the product), gateway IPs the API server refuses in Endpoints, two clusters
 * claiming the same local name.
 */

const P = "mirror.linkerd.io/";
const GATEWAY_NAME = `${P}gateway-name`;
const GATEWAY_NS = `${P}gateway-ns`;
const GATEWAY_IDENTITY = `${P}gateway-identity`;
const MIRRORED_SERVICE = `${P}mirrored-service`;
const CLUSTER_NAME = `${P}cluster-name`;
const REMOTE_GATEWAY_NAME = `${P}remote-gateway-name`;
const REMOTE_GATEWAY_NS = `${P}remote-gateway-ns`;
const REMOTE_RESOURCE_VERSION = `${P}remote-resource-version`;
const REMOTE_SVC_FQ_NAME = `${P}remote-svc-fq-name`;
const REMOTE_GATEWAY_RESOURCE_VERSION = `${P}remote-gateway-resource-version`;
const REMOTE_GATEWAY_IDENTITY = `${P}remote-gateway-identity`;

const SHARD = `${P}shard`;

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`: a cluster's shard is this mod S (SPEC §3). */
function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, "utf8")) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash;
}

export const DEFAULT_EXCLUDED_NAMESPACES: readonly string[] = ["kube-system", "kube-public", "kube-node-lease"];

/** A remote Service as observed (a structural subset of V1Service). */
export interface RemoteService {
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly resourceVersion?: string;
    readonly annotations?: Readonly<Record<string, string>>;
  };
  readonly spec?: {
    readonly ports?: readonly {
      readonly name?: string;
      readonly protocol?: string;
      readonly port: number;
      readonly targetPort?: number | string;
    }[];
  };
  readonly status?: { readonly loadBalancer?: { readonly ingress?: readonly { readonly ip?: string }[] } };
}

export interface RemoteCluster {
  readonly name: string;
  readonly domain: string;
  /** Every Service of the cluster, gateways included. */
  readonly services: readonly RemoteService[];
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

/** One mirror (Service + Endpoints) in a normalized, comparable form. */
export interface Mirror {
  readonly namespace: string;
  readonly name: string;
  readonly service?: {
    readonly labels: Readonly<Record<string, string>>;
    /** Only the `mirror.linkerd.io/` annotations (foreign ones may be kept by the product). */
    readonly annotations: Readonly<Record<string, string>>;
    readonly type: string;
    readonly selector: Readonly<Record<string, string>>;
    readonly ports: readonly MirrorServicePort[];
  };
  readonly endpoints?: {
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
    /** One entry per subset. Empty = no subsets. */
    readonly subsets: readonly { readonly addresses: readonly string[]; readonly ports: readonly MirrorPort[] }[];
  };
}

export interface OracleOptions {
  /** Default: kube-system, kube-public, kube-node-lease (SPEC §3). */
  readonly excludedNamespaces?: readonly string[];
  /** `namespace/name` keys held locally by objects fleet-mirror does not own (SPEC §5). */
  readonly userHeld?: ReadonlySet<string>;
  /**
   * Gateway addresses whose probe has failed long enough (SPEC §10): on a probed gateway
   * they are endpoints that are not ready. Absent: every address answers.
   */
  readonly deadAddresses?: ReadonlySet<string>;
  /** The replicas' `--shards` (default 1): above 1 every mirror carries its cluster's shard label (SPEC §3). */
  readonly shards?: number;
}

export function mirrorKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function sortPorts<T extends MirrorPort>(ports: readonly T[]): T[] {
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

function mirrorAnnotations(annotations: Readonly<Record<string, string>> | undefined): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [k, v] of Object.entries(annotations ?? {})) if (k.startsWith(P)) kept[k] = v;
  return kept;
}

/**
 * SPEC §2: a gateway is usable with ≥ 1 ingress entry and a port named incoming-port.
 * SPEC §10: a gateway with a port `mc-probe` numbered 1–65535 is probed; its dead
 * addresses are not ready (`notReady:<ip>`, as `actualMirrors` writes them). The list
 * is sorted as `actualMirrors` sorts it.
 */
function gatewayEndpoints(
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

/** SPEC §2–§5: the mirrors that must exist locally once things are quiet. */
export function expectedMirrors(remotes: readonly RemoteCluster[], options: OracleOptions = {}): Map<string, Mirror> {
  const excluded = new Set(options.excludedNamespaces ?? DEFAULT_EXCLUDED_NAMESPACES);
  const expected = new Map<string, Mirror>();
  for (const cluster of remotes) {
    const byKey = new Map<string, RemoteService>();
    for (const svc of cluster.services)
      byKey.set(mirrorKey(svc.metadata?.namespace ?? "", svc.metadata?.name ?? ""), svc);
    for (const svc of cluster.services) {
      const name = svc.metadata?.name ?? "";
      const namespace = svc.metadata?.namespace ?? "";
      const annotations = svc.metadata?.annotations ?? {};
      const gwName = annotations[GATEWAY_NAME];
      const gwNs = annotations[GATEWAY_NS];
      if (gwName === undefined || gwNs === undefined) continue; // both annotations, or not exported
      if (excluded.has(namespace)) continue;
      const mirrorName = `${name}-${cluster.name}`;
      if (mirrorName.length > 63) continue;
      const remotePorts = svc.spec?.ports ?? [];
      if (remotePorts.length === 0) continue;
      const key = mirrorKey(namespace, mirrorName);
      if (options.userHeld?.has(key)) continue;

      const gateway = byKey.get(mirrorKey(gwNs, gwName));
      const shards = options.shards ?? 1;
      const labels = {
        [MIRRORED_SERVICE]: "true",
        [CLUSTER_NAME]: cluster.name,
        [REMOTE_GATEWAY_NAME]: gwName,
        [REMOTE_GATEWAY_NS]: gwNs,
        ...(shards > 1 ? { [SHARD]: `${fnv1a32(cluster.name) % shards}-of-${shards}` } : {}),
      };
      const fqName = `${name}.${namespace}.svc.${cluster.domain}`;
      const serviceAnnotations: Record<string, string> = {
        [REMOTE_RESOURCE_VERSION]: svc.metadata?.resourceVersion ?? "",
        [REMOTE_SVC_FQ_NAME]: fqName,
      };
      if (gateway) serviceAnnotations[REMOTE_GATEWAY_RESOURCE_VERSION] = gateway.metadata?.resourceVersion ?? "";
      const endpointsAnnotations: Record<string, string> = { [REMOTE_SVC_FQ_NAME]: fqName };
      const identity = gateway?.metadata?.annotations?.[GATEWAY_IDENTITY];
      if (identity) endpointsAnnotations[REMOTE_GATEWAY_IDENTITY] = identity;
      const usable = gatewayEndpoints(gateway, options.deadAddresses ?? new Set());
      expected.set(key, {
        namespace,
        name: mirrorName,
        service: {
          labels,
          annotations: serviceAnnotations,
          type: "ClusterIP",
          selector: {},
          ports: sortPorts(
            remotePorts.map((p) => ({
              name: p.name ?? "",
              protocol: p.protocol ?? "TCP",
              port: p.port,
              targetPort: String(p.targetPort ?? p.port),
            })),
          ),
        },
        endpoints: {
          labels,
          annotations: endpointsAnnotations,
          subsets: usable
            ? [
                {
                  addresses: usable.ips,
                  ports: sortPorts(
                    remotePorts.map((p) => ({ name: p.name ?? "", protocol: p.protocol ?? "TCP", port: usable.port })),
                  ),
                },
              ]
            : [],
        },
      });
    }
  }
  return expected;
}

/** Local objects as listed (a structural subset of V1Service / V1Endpoints). */
export interface LocalObject {
  readonly metadata?: {
    readonly name?: string;
    readonly namespace?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
}
export interface LocalService extends LocalObject {
  readonly spec?: {
    readonly type?: string;
    readonly selector?: Readonly<Record<string, string>>;
    readonly ports?: readonly {
      readonly name?: string;
      readonly protocol?: string;
      readonly port: number;
      readonly targetPort?: number | string;
    }[];
  };
}
export interface LocalEndpoints extends LocalObject {
  readonly subsets?: readonly {
    readonly addresses?: readonly { readonly ip: string }[];
    readonly notReadyAddresses?: readonly { readonly ip: string }[];
    readonly ports?: readonly { readonly name?: string; readonly protocol?: string; readonly port: number }[];
  }[];
}

/** The local mirrors, normalized like `expectedMirrors` (pass every labelled Service and Endpoints). */
export function actualMirrors(
  services: readonly LocalService[],
  endpoints: readonly LocalEndpoints[],
): Map<string, Mirror> {
  const actual = new Map<
    string,
    { namespace: string; name: string; service?: Mirror["service"]; endpoints?: Mirror["endpoints"] }
  >();
  const entry = (o: LocalObject) => {
    const namespace = o.metadata?.namespace ?? "";
    const name = o.metadata?.name ?? "";
    const key = mirrorKey(namespace, name);
    let e = actual.get(key);
    if (!e) {
      e = { namespace, name };
      actual.set(key, e);
    }
    return e;
  };
  for (const s of services) {
    entry(s).service = {
      labels: { ...(s.metadata?.labels ?? {}) },
      annotations: mirrorAnnotations(s.metadata?.annotations),
      type: s.spec?.type ?? "ClusterIP",
      selector: { ...(s.spec?.selector ?? {}) },
      ports: sortPorts(
        (s.spec?.ports ?? []).map((p) => ({
          name: p.name ?? "",
          protocol: p.protocol ?? "TCP",
          port: p.port,
          targetPort: String(p.targetPort ?? p.port),
        })),
      ),
    };
  }
  for (const e of endpoints) {
    entry(e).endpoints = {
      labels: { ...(e.metadata?.labels ?? {}) },
      annotations: mirrorAnnotations(e.metadata?.annotations),
      subsets: (e.subsets ?? []).map((s) => ({
        addresses: [
          ...(s.addresses ?? []).map((a) => a.ip),
          ...(s.notReadyAddresses ?? []).map((a) => `notReady:${a.ip}`),
        ].sort(),
        ports: sortPorts(
          (s.ports ?? []).map((p) => ({ name: p.name ?? "", protocol: p.protocol ?? "TCP", port: p.port })),
        ),
      })),
    };
  }
  return actual as Map<string, Mirror>;
}

function show(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

function compare(lines: string[], where: string, field: string, expected: unknown, actual: unknown): void {
  const e = show(expected);
  const a = show(actual);
  if (e !== a) lines.push(`${where}: ${field}\n    expected ${e}\n    actual   ${a}`);
}

/** A readable diff, one entry per differing field; empty when local equals the oracle. */
export function diffMirrors(expected: ReadonlyMap<string, Mirror>, actual: ReadonlyMap<string, Mirror>): string[] {
  const lines: string[] = [];
  const keys = [...new Set([...expected.keys(), ...actual.keys()])].sort();
  for (const key of keys) {
    const e = expected.get(key);
    const a = actual.get(key);
    if (!e && a) {
      lines.push(
        `${key}: unexpected mirror (${[a.service ? "Service" : "", a.endpoints ? "Endpoints" : ""].filter(Boolean).join(" + ")}, cluster ${a.service?.labels[CLUSTER_NAME] ?? a.endpoints?.labels[CLUSTER_NAME] ?? "?"})`,
      );
      continue;
    }
    if (!e) continue;
    if (!a?.service) lines.push(`${key}: missing Service`);
    if (!a?.endpoints) lines.push(`${key}: missing Endpoints`);
    if (e.service && a?.service) {
      compare(lines, key, "Service labels", e.service.labels, a.service.labels);
      compare(lines, key, "Service annotations", e.service.annotations, a.service.annotations);
      compare(lines, key, "Service type", e.service.type, a.service.type);
      compare(lines, key, "Service selector", e.service.selector, a.service.selector);
      compare(lines, key, "Service ports", e.service.ports, a.service.ports);
    }
    if (e.endpoints && a?.endpoints) {
      compare(lines, key, "Endpoints labels", e.endpoints.labels, a.endpoints.labels);
      compare(lines, key, "Endpoints annotations", e.endpoints.annotations, a.endpoints.annotations);
      compare(lines, key, "Endpoints subsets", e.endpoints.subsets, a.endpoints.subsets);
    }
  }
  return lines;
}
