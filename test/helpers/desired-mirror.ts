/**
 * A desired mirror for unit tests of the pure planners: remote Service `shop/web` of
 * cluster `east` through gateway `gateway/gateway` at 198.18.0.10, port http 80 → 4143,
 * deeply frozen (a planner must never mutate its input).
 */
import type { DesiredMirror } from "../../src/core/desired.ts";
import { deepFreeze } from "./freeze.ts";

export const MIRROR_LABELS = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "gateway",
};

const FQ_NAME = "web.shop.svc.cluster.local";

export function testMirror(overrides: Partial<DesiredMirror> = {}): DesiredMirror {
  return deepFreeze({
    cluster: "east",
    namespace: "shop",
    name: "web-east",
    remote: "shop/web",
    labels: MIRROR_LABELS,
    serviceAnnotations: {
      "mirror.linkerd.io/remote-resource-version": "7",
      "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
    },
    ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
    endpointsAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME },
    addresses: ["198.18.0.10"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
    ...overrides,
  });
}
