/**
 * The one Endpoints object of a Service clusters share (a fleet-wide Service, SPEC §11;
 * an MCS import's derived Service, SPEC §12) in `endpoints`/`both` mode: one subset per
 * member cluster, its body, and whether an observed one already matches. Pure.
 */
import { mirrorAnnotations, sortedLabels } from "./compare.ts";
import type { FederatedMember } from "./federated.ts";
import { SKIP_MIRROR_LABEL } from "./labels.ts";
import type { EndpointsApi } from "./mirror-kinds.ts";
import type { EndpointSubset, Endpoints } from "./objects.ts";

/** One subset per member cluster with addresses (their gateways' incoming ports may differ). */
export function federatedSubsets(parts: readonly FederatedMember[]): EndpointSubset[] {
  return parts
    .filter((m) => (m.addresses.length > 0 || (m.endpoints ?? []).length > 0) && m.endpointPorts.length > 0)
    .map((m) => {
      const ports = m.endpointPorts.map((p) => ({
        ...(p.name ? { name: p.name } : {}),
        port: p.port,
        protocol: p.protocol,
      }));
      // A local part's copied endpoints (SPEC §16): each address with its hostname and node.
      if (m.endpoints) {
        const address = (ip: string, e: (typeof m.endpoints)[number]) => ({
          ip,
          ...(e.hostname ? { hostname: e.hostname } : {}),
          ...(e.nodeName ? { nodeName: e.nodeName } : {}),
        });
        const ready = m.endpoints
          .filter((e) => e.conditions.ready)
          .flatMap((e) => e.addresses.map((ip) => address(ip, e)));
        const notReady = m.endpoints
          .filter((e) => !e.conditions.ready)
          .flatMap((e) => e.addresses.map((ip) => address(ip, e)));
        return {
          ...(ready.length > 0 ? { addresses: ready } : {}),
          ...(notReady.length > 0 ? { notReadyAddresses: notReady } : {}),
          ports,
        };
      }
      const notReady = new Set(m.notReadyAddresses);
      const ready = m.addresses.filter((ip) => !notReady.has(ip));
      return {
        ...(ready.length > 0 ? { addresses: ready.map((ip) => ({ ip })) } : {}),
        ...(notReady.size > 0 ? { notReadyAddresses: m.notReadyAddresses.map((ip) => ({ ip })) } : {}),
        ports: m.endpointPorts.map((p) => ({
          ...(p.name ? { name: p.name } : {}),
          port: p.port,
          protocol: p.protocol,
        })),
      };
    });
}

/**
 * Subsets as a set of (address, ready, ports) triples: the API server repacks subsets
 * (merges those with equal ports, sorts), so their grouping is not compared.
 */
function subsetTriples(subsets: readonly EndpointSubset[] | undefined): string {
  const triples: string[] = [];
  for (const s of subsets ?? []) {
    const ports = JSON.stringify((s.ports ?? []).map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port]).sort());
    for (const a of s.addresses ?? []) triples.push(JSON.stringify([a.ip, true, ports]));
    for (const a of s.notReadyAddresses ?? []) triples.push(JSON.stringify([a.ip, false, ports]));
  }
  return JSON.stringify(triples.sort());
}

/** The shared Endpoints object's labels: its flavor's, and in `both` mode "do not derive slices from us". */
function endpointsLabelsFor(labels: Readonly<Record<string, string>>, mode: EndpointsApi): Record<string, string> {
  return mode === "both" ? { ...labels, [SKIP_MIRROR_LABEL]: "true" } : { ...labels };
}

/** Whether the observed shared Endpoints object needs no write (`labels`: its flavor's). */
export function sharedEndpointsMatch(
  labels: Readonly<Record<string, string>>,
  mode: EndpointsApi,
  parts: readonly FederatedMember[],
  observed: Endpoints,
): boolean {
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(endpointsLabelsFor(labels, mode)) &&
    mirrorAnnotations(observed.metadata.annotations) === mirrorAnnotations({}) &&
    subsetTriples(observed.subsets) === subsetTriples(federatedSubsets(parts))
  );
}

/** The shared Endpoints object to POST (no `observed`) or PUT over `observed`; foreign annotations kept. */
export function sharedEndpointsBody(
  target: { readonly namespace: string; readonly name: string; readonly labels: Readonly<Record<string, string>> },
  mode: EndpointsApi,
  parts: readonly FederatedMember[],
  observed: Endpoints | undefined,
): object {
  const labels = endpointsLabelsFor(target.labels, mode);
  const annotations: Record<string, string> = {};
  for (const [k, v] of Object.entries(observed?.metadata.annotations ?? {}))
    if (!k.startsWith("mirror.linkerd.io/")) annotations[k] = v;
  const metadata = observed
    ? { ...observed.metadata, labels, annotations }
    : { name: target.name, namespace: target.namespace, labels };
  return { ...(observed ?? {}), apiVersion: "v1", kind: "Endpoints", metadata, subsets: federatedSubsets(parts) };
}
