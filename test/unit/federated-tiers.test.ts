/**
 * A fleet-wide Service's members as priority tiers (SPEC §14): ready counts, standby
 * parts, and what a switch of the serving tiers plans: one write per part whose standing
 * changes and the Service's serving priority, nothing when converged.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type FederatedMember, reduceFederated } from "../../src/core/federated.ts";
import { federatedTiers, memberReady, servingParts } from "../../src/core/federated-tiers.ts";
import { localMemberFor } from "../../src/core/local-member.ts";
import type { EndpointsApi, ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, KubeObject, Service } from "../../src/core/objects.ts";
import { planFederated } from "../../src/core/plan-federated.ts";
import { webMember } from "../helpers/federated-member.ts";

const PRIORITY: Readonly<Record<string, number>> = { east: 10, west: 20, north: 20 };
const priorityOf = (cluster: string) => PRIORITY[cluster] ?? 100;

const gatewayMember = webMember;

/** Plans the fleet-wide Service with `members` serving up to `cutoff`, over `observed`. */
function plan(members: FederatedMember[], cutoff: number, observed: ObservedObject[], mode: EndpointsApi) {
  const reduction = reduceFederated({
    members: new Map(members.map((m) => [m.cluster, m])),
    order: ["east", "west", "north"],
    unknown: new Set(),
    registrationKnown: true,
    observedClusters: [],
  });
  assert.equal(reduction.kind, "write");
  if (reduction.kind !== "write") return [];
  return planFederated({
    namespace: "shop",
    name: "web-federated",
    reduction: { ...reduction, parts: servingParts(reduction.parts, cutoff, priorityOf) },
    servingPriority: cutoff,
    observed,
    endpointsApi: mode,
    namespaceExists: true,
    createNamespaces: true,
    excludedNamespaces: [],
  }).actions;
}

/** The observed objects after `actions`, as the API server would hold them. */
function after(actions: readonly WriteAction[], observed: ObservedObject[]): ObservedObject[] {
  const out = new Map(observed.map((o) => [`${o.kind}/${o.object.metadata.name}`, o]));
  for (const a of actions) {
    if (a.kind === "Namespace" || a.verb === "delete") continue;
    const body = a.body as KubeObject;
    out.set(`${a.kind}/${a.name}`, { kind: a.kind, object: { ...body, metadata: { ...body.metadata, uid: "u1" } } });
  }
  return [...out.values()];
}

/** Plans until nothing is left to write; returns the converged objects. */
function converge(members: FederatedMember[], cutoff: number, mode: EndpointsApi, from: ObservedObject[] = []) {
  let observed = from;
  for (let pass = 0; pass < 5; pass++) {
    const actions = plan(members, cutoff, observed, mode);
    if (actions.length === 0) return observed;
    observed = after(actions, observed);
  }
  assert.fail("the plan did not converge");
}

const members = () => [
  gatewayMember("east", ["198.18.1.1"]),
  gatewayMember("west", ["198.18.2.1"]),
  gatewayMember("north", ["198.18.3.1"]),
];

