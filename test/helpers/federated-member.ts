/** A remote cluster's member of the fleet-wide Service `shop/web-federated` (SPEC §11), frozen, for pure tests. */
import type { FederatedMember } from "../../src/core/federated.ts";
import { deepFreeze } from "./freeze.ts";

export function webMember(cluster: string, addresses: string[], notReady: string[] = []): FederatedMember {
  return deepFreeze({
    cluster,
    namespace: "shop",
    name: "web-federated",
    remote: "shop/web",
    ports: [{ name: "http", protocol: "TCP", port: 80 }],
    addresses,
    notReadyAddresses: notReady,
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  });
}
