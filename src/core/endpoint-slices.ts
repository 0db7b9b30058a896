/**
 * The EndpointSlices of a mirror (SPEC §9), as a pure function of the desired mirror
 * and the uid of the mirror Service: names, bodies, and whether an observed slice (as
 * the API server returns it, defaults filled in) already matches.
 *
 * Invariants:
 * - one slice per address family present, named `<mirror>-ipv4` / `<mirror>-ipv6`
 *   (a mirror name is at most 63 characters, so a slice name is at most 68, well
 *   under the 253 of an object name; `kubernetes.io/service-name` holds the mirror
 *   name itself, which fits the 63 of a label value);
 * - a gateway without addresses gives exactly one IPv4 slice without endpoints;
 * - a slice is fleet-mirror's only with the mirror labels AND fleet-mirror's
 *   `managed-by` value: a slice the built-in EndpointSliceMirroring controller derived
 *   from mirror Endpoints copies their labels, yet is never ours.
 */
import { mergeAnnotations, mirrorAnnotations, sortedLabels } from "./compare.ts";
import type { DesiredMirror } from "./desired.ts";
import { MANAGED_BY_FLEET_MIRROR, MANAGED_BY_LABEL, ownerCluster, SERVICE_NAME_LABEL } from "./labels.ts";
import type { EndpointSlice, KubeObject, ObjectMeta, OwnerReference, SliceEndpoint, SlicePort } from "./objects.ts";

export type AddressFamily = "ipv4" | "ipv6";

const ADDRESS_TYPES: Readonly<Record<AddressFamily, string>> = { ipv4: "IPv4", ipv6: "IPv6" };
const FAMILIES: readonly AddressFamily[] = ["ipv4", "ipv6"];

/**
 * The family of a gateway address. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is
 * IPv4: the API server accepts it only in an IPv4 slice.
 */
export function addressFamily(ip: string): AddressFamily {
  return ip.includes(":") && !/^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(ip) ? "ipv6" : "ipv4";
}

/** The name of a mirror's slice of one family. */
export function sliceName(mirror: string, family: AddressFamily): string {
  return `${mirror}-${family}`;
}

/** Every name a slice of `mirror` may have (where the writer looks for a mirror's slices). */
export function sliceNames(mirror: string): string[] {
  return FAMILIES.map((family) => sliceName(mirror, family));
}

/**
 * The Service a slice belongs to: its `kubernetes.io/service-name`. A slice without one
 * (fleet-mirror always writes it; one left by hand or by an older naming) is taken for
 * the mirror its name would be a slice of (`<mirror>-ipv4` → `<mirror>`; any other name:
 * itself), so every slice of ours belongs to exactly one key and can be collected.
 */
export function sliceMirrorName(slice: KubeObject): string {
  const label = slice.metadata.labels?.[SERVICE_NAME_LABEL];
  if (label) return label;
  const { name } = slice.metadata;
  const family = FAMILIES.find((f) => name.endsWith(`-${f}`));
  return family ? name.slice(0, -family.length - 1) : name;
}

/** The cluster that owns a slice (SPEC §5, §9), or undefined when fleet-mirror does not own it. */
export function sliceOwner(labels: Readonly<Record<string, string>> | undefined): string | undefined {
  return labels?.[MANAGED_BY_LABEL] === MANAGED_BY_FLEET_MIRROR ? ownerCluster(labels) : undefined;
}

/** What one slice of a mirror holds, before it is wrapped into an object. */
export interface SliceContent {
  readonly name: string;
  readonly addressType: string;
  readonly endpoints: readonly SliceEndpoint[];
  readonly ports: readonly SlicePort[];
}

/**
 * The slices a desired mirror stands for, IPv4 first. A headless mirror's endpoints are
 * its hosts that have an address, each with its hostname, ready (SPEC §12).
 */
export function desiredSliceContents(desired: DesiredMirror): SliceContent[] {
  const notReady = new Set(desired.notReadyAddresses);
  const ports: SlicePort[] = desired.endpointPorts.map((p) => ({
    ...(p.name ? { name: p.name } : {}),
    protocol: p.protocol,
    port: p.port,
  }));
  const byFamily = new Map<AddressFamily, SliceEndpoint[]>();
  const add = (ip: string, hostname?: string): void => {
    const family = addressFamily(ip);
    const ready = !notReady.has(ip);
    const endpoints = byFamily.get(family) ?? [];
    endpoints.push({
      addresses: [ip],
      ...(hostname ? { hostname } : {}),
      conditions: { ready, serving: ready, terminating: false },
    });
    byFamily.set(family, endpoints);
  };
  if (desired.headless) {
    for (const host of desired.headless.hosts) if (host.address) add(host.address, host.hostname);
  } else for (const ip of desired.addresses) add(ip);
  if (byFamily.size === 0) byFamily.set("ipv4", []);
  return FAMILIES.filter((family) => byFamily.has(family)).map((family) => ({
    name: sliceName(desired.name, family),
    addressType: ADDRESS_TYPES[family],
    endpoints: byFamily.get(family) ?? [],
    ports,
  }));
}

