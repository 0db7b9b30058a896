/**
 * Names that collide (SPEC §5, §9, §11, §12): a mirror's slices and the parts of a
 * fleet-wide Service or an MCS import share one namespace of names
 * (`<svc>-federated-<c>-ipv4` is both the part of cluster c of `<svc>-federated` and the
 * slice of the mirror of a remote `<svc>-federated` of c). A slice belongs to the
 * Service its `kubernetes.io/service-name` names, and to no other; a shared object's
 * part wins its name over a mirror's slice. And a stale owner of a mirror name that no
 * cluster claims any more gives the name up to the cluster that claims it.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { type FederatedMember, reduceFederated } from "../../src/core/federated.ts";
import type { ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, KubeObject, Service } from "../../src/core/objects.ts";
import { type PlanInput, planMirror } from "../../src/core/plan.ts";
import { planFederated } from "../../src/core/plan-federated.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const mirrorLabels = (cluster: string) => ({
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": cluster,
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "mirror",
});
const MANAGED = { "endpointslice.kubernetes.io/managed-by": "fleet-mirror" };

function desired(name: string, cluster = "east"): DesiredMirror {
  return deepFreeze({
    cluster,
    namespace: "shop",
    name,
    remote: `shop/${name.slice(0, -cluster.length - 1)}`,
    labels: mirrorLabels(cluster),
    serviceAnnotations: {},
    ports: [{ name: "http", protocol: "TCP", port: 80 }],
    endpointsAnnotations: {},
    addresses: ["198.18.0.10"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  });
}

function object<T extends KubeObject>(kind: string, name: string, labels: Record<string, string>, uid: string): T {
  return deepFreeze({
    apiVersion: kind === "EndpointSlice" ? "discovery.k8s.io/v1" : "v1",
    kind,
    metadata: { name, namespace: "shop", uid, resourceVersion: "7", labels },
    ...(kind === "EndpointSlice" ? { addressType: "IPv4" } : { spec: { type: "ClusterIP", clusterIP: "10.96.0.9" } }),
  } as unknown as T);
}

const service = (name: string, cluster = "east"): ObservedObject => ({
  kind: "Service",
  object: object<Service>("Service", name, mirrorLabels(cluster), `uid-${name}`),
});
const slice = (name: string, labels: Record<string, string>): ObservedObject => ({
  kind: "EndpointSlice",
  object: object<EndpointSlice>("EndpointSlice", name, labels, `uid-${name}`),
});

/** East's part of the fleet-wide Service `web-federated` (SPEC §11). */
const fleetPart = slice("web-federated-east-ipv4", {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/federated": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "kubernetes.io/service-name": "web-federated",
  ...MANAGED,
});
/** East's part of the MCS import whose derived Service is `derived0123456789abcdef` (SPEC §12). */
const importPart = slice("derived0123456789abcdef-east-ipv4", {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/service-import": "web",
  "mirror.linkerd.io/cluster-name": "east",
  "kubernetes.io/service-name": "derived0123456789abcdef",
  ...MANAGED,
});

function plan(key: string, overrides: Partial<PlanInput>): ReturnType<typeof planMirror> {
  return planMirror({
    key,
    desired: undefined,
    observed: [],
    endpointsApi: "endpointslices",
    namespaceExists: true,
    createNamespaces: true,
    excludedNamespaces: [],
    gcAllowed: () => true,
    ...overrides,
  });
}

const slices = (actions: readonly WriteAction[]) => actions.filter((a) => a.kind === "EndpointSlice");
const summary = (actions: readonly WriteAction[]): string[] =>
  actions.map((a) => `${a.verb} ${a.kind} ${a.kind === "Namespace" ? "" : a.name}`);

