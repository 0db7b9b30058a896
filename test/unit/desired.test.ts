import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type ClusterSettings,
  type DesiredMirror,
  type DesiredState,
  desiredMirrorFor,
  desiredMirrors,
  type HostnameLookup,
  ingressHostnames,
  viewGateway,
} from "../../src/core/desired.ts";
import { exportedGateway } from "../../src/core/export.ts";
import type { LoadBalancerIngress, Service, ServicePort } from "../../src/core/objects.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const east: ClusterSettings = deepFreeze({
  name: "east",
  domain: "cluster.local",
  excludedNamespaces: ["kube-system", "kube-public", "kube-node-lease"],
  defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
  exportSelector: { key: "mirror.linkerd.io/exported", value: "true" },
});

interface ServiceOptions {
  readonly name?: string;
  readonly namespace?: string;
  readonly resourceVersion?: string;
  readonly annotations?: Record<string, string>;
  readonly ports?: readonly ServicePort[] | undefined;
}

/** An exported remote Service (both gateway annotations), frozen. */
function remoteService(options: ServiceOptions = {}): Service {
  return deepFreeze({
    metadata: {
      name: options.name ?? "web",
      namespace: options.namespace ?? "shop",
      resourceVersion: options.resourceVersion ?? "1234",
      uid: "uid-web",
      annotations: options.annotations ?? {
        "mirror.linkerd.io/gateway-name": "gateway",
        "mirror.linkerd.io/gateway-ns": "mirror",
      },
    },
    spec: {
      type: "ClusterIP",
      clusterIP: "10.96.0.10",
      selector: { app: "web" },
      ...(options.ports === undefined && "ports" in options
        ? {}
        : { ports: options.ports ?? [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] }),
    },
  });
}

interface GatewayOptions {
  readonly name?: string;
  readonly namespace?: string;
  readonly resourceVersion?: string;
  readonly identity?: string;
  readonly ingress?: readonly LoadBalancerIngress[];
  readonly ports?: readonly ServicePort[];
}

/** A usable gateway Service (ingress IP + `incoming-port` 4143), frozen. */
function gatewayService(options: GatewayOptions = {}): Service {
  return deepFreeze({
    metadata: {
      name: options.name ?? "gateway",
      namespace: options.namespace ?? "mirror",
      resourceVersion: options.resourceVersion ?? "77",
      annotations:
        options.identity === undefined
          ? {}
          : { "mirror.linkerd.io/gateway-identity": options.identity, "other/annotation": "x" },
    },
    spec: {
      type: "LoadBalancer",
      ports: options.ports ?? [
        { name: "mc-probe", protocol: "TCP", port: 4191 },
        { name: "incoming-port", protocol: "TCP", port: 4143, nodePort: 31000 },
      ],
    },
    status: { loadBalancer: { ingress: options.ingress ?? [{ ip: "198.18.0.10" }] } },
  });
}

const noLookup: HostnameLookup = () => undefined;

/** The desired state of `east` given remote Services (gateways included) and a DNS lookup. */
function desire(services: readonly Service[], lookup: HostnameLookup = noLookup): DesiredState {
  const byKey = new Map(services.map((s) => [`${s.metadata.namespace}/${s.metadata.name}`, s]));
  return desiredMirrors(east, services, (key) => byKey.get(key), lookup);
}

/** The single mirror of a desired state (fails when there is not exactly one). */
function onlyMirror(state: DesiredState): DesiredMirror {
  assert.equal(state.problems.length, 0, JSON.stringify(state.problems));
  assert.equal(state.mirrors.size, 1);
  const [mirror] = state.mirrors.values();
  assert.ok(mirror);
  return mirror;
}

const LABELS = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "mirror",
};
const FQ_NAME = "web.shop.svc.cluster.local";

describe("exportedGateway", () => {
  it("names the gateway when the Service carries both gateway annotations", () => {
    assert.deepEqual(exportedGateway(remoteService()), { name: "gateway", namespace: "mirror" });
  });

  it("says not exported when either annotation is missing or empty", () => {
    for (const annotations of [
      {},
      { "mirror.linkerd.io/gateway-name": "gateway" },
      { "mirror.linkerd.io/gateway-ns": "mirror" },
      { "mirror.linkerd.io/gateway-name": "", "mirror.linkerd.io/gateway-ns": "mirror" },
      { "mirror.linkerd.io/gateway-name": "gateway", "mirror.linkerd.io/gateway-ns": "" },
    ]) {
      assert.equal(exportedGateway(remoteService({ annotations })), undefined, JSON.stringify(annotations));
    }
  });
});

