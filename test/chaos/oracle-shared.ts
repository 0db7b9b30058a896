/**
 * An independent oracle of the objects clusters share (SPEC §11 fleet-wide Services,
 * §12 MCS imports), in `--endpoints-api endpoints` mode: from what the remote clusters
 * finally hold, what must exist locally. Written from the SPEC alone, like oracle.ts.
 *
 * - Fleet-wide `<svc>-federated` in `<ns>`: its members are the remote Services labelled
 *   by `--federated-selector`, in registration order; the first sets the ports, and a
 *   member whose ports differ (name, protocol, port or targetPort) is left out, of the
 *   endpoints and of `federated-clusters` alike; the endpoints are the union of the
 *   members' gateway addresses (its §2 gateway, else its cluster's default one), dead
 *   ones not ready, each on its gateway's incoming port.
 * - MCS import `<svc>` in `<ns>`: one per name a ServiceExport exports (its Service
 *   exists, outside excluded namespaces) in a cluster that serves ServiceExports, when
 *   the local cluster serves ServiceImports; the derived Service `derived<FNV-1a 64 hex>`
 *   (ports of the export), its Endpoints (each exporter's default gateway), and the
 *   ServiceImport (ClusterSetIP, ports, `spec.ips` = the derived Service's cluster IP,
 *   `status.clusters`). Chaos never exports one name with different ports, so which
 *   export wins a conflict is not modelled.
 * - Sharded with Endpoints (`shards` > 1): neither is written (SPEC §11, §12).
 *
 * Endpoints are compared as sets of `ip|ready|ports` (the API server regroups subsets).
 */
import {
  compare,
  DEFAULT_EXCLUDED_NAMESPACES,
  DEFAULT_GATEWAY,
  DEFAULT_MEMBER_SELECTOR,
  GATEWAY_NAME,
  GATEWAY_NS,
  type GatewayRef,
  gatewayEndpoints,
  type LocalObject,
  MIRRORED_SERVICE,
  type MirrorServicePort,
  mirrorAnnotations,
  mirrorKey,
  P,
  type RemoteCluster,
  type RemoteService,
  type ServicePortShape,
  selectorPair,
  serviceOf,
  servicePorts,
  validServiceName,
} from "./oracle-common.ts";

const FEDERATED = `${P}federated`;
const FEDERATED_CLUSTERS = `${P}federated-clusters`;
const SERVICE_IMPORT = `${P}service-import`;

/** A fleet-wide Service or an import, normalized for comparison; a field left undefined is not compared. */
export interface SharedObject {
  readonly service?: {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
    readonly type: string;
    readonly headless: boolean;
    readonly ports: readonly MirrorServicePort[];
  };
  readonly endpoints?: {
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
    /** `ip|ready|[[name, protocol, port], …]`, sorted. */
    readonly addresses: readonly string[];
  };
  readonly serviceImport?: {
    readonly labels: Readonly<Record<string, string>>;
    readonly type: string;
    readonly ports: readonly string[];
    readonly ips: readonly string[];
    readonly clusters: readonly string[];
  };
}

export interface SharedOracleOptions {
  readonly excludedNamespaces?: readonly string[];
  readonly deadAddresses?: ReadonlySet<string>;
  readonly shards?: number;
  /** `--federated-selector` (default `mirror.linkerd.io/federated=member`). */
  readonly memberSelector?: string;
  /** The local cluster serves ServiceImports (SPEC §12). */
  readonly localMcs?: boolean;
  /** Cluster IPs of local Services by key: a ServiceImport's `spec.ips` is its derived Service's. */
  readonly localClusterIPs?: ReadonlyMap<string, string>;
}

/** SPEC §12: the derived Service of import `<ns>/<svc>`: `derived` + FNV-1a 64-bit of `<ns>/<svc>`, 16 hex digits. */
export function derivedName(namespace: string, service: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(`${namespace}/${service}`, "utf8")) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return `derived${hash.toString(16).padStart(16, "0")}`;
}