describe("a mirror owns a slice only if the slice's service-name is the mirror's name (F5)", () => {
  it("plans no action on a fleet-wide part under the mirror's slice name: the mirror is blocked", () => {
    const mirror = desired("web-federated-east");
    for (const observed of [[fleetPart], [service("web-federated-east"), fleetPart]]) {
      const p = plan("shop/web-federated-east", { desired: mirror, observed });
      assert.deepEqual(p.actions, [], JSON.stringify(p.actions));
      assert.equal(p.blocked?.reason, "owned-by-other-service");
      assert.match(p.blocked?.message ?? "", /EndpointSlice shop\/web-federated-east-ipv4 .*web-federated/);
    }
  });

  it("plans no action on an import part under the mirror's slice name", () => {
    const p = plan("shop/derived0123456789abcdef-east", {
      desired: desired("derived0123456789abcdef-east"),
      observed: [importPart],
    });
    assert.deepEqual(p.actions, []);
    assert.equal(p.blocked?.reason, "owned-by-other-service");
  });

  it("an unexported mirror is deleted without the part that holds its slice name", () => {
    const p = plan("shop/web-federated-east", { observed: [service("web-federated-east"), fleetPart] });
    assert.deepEqual(summary(p.actions), ["delete Service web-federated-east"]);
  });

  it("a slice of ours with another mirror's service-name under the name blocks, and is not collected with this one", () => {
    const other = slice("web-east-ipv4", {
      ...mirrorLabels("east"),
      "kubernetes.io/service-name": "old-east",
      ...MANAGED,
    });
    assert.equal(
      plan("shop/web-east", { desired: desired("web-east"), observed: [other] }).blocked?.reason,
      "owned-by-other-service",
    );
    assert.deepEqual(plan("shop/web-east", { observed: [other] }).actions, []);
  });
});

describe("our own leftovers, whatever their names (SPEC §6)", () => {
  const ours = (name: string, service?: string) =>
    slice(name, { ...mirrorLabels("east"), ...(service ? { "kubernetes.io/service-name": service } : {}), ...MANAGED });

  it("deletes a slice of the mirror under another name beside the live mirror, after writing the wanted one", () => {
    const p = plan("shop/web-east", {
      desired: desired("web-east"),
      observed: [service("web-east"), ours("web-east-x7k2p", "web-east")],
    });
    assert.deepEqual(summary(slices(p.actions)), [
      "create EndpointSlice web-east-ipv4",
      "delete EndpointSlice web-east-x7k2p",
    ]);
  });

  it("adopts a slice under the wanted name that lacks its service-name (it names the mirror by its own name)", () => {
    const p = plan("shop/web-east", {
      desired: desired("web-east"),
      observed: [service("web-east"), ours("web-east-ipv4")],
    });
    assert.equal(p.blocked, undefined);
    assert.deepEqual(summary(slices(p.actions)), ["update EndpointSlice web-east-ipv4"]);
  });

  it("deletes every slice of a mirror no longer wanted, and one naming no Service, when GC is allowed", () => {
    assert.deepEqual(summary(plan("shop/gone-east", { observed: [ours("gone-east-x7k2p", "gone-east")] }).actions), [
      "delete EndpointSlice gone-east-x7k2p",
    ]);
    assert.deepEqual(summary(plan("shop/stray-east", { observed: [ours("stray-east")] }).actions), [
      "delete EndpointSlice stray-east",
    ]);
    assert.deepEqual(plan("shop/stray-east", { observed: [ours("stray-east")], gcAllowed: () => false }).actions, []);
  });
});

