/**
 * Headless Services (SPEC §12), as pure functions: which remote Services are headless,
 * the hostnames their remote EndpointSlices carry, and the mirrors they stand for.
 *
 * An exported headless Service `<svc>` of cluster `<c>` whose remote endpoints carry
 * hostnames (a StatefulSet's pods) becomes:
 * - one ordinary mirror per valid hostname `<h>`, named `<h>-<c>` (a ClusterIP Service
 *   whose endpoints are the gateway, as any mirror), labelled as its cluster's mirrors
 *   plus `mirror.linkerd.io/headless-mirror-svc-name: <svc>-<c>`;
 * - the headless mirror `<svc>-<c>`: the ordinary mirror with `headless.hosts`, a
 *   Service with `clusterIP: None` whose endpoints are the per-host Services' cluster
 *   IPs with hostname `<h>` — which only the local writer knows (`resolveHeadless`).
 * Endpoints without hostnames (or hostnames none of which is valid) make it the ordinary
 * mirror, unchanged. Slices without any endpoint keep the shape last seen: a StatefulSet
 * scaled to 0 stays a headless mirror without hosts, never flipping to an ordinary one
 * and back (`clusterIP` is immutable, so a flip deletes and recreates the Service).
 *
 * Invariants: hosts are sorted and unique; at most the cluster's `maxHeadlessHosts`
 * of them (`--max-hosts-per-headless-service`), never more than MAX_HEADLESS_HOSTS (one
 * EndpointSlice holds at most 1 000 endpoints); a hostname that is not a DNS-1123 label,
 * or whose per-host mirror name is not a Service name, is left out and reported.
 */
import type { DesiredMirror, HeadlessHost, MirrorEndpointPort, MirrorProblem } from "./desired.ts";
import { REMOTE_SVC_FQ_NAME } from "./labels.ts";
import { mirrorName, validateDns1123Label, validateMirrorName } from "./naming.ts";
import type { EndpointSlice, KubeObject, Service } from "./objects.ts";

/** On a per-host mirror: the name of the headless mirror it belongs to (linkerd's key). */
export const HEADLESS_MIRROR_LABEL = "mirror.linkerd.io/headless-mirror-svc-name";

/**
 * Hosts of one headless Service mirrored at most, whatever the flag says: the API server
 * refuses an EndpointSlice of more than 1 000 endpoints, and the headless mirror's
 * addresses are one slice per address family. The hosts past the cap (in name order)
 * are reported.
 */
export const MAX_HEADLESS_HOSTS = 1_000;

/** Whether a remote Service is headless (`spec.clusterIP: None`). */
export function isHeadless(service: Service | undefined): boolean {
  return service?.spec?.clusterIP === "None";
}

/**
 * What an actor knows of the remote endpoints of one exported headless Service. Unknown
 * is never "none": only a list says which hosts exist, and a Service whose hosts are not
 * known never turns a headless mirror into an ordinary one.
 */
export type HeadlessHosts =
  /** Their first list is not done: nothing new is sent for the Service (no flapping). */
  | { readonly kind: "pending" }
  /**
   * Not known, and not about to be: the read was refused (403/404) before any list, or
   * the slices have no endpoint at all and nothing earlier says what the Service is.
   * Sent as the ordinary mirror marked `hostsUnknown`: the writer keeps a headless
   * mirror it has, and its per-host mirrors, as they are.
   */
  | { readonly kind: "unknown" }
  /** The remote endpoints carry no hostname (pods without one): an ordinary mirror. */
  | { readonly kind: "ordinary" }
  /**
   * A headless mirror with these hosts (possibly none: a StatefulSet scaled to 0): the
   * slices' hostnames, sorted and unique, plus the hosts gone from them for less than
   * the grace period.
   */
  | { readonly kind: "listed"; readonly hostnames: readonly string[] };

