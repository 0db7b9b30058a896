/**
 * Headless Services for tests (SPEC §12). The sandbox runs no kubelet and no remote
 * controller manager, so a test writes a remote headless Service's EndpointSlices
 * itself, as the built-in endpointslice controller would for a StatefulSet's pods
 * (addressType IPv4, endpoints with `hostname`, label `kubernetes.io/service-name`).
 * On the local side, a headless mirror's addresses are read as `hostname=ip` pairs
 * from its Endpoints or from fleet-mirror's slices.
 */
import { DiscoveryV1Api } from "@kubernetes/client-node";
import { podSlice } from "../../sandbox/pod-slice.ts";
import { GATEWAY_NAME, GATEWAY_NS, SERVICE_NAME_LABEL } from "../../src/core/labels.ts";
import type { EndpointsApi } from "../../src/core/mirror-kinds.ts";
import type { Fleet } from "./fleet.ts";
import { statusCode } from "./kube.ts";

/** A headless Service (`clusterIP: None`) in `cluster`, exported through `gateway/gateway` (SPEC §2). */
export async function createHeadless(
  fleet: Fleet,
  cluster: string,
  namespace: string,
  name: string,
  opts: { headless?: boolean } = {},
): Promise<void> {
  await fleet.ensureNamespace(cluster, namespace);
  await fleet.api(cluster).createNamespacedService({
    namespace,
    body: {
      metadata: { name, annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gateway" } },
      spec: {
        ...(opts.headless === false ? {} : { clusterIP: "None" }),
        ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
        selector: { app: name },
      },
    },
  });
}

/**
 * Sets remote slice `slice` of Service `service` to one endpoint per entry of
 * `hostnames` (undefined: an endpoint without a hostname), creating it when missing.
 */
export async function setSlice(
  fleet: Fleet,
  cluster: string,
  namespace: string,
  service: string,
  slice: string,
  hostnames: readonly (string | undefined)[],
): Promise<void> {
  const api = fleet.kubeConfig(cluster).makeApiClient(DiscoveryV1Api);
  const body = podSlice(namespace, service, slice, hostnames, { name: "http", port: 8080 });
  try {
    const current = await api.readNamespacedEndpointSlice({ namespace, name: slice });
    body.metadata = { ...body.metadata, resourceVersion: current.metadata?.resourceVersion ?? "" };
    await api.replaceNamespacedEndpointSlice({ namespace, name: slice, body });
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
    await api.createNamespacedEndpointSlice({ namespace, body });
  }
}

/**
 * The addresses of local mirror `name` as `hostname=ip` (`ip` alone without a hostname),
 * sorted: from its Endpoints in `endpoints` mode, from fleet-mirror's slices otherwise.
 */
export async function localAddresses(
  fleet: Fleet,
  mode: EndpointsApi,
  namespace: string,
  name: string,
): Promise<string[]> {
  const pair = (ip: string, hostname: string | undefined): string => (hostname ? `${hostname}=${ip}` : ip);
  if (mode === "endpoints") {
    try {
      const ep = await fleet.local.readNamespacedEndpoints({ namespace, name });
      return (ep.subsets ?? []).flatMap((s) => (s.addresses ?? []).map((a) => pair(a.ip, a.hostname))).sort();
    } catch (error) {
      if (statusCode(error) === 404) return [];
      throw error;
    }
  }
  const slices = await fleet
    .kubeConfig("local")
    .makeApiClient(DiscoveryV1Api)
    .listNamespacedEndpointSlice({
      namespace,
      labelSelector: `${SERVICE_NAME_LABEL}=${name},endpointslice.kubernetes.io/managed-by=fleet-mirror`,
    });
  return slices.items
    .flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses.map((ip) => pair(ip, e.hostname))))
    .sort();
}
