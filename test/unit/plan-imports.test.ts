import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Reduction, reduceFederated } from "../../src/core/federated.ts";
import { derivedServiceName, importKey, type McsExport } from "../../src/core/mcs.ts";
import { mirrorName } from "../../src/core/naming.ts";
import type { KubeObject } from "../../src/core/objects.ts";
import { planFederated } from "../../src/core/plan-federated.ts";
import {
  DERIVED_NAME,
  exportOrder,
  holdWhileKept,
  importFlavor,
  importLabels,
  isImportObject,
  planServiceImport,
} from "../../src/core/plan-imports.ts";
import { reduceImport } from "../../src/core/reduce-imports.ts";
import { deepFreeze } from "../helpers/freeze.ts";
import { clusterSetSpec } from "../helpers/mcs-export.ts";

function exported(cluster: string, exportedAt: string, port = 80): McsExport {
  return deepFreeze({
    cluster,
    namespace: "shop",
    name: "web",
    remote: "shop/web",
    ports: [{ name: "http", protocol: "TCP", port }],
    addresses: [`198.51.100.${cluster.length}`],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
    exportedAt,
    spec: clusterSetSpec([{ name: "http", protocol: "TCP", port }]),
  });
}

function reduce(exports: McsExport[]): Reduction {
  return reduceImport({
    exports: new Map(exports.map((e) => [e.cluster, e])),
    registration: { registeredAt: () => undefined },
    unknown: new Set(),
    registrationKnown: true,
    observedClusters: [],
    observedPorts: undefined,
  }).reduction;
}

const derived = derivedServiceName("shop", "web");

function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

describe("the derived Service's name (SPEC §12)", () => {
  it("is stable, fits any Service name, has no '-' (never a mirror's or a fleet-wide name) and is told apart", () => {
    assert.equal(derivedServiceName("shop", "web"), derived);
    assert.match(derived, DERIVED_NAME);
    assert.notEqual(derivedServiceName("shop", "web2"), derived);
    assert.notEqual(derivedServiceName("shop2", "web"), derived);
    const long = derivedServiceName("shop", "a".repeat(63));
    assert.ok(long.length <= 63 && !long.includes("-"));
    assert.ok(!DERIVED_NAME.test(mirrorName("derived0123456789abcdef", "east")));
    assert.equal(importKey({ namespace: "shop", name: "web" }), `shop/${derived}`);
  });
});

describe("exporters' order: the oldest export first (the MCS conflict rule)", () => {
  it("orders by export time, then name, whatever the map's order; an unknown time goes last", () => {
    const order = exportOrder(
      new Map([
        ["b", exported("b", "2026-12-04T10:00:05Z")],
        ["zz", exported("zz", "")],
        ["c", exported("c", "2026-12-04T10:00:01Z")],
        ["a", exported("a", "2026-12-04T10:00:05Z")],
      ]),
    );
    assert.deepEqual(order, ["c", "a", "b", "zz"]);
  });

  it("gives one order in every insertion order, whatever the timestamps say: an unparsable one goes after every valid one (F13)", () => {
    const exports = [
      exported("a", "2024-03-01T00:00:00Z"),
      exported("b", "garbage"),
      exported("c", "2023-03-01T00:00:00Z"),
      exported("d", "1 March 2022"),
      exported("e", ""),
    ];
    const registration = { registeredAt: () => "2020-01-01T00:00:00Z" };
    for (const permutation of permutations(exports)) {
      const map = new Map(permutation.map((e) => [e.cluster, e]));
      assert.deepEqual(exportOrder(map), ["c", "a", "b", "d", "e"], permutation.map((e) => e.cluster).join());
      // Among the invalid ones, by name (SPEC §16: one order on every cluster of a clusterset).
      assert.deepEqual(exportOrder(map, registration), ["c", "a", "b", "d", "e"]);
    }
  });

  it("never ranks an export before its cluster's registration: a remote claiming to be oldest is clamped, ties go by name (F13, SPEC §16)", () => {
    const registeredAt: Record<string, string> = {
      honest: "2026-01-01T00:00:00Z",
      hostile: "2026-06-01T00:00:00Z",
    };
    const registration = { registeredAt: (c: string) => registeredAt[c] };
    const honest = exported("honest", "2026-03-01T00:00:00Z");
    const claims = (at: string) => new Map([honest, exported("hostile", at)].map((e) => [e.cluster, e]));
    // Claims 1970: counted from its registration (June), after the honest export (March).
    assert.deepEqual(exportOrder(claims("1970-01-01T00:00:00Z"), registration), ["honest", "hostile"]);
    // An export made before the other cluster was even registered still wins (the MCS rule).
    assert.deepEqual(exportOrder(claims("2026-07-01T00:00:00Z"), registration), ["honest", "hostile"]);
    // Both clamped to the same instant: by name.
    const same = { registeredAt: () => "2026-09-01T00:00:00Z" };
    assert.deepEqual(exportOrder(claims("1970-01-01T00:00:00Z"), same), ["honest", "hostile"]);
    // The local cluster's own export is never clamped: its time is the local API server's.
    const local = { registeredAt: () => "2026-09-01T00:00:00Z", local: "hostile" };
    assert.deepEqual(exportOrder(claims("2026-02-01T00:00:00Z"), local), ["hostile", "honest"]);
  });

  it("keeps the oldest export's port of a name: a later, different one stays a part that does not serve it (SPEC §16)", () => {
    const reduction = reduce([
      exported("west", "2026-12-04T11:00:00Z", 9090),
      exported("east", "2026-12-04T10:00:00Z"),
    ]);
    assert.equal(reduction.kind, "write");
    if (reduction.kind !== "write") return;
    assert.deepEqual(reduction.ports, [{ name: "http", protocol: "TCP", port: 80 }]);
    assert.deepEqual(reduction.excluded, []);
    assert.deepEqual(
      reduction.parts.map((p) => [p.cluster, p.endpointPorts.length]),
      [
        ["east", 1],
        ["west", 0],
      ],
    );
  });
});