/** What one list of a Service's remote slices says: its hostnames, and whether it has any endpoint. */
export interface HostsEvidence {
  /** Sorted, unique, unvalidated. */
  readonly hostnames: readonly string[];
  /** Some endpoint exists (with a hostname or without). */
  readonly endpoints: boolean;
}

/** The hostnames of a Service's remote EndpointSlices: sorted, unique, unvalidated. */
export function hostnamesOf(slices: Iterable<EndpointSlice>): string[] {
  return [...evidenceOf(slices).hostnames];
}

/**
 * What a watch of a Service's remote slices keeps of one: its key, version, hostnames,
 * and one endpoint without a hostname when it has any (what the Service is, never the
 * remote's addresses).
 */
export function keepHostnames(object: KubeObject): EndpointSlice {
  const { name, namespace, resourceVersion } = object.metadata;
  const endpoints = (object as EndpointSlice).endpoints ?? [];
  const hostnames = endpoints.flatMap((e) =>
    typeof e.hostname === "string" && e.hostname !== "" ? [{ addresses: [], hostname: e.hostname }] : [],
  );
  const without = endpoints.length > hostnames.length ? [{ addresses: [] }] : [];
  return {
    metadata: { name, ...(namespace ? { namespace } : {}), ...(resourceVersion ? { resourceVersion } : {}) },
    endpoints: [...hostnames, ...without],
  };
}

/** What a Service's remote EndpointSlices say of its hosts. */
export function evidenceOf(slices: Iterable<EndpointSlice>): HostsEvidence {
  const names = new Set<string>();
  let endpoints = false;
  for (const slice of slices) {
    for (const endpoint of slice.endpoints ?? []) {
      endpoints = true;
      const hostname = endpoint["hostname"];
      if (typeof hostname === "string" && hostname !== "") names.add(hostname);
    }
  }
  return { hostnames: [...names].sort(), endpoints };
}

/** What the slices last showed a Service to be, kept for when they show nothing (scaled to 0). */
export type HeadlessShape = "headless" | "ordinary";

/** The shape `evidence` shows; undefined when it shows none (no endpoint at all). */
export function shapeOf(evidence: HostsEvidence): HeadlessShape | undefined {
  return evidence.hostnames.length > 0 ? "headless" : evidence.endpoints ? "ordinary" : undefined;
}

/**
 * The hosts of a Service, from the last list (`evidence`, undefined before any), the
 * hosts still within their grace period (`away`), the shape seen last (`shape`) and
 * whether reads are refused (`denied`). Pure, unit tested:
 * - endpoints without any hostname: ordinary (positive knowledge, no grace);
 * - hostnames (listed or away): those hosts;
 * - no endpoint at all: headless without hosts if it was headless, ordinary if it was
 *   ordinary, unknown if nothing says (a first list of an empty Service);
 * - no list yet: unknown when refused, else pending.
 */
export function hostsAnswer(state: {
  readonly evidence: HostsEvidence | undefined;
  readonly away: Iterable<string>;
  readonly shape: HeadlessShape | undefined;
  readonly denied: boolean;
}): HeadlessHosts {
  const { evidence } = state;
  if (!evidence) return { kind: state.denied ? "unknown" : "pending" };
  if (evidence.hostnames.length === 0 && evidence.endpoints) return { kind: "ordinary" };
  const hostnames = [...new Set([...evidence.hostnames, ...state.away])].sort();
  if (hostnames.length > 0 || state.shape === "headless") return { kind: "listed", hostnames };
  return { kind: state.shape === "ordinary" ? "ordinary" : "unknown" };
}

/**
 * The hosts away from the slices after a list or a change: every host of `previous`
 * (the hosts answered before) that `current` lacks, with the time it went (kept from
 * `away`, else `now`), unless it went `graceMs` or longer ago. A host that is back is no
 * longer away. Endpoints without hostnames (an ordinary Service now) leave none away.
 */
