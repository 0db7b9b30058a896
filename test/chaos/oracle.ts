/**
 * An independent oracle of SPEC §2–§5, §10 and §12 (label export, headless Services):
 * from what the remote clusters finally hold, the local mirrors that must exist, field
 * by field. Written from the SPEC alone — it imports nothing from `src/core` (not
 * `desired.ts`, not `plan.ts`), so a bug there cannot hide itself by being repeated
 * here. Fleet-wide Services and MCS imports are oracle-shared.ts's.
 *
 * Pure and synchronous: `expectedMirrors(remotes, options) → Map<key, Mirror>`,
 * `actualMirrors(services, endpoints) → Map<key, Mirror>`, `diffMirrors(…) → lines`.
 *
 * Not modelled (the chaos schedule never produces them): ingress hostnames (resolved through
 * DNS by the product), gateway IPs the API server refuses in Endpoints, two clusters
 * claiming the same local name, two headless Services of a namespace sharing a host name,
 * more than 1 000 hosts.
 */
import {
  CLUSTER_NAME,
  compare,
  DEFAULT_EXCLUDED_NAMESPACES,
  DEFAULT_EXPORT_SELECTOR,
  exportGateway,
  fnv1a32,
  GATEWAY_IDENTITY,
  gatewayEndpoints,
  type LocalObject,
  MIRRORED_SERVICE,
  type MirrorPort,
  type MirrorServicePort,
  mirrorAnnotations,
  mirrorKey,
  P,
  type RemoteCluster,
  type RemoteService,
  type ServicePortShape,
  serviceOf,
  servicePorts,
  sortPorts,
  validServiceName,
} from "./oracle-common.ts";

export type { LocalObject, RemoteCluster, RemoteService } from "./oracle-common.ts";
export { DEFAULT_EXCLUDED_NAMESPACES, mirrorKey } from "./oracle-common.ts";

const REMOTE_GATEWAY_NAME = `${P}remote-gateway-name`;
const REMOTE_GATEWAY_NS = `${P}remote-gateway-ns`;
const REMOTE_RESOURCE_VERSION = `${P}remote-resource-version`;
const REMOTE_SVC_FQ_NAME = `${P}remote-svc-fq-name`;
const REMOTE_GATEWAY_RESOURCE_VERSION = `${P}remote-gateway-resource-version`;
const REMOTE_GATEWAY_IDENTITY = `${P}remote-gateway-identity`;
const HEADLESS_MIRROR = `${P}headless-mirror-svc-name`;
const SHARD = `${P}shard`;
/** Labels of the objects oracle-shared.ts predicts: not mirrors. */
const SHARED_LABELS = [`${P}federated`, `${P}service-import`];
const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