describe("an import with an unknown exporter after a writer start", () => {
  it("waits rather than let the known first exporter change the ports: the unknown one may be the oldest", () => {
    const east = exported("east", "2026-12-04T10:00:00Z");
    const west = exported("west", "2026-12-04T11:00:00Z", 9090);
    const reduction = reduceFederated({
      members: new Map([["west", west]]),
      order: ["west"],
      unknown: new Set(["east"]),
      registrationKnown: true,
      observedClusters: ["east"],
    });
    assert.equal(reduction.kind, "write");
    assert.deepEqual(holdWhileKept(reduction, east.ports), { kind: "wait", kept: ["east"] });
    // Same ports, or nothing kept: written as reduced.
    assert.equal(holdWhileKept(reduction, west.ports), reduction);
    const known = reduce([east, west]);
    assert.equal(holdWhileKept(known, west.ports), known);
  });
});

describe("planServiceImport (SPEC §12)", () => {
  const reduction = reduce([exported("east", "2026-12-04T10:00:00Z"), exported("west", "2026-12-04T10:00:01Z")]);
  const spec = clusterSetSpec([{ name: "http", protocol: "TCP", port: 80 }]);
  const base = {
    namespace: "shop",
    name: "web",
    derived,
    reduction,
    spec,
    apiVersion: "multicluster.x-k8s.io/v1beta1",
  };
  const ip = { ips: ["10.96.0.9"], families: ["IPv4"] };

  it("waits for the derived Service's cluster IP, then creates the ServiceImport with its spec", () => {
    assert.deepEqual(planServiceImport({ ...base, observed: undefined, clusterIPs: undefined }).actions, []);
    const [create] = planServiceImport({ ...base, observed: undefined, clusterIPs: ip }).actions;
    assert.equal(create?.verb, "create");
    assert.deepEqual((create as { body: object }).body, {
      apiVersion: "multicluster.x-k8s.io/v1beta1",
      kind: "ServiceImport",
      metadata: {
        name: "web",
        namespace: "shop",
        labels: importLabels("web"),
        annotations: { "mirror.linkerd.io/derived-service": derived },
      },
      spec: {
        type: "ClusterSetIP",
        ports: [{ name: "http", protocol: "TCP", port: 80 }],
        ips: ["10.96.0.9"],
        ipFamilies: ["IPv4"],
        sessionAffinity: "None",
      },
    });
  });

  const ours = (fields: Partial<{ spec: object; status: object }>): KubeObject =>
    deepFreeze({
      metadata: {
        name: "web",
        namespace: "shop",
        uid: "u1",
        resourceVersion: "7",
        labels: { ...importLabels("web"), team: "x" },
        annotations: { "mirror.linkerd.io/derived-service": derived },
      },
      spec: {
        type: "ClusterSetIP",
        ports: [{ name: "http", protocol: "TCP", port: 80 }],
        ips: ["10.96.0.9"],
        ipFamilies: ["IPv4"],
        sessionAffinity: "None",
      },
      ...fields,
    });

  it("writes the status (a subresource) once the spec matches, and nothing once both match", () => {
    const [status] = planServiceImport({ ...base, observed: ours({}), clusterIPs: ip }).actions;
    assert.equal(status?.verb, "update");
    assert.equal((status as { subresource?: string }).subresource, "status");
    assert.deepEqual((status as { body: { status: object } }).body.status, {
      clusters: [{ cluster: "east" }, { cluster: "west" }],
    });
    const settled = ours({ status: { clusters: [{ cluster: "east" }, { cluster: "west" }] } });
    assert.deepEqual(planServiceImport({ ...base, observed: settled, clusterIPs: ip }).actions, []);
  });

  it("updates a spec that differs (ports, ips), keeping foreign labels", () => {
    const stale = ours({
      spec: { type: "ClusterSetIP", ports: [{ name: "http", protocol: "TCP", port: 81 }], ips: [] },
    });
    const [update] = planServiceImport({ ...base, observed: stale, clusterIPs: ip }).actions;
    assert.equal(update?.verb, "update");
    assert.equal((update as { subresource?: string }).subresource, undefined);
    const body = (update as { body: { metadata: { labels: object }; spec: object } }).body;
    assert.deepEqual(body.spec, {
      type: "ClusterSetIP",
      ports: [{ name: "http", protocol: "TCP", port: 80 }],
      ips: ["10.96.0.9"],
      ipFamilies: ["IPv4"],
      sessionAffinity: "None",
    });
    assert.deepEqual(body.metadata.labels, { ...importLabels("web"), team: "x" });
  });

  it("never touches a user's ServiceImport: the import is blocked", () => {
    const user = deepFreeze({ metadata: { name: "web", namespace: "shop", labels: { owner: "me" } } });
    const plan = planServiceImport({ ...base, observed: user, clusterIPs: ip });
    assert.deepEqual(plan.actions, []);
    assert.equal(plan.blocked?.reason, "user-owned");
    const gone = planServiceImport({ ...base, reduction: { kind: "delete" }, observed: user, clusterIPs: undefined });
    assert.deepEqual(gone.actions, []);
  });

  it("deletes its own ServiceImport (uid precondition) when no cluster exports the name", () => {
    const [del] = planServiceImport({
      ...base,
      reduction: { kind: "delete" },
      observed: ours({}),
      clusterIPs: undefined,
    }).actions;
    assert.deepEqual(del, {
      verb: "delete",
      kind: "ServiceImport",
      namespace: "shop",
      name: "web",
      uid: "u1",
      cluster: "",
    });
  });
});