const portsKey = (ports: readonly MirrorServicePort[]): string =>
  JSON.stringify(ports.map((p) => [p.name, p.protocol, p.port, p.targetPort]));

/** The `ip|ready|ports` entries of one cluster's part: its gateway's addresses on its incoming port. */
function partAddresses(
  cluster: RemoteCluster,
  gatewayRef: GatewayRef,
  ports: readonly MirrorServicePort[],
  dead: ReadonlySet<string>,
): string[] {
  const usable = gatewayEndpoints(serviceOf(cluster, gatewayRef), dead);
  if (!usable) return [];
  const shown = JSON.stringify(ports.map((p) => [p.name, p.protocol, usable.port]).sort());
  return usable.ips.map((ip) =>
    ip.startsWith("notReady:") ? `${ip.slice("notReady:".length)}|false|${shown}` : `${ip}|true|${shown}`,
  );
}

function memberGateway(svc: RemoteService, cluster: RemoteCluster): GatewayRef {
  const name = svc.metadata?.annotations?.[GATEWAY_NAME];
  const namespace = svc.metadata?.annotations?.[GATEWAY_NS];
  return name !== undefined && namespace !== undefined
    ? { namespace, name }
    : (cluster.defaultGateway ?? DEFAULT_GATEWAY);
}

interface Part {
  readonly cluster: RemoteCluster;
  readonly ports: readonly MirrorServicePort[];
  readonly gateway: GatewayRef;
  /** SPEC §12: when the ServiceExport was created (import precedence). */
  readonly since?: string;
}

/**
 * The parts' addresses as one Endpoints object holds them: each part its own, so an
 * address two clusters' gateways share is there once per part (the API server keeps
 * Endpoints subsets as written).
 */
function union(parts: readonly string[][]): string[] {
  return parts.flat().sort();
}

/** The first part sets the ports; parts whose ports differ are left out (SPEC §11, §12). */
function agreeing(parts: readonly Part[]): { ports: readonly MirrorServicePort[]; parts: Part[] } | undefined {
  const first = parts[0];
  if (!first) return undefined;
  const key = portsKey(first.ports);
  return { ports: first.ports, parts: parts.filter((p) => portsKey(p.ports) === key) };
}

