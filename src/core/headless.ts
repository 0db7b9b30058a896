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
 * Without a valid hostname it is the ordinary mirror, unchanged.
 *
 * Invariants: hosts are sorted and unique; at most the cluster's `maxHeadlessHosts`
 * of them (`--max-hosts-per-headless-service`), never more than MAX_HEADLESS_HOSTS (one
 * EndpointSlice holds at most 1 000 endpoints); a hostname that is not a DNS-1123 label,
 * or whose per-host mirror name is not a Service name, is left out and reported.
 */
import type { DesiredMirror, HeadlessHost, MirrorEndpointPort, MirrorProblem } from "./desired.ts";
import { REMOTE_SVC_FQ_NAME } from "./labels.ts";
import { mirrorName, validateDns1123Label, validateMirrorName } from "./naming.ts";
import type { EndpointSlice, Service } from "./objects.ts";

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

/** What an actor knows of the remote endpoints of one exported headless Service. */
export type HeadlessHosts =
  /** Their first list is not done: nothing new is sent for the Service (no flapping). */
  | { readonly kind: "pending" }
  /** The remote denies reading EndpointSlices (reported per cluster): an ordinary mirror. */
  | { readonly kind: "denied" }
  /** Every `endpoints[].hostname` of the Service's slices, sorted and unique. */
  | { readonly kind: "listed"; readonly hostnames: readonly string[] };

/** The hostnames of a Service's remote EndpointSlices: sorted, unique, unvalidated. */
export function hostnamesOf(slices: Iterable<EndpointSlice>): string[] {
  const names = new Set<string>();
  for (const slice of slices) {
    for (const endpoint of slice.endpoints ?? []) {
      const hostname = endpoint["hostname"];
      if (typeof hostname === "string" && hostname !== "") names.add(hostname);
    }
  }
  return [...names].sort();
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
  if (kept.length === 0) return { mirrors: [mirror], ...(problem ? { problem } : {}) };
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

/**
 * The mirrors of exported headless Service `key` (its ordinary mirror `mirror`) given
 * what is known of its hostnames: undefined while they are pending (what was sent
 * stays), the ordinary mirror when reads are denied, else `headlessMirrors`. A per-host
 * name is taken by an exported Service of the namespace named like the host (`exported`:
 * its own mirror), or by a host of the same name of another headless Service of the
 * namespace that comes first (`hostClaimant`).
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
): { readonly mirrors: readonly DesiredMirror[] | undefined; readonly problem?: MirrorProblem } {
  if (hosts.kind === "pending") return { mirrors: undefined };
  if (hosts.kind !== "listed") return { mirrors: [mirror] };
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