describe("a shared object's part wins its name over a mirror's slice (F5)", () => {
  const member: FederatedMember = deepFreeze({
    cluster: "east",
    namespace: "shop",
    name: "web-federated",
    remote: "shop/web",
    ports: [{ name: "http", protocol: "TCP", port: 80 }],
    addresses: ["198.18.1.1"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  });
  const reduction = reduceFederated({
    members: new Map([["east", member]]),
    order: ["east"],
    unknown: new Set(),
    registrationKnown: true,
    observedClusters: [],
  });
  const fleetService: ObservedObject = {
    kind: "Service",
    object: object<Service>(
      "Service",
      "web-federated",
      {
        "mirror.linkerd.io/mirrored-service": "true",
        "mirror.linkerd.io/federated": "true",
      },
      "uid-fleet",
    ),
  };
  const fleetPlan = (observed: ObservedObject[]) =>
    planFederated({
      namespace: "shop",
      name: "web-federated",
      reduction,
      observed,
      endpointsApi: "endpointslices",
      namespaceExists: true,
      createNamespaces: true,
      excludedNamespaces: [],
    });
  const mirrorSlice = slice("web-federated-east-ipv4", {
    ...mirrorLabels("east"),
    "kubernetes.io/service-name": "web-federated-east",
    ...MANAGED,
  });

  it("the fleet-wide Service is not blocked: the mirror's slice is deleted (uid precondition), then the part is created", () => {
    const first = fleetPlan([fleetService, mirrorSlice]);
    assert.equal(first.blocked, undefined, first.blocked?.message);
    assert.deepEqual(
      first.actions.filter((a) => a.kind === "EndpointSlice"),
      [
        {
          verb: "delete",
          kind: "EndpointSlice",
          namespace: "shop",
          name: "web-federated-east-ipv4",
          uid: "uid-web-federated-east-ipv4",
          cluster: "east",
        },
      ],
    );
    assert.equal(first.again, true, "planned again once the mirror's slice is gone");
    // Once it is gone, the part.
    const second = fleetPlan([fleetService]);
    assert.deepEqual(summary(second.actions.filter((a) => a.kind === "EndpointSlice")), [
      "create EndpointSlice web-federated-east-ipv4",
    ]);
    assert.equal(second.again, undefined);
  });

  it("a user's slice under the part's name still blocks the fleet-wide Service (SPEC §11)", () => {
    const users = slice("web-federated-east-ipv4", { app: "web" });
    const p = fleetPlan([fleetService, users]);
    assert.equal(p.blocked?.reason, "user-owned");
    assert.deepEqual(p.actions, []);
  });
});

describe("a stale owner of a mirror name releases it to the cluster that claims it (F8)", () => {
  // Cluster b-c exported `a` (mirror a-b-c), then stopped; cluster c exports `a-b` (also a-b-c).
  const staleService = service("a-b-c", "b-c");
  const staleSlice = slice("a-b-c-ipv4", { ...mirrorLabels("b-c"), "kubernetes.io/service-name": "a-b-c", ...MANAGED });
  const claim = desired("a-b-c", "c");

  it("deletes the stale owner's objects (uid preconditions) when it no longer claims the name and may be collected", () => {
    const p = plan("shop/a-b-c", { desired: claim, claimants: ["c"], observed: [staleService, staleSlice] });
    assert.equal(p.blocked, undefined);
    assert.deepEqual(
      p.actions.map((a) => (a.verb === "delete" ? `delete ${a.kind} ${a.name} ${a.uid} ${a.cluster}` : a.verb)),
      ["delete Service a-b-c uid-a-b-c b-c", "delete EndpointSlice a-b-c-ipv4 uid-a-b-c-ipv4 b-c"],
    );
    assert.equal(p.released, "b-c");
  });

  it("blocks while the stale owner's garbage collection is not allowed (its complete set not seen yet)", () => {
    const p = plan("shop/a-b-c", {
      desired: claim,
      claimants: ["c"],
      observed: [staleService, staleSlice],
      gcAllowed: (cluster) => cluster !== "b-c",
    });
    assert.deepEqual(p.actions, []);
    assert.equal(p.blocked?.reason, "owned-by-other-cluster");
  });

  it("blocks while the owner still claims the name", () => {
    const p = plan("shop/a-b-c", { desired: claim, claimants: ["b-c", "c"], observed: [staleService, staleSlice] });
    assert.deepEqual(p.actions, []);
    assert.equal(p.blocked?.reason, "owned-by-other-cluster");
  });
});
