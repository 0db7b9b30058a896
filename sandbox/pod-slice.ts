/**
 * The EndpointSlice the built-in endpointslice controller writes for a headless
 * Service's pods (a StatefulSet's), for remotes that run no such controller (the
 * sandbox demo, tests, benchmarks): addressType IPv4, one ready endpoint per entry of
 * `hostnames` at a made-up pod address (undefined: an endpoint without a hostname),
 * labelled `kubernetes.io/service-name`.
 */
import type { V1EndpointSlice } from "@kubernetes/client-node";
import { SERVICE_NAME_LABEL } from "../src/core/labels.ts";

export function podSlice(
  namespace: string,
  service: string,
  slice: string,
  hostnames: readonly (string | undefined)[],
  port: { readonly name: string; readonly port: number },
): V1EndpointSlice {
  return {
    metadata: {
      name: slice,
      namespace,
      labels: {
        [SERVICE_NAME_LABEL]: service,
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
      },
    },
    addressType: "IPv4",
    endpoints: hostnames.map((hostname, i) => ({
      addresses: [`10.244.${Math.floor(i / 250)}.${(i % 250) + 1}`],
      ...(hostname ? { hostname } : {}),
      conditions: { ready: true },
    })),
    ports: [{ name: port.name, port: port.port, protocol: "TCP" }],
  };
}
