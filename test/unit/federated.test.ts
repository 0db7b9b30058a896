import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ClusterSettings, GatewayView } from "../../src/core/desired.ts";
import {
  desiredMemberFor,
  type FederatedMember,
  memberGateway,
  type ReduceInput,
  reduceFederated,
  summarizeReduction,
} from "../../src/core/federated.ts";
import { parseLabelRequirement } from "../../src/core/label-requirement.ts";
import type { Service } from "../../src/core/objects.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const east: ClusterSettings = deepFreeze({
  name: "east",
  domain: "cluster.local",
  excludedNamespaces: ["kube-system"],
  defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
  exportSelector: { key: "mirror.linkerd.io/exported", value: "true" },
});
const selector = deepFreeze({ key: "mirror.linkerd.io/federated", value: "member" });

function remoteService(labels: Record<string, string>, extra: Partial<Service> = {}): Service {
  return deepFreeze({
    metadata: { name: "web", namespace: "shop", labels },
    spec: { ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] },
    ...extra,
  });
}

const gateway: GatewayView = deepFreeze({
  exists: true,
  identity: "gw.east",
  addresses: ["203.0.113.1", "203.0.113.2"],
  notReadyAddresses: ["203.0.113.2"],
  incomingPort: 4143,
});

function member(cluster: string, ports = [{ name: "http", protocol: "TCP", port: 80 }]): FederatedMember {
  return deepFreeze({
    cluster,
    namespace: "shop",
    name: "web-federated",
    remote: "shop/web",
    ports,
    addresses: [`203.0.113.${cluster.length}`],
    notReadyAddresses: [],
    endpointPorts: ports.map((p) => ({ name: p.name, protocol: p.protocol, port: 4143 })),
  });
}

function input(members: FederatedMember[], options: Partial<ReduceInput> = {}): ReduceInput {
  return {
    members: new Map(members.map((m) => [m.cluster, m])),
    order: ["east", "west", "north"],
    unknown: new Set(),
    registrationKnown: true,
    observedClusters: [],
    ...options,
  };
}

describe("label requirement (member and export selectors)", () => {
  it("parses key=value and key==value", () => {
    assert.deepEqual(parseLabelRequirement("mirror.linkerd.io/federated=member"), {
      key: "mirror.linkerd.io/federated",
      value: "member",
    });
    assert.deepEqual(parseLabelRequirement("fleet==yes"), { key: "fleet", value: "yes" });
  });

  it("rejects set-based forms, two requirements and invalid keys or values with a reason", () => {
    for (const bad of ["", "fleet", "fleet!=no", "fleet in (a)", "a=b,c=d", "-bad=x", "fleet=no way", "x=y=z"]) {
      assert.equal(typeof parseLabelRequirement(bad), "string", bad);
    }
  });
});

describe("desiredMemberFor", () => {
  it("a Service with the member label contributes its own gateway's addresses, dead ones not ready", () => {
    const outcome = desiredMemberFor(
      east,
      selector,
      remoteService({ "mirror.linkerd.io/federated": "member" }),
      gateway,
    );
    assert.equal(outcome.kind, "member");
    assert.deepEqual(outcome.kind === "member" ? outcome.member : undefined, {
      cluster: "east",
      namespace: "shop",
      name: "web-federated",
      remote: "shop/web",
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
      addresses: ["203.0.113.1", "203.0.113.2"],
      notReadyAddresses: ["203.0.113.2"],
      endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
      identity: "gw.east",
    });
  });

  it("a Service without the label, or with another value, is not a member", () => {
    assert.equal(desiredMemberFor(east, selector, remoteService({}), gateway).kind, "not-member");
    assert.equal(
      desiredMemberFor(east, selector, remoteService({ "mirror.linkerd.io/federated": "no" }), gateway).kind,
      "not-member",
    );
  });

  it("an unusable gateway gives a member without addresses", () => {
    const outcome = desiredMemberFor(
      east,
      selector,
      remoteService({ "mirror.linkerd.io/federated": "member" }),
      deepFreeze({ exists: false, addresses: [], unusable: "gateway Service not found" }),
    );
    assert.ok(outcome.kind === "member");
    assert.deepEqual([outcome.member.addresses, outcome.member.endpointPorts], [[], []]);
  });

  it("a member without ports or in an excluded namespace is a problem, not a member", () => {
    const labels = { "mirror.linkerd.io/federated": "member" };
    const noPorts = desiredMemberFor(east, selector, remoteService(labels, { spec: { ports: [] } }), gateway);
    assert.equal(noPorts.kind === "problem" ? noPorts.problem.reason : noPorts.kind, "no-ports");
    const excluded = desiredMemberFor(
      east,
      selector,
      deepFreeze({ metadata: { name: "dns", namespace: "kube-system", labels }, spec: { ports: [{ port: 53 }] } }),
      gateway,
    );
    assert.equal(excluded.kind === "problem" ? excluded.problem.reason : excluded.kind, "excluded-namespace");
  });

  it("the member gateway is the one the §2 annotations name, else the default gateway", () => {
    assert.deepEqual(memberGateway(east, remoteService({})), {
      name: "linkerd-gateway",
      namespace: "linkerd-multicluster",
    });
    const ownDefault = { ...east, defaultGateway: { name: "edge", namespace: "mesh" } };
    assert.deepEqual(memberGateway(ownDefault, remoteService({})), { name: "edge", namespace: "mesh" });
    const annotated = remoteService(
      {},
      {
        metadata: {
          name: "web",
          annotations: { "mirror.linkerd.io/gateway-name": "gw", "mirror.linkerd.io/gateway-ns": "mc" },
        },
      },
    );
    assert.deepEqual(memberGateway(ownDefault, annotated), { name: "gw", namespace: "mc" });
  });
});

