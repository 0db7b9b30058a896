/**
 * The chaos oracle checked against hand-written SPEC §2–§5 examples, so that a green
 * chaos run means the mirrors are right, not that the oracle is blind.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { shardLabelValue } from "../../src/core/shard-label.ts";
import { shardOf } from "../../src/core/shards.ts";
import { mulberry32 } from "./draw.ts";
import { actualMirrors, diffMirrors, expectedMirrors, type RemoteCluster, type RemoteService } from "./oracle.ts";
import { Schedule } from "./schedule.ts";

const exported = (namespace: string, name: string, extra: Partial<RemoteService> = {}): RemoteService => ({
  metadata: {
    namespace,
    name,
    resourceVersion: "11",
    annotations: { "mirror.linkerd.io/gateway-name": "gateway", "mirror.linkerd.io/gateway-ns": "gateway" },
  },
  spec: { ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] },
  ...extra,
});

const gateway: RemoteService = {
  metadata: {
    namespace: "gateway",
    name: "gateway",
    resourceVersion: "7",
    annotations: { "mirror.linkerd.io/gateway-identity": "gw.east" },
  },
  spec: { ports: [{ name: "incoming-port", protocol: "TCP", port: 4143 }] },
  status: { loadBalancer: { ingress: [{ ip: "198.18.0.20" }, { ip: "198.18.0.10" }] } },
};

const east = (services: RemoteService[]): RemoteCluster => ({ name: "east", domain: "cluster.local", services });

describe("chaos oracle", () => {
  it("expects the shard label of sharded replicas, computed as the product computes it", () => {
    for (const name of ["east", "west", "north", "east3", "west4", "north1", "ünïcode-☃"]) {
      const cluster: RemoteCluster = { name, domain: "cluster.local", services: [gateway, exported("shop", "web")] };
      const labels = expectedMirrors([cluster], { shards: 6 }).get(`shop/web-${name}`)?.service?.labels;
      assert.equal(labels?.["mirror.linkerd.io/shard"], shardLabelValue(shardOf(name, 6), 6), name);
      const unsharded = expectedMirrors([cluster]).get(`shop/web-${name}`)?.service?.labels;
      assert.equal(unsharded?.["mirror.linkerd.io/shard"], undefined);
    }
  });

  it("expects a Service and filled Endpoints for an exported Service whose gateway is usable", () => {
    const expected = expectedMirrors([east([gateway, exported("shop", "web")])]);
    assert.deepEqual([...expected.keys()], ["shop/web-east"]);
    const mirror = expected.get("shop/web-east");
    assert.deepEqual(mirror?.service?.labels, {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/cluster-name": "east",
      "mirror.linkerd.io/remote-gateway-name": "gateway",
      "mirror.linkerd.io/remote-gateway-ns": "gateway",
    });
    assert.deepEqual(mirror?.service?.annotations, {
      "mirror.linkerd.io/remote-resource-version": "11",
      "mirror.linkerd.io/remote-svc-fq-name": "web.shop.svc.cluster.local",
      "mirror.linkerd.io/remote-gateway-resource-version": "7",
    });
    assert.deepEqual(mirror?.endpoints?.annotations, {
      "mirror.linkerd.io/remote-svc-fq-name": "web.shop.svc.cluster.local",
      "mirror.linkerd.io/remote-gateway-identity": "gw.east",
    });
    assert.deepEqual(mirror?.endpoints?.subsets, [
      { addresses: ["198.18.0.10", "198.18.0.20"], ports: [{ name: "http", protocol: "TCP", port: 4143 }] },
    ]);
  });

  it("expects nothing for a half-exported Service, an excluded namespace or a name held by a user", () => {
    const half = exported("shop", "half");
    const halfService: RemoteService = {
      ...half,
      metadata: { ...half.metadata, annotations: { "mirror.linkerd.io/gateway-name": "gateway" } },
    };
    const expected = expectedMirrors(
      [east([gateway, halfService, exported("kube-system", "dns"), exported("shop", "held")])],
      { userHeld: new Set(["shop/held-east"]) },
    );
    assert.deepEqual([...expected.keys()], []);
  });

  it("expects empty Endpoints when the gateway is missing, has no ingress or no incoming-port", () => {
    const noIngress: RemoteService = { ...gateway, status: {} };
    const noPort: RemoteService = { ...gateway, spec: { ports: [{ name: "other", port: 4143 }] } };
    for (const services of [
      [exported("shop", "web")],
      [noIngress, exported("shop", "web")],
      [noPort, exported("shop", "web")],
    ]) {
      const mirror = expectedMirrors([east(services)]).get("shop/web-east");
      assert.deepEqual(mirror?.endpoints?.subsets, []);
    }
  });

  it("reports every differing field, and nothing when local equals the oracle", () => {
    const expected = expectedMirrors([east([gateway, exported("shop", "web")])]);
    const labels = {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/cluster-name": "east",
      "mirror.linkerd.io/remote-gateway-name": "gateway",
      "mirror.linkerd.io/remote-gateway-ns": "gateway",
    };
    const service = {
      metadata: {
        namespace: "shop",
        name: "web-east",
        labels,
        annotations: {
          "mirror.linkerd.io/remote-resource-version": "11",
          "mirror.linkerd.io/remote-svc-fq-name": "web.shop.svc.cluster.local",
          "mirror.linkerd.io/remote-gateway-resource-version": "7",
          "user.example/kept": "x",
        },
      },
      spec: { type: "ClusterIP", ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] },
    };
    const endpoints = {
      metadata: {
        namespace: "shop",
        name: "web-east",
        labels,
        annotations: {
          "mirror.linkerd.io/remote-svc-fq-name": "web.shop.svc.cluster.local",
          "mirror.linkerd.io/remote-gateway-identity": "gw.east",
        },
      },
      subsets: [
        {
          addresses: [{ ip: "198.18.0.20" }, { ip: "198.18.0.10" }],
          ports: [{ name: "http", protocol: "TCP", port: 4143 }],
        },
      ],
    };
    assert.deepEqual(diffMirrors(expected, actualMirrors([service], [endpoints])), []);

    const stale = {
      ...endpoints,
      subsets: [{ addresses: [{ ip: "198.18.0.10" }], ports: [{ name: "http", port: 4143 }] }],
    };
    const stray = { ...service, metadata: { ...service.metadata, name: "gone-east" } };
    const diff = diffMirrors(expected, actualMirrors([service, stray], [stale]));
    assert.equal(diff.length, 2, diff.join("\n"));
    assert.match(diff[0] ?? "", /^shop\/gone-east: unexpected mirror/);
    assert.match(diff[1] ?? "", /^shop\/web-east: Endpoints subsets/);
  });

  it("generates the same schedule for the same seed", () => {
    const a = new Schedule({ seed: 42, clusters: ["east", "west"], proxies: true }).take(50);
    const b = new Schedule({ seed: 42, clusters: ["east", "west"], proxies: true }).take(50);
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, new Schedule({ seed: 43, clusters: ["east", "west"], proxies: true }).take(50));
    const random = mulberry32(1);
    assert.ok(Array.from({ length: 100 }, random).every((x) => x >= 0 && x < 1));
  });

  it("expects a probed gateway's dead addresses not ready, and an unprobed gateway's ready (SPEC §10)", () => {
    const dead = new Set(["198.18.0.20"]);
    const probed: RemoteService = {
      ...gateway,
      spec: { ports: [...(gateway.spec?.ports ?? []), { name: "mc-probe", protocol: "TCP", port: 4191 }] },
    };
    const subsets = (gw: RemoteService) =>
      expectedMirrors([east([gw, exported("shop", "web")])], { deadAddresses: dead }).get("shop/web-east")?.endpoints
        ?.subsets;
    assert.deepEqual(subsets(probed)?.[0]?.addresses, ["198.18.0.10", "notReady:198.18.0.20"]);
    assert.deepEqual(subsets(gateway)?.[0]?.addresses, ["198.18.0.10", "198.18.0.20"], "not probed: alive");
    const portZero: RemoteService = {
      ...gateway,
      spec: { ports: [...(gateway.spec?.ports ?? []), { name: "mc-probe", protocol: "TCP", port: 0 }] },
    };
    assert.deepEqual(subsets(portZero)?.[0]?.addresses, ["198.18.0.10", "198.18.0.20"], "port 0: not probed");
    // actualMirrors writes a not-ready address the same way.
    const actual = actualMirrors(
      [],
      [
        {
          metadata: { namespace: "shop", name: "web-east" },
          subsets: [{ addresses: [{ ip: "198.18.0.10" }], notReadyAddresses: [{ ip: "198.18.0.20" }] }],
        },
      ],
    );
    assert.deepEqual(actual.get("shop/web-east")?.endpoints?.subsets[0]?.addresses, subsets(probed)?.[0]?.addresses);
  });

  it("with probe addresses, draws every gateway IP from them and has addresses die and recover", () => {
    const pool = ["203.0.113.241", "203.0.113.242", "203.0.113.243"];
    const steps = new Schedule({ seed: 7, clusters: ["east", "west"], proxies: true, probeAddresses: pool }).take(300);
    const ips = steps.flatMap((s) => (s.kind === "gateway-ips" || s.kind === "gateway-create" ? s.ips : []));
    assert.ok(ips.length > 0 && ips.every((ip) => pool.includes(ip)), ips.join());
    const dead = new Set<string>();
    for (const s of steps) {
      if (s.kind === "probe-fail") {
        assert.ok(!dead.has(s.address), `${s.address} dies only while alive`);
        dead.add(s.address);
      } else if (s.kind === "probe-recover") {
        assert.ok(dead.delete(s.address), `${s.address} recovers only while dead`);
      }
    }
    assert.ok(steps.some((s) => s.kind === "probe-fail") && steps.some((s) => s.kind === "probe-recover"));
    const unprobed = new Schedule({ seed: 7, clusters: ["east", "west"], proxies: true }).take(300);
    assert.ok(!unprobed.some((s) => s.kind === "probe-fail" || s.kind === "probe-recover"));
  });
});