export function hostsAway(
  previous: readonly string[],
  away: ReadonlyMap<string, number>,
  current: HostsEvidence,
  now: number,
  graceMs: number,
): Map<string, number> {
  const next = new Map<string, number>();
  if (current.hostnames.length === 0 && current.endpoints) return next;
  const present = new Set(current.hostnames);
  for (const hostname of previous) {
    if (present.has(hostname)) continue;
    const since = away.get(hostname) ?? now;
    if (now - since < graceMs) next.set(hostname, since);
  }
  return next;
}

/** When the first host of `away` leaves for good (undefined: none is away). */
export function awayUntil(away: ReadonlyMap<string, number>, graceMs: number): number | undefined {
  let first: number | undefined;
  for (const since of away.values()) if (first === undefined || since < first) first = since;
  return first === undefined ? undefined : first + graceMs;
}

export interface HeadlessOutcome {
  /** The headless mirror first, then the per-host mirrors; or the ordinary mirror alone. */
  readonly mirrors: readonly DesiredMirror[];
  /** Hostnames left out, with why (one problem of the remote Service). */
  readonly problem?: MirrorProblem;
}

/**
 * The mirrors of an exported headless Service whose ordinary mirror is `mirror`, given
 * the hostnames of its remote endpoints. A per-host mirror's FQDN annotation is
 * `<h>.<svc>.<ns>.svc.<domain>`, the remote pod's own name. `taken(h)`: why the
 * per-host name `<h>-<c>` belongs to something else of the cluster (an exported Service
 * named `h` in the namespace, whose own mirror it is; a host `h` of another headless
 * Service of the namespace that comes first), undefined when it is free: such a host is
 * left out and reported, and the other keeps the name.
 */
export function headlessMirrors(
  mirror: DesiredMirror,
  hostnames: readonly string[],
  taken: (hostname: string) => string | undefined = () => undefined,
  maxHosts: number = MAX_HEADLESS_HOSTS,
): HeadlessOutcome {
  const cap = Math.min(maxHosts, MAX_HEADLESS_HOSTS);
  const refused: string[] = [];
  const valid: string[] = [];
  for (const hostname of hostnames) {
    const invalid = validateDns1123Label(hostname);
    const service = mirrorName(hostname, mirror.cluster);
    const invalidName = invalid ? undefined : validateMirrorName(service);
    const owner = invalid || invalidName ? undefined : taken(hostname);
    const why = invalid
      ? `hostname ${JSON.stringify(hostname.slice(0, 80))} is not a DNS label: ${invalid}`
      : invalidName
        ? `per-host mirror name ${service} is not a valid Service name: ${invalidName}`
        : owner
          ? `per-host mirror name ${service} is ${owner}`
          : undefined;
    if (why) refused.push(why);
    else valid.push(hostname);
  }
  const kept = valid.slice(0, cap);
  if (valid.length > kept.length)
    refused.push(
      `${valid.length} hostnames, more than the ${cap} mirrored: ${valid.length - kept.length} left out (from ${valid[cap]} on, in name order; --max-hosts-per-headless-service)`,
    );
  const problem: MirrorProblem | undefined =
    refused.length > 0
      ? {
          cluster: mirror.cluster,
          remote: mirror.remote,
          reason: "headless-hostname-invalid",
          message: `headless Service: ${refused.length > 3 ? `${refused.slice(0, 3).join("; ")}; and ${refused.length - 3} more` : refused.join("; ")}`,
        }
      : undefined;
  // Hostnames, none of them mirrorable: the ordinary mirror, as without hostnames. No
  // hostname at all (a StatefulSet scaled to 0): the headless mirror without hosts.
  if (kept.length === 0 && hostnames.length > 0) return { mirrors: [mirror], ...(problem ? { problem } : {}) };
  const fqName = mirror.serviceAnnotations[REMOTE_SVC_FQ_NAME] ?? "";
  const hosts: HeadlessHost[] = kept.map((hostname) => ({ hostname, service: mirrorName(hostname, mirror.cluster) }));
  // Clients reach a host at its per-host Service's cluster IP on the Service's port.
  const endpointPorts: MirrorEndpointPort[] = mirror.ports.map((p) => ({
    ...(p.name ? { name: p.name } : {}),
    protocol: p.protocol,
    port: p.port,
  }));
  const headless: DesiredMirror = {
    ...mirror,
    addresses: [],
    notReadyAddresses: [],
    endpointPorts,
    headless: { hosts },
  };
  const perHost = hosts.map(
    (host): DesiredMirror => ({
      ...mirror,
      name: host.service,
      labels: { ...mirror.labels, [HEADLESS_MIRROR_LABEL]: mirror.name },
      serviceAnnotations: { ...mirror.serviceAnnotations, [REMOTE_SVC_FQ_NAME]: `${host.hostname}.${fqName}` },
      endpointsAnnotations: { ...mirror.endpointsAnnotations, [REMOTE_SVC_FQ_NAME]: `${host.hostname}.${fqName}` },
    }),
  );
  return { mirrors: [headless, ...perHost], ...(problem ? { problem } : {}) };
}

