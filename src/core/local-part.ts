/**
 * A local Service's own endpoints as a part of a Service that clusters share (a fleet-wide
 * Service's local member, planned; SPEC §16's local exporter of an MCS import): its
 * EndpointSlices (label `kubernetes.io/service-name`, whoever manages them) copied as
 * they are, pod addresses, conditions, hostname, nodeName and zone, with their ports;
 * and the slices that part is written as. Pure: no I/O, no mutation of inputs.
 *
 * Invariants (unit tested):
 * - only IPv4 and IPv6 slices count (an FQDN slice has no address a part can carry);
 * - one port set: the ports of the first slice (by name) that has endpoints; endpoints of
 *   slices whose ports differ from it (a named port resolving to different container
 *   ports on different pods) are left out, so no endpoint is written with ports it lacks;
 * - at most `MAX_PART_ENDPOINTS` endpoints per family (one EndpointSlice's limit), the
 *   first in address order;
 * - the result is sorted: the same slices in any order give the same part.
 */
import type { MirrorEndpointPort } from "./desired.ts";
import { type AddressFamily, addressFamily, type SliceContent, sliceName } from "./endpoint-slices.ts";
import type { PartEndpoint } from "./federated.ts";
import type { EndpointSlice, SliceEndpoint, SlicePort } from "./objects.ts";

/** Endpoints one EndpointSlice may hold (the API server's limit). */
export const MAX_PART_ENDPOINTS = 1_000;

export interface LocalPart {
  readonly endpoints: readonly PartEndpoint[];
  readonly endpointPorts: readonly MirrorEndpointPort[];
}

const portsText = (ports: readonly SlicePort[] | null | undefined): string =>
  JSON.stringify(
    (ports ?? [])
      .map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port ?? 0])
      .sort((a, b) => (String(a) < String(b) ? -1 : 1)),
  );

/** One slice endpoint as a part carries it (the API's defaults: ready unless false, serving as ready). */
function partEndpoint(e: SliceEndpoint): PartEndpoint {
  const ready = e.conditions?.ready !== false;
  const nodeName = typeof e["nodeName"] === "string" ? (e["nodeName"] as string) : undefined;
  const zone = typeof e["zone"] === "string" ? (e["zone"] as string) : undefined;
  return {
    addresses: [...e.addresses].sort(),
    conditions: {
      ready,
      serving: e.conditions?.serving ?? ready,
      terminating: e.conditions?.terminating ?? false,
    },
    ...(e.hostname ? { hostname: e.hostname } : {}),
    ...(nodeName ? { nodeName } : {}),
    ...(zone ? { zone } : {}),
  };
}

/** The part a local Service's slices stand for (see the invariants). */
export function localPartOf(slices: readonly EndpointSlice[]): LocalPart {
  const usable = slices
    .filter((s) => s.addressType === "IPv4" || s.addressType === "IPv6")
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
  const first = usable.find((s) => (s.endpoints ?? []).length > 0) ?? usable[0];
  if (!first) return { endpoints: [], endpointPorts: [] };
  const ports = portsText(first.ports);
  const byFamily = new Map<AddressFamily, PartEndpoint[]>();
  for (const slice of usable) {
    if (portsText(slice.ports) !== ports) continue;
    for (const e of slice.endpoints ?? []) {
      if (e.addresses.length === 0) continue;
      const family = addressFamily(e.addresses[0] as string);
      const list = byFamily.get(family) ?? [];
      list.push(partEndpoint(e));
      byFamily.set(family, list);
    }
  }
  const endpoints = [...byFamily.values()].flatMap((list) =>
    list.sort((a, b) => (a.addresses[0] ?? "").localeCompare(b.addresses[0] ?? "", "en")).slice(0, MAX_PART_ENDPOINTS),
  );
  const endpointPorts = (first.ports ?? [])
    .filter((p) => typeof p.port === "number")
    .map((p) => ({ ...(p.name ? { name: p.name } : {}), protocol: p.protocol ?? "TCP", port: p.port as number }))
    .sort((a, b) => ((a.name ?? "") < (b.name ?? "") ? -1 : (a.name ?? "") > (b.name ?? "") ? 1 : 0));
  return { endpoints, endpointPorts };
}

/** The slices of a part with copied endpoints, named `<name>-ipv4|ipv6`, IPv4 first; one empty IPv4 slice when none. */
export function localPartSliceContents(
  name: string,
  endpoints: readonly PartEndpoint[],
  ports: readonly MirrorEndpointPort[],
): SliceContent[] {
  const slicePorts: SlicePort[] = ports.map((p) => ({
    ...(p.name ? { name: p.name } : {}),
    protocol: p.protocol,
    port: p.port,
  }));
  const byFamily = new Map<AddressFamily, SliceEndpoint[]>();
  for (const e of endpoints) {
    const family = addressFamily(e.addresses[0] ?? "");
    const list = byFamily.get(family) ?? [];
    list.push({ ...e, addresses: [...e.addresses], conditions: { ...e.conditions } });
    byFamily.set(family, list);
  }
  if (byFamily.size === 0) byFamily.set("ipv4", []);
  return (["ipv4", "ipv6"] as const)
    .filter((family) => byFamily.has(family))
    .map((family) => ({
      name: sliceName(name, family),
      addressType: family === "ipv4" ? "IPv4" : "IPv6",
      endpoints: byFamily.get(family) ?? [],
      ports: slicePorts,
    }));
}
