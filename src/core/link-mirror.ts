/**
 * The mirror of a remote Service of a Link-registered cluster, in the shape linkerd's
 * current service mirror writes it (SPEC §15), so that a converged linkerd installation
 * is taken over without a write. Pure.
 *
 * linkerd's rules, kept exactly:
 * - labels: every label of the remote Service but those whose key begins with
 *   `mirror.linkerd.io` and the Link's excluded labels, plus `mirrored-service: "true"`
 *   and `cluster-name`; a remote-discovery mirror also
 *   `multicluster.linkerd.io/remote-discovery: <cluster>` and
 *   `multicluster.linkerd.io/remote-service: <name>`. No gateway labels: the Link names
 *   one gateway.
 * - Service annotations: every annotation of the remote Service but the Link's excluded
 *   annotations and the topology hints (not multicluster-aware), plus
 *   `remote-svc-fq-name` and `remote-resource-version`. They are the mirror's whole
 *   set (`serviceAnnotationsExact`), but for kubectl's last-applied configuration,
 *   which fleet-mirror never copies (its actors do not even keep it) and leaves as found.
 * - Endpoints annotations: `remote-svc-fq-name` and `remote-gateway-identity` (the
 *   Link's, also when empty: linkerd's endpoint repair always sets it).
 * - An excluded key `<prefix>/*` excludes every key that begins with `<prefix>`, as
 *   linkerd matches it (`example.com/*` also excludes `example.community/x`).
 */

import { selects } from "./label-selector.ts";
import {
  CLUSTER_NAME,
  MIRRORED_SERVICE,
  REMOTE_GATEWAY_IDENTITY,
  REMOTE_RESOURCE_VERSION,
  REMOTE_SVC_FQ_NAME,
} from "./labels.ts";
import type { LinkSettings } from "./link.ts";
import type { Service } from "./objects.ts";

/** linkerd's label prefix (no slash: its own rule drops any key that begins so). */
const LINKERD_MIRROR_PREFIX = "mirror.linkerd.io";
/** On a remote-discovery mirror: the cluster, and the remote Service's name. */
export const REMOTE_DISCOVERY_LABEL = "multicluster.linkerd.io/remote-discovery";
export const REMOTE_SERVICE_LABEL = "multicluster.linkerd.io/remote-service";
/** Topology hints name zones of the remote cluster: never copied. */
const TOPOLOGY_ANNOTATIONS: ReadonlySet<string> = new Set([
  "service.kubernetes.io/topology-aware-hints",
  "service.kubernetes.io/topology-mode",
]);
/** kubectl's copy of an applied object: never copied, never compared, kept as found. */
export const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** Whether `key` is excluded by `patterns` (literal keys, or `<prefix>/*`). */
export function excludedKey(key: string, patterns: readonly string[]): boolean {
  for (const pattern of patterns) {
    if (pattern.endsWith("/*") ? key.startsWith(pattern.slice(0, -2)) : key === pattern) return true;
  }
  return false;
}

export interface LinkMirrorShape {
  readonly labels: Readonly<Record<string, string>>;
  readonly serviceAnnotations: Readonly<Record<string, string>>;
  readonly endpointsAnnotations: Readonly<Record<string, string>>;
  /** A remote-discovery mirror: its Service alone, no Endpoints or slices. */
  readonly serviceOnly: boolean;
}

/** The labels, annotations and kind of the mirror of `service` of the Link's cluster `cluster`. */
export function linkMirrorShape(
  link: LinkSettings,
  cluster: string,
  service: Service,
  fqName: string,
): LinkMirrorShape {
  const remoteDiscovery = selects(link.remoteDiscoverySelector, service.metadata.labels);
  const labels: Record<string, string> = { [MIRRORED_SERVICE]: "true" };
  for (const [key, value] of Object.entries(service.metadata.labels ?? {})) {
    if (key.startsWith(LINKERD_MIRROR_PREFIX) || excludedKey(key, link.excludedLabels)) continue;
    labels[key] = value;
  }
  labels[CLUSTER_NAME] = cluster;
  if (remoteDiscovery) {
    labels[REMOTE_DISCOVERY_LABEL] = cluster;
    labels[REMOTE_SERVICE_LABEL] = service.metadata.name;
  }
  const serviceAnnotations: Record<string, string> = {};
  for (const [key, value] of Object.entries(service.metadata.annotations ?? {})) {
    if (key === LAST_APPLIED || TOPOLOGY_ANNOTATIONS.has(key) || excludedKey(key, link.excludedAnnotations)) continue;
    serviceAnnotations[key] = value;
  }
  serviceAnnotations[REMOTE_SVC_FQ_NAME] = fqName;
  serviceAnnotations[REMOTE_RESOURCE_VERSION] = service.metadata.resourceVersion ?? "";
  return {
    labels,
    serviceAnnotations,
    endpointsAnnotations: { [REMOTE_SVC_FQ_NAME]: fqName, [REMOTE_GATEWAY_IDENTITY]: link.gateway.identity },
    serviceOnly: remoteDiscovery,
  };
}
