/**
 * The `mirror.linkerd.io/*` keys: wire-compatible with linkerd2's first service
 * mirror, so existing credential Secrets and exported Services work unchanged.
 */
export const MIRROR_PREFIX = "mirror.linkerd.io/";

// Credentials Secret (SPEC §1)
export const SECRET_TYPE = "mirror.linkerd.io/remote-kubeconfig";
export const CLUSTER_NAME = "mirror.linkerd.io/cluster-name";
export const REMOTE_CLUSTER_DOMAIN = "mirror.linkerd.io/remote-cluster-domain";
export const KUBECONFIG_KEY = "kubeconfig";

// Exported remote Service and its gateway (SPEC §2)
export const GATEWAY_NAME = "mirror.linkerd.io/gateway-name";
export const GATEWAY_NS = "mirror.linkerd.io/gateway-ns";
export const GATEWAY_IDENTITY = "mirror.linkerd.io/gateway-identity";
export const GATEWAY_PORT_NAME = "incoming-port";

// Mirror labels (SPEC §3); CLUSTER_NAME above is the fourth.
export const MIRRORED_SERVICE = "mirror.linkerd.io/mirrored-service";
export const REMOTE_GATEWAY_NAME = "mirror.linkerd.io/remote-gateway-name";
export const REMOTE_GATEWAY_NS = "mirror.linkerd.io/remote-gateway-ns";

// Mirror annotations (SPEC §3)
export const REMOTE_RESOURCE_VERSION = "mirror.linkerd.io/remote-resource-version";
export const REMOTE_SVC_FQ_NAME = "mirror.linkerd.io/remote-svc-fq-name";
export const REMOTE_GATEWAY_RESOURCE_VERSION = "mirror.linkerd.io/remote-gateway-resource-version";
export const REMOTE_GATEWAY_IDENTITY = "mirror.linkerd.io/remote-gateway-identity";

/** True when `labels` mark an object as a mirror owned by `cluster` (SPEC §5). */
export function isOwnedBy(labels: Readonly<Record<string, string>> | undefined, cluster: string): boolean {
  return labels?.[MIRRORED_SERVICE] === "true" && labels[CLUSTER_NAME] === cluster;
}

/** The owning cluster of a mirror object, or undefined when fleet-mirror does not own it. */
export function ownerCluster(labels: Readonly<Record<string, string>> | undefined): string | undefined {
  if (labels?.[MIRRORED_SERVICE] !== "true") return undefined;
  const cluster = labels[CLUSTER_NAME];
  return cluster ? cluster : undefined;
}

// EndpointSlices (SPEC §9): the well-known discovery.k8s.io labels.
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";
export const MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by";
/**
 * fleet-mirror's own `managed-by` value. It differs from the built-in controllers'
 * (`endpointslice-controller.k8s.io`, `endpointslicemirroring-controller.k8s.io`), so
 * kube-controller-manager leaves fleet-mirror's slices alone, and fleet-mirror never
 * counts a slice those controllers made as its own, even one that copied the mirror
 * labels from mirror Endpoints.
 */
export const MANAGED_BY_FLEET_MIRROR = "fleet-mirror";
/** On Endpoints: the built-in EndpointSliceMirroring controller does not derive slices from them. */
export const SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror";

/**
 * On fleet-mirror's objects of an MCS import (SPEC §12): the ServiceImport, its derived
 * Service and the exporting clusters' slices; the value is the ServiceImport's name.
 * With `mirrored-service: "true"` it marks them as fleet-mirror's.
 */
export const SERVICE_IMPORT_LABEL = "mirror.linkerd.io/service-import";

/**
 * Sharded (`--shards S` > 1): the shard of the cluster a mirror object belongs to,
 * `<k>-of-<S>`; each writer watches only its own shards' (core/shard-label.ts).
 */
export const SHARD_LABEL = "mirror.linkerd.io/shard";