/** SPEC §11, §12: the fleet-wide Services and imports that must exist locally, by key (`<kind> <ns>/<name>`). */
export function expectedShared(
  remotes: readonly RemoteCluster[],
  options: SharedOracleOptions = {},
): Map<string, SharedObject> {
  const expected = new Map<string, SharedObject>();
  if ((options.shards ?? 1) > 1) return expected;
  const excluded = new Set(options.excludedNamespaces ?? DEFAULT_EXCLUDED_NAMESPACES);
  const dead = options.deadAddresses ?? new Set<string>();
  const member = selectorPair(options.memberSelector ?? DEFAULT_MEMBER_SELECTOR);

  const fleetWide = new Map<string, Part[]>();
  const imports = new Map<string, Part[]>();
  for (const cluster of remotes) {
    for (const svc of cluster.services) {
      const namespace = svc.metadata?.namespace ?? "";
      const name = `${svc.metadata?.name ?? ""}-federated`;
      if (!member || svc.metadata?.labels?.[member[0]] !== member[1] || excluded.has(namespace)) continue;
      const ports = servicePorts(svc);
      if (ports.length === 0 || !validServiceName(name)) continue;
      const key = mirrorKey(namespace, name);
      fleetWide.set(key, [...(fleetWide.get(key) ?? []), { cluster, ports, gateway: memberGateway(svc, cluster) }]);
    }
    if (!options.localMcs || cluster.serviceExports === undefined) continue;
    for (const se of cluster.serviceExports) {
      const namespace = se.metadata?.namespace ?? "";
      const name = se.metadata?.name ?? "";
      const svc = serviceOf(cluster, { namespace, name });
      const ports = svc ? servicePorts(svc) : [];
      if (!svc || excluded.has(namespace) || ports.length === 0) continue;
      const key = mirrorKey(namespace, name);
      const part = {
        cluster,
        ports,
        gateway: cluster.defaultGateway ?? DEFAULT_GATEWAY,
        since: se.metadata?.creationTimestamp ?? "",
      };
      imports.set(key, [...(imports.get(key) ?? []), part]);
    }
  }

  for (const [key, parts] of fleetWide) {
    const agreed = agreeing(parts);
    if (!agreed) continue;
    const name = key.slice(key.indexOf("/") + 1);
    const labels = { [MIRRORED_SERVICE]: "true", [FEDERATED]: "true" };
    const clusters = agreed.parts.map((p) => p.cluster.name).sort();
    expected.set(`fleet-wide ${key}`, {
      service: {
        name,
        labels,
        annotations: { [FEDERATED_CLUSTERS]: clusters.join(",") },
        type: "ClusterIP",
        headless: false,
        ports: agreed.ports,
      },
      endpoints: {
        labels,
        annotations: {},
        addresses: union(agreed.parts.map((p) => partAddresses(p.cluster, p.gateway, agreed.ports, dead))),
      },
    });
  }

  for (const [key, parts] of imports) {
    const byAge = [...parts].sort((a, b) =>
      (a.since ?? "") !== (b.since ?? "")
        ? Date.parse(a.since ?? "") - Date.parse(b.since ?? "")
        : a.cluster.name < b.cluster.name
          ? -1
          : 1,
    );
    const agreed = agreeing(byAge);
    if (!agreed) continue;
    const [namespace = "", name = ""] = key.split("/");
    const derived = derivedName(namespace, name);
    const labels = { [MIRRORED_SERVICE]: "true", [SERVICE_IMPORT]: name };
    const ip = options.localClusterIPs?.get(mirrorKey(namespace, derived));
    expected.set(`import ${key}`, {
      service: { name: derived, labels, type: "ClusterIP", headless: false, ports: agreed.ports },
      endpoints: {
        labels,
        addresses: union(agreed.parts.map((p) => partAddresses(p.cluster, p.gateway, agreed.ports, dead))),
      },
      serviceImport: {
        labels,
        type: "ClusterSetIP",
        ports: agreed.ports.map((p) => `${p.name}/${p.protocol}/${p.port}`).sort(),
        ips: ip ? [ip] : ["(the derived Service's cluster IP)"],
        clusters: agreed.parts.map((p) => p.cluster.name).sort(),
      },
    });
  }
  return expected;
}

/** A local Service, Endpoints or ServiceImport as listed (structural subsets). */
export interface LocalSharedObject extends LocalObject {
  readonly spec?: {
    readonly type?: string;
    readonly clusterIP?: string;
    readonly ips?: readonly string[];
    readonly ports?: readonly ServicePortShape[];
  };
  readonly subsets?: readonly {
    readonly addresses?: readonly { readonly ip: string }[];
    readonly notReadyAddresses?: readonly { readonly ip: string }[];
    readonly ports?: readonly { readonly name?: string; readonly protocol?: string; readonly port: number }[];
  }[];
  readonly status?: { readonly clusters?: readonly { readonly cluster: string }[] };
}

function triples(endpoints: LocalSharedObject): string[] {
  const out: string[] = [];
  for (const s of endpoints.subsets ?? []) {
    const ports = JSON.stringify((s.ports ?? []).map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port]).sort());
    for (const a of s.addresses ?? []) out.push(`${a.ip}|true|${ports}`);
    for (const a of s.notReadyAddresses ?? []) out.push(`${a.ip}|false|${ports}`);
  }
  return out.sort();
}

