/**
 * The pure desired computation of one remote key (src/core/cluster-desired.ts): every
 * role (mirror, headless hosts, fleet-wide member, MCS export) from one observation,
 * each through this cluster's own view of its gateway, with "not known yet" kept apart
 * from "none".
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ClusterObservation, desiredOfService, type GatewayViews } from "../../src/core/cluster-desired.ts";
import type { ClusterSettings } from "../../src/core/desired.ts";
import type { HeadlessHosts } from "../../src/core/headless.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../../src/core/labels.ts";
import type { ServiceExport } from "../../src/core/mcs.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const SETTINGS: ClusterSettings = {
  name: "east",
  domain: "cluster.local",
  excludedNamespaces: ["kube-system"],
  defaultGateway: { name: "gateway", namespace: "gw" },
};

const gateway = (ip: string): Service => ({
  metadata: { name: "gateway", namespace: "gw", resourceVersion: "3" },
  spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143 }] },
  status: { loadBalancer: { ingress: [{ ip }] } },
});

const service = (name: string, opts: { headless?: boolean; exported?: boolean; member?: boolean } = {}): Service => ({
  metadata: {
    name,
    namespace: "shop",
    resourceVersion: "7",
    ...(opts.exported === false ? {} : { annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gw" } }),
    ...(opts.member ? { labels: { "mirror.linkerd.io/federated": "member" } } : {}),
  },
  spec: { ...(opts.headless ? { clusterIP: "None" } : {}), ports: [{ name: "http", port: 80, protocol: "TCP" }] },
});

const serviceExport = (name: string, namespace = "shop"): ServiceExport => ({
  metadata: { name, namespace, creationTimestamp: "2026-01-01T00:00:00Z" },
});

/** An observation over fixed maps, deeply frozen: the computation must never mutate what it reads. */
function observation(
  services: Service[],
  opts: {
    exports?: ServiceExport[];
    hosts?: Record<string, HeadlessHosts>;
    dead?: Record<string, string[]>;
    reads?: string[];
  } = {},
): ClusterObservation {
  const byKey = new Map(services.map((s) => [objectKey(s.metadata), deepFreeze(s)]));
  const exports = new Map((opts.exports ?? []).map((e) => [objectKey(e.metadata), deepFreeze(e)]));
  return {
    settings: SETTINGS,
    memberSelector: { key: "mirror.linkerd.io/federated", value: "member" },
    service: (key) => {
      opts.reads?.push(key);
      return byKey.get(key);
    },
    serviceExport: (key) => exports.get(key),
    lookupHostname: () => undefined,
    deadAddresses: (key) => (opts.dead?.[key] ? new Set(opts.dead[key]) : undefined),
    headlessHosts: (key) => opts.hosts?.[key] ?? { kind: "pending" },
    hostClaimant: () => undefined,
  };
}

describe("desiredOfService", () => {
  it("gives an exported Service one mirror whose endpoints are its cluster's gateway addresses", () => {
    const observed = observation([service("web"), gateway("198.18.0.1")]);
    const desired = desiredOfService(observed, "shop/web", new Map());
    assert.equal(desired.mirrors?.length, 1);
    const [mirror] = desired.mirrors ?? [];
    assert.equal(mirror?.name, "web-east");
    assert.deepEqual(mirror?.addresses, ["198.18.0.1"]);
    assert.deepEqual(mirror?.endpointPorts, [{ name: "http", protocol: "TCP", port: 4143 }]);
    assert.equal(desired.member, undefined);
    assert.equal(desired.mcs, undefined);
    assert.deepEqual(desired.problems, { exported: undefined, headless: undefined, member: undefined, mcs: undefined });
  });

  it("marks a probed gateway's dead addresses not ready in the mirror and the member alike", () => {
    const observed = observation([service("web", { member: true }), gateway("198.18.0.1")], {
      dead: { "gw/gateway": ["198.18.0.1"] },
    });
    const desired = desiredOfService(observed, "shop/web", new Map());
    assert.deepEqual(desired.mirrors?.[0]?.notReadyAddresses, ["198.18.0.1"]);
    assert.equal(desired.member?.name, "web-federated");
    assert.deepEqual(desired.member?.notReadyAddresses, ["198.18.0.1"]);
  });

  it("views a gateway once per pass however many Services share it", () => {
    const reads: string[] = [];
    const observed = observation([service("a"), service("b"), gateway("198.18.0.1")], { reads });
    const views: GatewayViews = new Map();
    desiredOfService(observed, "shop/a", views);
    desiredOfService(observed, "shop/b", views);
    assert.equal(reads.filter((k) => k === "gw/gateway").length, 1);
    assert.deepEqual([...views.keys()], ["gw/gateway"]);
  });

  it("gives a Service that is gone, or not exported, no mirror, no member and no problem", () => {
    const observed = observation([service("plain", { exported: false }), gateway("198.18.0.1")]);
    for (const key of ["shop/plain", "shop/gone"]) {
      const desired = desiredOfService(observed, key, new Map());
      assert.deepEqual(desired.mirrors, [], key);
      assert.equal(desired.member, undefined, key);
      assert.equal(desired.problems.exported, undefined, key);
    }
  });

  it("says a headless Service's mirrors are not known (undefined, not empty) until its hostnames are listed", () => {
    const observed = observation([service("db", { headless: true }), gateway("198.18.0.1")]);
    const desired = desiredOfService(observed, "shop/db", new Map());
    assert.equal(desired.mirrors, undefined);
    assert.equal("headless" in desired.problems, false, "no headless problem is decided while the hosts are unknown");
  });

  it("gives a headless Service with listed hostnames its headless mirror and one mirror per host", () => {
    const observed = observation([service("db", { headless: true }), gateway("198.18.0.1")], {
      hosts: { "shop/db": { kind: "listed", hostnames: ["db-0", "db-1"] } },
    });
    const desired = desiredOfService(observed, "shop/db", new Map());
    assert.deepEqual(desired.mirrors?.map((m) => m.name).sort(), ["db-0-east", "db-1-east", "db-east"]);
    assert.equal(desired.problems.headless, undefined);
    assert.equal("headless" in desired.problems, true);
  });

  it("gives a ServiceExport with its Service an MCS export through the cluster's default gateway", () => {
    const observed = observation([service("orders", { exported: false }), gateway("198.18.0.1")], {
      exports: [serviceExport("orders")],
    });
    const desired = desiredOfService(observed, "shop/orders", new Map());
    assert.deepEqual(desired.mirrors, [], "an MCS export alone makes no per-cluster mirror");
    assert.equal(desired.mcs?.name, "orders");
    assert.deepEqual(desired.mcs?.addresses, ["198.18.0.1"]);
    assert.equal(desired.problems.mcs, undefined);
  });

  it("reports a ServiceExport without its Service, or in an excluded namespace, as a problem of the MCS role only", () => {
    const observed = observation([gateway("198.18.0.1")], {
      exports: [serviceExport("lonely"), serviceExport("dns", "kube-system")],
    });
    const lonely = desiredOfService(observed, "shop/lonely", new Map());
    assert.equal(lonely.mcs, undefined);
    assert.equal(lonely.problems.mcs?.reason, "service-export-without-service");
    assert.equal(lonely.problems.exported, undefined);
    const excluded = desiredOfService(observed, "kube-system/dns", new Map());
    assert.equal(excluded.problems.mcs?.reason, "excluded-namespace");
  });
});