/**
 * The labels of every slice of `desired`: the mirror's labels and the two of
 * discovery.k8s.io. `service` is the Service the slices belong to: the mirror's own
 * (default), or a fleet-wide Service that a part of one cluster belongs to (SPEC §11).
 */
export function sliceLabels(desired: DesiredMirror, service = desired.name): Record<string, string> {
  return { ...desired.labels, [SERVICE_NAME_LABEL]: service, [MANAGED_BY_LABEL]: MANAGED_BY_FLEET_MIRROR };
}

function ownerReference(service: string, serviceUid: string): OwnerReference {
  // No blockOwnerDeletion: setting it needs the right to set finalizers on Services,
  // which least privilege (SPEC §7) does not grant; the reference alone lets the
  // garbage collector delete the slices with their Service.
  return { apiVersion: "v1", kind: "Service", name: service, uid: serviceUid, controller: true };
}

function ownerReferences(meta: ObjectMeta): readonly OwnerReference[] {
  const refs = meta["ownerReferences"];
  return Array.isArray(refs) ? (refs as OwnerReference[]) : [];
}

const isOurs = (ref: OwnerReference, ours: OwnerReference): boolean =>
  ref.apiVersion === ours.apiVersion &&
  ref.kind === ours.kind &&
  ref.name === ours.name &&
  ref.uid === ours.uid &&
  ref.controller === true;

function normalizeEndpoints(endpoints: readonly SliceEndpoint[] | null | undefined): string {
  return JSON.stringify(
    (endpoints ?? [])
      .map((e) => [
        [...e.addresses].sort(),
        e.hostname ?? null,
        e.conditions?.ready ?? null,
        e.conditions?.serving ?? null,
        e.conditions?.terminating ?? null,
        // A local part's copied endpoints carry these (SPEC §16); a mirror's never do.
        e["nodeName"] ?? null,
        e["zone"] ?? null,
      ])
      .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
  );
}

/** The API server fills in an empty name and protocol TCP. */
function normalizePorts(ports: readonly SlicePort[] | null | undefined): string {
  return JSON.stringify(
    (ports ?? [])
      .map((p) => [p.name ?? "", p.protocol ?? "TCP", p.port ?? null, p.appProtocol ?? null])
      .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)),
  );
}

/**
 * True when `observed` needs no write to be the slice `content` of `desired` (of Service
 * `service`). `serviceUid` undefined: the Service does not exist yet (a fleet-wide part
 * announced by a replica that does not own the Service, SPEC §11), so no ownerReference
 * is asked for.
 */
export function sliceMatches(
  desired: DesiredMirror,
  content: SliceContent,
  serviceUid: string | undefined,
  observed: EndpointSlice,
  service = desired.name,
): boolean {
  const ours = serviceUid === undefined ? undefined : ownerReference(service, serviceUid);
  return (
    sortedLabels(observed.metadata.labels) === sortedLabels(sliceLabels(desired, service)) &&
    mirrorAnnotations(observed.metadata.annotations) === mirrorAnnotations(desired.endpointsAnnotations) &&
    (ours === undefined || ownerReferences(observed.metadata).some((ref) => isOurs(ref, ours))) &&
    observed.addressType === content.addressType &&
    normalizeEndpoints(observed.endpoints) === normalizeEndpoints(content.endpoints) &&
    normalizePorts(observed.ports) === normalizePorts(content.ports)
  );
}

/**
 * The slice to POST (no `observed`) or PUT (over `observed`, whose other fields and
 * foreign annotations and owner references are kept). `addressType` is immutable: a
 * slice of the wrong type is never planned as an update, as its name says its family.
 * `serviceUid` undefined: no ownerReference is added (see `sliceMatches`); an observed
 * slice keeps the references it has.
 */
export function sliceBody(
  desired: DesiredMirror,
  content: SliceContent,
  serviceUid: string | undefined,
  observed?: EndpointSlice,
  service = desired.name,
): object {
  const ours = serviceUid === undefined ? [] : [ownerReference(service, serviceUid)];
  const metadata = observed
    ? {
        ...observed.metadata,
        labels: sliceLabels(desired, service),
        annotations: mergeAnnotations(observed.metadata, desired.endpointsAnnotations),
        ownerReferences:
          serviceUid === undefined
            ? ownerReferences(observed.metadata)
            : [
                ...ownerReferences(observed.metadata).filter(
                  (ref) => !(ref.kind === "Service" && ref.name === service),
                ),
                ...ours,
              ],
      }
    : {
        name: content.name,
        namespace: desired.namespace,
        labels: sliceLabels(desired, service),
        annotations: { ...desired.endpointsAnnotations },
        ownerReferences: ours,
      };
  return {
    ...(observed ?? {}),
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata,
    addressType: content.addressType,
    endpoints: content.endpoints.map((e) => ({ ...e, addresses: [...e.addresses] })),
    ports: content.ports.map((p) => ({ ...p })),
  };
}
