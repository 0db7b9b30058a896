/**
 * The bodies of a mirror's Service and Endpoints (SPEC §3) and whether an observed one
 * already matches: pure functions of the desired mirror, shared by the mirror planner
 * (plan.ts) and the fleet-wide one (plan-federated.ts). Comparisons normalize the
 * defaults the API server fills in, so an unchanged mirror never causes a write (SPEC §4).
 */
import {
  mergeAnnotations,
  mergeOwnedAnnotations,
  mirrorAnnotations,
  ownedAnnotations,
  sortedLabels,
} from "./compare.ts";
import type { DesiredMirror } from "./desired.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE, SKIP_MIRROR_LABEL } from "./labels.ts";
import type { EndpointsApi } from "./mirror-kinds.ts";
import type {
  EndpointAddress,
  EndpointPort,
  EndpointSubset,
  Endpoints,
  ObjectMeta,
  Service,
  ServicePort,
} from "./objects.ts";

// ---------------------------------------------------------------------------------
// Normalization: compare what the API server returns with what we want, ignoring
// the defaults it fills in, so an unchanged mirror never causes a write.

type ComparablePort = Pick<ServicePort, "name" | "protocol" | "port" | "targetPort" | "nodePort">;

function normalizeServicePorts(ports: readonly ComparablePort[] | undefined): string {
  return JSON.stringify(
    (ports ?? []).map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port, p.targetPort ?? p.port, p.nodePort ?? null]),
  );
}

function normalizeSubsets(subsets: readonly EndpointSubset[] | undefined): string {
  const normalized = (subsets ?? [])
    .map((s) => ({
      addresses: (s.addresses ?? []).map(addressKey).sort(),
      notReady: (s.notReadyAddresses ?? []).map(addressKey).sort(),
      ports: (s.ports ?? []).map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port]).sort(),
    }))
    .filter((s) => s.addresses.length + s.notReady.length > 0 || s.ports.length > 0);
  return JSON.stringify(normalized);
}

/** An address as compared: its IP, and its hostname when it has one (headless, SPEC §12). */
const addressKey = (a: EndpointAddress): string => (a.hostname ? `${a.ip} ${a.hostname}` : a.ip);

/**
 * The Endpoints subsets a desired mirror stands for: none while the gateway is unusable.
 * A headless mirror's are its hosts that have an address, each with its hostname.
 */
export function desiredSubsets(desired: DesiredMirror): EndpointSubset[] {
  if (desired.headless) {
    const addresses = desired.headless.hosts.flatMap((h) =>
      h.address ? [{ ip: h.address, hostname: h.hostname }] : [],
    );
    if (addresses.length === 0 || desired.endpointPorts.length === 0) return [];
    return [{ addresses, ports: endpointsPorts(desired) }];
  }
  if (desired.addresses.length === 0 || desired.endpointPorts.length === 0) return [];
  const notReady = new Set(desired.notReadyAddresses);
  const ready = desired.addresses.filter((ip) => !notReady.has(ip));
  return [
    {
      ...(ready.length > 0 ? { addresses: ready.map((ip) => ({ ip })) } : {}),
      ...(notReady.size > 0 ? { notReadyAddresses: desired.notReadyAddresses.map((ip) => ({ ip })) } : {}),
      ports: endpointsPorts(desired),
    },
  ];
}

function endpointsPorts(desired: DesiredMirror): EndpointPort[] {
  return desired.endpointPorts.map((p) => ({
    ...(p.name ? { name: p.name } : {}),
    port: p.port,
    protocol: p.protocol,
  }));
}

/**
 * Whether an observed Service's `clusterIP` is what `desired` needs: `None` for a
 * headless mirror, an IP (or not yet allocated) for any other. `clusterIP` is
 * immutable: a Service on the wrong side is deleted and created again.
 */
export function clusterIpMatches(desired: DesiredMirror, observed: Service): boolean {
  return (observed.spec?.clusterIP === "None") === (desired.headless !== undefined);
}

/** The labels of the mirror Endpoints: in `both` mode they also say "do not derive slices from us". */
export function endpointsLabels(desired: DesiredMirror, mode: EndpointsApi): Record<string, string> {
  return mode === "both" ? { ...desired.labels, [SKIP_MIRROR_LABEL]: "true" } : { ...desired.labels };
}

export function serviceMatches(desired: DesiredMirror, observed: Service): boolean {
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(desired.labels) &&
    ownedAnnotations(observed.metadata.annotations, desired.serviceAnnotationsExact === true) ===
      ownedAnnotations(desired.serviceAnnotations, desired.serviceAnnotationsExact === true) &&
    (observed.spec?.type ?? "ClusterIP") === "ClusterIP" &&
    clusterIpMatches(desired, observed) &&
    Object.keys(observed.spec?.selector ?? {}).length === 0 &&
    normalizeServicePorts(observed.spec?.ports) === normalizeServicePorts(desired.ports)
  );
}

export function endpointsMatch(desired: DesiredMirror, observed: Endpoints, mode: EndpointsApi = "endpoints"): boolean {
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(endpointsLabels(desired, mode)) &&
    mirrorAnnotations(observed.metadata.annotations) === mirrorAnnotations(desired.endpointsAnnotations) &&
    normalizeSubsets(observed.subsets) === normalizeSubsets(desiredSubsets(desired))
  );
}

export function serviceBody(desired: DesiredMirror, observed?: Service): object {
  const ports = desired.ports.map((p) => ({ ...p }));
  if (!observed) {
    return {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: desired.name,
        namespace: desired.namespace,
        labels: { ...desired.labels },
        annotations: { ...desired.serviceAnnotations },
      },
      spec: { type: "ClusterIP", ...(desired.headless ? { clusterIP: "None" } : {}), ports },
    };
  }
  const { selector: _selector, ...spec } = observed.spec ?? {};
  return {
    ...observed,
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      ...observed.metadata,
      labels: { ...desired.labels },
      annotations: mergeOwnedAnnotations(
        observed.metadata,
        desired.serviceAnnotations,
        desired.serviceAnnotationsExact === true,
      ),
    },
    spec: { ...spec, type: "ClusterIP", ports },
  };
}

export function endpointsBody(desired: DesiredMirror, observed?: Endpoints, mode: EndpointsApi = "endpoints"): object {
  const labels = endpointsLabels(desired, mode);
  const metadata: ObjectMeta = observed
    ? { ...observed.metadata, labels, annotations: mergeAnnotations(observed.metadata, desired.endpointsAnnotations) }
    : { name: desired.name, namespace: desired.namespace, labels, annotations: { ...desired.endpointsAnnotations } };
  return { ...(observed ?? {}), apiVersion: "v1", kind: "Endpoints", metadata, subsets: desiredSubsets(desired) };
}

export function namespaceBody(name: string, cluster: string): object {
  return {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name, labels: { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: cluster } },
  };
}