describe("desiredMirrors", () => {
  it("mirrors an exported Service as <svc>-<cluster> in the same namespace, with exactly the specified metadata", () => {
    const state = desire([remoteService(), gatewayService({ identity: "gateway.mirror.serviceaccount.identity" })]);
    assert.deepEqual([...state.mirrors.keys()], ["shop/web-east"]);
    assert.deepEqual(onlyMirror(state), {
      cluster: "east",
      namespace: "shop",
      name: "web-east",
      remote: "shop/web",
      labels: LABELS,
      serviceAnnotations: {
        "mirror.linkerd.io/remote-resource-version": "1234",
        "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
        "mirror.linkerd.io/remote-gateway-resource-version": "77",
      },
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
      endpointsAnnotations: {
        "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
        "mirror.linkerd.io/remote-gateway-identity": "gateway.mirror.serviceaccount.identity",
      },
      addresses: ["198.18.0.10"],
      notReadyAddresses: [],
      endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
    });
  });

  it("does not mirror a Service with only one of the two gateway annotations, nor report it", () => {
    const state = desire([
      remoteService({ name: "a", annotations: { "mirror.linkerd.io/gateway-name": "gateway" } }),
      remoteService({ name: "b", annotations: { "mirror.linkerd.io/gateway-ns": "mirror" } }),
      remoteService({ name: "c", annotations: {} }),
      gatewayService(),
    ]);
    assert.equal(state.mirrors.size, 0);
    assert.deepEqual(state.problems, []);
  });

  it("labels the mirror with exactly the four mirror labels, taken from the Service's own gateway annotations", () => {
    const mirror = onlyMirror(
      desire([
        remoteService({
          annotations: {
            "mirror.linkerd.io/gateway-name": "gw-2",
            "mirror.linkerd.io/gateway-ns": "edge",
            "unrelated/annotation": "ignored",
          },
        }),
        gatewayService({ name: "gw-2", namespace: "edge" }),
      ]),
    );
    assert.deepEqual(mirror.labels, {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/cluster-name": "east",
      "mirror.linkerd.io/remote-gateway-name": "gw-2",
      "mirror.linkerd.io/remote-gateway-ns": "edge",
    });
    assert.deepEqual(mirror.addresses, ["198.18.0.10"]);
  });

  it("builds the fully qualified remote name from the Service, its namespace and the cluster domain", () => {
    const state = desiredMirrors(
      { ...east, domain: "east.example" },
      [remoteService({ name: "api", namespace: "billing" })],
      () => undefined,
      noLookup,
    );
    const mirror = onlyMirror(state);
    assert.equal(mirror.serviceAnnotations["mirror.linkerd.io/remote-svc-fq-name"], "api.billing.svc.east.example");
    assert.equal(mirror.endpointsAnnotations["mirror.linkerd.io/remote-svc-fq-name"], "api.billing.svc.east.example");
  });

  it("carries only name, protocol, port and targetPort of each port, defaulting the protocol to TCP", () => {
    const mirror = onlyMirror(
      desire([
        remoteService({
          ports: [
            { name: "http", protocol: "TCP", port: 80, targetPort: "web", nodePort: 30080, appProtocol: "http" },
            { name: "dns", protocol: "UDP", port: 53, targetPort: 5353, nodePort: 30053 },
            { port: 9000, extra: { nested: true } },
          ],
        }),
        gatewayService(),
      ]),
    );
    assert.deepEqual(mirror.ports, [
      { name: "http", protocol: "TCP", port: 80, targetPort: "web" },
      { name: "dns", protocol: "UDP", port: 53, targetPort: 5353 },
      { protocol: "TCP", port: 9000 },
    ]);
  });

  it("gives the Endpoints one port per Service port, same name and protocol, numbered as the gateway's incoming-port", () => {
    const mirror = onlyMirror(
      desire([
        remoteService({
          ports: [
            { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
            { name: "dns", protocol: "UDP", port: 53 },
            { port: 9000 },
          ],
        }),
        gatewayService({ ports: [{ name: "incoming-port", port: 4243 }] }),
      ]),
    );
    assert.deepEqual(mirror.endpointPorts, [
      { name: "http", protocol: "TCP", port: 4243 },
      { name: "dns", protocol: "UDP", port: 4243 },
      { protocol: "TCP", port: 4243 },
    ]);
  });

  it("uses the gateway's ingress IPs as addresses, sorted and without duplicates, whatever their order", () => {
    const ips = ["198.18.0.30", "198.18.0.10", "198.18.0.20", "198.18.0.10"];
    const expected = ["198.18.0.10", "198.18.0.20", "198.18.0.30"];
    for (const order of [ips, [...ips].reverse()]) {
      const mirror = onlyMirror(desire([remoteService(), gatewayService({ ingress: order.map((ip) => ({ ip })) })]));
      assert.deepEqual(mirror.addresses, expected);
    }
  });

  it("resolves a hostname ingress through the lookup, uses all its IPs sorted, and never copies the hostname", () => {
    const asked: string[] = [];
    const lookup: HostnameLookup = (hostname) => {
      asked.push(hostname);
      return hostname === "gw.example.com" ? deepFreeze(["198.51.100.7", "198.51.100.3", "198.51.100.5"]) : undefined;
    };
    const mirror = onlyMirror(
      desire([remoteService(), gatewayService({ ingress: [{ hostname: "gw.example.com" }] })], lookup),
    );
    assert.deepEqual(asked, ["gw.example.com"]);
    assert.deepEqual(mirror.addresses, ["198.51.100.3", "198.51.100.5", "198.51.100.7"]);
    assert.deepEqual(mirror.endpointPorts, [{ name: "http", protocol: "TCP", port: 4143 }]);
  });

  it("merges resolved hostname IPs with plain ingress IPs, sorted and de-duplicated", () => {
    const lookup: HostnameLookup = () => ["198.18.0.20", "198.18.0.10"];
    const mirror = onlyMirror(
      desire(
        [
          remoteService(),
          gatewayService({ ingress: [{ ip: "198.18.0.30" }, { hostname: "gw.example.com" }, { ip: "198.18.0.10" }] }),
        ],
        lookup,
      ),
    );
    assert.deepEqual(mirror.addresses, ["198.18.0.10", "198.18.0.20", "198.18.0.30"]);
  });

  it("prefers the IP of an ingress entry that has both an IP and a hostname, without a lookup", () => {
    const lookup: HostnameLookup = () => assert.fail("no lookup expected");
    const mirror = onlyMirror(
      desire(
        [remoteService(), gatewayService({ ingress: [{ ip: "198.18.0.10", hostname: "gw.example.com" }] })],
        lookup,
      ),
    );
    assert.deepEqual(mirror.addresses, ["198.18.0.10"]);
  });

  it("leaves out a hostname that does not resolve while other ingress entries do", () => {
    const lookup: HostnameLookup = (hostname) => (hostname === "ok.example.com" ? ["198.51.100.1"] : undefined);
    const mirror = onlyMirror(
      desire(
        [
          remoteService(),
          gatewayService({ ingress: [{ hostname: "dead.example.com" }, { hostname: "ok.example.com" }] }),
        ],
        lookup,
      ),
    );
    assert.deepEqual(mirror.addresses, ["198.51.100.1"]);
  });

  describe("when the gateway is not usable, the mirror is still desired but its Endpoints have no addresses", () => {
    const unusable: [string, readonly Service[], HostnameLookup][] = [
      ["gateway Service missing", [remoteService()], noLookup],
      ["gateway has no ingress yet", [remoteService(), gatewayService({ ingress: [] })], noLookup],
      [
        "gateway has no incoming-port",
        [remoteService(), gatewayService({ ports: [{ name: "mc-gateway", port: 4143 }] })],
        noLookup,
      ],
      [
        "gateway hostname does not resolve",
        [remoteService(), gatewayService({ ingress: [{ hostname: "gw.example.com" }] })],
        noLookup,
      ],
      [
        "gateway hostname resolves to nothing",
        [remoteService(), gatewayService({ ingress: [{ hostname: "gw.example.com" }] })],
        () => [],
      ],
    ];
    for (const [situation, services, lookup] of unusable) {
      it(`${situation}: mirror desired, no addresses, no endpoint ports, no hostname as address`, () => {
        const mirror = onlyMirror(desire(services, lookup));
        assert.equal(mirror.name, "web-east");
        assert.deepEqual(mirror.labels, LABELS);
        assert.deepEqual(mirror.ports, [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }]);
        assert.deepEqual(mirror.addresses, []);
        assert.deepEqual(mirror.endpointPorts, []);
      });
    }
  });

  it("sets remote-gateway-resource-version only while the gateway Service exists", () => {
    const withGateway = onlyMirror(desire([remoteService(), gatewayService({ resourceVersion: "91", ingress: [] })]));
    assert.equal(withGateway.serviceAnnotations["mirror.linkerd.io/remote-gateway-resource-version"], "91");

    const withoutGateway = onlyMirror(desire([remoteService()]));
    assert.deepEqual(withoutGateway.serviceAnnotations, {
      "mirror.linkerd.io/remote-resource-version": "1234",
      "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
    });
    assert.deepEqual(withoutGateway.endpointsAnnotations, { "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME });
  });

  it("puts the gateway identity on the Endpoints only, and only when it is non-empty", () => {
    const withIdentity = onlyMirror(desire([remoteService(), gatewayService({ identity: "id.example" })]));
    assert.equal(withIdentity.endpointsAnnotations["mirror.linkerd.io/remote-gateway-identity"], "id.example");
    assert.equal("mirror.linkerd.io/remote-gateway-identity" in withIdentity.serviceAnnotations, false);

    for (const identity of ["", undefined]) {
      const mirror = onlyMirror(desire([remoteService(), gatewayService(identity === undefined ? {} : { identity })]));
      assert.deepEqual(mirror.endpointsAnnotations, { "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME });
    }
  });

  it("keeps the identity of an existing but unusable gateway", () => {
    const mirror = onlyMirror(desire([remoteService(), gatewayService({ identity: "id.example", ingress: [] })]));
    assert.equal(mirror.endpointsAnnotations["mirror.linkerd.io/remote-gateway-identity"], "id.example");
    assert.deepEqual(mirror.addresses, []);
  });

  it("reports a mirror name longer than 63 characters as a problem instead of a mirror", () => {
    const longest = "a".repeat(63 - "-east".length);
    const tooLong = `${longest}b`;
    const state = desire([remoteService({ name: longest }), remoteService({ name: tooLong }), gatewayService()]);
    assert.deepEqual([...state.mirrors.keys()], [`shop/${longest}-east`]);
    assert.equal(state.problems.length, 1);
    assert.equal(state.problems[0]?.reason, "mirror-name-invalid");
    assert.equal(state.problems[0]?.cluster, "east");
    assert.equal(state.problems[0]?.remote, `shop/${tooLong}`);
    assert.match(state.problems[0]?.message ?? "", /63/);
  });

  it("reports a Service without ports as a problem instead of a mirror", () => {
    for (const ports of [[], undefined]) {
      const state = desire([remoteService({ ports }), gatewayService()]);
      assert.equal(state.mirrors.size, 0);
      assert.deepEqual(
        state.problems.map((p) => [p.reason, p.remote]),
        [["no-ports", "shop/web"]],
      );
    }
  });

  it("reports a Service in an excluded namespace as a problem and never mirrors it", () => {
    const state = desire([
      remoteService({ namespace: "kube-system" }),
      remoteService({ namespace: "kube-public" }),
      remoteService({ namespace: "shop" }),
      gatewayService(),
    ]);
    assert.deepEqual([...state.mirrors.keys()], ["shop/web-east"]);
    assert.deepEqual(
      state.problems.map((p) => [p.reason, p.remote]),
      [
        ["excluded-namespace", "kube-system/web"],
        ["excluded-namespace", "kube-public/web"],
      ],
    );
  });

  it("lets a problem with one Service leave the other mirrors untouched", () => {
    const state = desire([
      remoteService({ name: "ok-1" }),
      remoteService({ name: "empty", ports: [] }),
      remoteService({ name: "ok-2" }),
      gatewayService(),
    ]);
    assert.deepEqual([...state.mirrors.keys()].sort(), ["shop/ok-1-east", "shop/ok-2-east"]);
    assert.equal(state.problems.length, 1);
  });

  it("looks each gateway up only through the given cluster's getService, by namespace/name", () => {
    const asked: string[] = [];
    const eastGateway = gatewayService({ ingress: [{ ip: "198.18.0.1" }] });
    const state = desiredMirrors(
      east,
      [remoteService({ name: "a" }), remoteService({ name: "b" })],
      (key) => {
        asked.push(key);
        return key === "mirror/gateway" ? eastGateway : undefined;
      },
      noLookup,
    );
    assert.ok(asked.length >= 1 && asked.every((key) => key === "mirror/gateway"), JSON.stringify(asked));
    assert.deepEqual(
      [...state.mirrors.values()].map((m) => m.addresses),
      [["198.18.0.1"], ["198.18.0.1"]],
    );
  });

  it("never uses another cluster's same-named gateway", () => {
    const west: ClusterSettings = { ...east, name: "west" };
    const eastServices = [remoteService(), gatewayService({ ingress: [{ ip: "198.18.0.1" }], resourceVersion: "1" })];
    const westServices = [remoteService(), gatewayService({ ingress: [{ ip: "203.0.113.9" }], resourceVersion: "2" })];
    const getter = (services: readonly Service[]) => (key: string) =>
      services.find((s) => `${s.metadata.namespace}/${s.metadata.name}` === key);
    const eastMirror = onlyMirror(desiredMirrors(east, eastServices, getter(eastServices), noLookup));
    const westMirror = onlyMirror(desiredMirrors(west, westServices, getter(westServices), noLookup));
    assert.deepEqual(eastMirror.addresses, ["198.18.0.1"]);
    assert.equal(eastMirror.name, "web-east");
    assert.deepEqual(westMirror.addresses, ["203.0.113.9"]);
    assert.equal(westMirror.name, "web-west");
    assert.equal(westMirror.labels["mirror.linkerd.io/cluster-name"], "west");
    assert.equal(westMirror.serviceAnnotations["mirror.linkerd.io/remote-gateway-resource-version"], "2");
  });

  it("fills the Endpoints as soon as the gateway becomes usable, whatever came before", () => {
    const service = remoteService();
    const before = onlyMirror(desire([service, gatewayService({ ingress: [] })]));
    assert.deepEqual(before.addresses, []);
    const after = onlyMirror(desire([service, gatewayService({ ingress: [{ ip: "198.18.0.10" }] })]));
    assert.deepEqual(after.addresses, ["198.18.0.10"]);
    assert.deepEqual(after.endpointPorts, [{ name: "http", protocol: "TCP", port: 4143 }]);
  });

  it("mutates none of its inputs and returns plain, cloneable data", () => {
    const services = deepFreeze([
      remoteService({
        ports: [
          { name: "http", port: 80, nodePort: 30080 },
          { name: "grpc", protocol: "TCP", port: 90 },
        ],
      }),
      gatewayService({
        identity: "id",
        ingress: [{ ip: "198.18.0.9" }, { hostname: "gw.example.com" }, { ip: "198.18.0.1" }],
      }),
    ]);
    const snapshot = structuredClone(services);
    const resolved = deepFreeze(["198.51.100.9", "198.51.100.1"]);
    const state = desire(services, () => resolved);
    assert.deepEqual(services, snapshot);
    assert.deepEqual(resolved, ["198.51.100.9", "198.51.100.1"]);
    const mirror = onlyMirror(state);
    assert.deepEqual(structuredClone(mirror), mirror);
  });
});

describe("desiredMirrorFor", () => {
  it("says not-exported for a Service without both gateway annotations", () => {
    const view = viewGateway(gatewayService(), noLookup);
    assert.deepEqual(desiredMirrorFor(east, remoteService({ annotations: {} }), view), { kind: "not-exported" });
  });
});

describe("viewGateway", () => {
  it("describes a usable gateway: exists, its resourceVersion, identity, sorted IPs and incoming-port", () => {
    assert.deepEqual(
      viewGateway(gatewayService({ identity: "id", ingress: [{ ip: "198.18.0.2" }, { ip: "198.18.0.1" }] }), noLookup),
      {
        exists: true,
        resourceVersion: "77",
        identity: "id",
        addresses: ["198.18.0.1", "198.18.0.2"],
        incomingPort: 4143,
      },
    );
  });

  it("says why a gateway is unusable", () => {
    assert.match(viewGateway(undefined, noLookup).unusable ?? "", /not found/);
    assert.match(viewGateway(gatewayService({ ingress: [] }), noLookup).unusable ?? "", /no ingress/);
    assert.match(viewGateway(gatewayService({ ports: [] }), noLookup).unusable ?? "", /incoming-port/);
    assert.match(
      viewGateway(gatewayService({ ingress: [{ hostname: "gw.example.com" }] }), noLookup).unusable ?? "",
      /gw\.example\.com/,
    );
  });
});

describe("ingressHostnames", () => {
  it("lists each hostname that has no IP, once, sorted", () => {
    const gateway = gatewayService({
      ingress: [
        { hostname: "b.example" },
        { ip: "198.18.0.1", hostname: "has-ip.example" },
        { hostname: "a.example" },
        { hostname: "b.example" },
      ],
    });
    assert.deepEqual(ingressHostnames(gateway), ["a.example", "b.example"]);
  });
});