describe("reduceFederated", () => {
  it("is the union of every member cluster's part, annotated with the clusters sorted", () => {
    const result = reduceFederated(input([member("west"), member("east")]));
    assert.ok(result.kind === "write");
    assert.deepEqual(
      result.parts.map((p) => p.cluster),
      ["east", "west"],
    );
    assert.deepEqual(result.clusters, ["east", "west"]);
    assert.deepEqual(result.excluded, []);
  });

  it("does not depend on the order members are held in", () => {
    const conflicting = member("east", [{ name: "grpc", protocol: "TCP", port: 90 }]);
    const a = reduceFederated(input([conflicting, member("west"), member("north")]));
    const b = reduceFederated(input([member("north"), member("west"), conflicting]));
    assert.deepEqual(a, b);
  });

  it("the first member by registration order sets the ports; a later member whose ports differ is left out and named", () => {
    const west = member("west", [{ name: "grpc", protocol: "TCP", port: 90 }]);
    const result = reduceFederated(input([west, member("east"), member("north")]));
    assert.ok(result.kind === "write");
    assert.deepEqual(result.ports, member("east").ports);
    assert.deepEqual(
      result.parts.map((p) => p.cluster),
      ["east", "north"],
    );
    assert.deepEqual(
      result.excluded.map((e) => e.cluster),
      ["west"],
    );
    assert.match(result.excluded[0]?.message ?? "", /cluster west differ from those of cluster east/);
    assert.deepEqual(result.clusters, ["east", "north"]);
  });

  it("registration order, not name order, decides which member sets the ports", () => {
    const east = member("east", [{ name: "grpc", protocol: "TCP", port: 90 }]);
    const result = reduceFederated(input([east, member("west")], { order: ["west", "east"] }));
    assert.ok(result.kind === "write");
    assert.deepEqual(
      result.excluded.map((e) => e.cluster),
      ["east"],
    );
  });

  it("ports in another order are the same ports", () => {
    const two = [
      { name: "a", protocol: "TCP", port: 1 },
      { name: "b", protocol: "TCP", port: 2 },
    ];
    const result = reduceFederated(input([member("east", two), member("west", [...two].reverse())]));
    assert.ok(result.kind === "write");
    assert.deepEqual(result.excluded, []);
  });

  it("an unknown cluster the observed annotation names keeps its part and stays in the annotation", () => {
    const result = reduceFederated(
      input([member("east")], { unknown: new Set(["west"]), observedClusters: ["east", "west"] }),
    );
    assert.ok(result.kind === "write");
    assert.deepEqual(result.kept, ["west"]);
    assert.deepEqual(result.clusters, ["east", "west"]);
  });

  it("a known cluster without the member is dropped from the annotation", () => {
    const result = reduceFederated(input([member("east")], { observedClusters: ["east", "west"] }));
    assert.ok(result.kind === "write");
    assert.deepEqual(result.clusters, ["east"]);
  });

  it("the last member gone deletes only when every registered cluster is known", () => {
    assert.deepEqual(reduceFederated(input([], { observedClusters: ["east"] })), { kind: "delete" });
    assert.deepEqual(reduceFederated(input([], { unknown: new Set(["north"]), observedClusters: ["east"] })), {
      kind: "wait",
      kept: [],
    });
    assert.deepEqual(reduceFederated(input([], { unknown: new Set(["east"]), observedClusters: ["east"] })), {
      kind: "wait",
      kept: ["east"],
    });
    assert.deepEqual(reduceFederated(input([], { registrationKnown: false, observedClusters: ["east"] })), {
      kind: "wait",
      kept: [],
    });
  });

  it("a member held from an unknown cluster is not trusted: the cluster's observed part is kept instead", () => {
    const result = reduceFederated(
      input([member("east"), member("west")], { unknown: new Set(["west"]), observedClusters: ["west"] }),
    );
    assert.ok(result.kind === "write");
    assert.deepEqual(
      result.parts.map((p) => p.cluster),
      ["east"],
    );
    assert.deepEqual(result.kept, ["west"]);
  });
});

describe("summarizeReduction", () => {
  it("counts the written parts' addresses, ready and not ready; kept clusters are named, not counted", () => {
    const north = deepFreeze({
      ...member("north"),
      addresses: ["203.0.113.7", "203.0.113.8"],
      notReadyAddresses: ["203.0.113.8"],
    });
    const summary = summarizeReduction(
      reduceFederated(input([member("east"), north], { unknown: new Set(["west"]), observedClusters: ["west"] })),
    );
    assert.deepEqual(summary, { clusters: ["east", "north", "west"], kept: ["west"], ready: 2, notReady: 1 });
  });

  it("a member left out for its ports adds no addresses; wait and delete write none", () => {
    const other = member("west", [{ name: "http", protocol: "TCP", port: 81 }]);
    assert.deepEqual(summarizeReduction(reduceFederated(input([member("east"), other]))), {
      clusters: ["east"],
      kept: [],
      ready: 1,
      notReady: 0,
    });
    assert.deepEqual(summarizeReduction({ kind: "wait", kept: ["east"] }), {
      clusters: ["east"],
      kept: ["east"],
      ready: 0,
      notReady: 0,
    });
    assert.deepEqual(summarizeReduction({ kind: "delete" }), { clusters: [], kept: [], ready: 0, notReady: 0 });
  });
});