/** One mirror (Service + Endpoints) in a normalized, comparable form. */
export interface Mirror {
  readonly namespace: string;
  readonly name: string;
  readonly service?: {
    readonly labels: Readonly<Record<string, string>>;
    /** Only the `mirror.linkerd.io/` annotations (foreign ones may be kept by the product). */
    readonly annotations: Readonly<Record<string, string>>;
    readonly type: string;
    /** `clusterIP: None` (SPEC §12: a headless mirror). */
    readonly headless: boolean;
    readonly selector: Readonly<Record<string, string>>;
    readonly ports: readonly MirrorServicePort[];
  };
  readonly endpoints?: {
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
    /**
     * One entry per subset. Empty = no subsets. An address is `<ip>`, `notReady:<ip>`,
     * or `<hostname>=<ip>` when it carries a hostname (SPEC §12).
     */
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
  /** `--export-selector` (SPEC §12; default `mirror.linkerd.io/exported=true`; empty: off). */
  readonly exportSelector?: string;
  /**
   * The cluster IPs of the local per-host mirrors by key (SPEC §12: a headless mirror's
   * addresses are its hosts' Services' cluster IPs, which only the local API server
   * allocates). A host without one is left out.
   */
  readonly localClusterIPs?: ReadonlyMap<string, string>;
}

interface Exported {
  readonly svc: RemoteService;
  readonly namespace: string;
  readonly name: string;
  readonly gateway: { readonly namespace: string; readonly name: string };
}

/** The Services of `cluster` exported by annotation or label (SPEC §2, §12), with their gateway. */
function exportedServices(cluster: RemoteCluster, options: OracleOptions): Exported[] {
  const selector = options.exportSelector ?? DEFAULT_EXPORT_SELECTOR;
  return cluster.services.flatMap((svc) => {
    const gateway = exportGateway(svc, cluster, selector);
    const namespace = svc.metadata?.namespace ?? "";
    const name = svc.metadata?.name ?? "";
    return gateway ? [{ svc, namespace, name, gateway }] : [];
  });
}

/**
 * SPEC §12: the hosts of an exported headless Service: the hostnames of its remote
 * slices (ready or not), each a DNS-1123 label whose `<h>-<c>` is a Service name, and no
 * host named like another Service the cluster exports in that namespace. Sorted.
 */
function hostsOf(cluster: RemoteCluster, e: Exported, exportedNames: ReadonlySet<string>): string[] {
  if (e.svc.spec?.clusterIP !== "None") return [];
  const hosts = new Set<string>();
  for (const slice of cluster.endpointSlices ?? []) {
    if (slice.metadata?.namespace !== e.namespace || slice.metadata.labels?.[SERVICE_NAME_LABEL] !== e.name) continue;
    for (const endpoint of slice.endpoints ?? []) if (endpoint.hostname) hosts.add(endpoint.hostname);
  }
  return [...hosts]
    .filter((h) => /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(h) && h.length <= 63)
    .filter((h) => validServiceName(`${h}-${cluster.name}`))
    .filter((h) => !exportedNames.has(mirrorKey(e.namespace, h)))
    .sort()
    .slice(0, 1_000);
}

/** SPEC §2–§5, §12: the mirrors that must exist locally once things are quiet. */
export function expectedMirrors(remotes: readonly RemoteCluster[], options: OracleOptions = {}): Map<string, Mirror> {
  const excluded = new Set(options.excludedNamespaces ?? DEFAULT_EXCLUDED_NAMESPACES);
  const expected = new Map<string, Mirror>();
  const shards = options.shards ?? 1;
  for (const cluster of remotes) {
    const exported = exportedServices(cluster, options).filter((e) => !excluded.has(e.namespace));
    const exportedNames = new Set(exported.map((e) => mirrorKey(e.namespace, e.name)));
    for (const e of exported) {
      const { svc, namespace, name } = e;
      const mirrorName = `${name}-${cluster.name}`;
      if (mirrorName.length > 63) continue;
      const ports = servicePorts(svc);
      if (ports.length === 0) continue;
      const key = mirrorKey(namespace, mirrorName);
      if (options.userHeld?.has(key)) continue;
      const gateway = serviceOf(cluster, e.gateway);
      const labels = {
        [MIRRORED_SERVICE]: "true",
        [CLUSTER_NAME]: cluster.name,
        [REMOTE_GATEWAY_NAME]: e.gateway.name,
        [REMOTE_GATEWAY_NS]: e.gateway.namespace,
        ...(shards > 1 ? { [SHARD]: `${fnv1a32(cluster.name) % shards}-of-${shards}` } : {}),
      };
      const usable = gatewayEndpoints(gateway, options.deadAddresses ?? new Set());
      const mirror = (mirrorName: string, fqName: string, extraLabels: Record<string, string>): Mirror => {
        const serviceAnnotations: Record<string, string> = {
          [REMOTE_RESOURCE_VERSION]: svc.metadata?.resourceVersion ?? "",
          [REMOTE_SVC_FQ_NAME]: fqName,
        };
        if (gateway) serviceAnnotations[REMOTE_GATEWAY_RESOURCE_VERSION] = gateway.metadata?.resourceVersion ?? "";
        const endpointsAnnotations: Record<string, string> = { [REMOTE_SVC_FQ_NAME]: fqName };
        const identity = gateway?.metadata?.annotations?.[GATEWAY_IDENTITY];
        if (identity) endpointsAnnotations[REMOTE_GATEWAY_IDENTITY] = identity;
        const all = { ...labels, ...extraLabels };
        return {
          namespace,
          name: mirrorName,
          service: {
            labels: all,
            annotations: serviceAnnotations,
            type: "ClusterIP",
            headless: false,
            selector: {},
            ports,
          },
          endpoints: {
            labels: all,
            annotations: endpointsAnnotations,
            subsets: usable
              ? [
                  {
                    addresses: usable.ips,
                    ports: sortPorts(ports.map((p) => ({ name: p.name, protocol: p.protocol, port: usable.port }))),
                  },
                ]
              : [],
          },
        };
      };
      const fqName = `${name}.${namespace}.svc.${cluster.domain}`;
      const hosts = hostsOf(cluster, e, exportedNames);
      if (hosts.length === 0) {
        expected.set(key, mirror(mirrorName, fqName, {}));
        continue;
      }
      // SPEC §12, headless: a per-host mirror per host, and the headless mirror whose
      // addresses are their cluster IPs with hostname <h>, ready, on the Service's own ports.
      const addresses: string[] = [];
      for (const host of hosts) {
        const hostKey = mirrorKey(namespace, `${host}-${cluster.name}`);
        expected.set(
          hostKey,
          mirror(`${host}-${cluster.name}`, `${host}.${name}.${namespace}.svc.${cluster.domain}`, {
            [HEADLESS_MIRROR]: mirrorName,
          }),
        );
        const ip = options.localClusterIPs?.get(hostKey);
        if (ip) addresses.push(`${host}=${ip}`);
      }
      const plain = mirror(mirrorName, fqName, {});
      expected.set(key, {
        ...plain,
        ...(plain.service ? { service: { ...plain.service, headless: true } } : {}),
        ...(plain.endpoints
          ? {
              endpoints: {
                ...plain.endpoints,
                subsets:
                  addresses.length > 0
                    ? [
                        {
                          addresses: addresses.sort(),
                          ports: sortPorts(ports.map((p) => ({ name: p.name, protocol: p.protocol, port: p.port }))),
                        },
                      ]
                    : [],
              },
            }
          : {}),
      });
    }
  }
  return expected;
}

export interface LocalService extends LocalObject {
  readonly spec?: {
    readonly type?: string;
    readonly clusterIP?: string;
    readonly selector?: Readonly<Record<string, string>>;
    readonly ports?: readonly ServicePortShape[];
  };
}
export interface LocalEndpoints extends LocalObject {
  readonly subsets?: readonly {
    readonly addresses?: readonly { readonly ip: string; readonly hostname?: string }[];
    readonly notReadyAddresses?: readonly { readonly ip: string; readonly hostname?: string }[];
    readonly ports?: readonly { readonly name?: string; readonly protocol?: string; readonly port: number }[];
  }[];
}

/**
 * The local mirrors, normalized like `expectedMirrors` (pass every labelled Service and
 * Endpoints; fleet-wide and import objects, labelled as such, are left to oracle-shared.ts).
 */
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
  const shared = (o: LocalObject): boolean => SHARED_LABELS.some((label) => o.metadata?.labels?.[label] !== undefined);
  for (const s of services) {
    if (shared(s)) continue;
    entry(s).service = {
      labels: { ...(s.metadata?.labels ?? {}) },
      annotations: mirrorAnnotations(s.metadata?.annotations),
      type: s.spec?.type ?? "ClusterIP",
      headless: s.spec?.clusterIP === "None",
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
  const address = (a: { readonly ip: string; readonly hostname?: string }) =>
    a.hostname ? `${a.hostname}=${a.ip}` : a.ip;
  for (const e of endpoints) {
    if (shared(e)) continue;
    entry(e).endpoints = {
      labels: { ...(e.metadata?.labels ?? {}) },
      annotations: mirrorAnnotations(e.metadata?.annotations),
      subsets: (e.subsets ?? []).map((s) => ({
        addresses: [
          ...(s.addresses ?? []).map(address),
          ...(s.notReadyAddresses ?? []).map((a) => `notReady:${address(a)}`),
        ].sort(),
        ports: sortPorts(
          (s.ports ?? []).map((p) => ({ name: p.name ?? "", protocol: p.protocol ?? "TCP", port: p.port })),
        ),
      })),
    };
  }
  return actual as Map<string, Mirror>;
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
      compare(lines, key, "Service headless (clusterIP None)", e.service.headless, a.service.headless);
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