describe("federated tiers", () => {
  it("counts a remote member's alive gateway addresses and a local part's ready endpoints", () => {
    assert.equal(memberReady(gatewayMember("east", ["a", "b", "c"], ["b"])), 2);
    const local: FederatedMember = {
      ...gatewayMember("local", []),
      endpoints: [
        { addresses: ["10.0.0.1"], conditions: { ready: true, serving: true, terminating: false } },
        { addresses: ["10.0.0.2"], conditions: { ready: false, serving: false, terminating: true } },
      ],
    };
    assert.equal(memberReady(local), 1);
  });

  it("has tiers only with two priorities or more, kept clusters counted as their observed part holds them", () => {
    assert.equal(
      federatedTiers([gatewayMember("west", ["a"])], ["north"], priorityOf, () => 3),
      undefined,
    );
    assert.deepEqual(
      federatedTiers([gatewayMember("east", ["a"], ["a"])], ["west"], priorityOf, () => 2),
      [
        { priority: 10, ready: 0 },
        { priority: 20, ready: 2 },
      ],
    );
  });

  it("writes a standby member's addresses all not ready, with its true ready count, and leaves a serving member's health as it is", () => {
    const parts = servingParts(
      [gatewayMember("east", ["a", "b"], ["b"]), gatewayMember("west", ["c", "d"])],
      10,
      priorityOf,
    );
    assert.deepEqual(parts[0], gatewayMember("east", ["a", "b"], ["b"]));
    assert.deepEqual(parts[1], { ...gatewayMember("west", ["c", "d"], ["c", "d"]), standby: true, standbyReady: 2 });
  });

  it("a switch of the serving tiers writes the parts whose standing changes and the Service's serving priority, and nothing once converged", () => {
    const observed = converge(members(), 10, "endpointslices");
    const slice = (name: string) =>
      observed.find((o) => o.object.metadata.name === name)?.object as EndpointSlice | undefined;
    assert.equal(
      slice("web-federated-west-ipv4")?.metadata.annotations?.["mirror.linkerd.io/federated-standby"],
      "true",
    );
    assert.equal(slice("web-federated-west-ipv4")?.endpoints?.[0]?.conditions?.ready, false);
    assert.equal(slice("web-federated-east-ipv4")?.endpoints?.[0]?.conditions?.ready, true);
    // east's gateway dies: west and north (priority 20) serve.
    const failed = [gatewayMember("east", ["198.18.1.1"], ["198.18.1.1"]), ...members().slice(1)];
    const actions = plan(failed, 20, observed, "endpointslices");
    assert.deepEqual(actions.map((a) => `${a.verb} ${a.kind} ${a.name}`).sort(), [
      "update EndpointSlice web-federated-east-ipv4",
      "update EndpointSlice web-federated-north-ipv4",
      "update EndpointSlice web-federated-west-ipv4",
      "update Service web-federated",
    ]);
    assert.deepEqual(plan(failed, 20, after(actions, observed), "endpointslices"), []);
  });

  it("in Endpoints mode a switch is one write of the Endpoints object and one of the Service", () => {
    const observed = converge(members(), 10, "endpoints");
    const actions = plan(members(), 20, observed, "endpoints");
    assert.deepEqual(actions.map((a) => `${a.verb} ${a.kind}`).sort(), ["update Endpoints", "update Service"]);
    const endpoints = after(actions, observed).find((o) => o.kind === "Endpoints")?.object as {
      subsets?: { addresses?: unknown[]; notReadyAddresses?: unknown[] }[];
    };
    const ready = (endpoints.subsets ?? []).flatMap((s) => s.addresses ?? []);
    assert.equal(ready.length, 3);
  });
});

describe("localMemberFor", () => {
  const selector = { key: "mirror.linkerd.io/federated", value: "member" };
  const service = (labels: Record<string, string>, type?: string): Service => ({
    metadata: { name: "web", namespace: "shop", labels },
    spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }], ...(type ? { type } : {}) },
  });
  const slice: EndpointSlice = {
    metadata: { name: "web-abc", namespace: "shop", labels: { "kubernetes.io/service-name": "web" } },
    addressType: "IPv4",
    endpoints: [{ addresses: ["10.0.0.1"], conditions: { ready: true }, hostname: "web-0", zone: "z" }],
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
  };

  it("makes a local Service the selector matches a member of <svc>-federated with its own endpoints copied", () => {
    const member = localMemberFor("local", selector, service({ "mirror.linkerd.io/federated": "member" }), [slice]);
    assert.equal(member?.name, "web-federated");
    assert.equal(member?.cluster, "local");
    assert.deepEqual(member?.endpointPorts, [{ name: "http", protocol: "TCP", port: 8080 }]);
    assert.deepEqual(member?.endpoints, [
      {
        addresses: ["10.0.0.1"],
        conditions: { ready: true, serving: true, terminating: false },
        hostname: "web-0",
        zone: "z",
      },
    ]);
    assert.equal(member && memberReady(member), 1);
  });

  it("is no member without the selector's label, as an ExternalName Service, as fleet-mirror's own Service, or without ports", () => {
    assert.equal(localMemberFor("local", selector, service({}), [slice]), undefined);
    const labels = { "mirror.linkerd.io/federated": "member" };
    assert.equal(localMemberFor("local", selector, service(labels, "ExternalName"), [slice]), undefined);
    const mirror = service({ ...labels, "mirror.linkerd.io/mirrored-service": "true" });
    assert.equal(localMemberFor("local", selector, mirror, [slice]), undefined);
    const portless = { ...service(labels), spec: {} };
    assert.equal(localMemberFor("local", selector, portless, [slice]), undefined);
  });
});