/** The local fleet-wide Services and imports, normalized like `expectedShared` (pass every labelled object). */
export function actualShared(
  services: readonly LocalSharedObject[],
  endpoints: readonly LocalSharedObject[],
  serviceImports: readonly LocalSharedObject[],
): Map<string, SharedObject> {
  const actual = new Map<string, { -readonly [K in keyof SharedObject]: SharedObject[K] }>();
  const keyOf = (o: LocalSharedObject): string | undefined => {
    const labels = o.metadata?.labels ?? {};
    const namespace = o.metadata?.namespace ?? "";
    if (labels[FEDERATED] !== undefined) return `fleet-wide ${mirrorKey(namespace, o.metadata?.name ?? "")}`;
    const imported = labels[SERVICE_IMPORT];
    return imported !== undefined ? `import ${mirrorKey(namespace, imported)}` : undefined;
  };
  const entry = (key: string) => {
    const e = actual.get(key) ?? {};
    actual.set(key, e);
    return e;
  };
  for (const s of services) {
    const key = keyOf(s);
    if (!key) continue;
    const fleetWide = key.startsWith("fleet-wide ");
    entry(key).service = {
      name: s.metadata?.name ?? "",
      labels: { ...(s.metadata?.labels ?? {}) },
      ...(fleetWide ? { annotations: mirrorAnnotations(s.metadata?.annotations) } : {}),
      type: s.spec?.type ?? "ClusterIP",
      headless: s.spec?.clusterIP === "None",
      ports: servicePorts({ spec: { ports: s.spec?.ports ?? [] } }),
    };
  }
  for (const e of endpoints) {
    const key = keyOf(e);
    if (!key) continue;
    const fleetWide = key.startsWith("fleet-wide ");
    entry(key).endpoints = {
      labels: { ...(e.metadata?.labels ?? {}) },
      ...(fleetWide ? { annotations: mirrorAnnotations(e.metadata?.annotations) } : {}),
      addresses: triples(e),
    };
  }
  for (const si of serviceImports) {
    const namespace = si.metadata?.namespace ?? "";
    const name = si.metadata?.name ?? "";
    const labels = si.metadata?.labels ?? {};
    entry(`import ${mirrorKey(namespace, name)}`).serviceImport = {
      labels: Object.fromEntries(
        Object.entries(labels).filter(([k]) => k === MIRRORED_SERVICE || k === SERVICE_IMPORT),
      ),
      type: si.spec?.type ?? "",
      ports: (si.spec?.ports ?? []).map((p) => `${p.name ?? ""}/${p.protocol ?? "TCP"}/${p.port}`).sort(),
      ips: [...(si.spec?.ips ?? [])],
      clusters: (si.status?.clusters ?? []).map((c) => c.cluster).sort(),
    };
  }
  return actual as Map<string, SharedObject>;
}

/** A readable diff of the shared objects, one entry per differing field; empty when equal. */
export function diffShared(
  expected: ReadonlyMap<string, SharedObject>,
  actual: ReadonlyMap<string, SharedObject>,
): string[] {
  const lines: string[] = [];
  for (const key of [...new Set([...expected.keys(), ...actual.keys()])].sort()) {
    const e = expected.get(key);
    const a = actual.get(key);
    if (!e) {
      const parts = [
        a?.service ? "Service" : "",
        a?.endpoints ? "Endpoints" : "",
        a?.serviceImport ? "ServiceImport" : "",
      ];
      lines.push(`${key}: unexpected (${parts.filter(Boolean).join(" + ")})`);
      continue;
    }
    for (const [part, want] of [
      ["Service", e.service],
      ["Endpoints", e.endpoints],
      ["ServiceImport", e.serviceImport],
    ] as const) {
      const got = a?.[part === "Service" ? "service" : part === "Endpoints" ? "endpoints" : "serviceImport"];
      if (!want) continue;
      if (!got) {
        lines.push(`${key}: missing ${part}`);
        continue;
      }
      for (const [field, value] of Object.entries(want))
        compare(lines, key, `${part} ${field}`, value, (got as Record<string, unknown>)[field]);
    }
  }
  return lines;
}
