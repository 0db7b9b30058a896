import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1EndpointSlice, V1Service } from "@kubernetes/client-node";
import { type LocalLists, mirrorRows } from "../../sandbox/demo-mirrors.ts";
import { FEDERATED_LABEL } from "../../src/core/federated.ts";
import { HEADLESS_MIRROR_LABEL } from "../../src/core/headless.ts";
import {
  CLUSTER_NAME,
  MANAGED_BY_FLEET_MIRROR,
  MANAGED_BY_LABEL,
  MIRRORED_SERVICE,
  SERVICE_IMPORT_LABEL,
  SERVICE_NAME_LABEL,
} from "../../src/core/labels.ts";
import { derivedServiceName, MCS_SOURCE_CLUSTER_LABEL } from "../../src/core/mcs.ts";
import { STANDBY_ANNOTATION } from "../../src/core/tiers.ts";

const service = (name: string, labels: Record<string, string>, headless = false): V1Service => ({
  metadata: { namespace: "shop", name, labels: { [MIRRORED_SERVICE]: "true", ...labels } },
  spec: { ...(headless ? { clusterIP: "None" } : {}), ports: [{ port: 5432, protocol: "TCP" }] },
});

const slice = (
  service: string,
  endpoints: { ip: string; hostname?: string; ready?: boolean }[],
  labels: Record<string, string> = {},
): V1EndpointSlice => ({
  metadata: {
    namespace: "shop",
    name: `${service}-${Object.values(labels).join("-")}`,
    labels: { [SERVICE_NAME_LABEL]: service, [MANAGED_BY_LABEL]: MANAGED_BY_FLEET_MIRROR, ...labels },
  },
  addressType: "IPv4",
  endpoints: endpoints.map((e) => ({
    addresses: [e.ip],
    ...(e.hostname ? { hostname: e.hostname } : {}),
    conditions: { ready: e.ready ?? true },
  })),
  ports: [{ port: 4143 }],
});

const GW = "198.51.100.65";
const east = { [CLUSTER_NAME]: "east" };

function headlessLists(): LocalLists {
  const hosts = ["db-0", "db-1", "db-2"];
  return {
    services: [
      service("db-east", east, true),
      ...hosts.map((h) => service(`${h}-east`, { ...east, [HEADLESS_MIRROR_LABEL]: "db-east" })),
      service("web-east", east),
    ],
    endpoints: [],
    slices: [
      slice(
        "db-east",
        hosts.map((hostname, i) => ({ ip: `10.96.0.${i + 10}`, hostname })),
      ),
      ...hosts.map((h) => slice(`${h}-east`, [{ ip: GW }])),
      slice("web-east", [{ ip: GW }]),
    ],
    imports: [],
  };
}

describe("the demo's MIRROR rows", () => {
  it("shows a fleet-wide part that stands by (SPEC §14) as (standby), one that is not ready as (not ready)", () => {
    const fleet = { [FEDERATED_LABEL]: "true" };
    const part = (cluster: string, ip: string, ready: boolean, standby = false): V1EndpointSlice => {
      const s = slice("search-federated", [{ ip, ready }], { [CLUSTER_NAME]: cluster });
      return standby ? { ...s, metadata: { ...s.metadata, annotations: { [STANDBY_ANNOTATION]: "true" } } } : s;
    };
    const [row] = mirrorRows({
      services: [service("search-federated", fleet)],
      endpoints: [],
      slices: [part("east", "198.51.100.65", false, true), part("west", "198.51.100.66", false)],
      imports: [],
    });
    assert.equal(row?.cluster, "fleet");
    assert.equal(row?.endpoints, "198.51.100.65:4143 (standby),198.51.100.66:4143 (not ready)");
  });

  it("shows a headless mirror as one row naming its hosts, reached through its per-host mirrors' gateway", () => {
    const rows = mirrorRows(headlessLists());
    assert.deepEqual(
      rows.map((r) => r.key),
      ["shop/db-east", "shop/web-east"],
      "no row per host",
    );
    const db = rows[0];
    assert.deepEqual(db?.hosts, ["db-0", "db-1", "db-2"]);
    assert.deepEqual(db?.addresses, [{ address: `${GW}:4143`, ready: true }]);
    assert.equal(db?.endpoints, `hosts db-0,db-1,db-2 via ${GW}:4143`);
    assert.equal(db?.cluster, "east");
  });

  it("shows an MCS import as the ServiceImport's row (cluster mcs) with its status's clusters, not its derived Service", () => {
    const derived = derivedServiceName("shop", "orders");
    const importLabel = { [SERVICE_IMPORT_LABEL]: "orders" };
    const rows = mirrorRows({
      services: [{ ...service(derived, importLabel) }],
      endpoints: [],
      slices: [
        slice(derived, [{ ip: GW }], { ...importLabel, [MCS_SOURCE_CLUSTER_LABEL]: "east" }),
        slice(derived, [{ ip: "198.51.100.66", ready: false }], { ...importLabel, [MCS_SOURCE_CLUSTER_LABEL]: "west" }),
      ],
      imports: [
        {
          metadata: { namespace: "shop", name: "orders" },
          spec: { ports: [{ port: 8080, protocol: "TCP" }] },
          status: { clusters: [{ cluster: "east" }, { cluster: "west" }] },
        },
      ],
    });
    assert.equal(rows.length, 1, JSON.stringify(rows));
    const row = rows[0];
    assert.equal(row?.key, "shop/orders");
    assert.equal(row?.cluster, "mcs");
    assert.equal(row?.ports, "8080/TCP");
    assert.deepEqual(row?.clusters, ["east", "west"]);
    assert.equal(row?.endpoints, `[east,west] ${GW}:4143,198.51.100.66:4143 (not ready)`);
  });
});