describe("the derived Service and its slices (planFederated with the import flavor)", () => {
  const reduction = reduce([exported("east", "2026-12-04T10:00:00Z")]);
  const input = {
    namespace: "shop",
    name: derived,
    reduction,
    endpointsApi: "endpointslices" as const,
    namespaceExists: true,
    createNamespaces: true,
    excludedNamespaces: [],
    flavor: importFlavor("web"),
  };

  it("creates the derived Service with the import's labels, then slices labelled for the MCS API", () => {
    const [service] = planFederated({ ...input, observed: [] }).actions;
    assert.equal(service?.verb, "create");
    const labels = (service as { body: { metadata: { labels: object } } }).body.metadata.labels;
    assert.deepEqual(labels, importLabels("web"));
    const created = deepFreeze({
      ...(service as { body: KubeObject }).body,
      metadata: { ...(service as { body: KubeObject }).body.metadata, uid: "s1", resourceVersion: "1" },
    });
    const [slice] = planFederated({ ...input, observed: [{ kind: "Service", object: created }] }).actions;
    assert.equal(slice?.kind, "EndpointSlice");
    const sliceLabels = (slice as { body: { metadata: { labels: Record<string, string> } } }).body.metadata.labels;
    assert.equal(sliceLabels["multicluster.kubernetes.io/service-name"], "web");
    assert.equal(sliceLabels["multicluster.kubernetes.io/source-cluster"], "east");
    assert.equal(sliceLabels["kubernetes.io/service-name"], derived);
    assert.equal(sliceLabels["mirror.linkerd.io/service-import"], "web");
    assert.ok(isImportObject("EndpointSlice", deepFreeze({ metadata: { name: "x", labels: sliceLabels } })));
  });

  it("treats a user's Service under the derived name as a conflict, never a fleet-wide object", () => {
    const user = deepFreeze({ metadata: { name: derived, namespace: "shop", labels: { app: "mine" } } });
    const plan = planFederated({ ...input, observed: [{ kind: "Service", object: user }] });
    assert.equal(plan.blocked?.reason, "user-owned");
    assert.match(plan.blocked?.message ?? "", /not a fleet-mirror MCS import object/);
  });
});