/** `mirror` (an ordinary mirror) marked as standing for a headless Service whose hosts are not known. */
export function hostsUnknown(mirror: DesiredMirror): DesiredMirror {
  return { ...mirror, hostsUnknown: true };
}

/**
 * The mirrors of exported headless Service `key` (its ordinary mirror `mirror`) given
 * what is known of its hostnames: while they are pending, `mirrors` is undefined (what
 * was sent stays) and `unknown` is what a complete set says of it; when they are not
 * known, the ordinary mirror marked `hostsUnknown`; an ordinary Service's, the ordinary
 * mirror; else `headlessMirrors`. A per-host name is taken by an exported Service of the
 * namespace named like the host (`exported`: its own mirror), or by a host of the same
 * name of another headless Service of the namespace that comes first (`hostClaimant`).
 */
export function headlessOutcome(
  key: string,
  mirror: DesiredMirror,
  hosts: HeadlessHosts,
  lookups: {
    readonly exported: (namespace: string, name: string) => boolean;
    readonly hostClaimant: (namespace: string, hostname: string) => string | undefined;
  },
  maxHosts: number = MAX_HEADLESS_HOSTS,
): {
  readonly mirrors: readonly DesiredMirror[] | undefined;
  readonly unknown?: readonly DesiredMirror[];
  readonly problem?: MirrorProblem;
} {
  if (hosts.kind === "pending") return { mirrors: undefined, unknown: [hostsUnknown(mirror)] };
  if (hosts.kind === "unknown") return { mirrors: [hostsUnknown(mirror)] };
  if (hosts.kind === "ordinary") return { mirrors: [mirror] };
  const { namespace } = mirror;
  const taken = (h: string): string | undefined => {
    if (lookups.exported(namespace, h)) return `the mirror of exported Service ${namespace}/${h}`;
    const claimant = lookups.hostClaimant(namespace, h);
    return claimant !== undefined && claimant !== key
      ? `a host of headless Service ${claimant} too, which comes first and keeps it`
      : undefined;
  };
  return headlessMirrors(mirror, hosts.hostnames, taken, maxHosts);
}

/**
 * The headless mirror `desired` with each host's address filled in from its observed
 * per-host Service (`clusterIpOf`: the cluster IP of a Service of `desired`'s cluster in
 * its namespace, undefined while it has none, or is not that cluster's mirror). A host
 * without an address is left out of the endpoints until it has one. Any other mirror is
 * returned as it is.
 */
export function resolveHeadless(
  desired: DesiredMirror,
  clusterIpOf: (service: string) => string | undefined,
): DesiredMirror {
  if (!desired.headless) return desired;
  const hosts = desired.headless.hosts.map((host): HeadlessHost => {
    const { address: _ignored, ...named } = host;
    const ip = clusterIpOf(host.service);
    return ip && ip !== "None" ? { ...named, address: ip } : named;
  });
  return { ...desired, headless: { hosts } };
}
