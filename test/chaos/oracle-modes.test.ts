/**
 * The chaos oracles of the other ways to export, checked against hand-written SPEC §11
 * and §12 examples (label export, headless Services, fleet-wide Services, MCS imports),
 * and the mode steps of the schedule: so that a green chaos run means those objects are
 * right, not that the oracle is blind to them.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { derivedServiceName } from "../../src/core/mcs.ts";
import { actualMirrors, expectedMirrors, type RemoteCluster, type RemoteService } from "./oracle.ts";
import { actualShared, derivedName, diffShared, expectedShared } from "./oracle-shared.ts";
import { Schedule } from "./schedule.ts";
import { isModeStep, type Step } from "./steps.ts";

const HTTP = [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }];

function service(
  namespace: string,
  name: string,
  fields: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    headless?: boolean;
    ports?: typeof HTTP;
  } = {},
): RemoteService {
  return {
    metadata: {
      namespace,
      name,
      resourceVersion: "5",
      labels: fields.labels ?? {},
      annotations: fields.annotations ?? {},
    },
    spec: { ports: fields.ports ?? HTTP, ...(fields.headless ? { clusterIP: "None" } : {}) },
  };
}

const gateway = (name: string, ip: string, port = 4143): RemoteService => ({
  metadata: { namespace: "gateway", name, resourceVersion: "7", annotations: {} },
  spec: { ports: [{ name: "incoming-port", protocol: "TCP", port }] },
  status: { loadBalancer: { ingress: [{ ip }] } },
});

const cluster = (name: string, services: RemoteService[], extra: Partial<RemoteCluster> = {}): RemoteCluster => ({
  name,
  domain: "cluster.local",
  services: [gateway("gateway", "198.18.0.1"), gateway("gw2", "198.18.0.2", 4200), ...services],
  defaultGateway: { namespace: "gateway", name: "gw2" },
  ...extra,
});

const LABEL = { "mirror.linkerd.io/exported": "true" };
const MEMBER = { "mirror.linkerd.io/federated": "member" };
const ANNOTATED = { "mirror.linkerd.io/gateway-name": "gateway", "mirror.linkerd.io/gateway-ns": "gateway" };

describe("chaos oracle: label export (SPEC §12)", () => {
  it("mirrors a Service labelled exactly `true` through its cluster's default gateway, and nothing for a look-alike or a negative", () => {
    const expected = expectedMirrors([
      cluster("east", [
        service("m", "on", { labels: LABEL }),
        service("m", "caps", { labels: { "mirror.linkerd.io/exported": "True" } }),
        service("m", "no", { labels: { "mirror.linkerd.io/exported": "false" } }),
      ]),
    ]);
    assert.deepEqual([...expected.keys()], ["m/on-east"]);
    const mirror = expected.get("m/on-east");
    assert.equal(mirror?.service?.labels["mirror.linkerd.io/remote-gateway-name"], "gw2");
    assert.deepEqual(mirror?.endpoints?.subsets, [
      { addresses: ["198.18.0.2"], ports: [{ name: "http", protocol: "TCP", port: 4200 }] },
    ]);
  });

  it("lets the §2 annotations win over the label, and uses linkerd's default gateway when the Secret names none", () => {
    const both = expectedMirrors([cluster("east", [service("m", "both", { labels: LABEL, annotations: ANNOTATED })])]);
    assert.equal(both.get("m/both-east")?.service?.labels["mirror.linkerd.io/remote-gateway-name"], "gateway");
    const plain: RemoteCluster = {
      name: "east",
      domain: "cluster.local",
      services: [service("m", "x", { labels: LABEL })],
    };
    const labels = expectedMirrors([plain]).get("m/x-east")?.endpoints?.labels;
    assert.equal(labels?.["mirror.linkerd.io/remote-gateway-ns"], "linkerd-multicluster");
    assert.deepEqual(expectedMirrors([plain], { exportSelector: "" }).size, 0, "label export off");
  });
});

describe("chaos oracle: headless Services (SPEC §12)", () => {
  const slice = (namespace: string, svc: string, hostnames: (string | undefined)[]) => ({
    metadata: { namespace, labels: { "kubernetes.io/service-name": svc } },
    endpoints: hostnames.map((hostname) => (hostname ? { hostname } : {})),
  });

  it("expects a per-host mirror per valid host and a headless mirror addressed by their cluster IPs", () => {
    const east = cluster(
      "east",
      [
        service("db", "db", { annotations: ANNOTATED, headless: true }),
        service("db", "db-2", { annotations: ANNOTATED }),
      ],
      {
        endpointSlices: [slice("db", "db", ["db-0", "db-1", "0kv", "db-2", undefined]), slice("other", "db", ["x-0"])],
      },
    );
    const expected = expectedMirrors([east], { localClusterIPs: new Map([["db/db-0-east", "10.96.0.10"]]) });
    assert.deepEqual([...expected.keys()].sort(), ["db/db-0-east", "db/db-1-east", "db/db-2-east", "db/db-east"]);
    const host = expected.get("db/db-0-east");
    assert.equal(host?.service?.labels["mirror.linkerd.io/headless-mirror-svc-name"], "db-east");
    assert.equal(host?.service?.annotations["mirror.linkerd.io/remote-svc-fq-name"], "db-0.db.db.svc.cluster.local");
    assert.equal(host?.service?.headless, false);
    const headless = expected.get("db/db-east");
    assert.equal(headless?.service?.headless, true);
    // db-1 has no cluster IP yet: left out; db-2 is an exported Service of its own (its mirror is db-2-east).
    assert.deepEqual(headless?.endpoints?.subsets, [
      { addresses: ["db-0=10.96.0.10"], ports: [{ name: "http", protocol: "TCP", port: 80 }] },
    ]);
    assert.equal(
      expected.get("db/db-2-east")?.service?.labels["mirror.linkerd.io/headless-mirror-svc-name"],
      undefined,
    );
  });

  it("expects an ordinary mirror for a headless Service without hostnames, and reads hostnames back from local Endpoints", () => {
    const east = cluster("east", [service("db", "db", { annotations: ANNOTATED, headless: true })], {
      endpointSlices: [slice("db", "db", [undefined])],
    });
    assert.equal(expectedMirrors([east]).get("db/db-east")?.service?.headless, false);
    const local = actualMirrors(
      [{ metadata: { namespace: "db", name: "db-east" }, spec: { type: "ClusterIP", clusterIP: "None" } }],
      [
        {
          metadata: { namespace: "db", name: "db-east" },
          subsets: [{ addresses: [{ ip: "10.96.0.10", hostname: "db-0" }] }],
        },
      ],
    );
    assert.equal(local.get("db/db-east")?.service?.headless, true);
    assert.deepEqual(local.get("db/db-east")?.endpoints?.subsets[0]?.addresses, ["db-0=10.96.0.10"]);
  });
});

describe("chaos oracle: fleet-wide Services (SPEC §11)", () => {
  const member = (ports = HTTP, annotations: Record<string, string> = {}) =>
    service("modes", "m-0", { labels: MEMBER, annotations, ports });

  it("unites the members' gateways, the first registered member setting the ports, and leaves a disagreeing member out", () => {
    const grpc = [...HTTP, { name: "grpc", protocol: "TCP", port: 90, targetPort: 9090 }];
    const expected = expectedShared([
      cluster("west", [member()]),
      cluster("east", [member(HTTP, ANNOTATED)]),
      cluster("north", [member(grpc)]),
    ]);
    const fleet = expected.get("fleet-wide modes/m-0-federated");
    assert.deepEqual(fleet?.service?.annotations, { "mirror.linkerd.io/federated-clusters": "east,west" });
    assert.deepEqual(fleet?.service?.labels, {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/federated": "true",
    });
    assert.deepEqual(fleet?.endpoints?.addresses, [
      '198.18.0.1|true|[["http","TCP",4143]]',
      '198.18.0.2|true|[["http","TCP",4200]]',
    ]);
    // The first registered member (north first) sets other ports: the two others are left out.
    const north = expectedShared([cluster("north", [member(grpc)]), cluster("west", [member()])]);
    assert.deepEqual(north.get("fleet-wide modes/m-0-federated")?.service?.annotations, {
      "mirror.linkerd.io/federated-clusters": "north",
    });
  });

  it("expects nothing from an excluded namespace, sharded in Endpoints mode, or without members", () => {
    const excluded = service("kube-system", "dns", { labels: MEMBER });
    assert.equal(expectedShared([cluster("east", [excluded])]).size, 0);
    assert.equal(expectedShared([cluster("east", [member()])], { shards: 6 }).size, 0);
    assert.equal(expectedShared([cluster("east", [service("modes", "m-0")])]).size, 0);
  });

  it("reports nothing when local equals the oracle, and each differing field otherwise", () => {
    const expected = expectedShared([cluster("east", [member()])], { deadAddresses: new Set() });
    const labels = { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/federated": "true" };
    const svc = {
      metadata: {
        namespace: "modes",
        name: "m-0-federated",
        labels,
        annotations: { "mirror.linkerd.io/federated-clusters": "east" },
      },
      spec: { type: "ClusterIP", ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] },
    };
    const endpoints = {
      metadata: { namespace: "modes", name: "m-0-federated", labels },
      subsets: [{ addresses: [{ ip: "198.18.0.2" }], ports: [{ name: "http", protocol: "TCP", port: 4200 }] }],
    };
    assert.deepEqual(diffShared(expected, actualShared([svc], [endpoints], [])), []);
    const stale = { ...endpoints, subsets: [] };
    const diff = diffShared(expected, actualShared([svc], [stale], []));
    assert.equal(diff.length, 1, diff.join("\n"));
    assert.match(diff[0] ?? "", /Endpoints addresses/);
  });
});

describe("chaos oracle: MCS imports (SPEC §12)", () => {
  const withExports = (name: string, services: RemoteService[], exports: string[]): RemoteCluster =>
    cluster(name, services, {
      serviceExports: exports.map((n) => ({
        metadata: { namespace: "mcs", name: n, creationTimestamp: "2026-01-01T00:00:00Z" },
      })),
    });

  it("names the derived Service as the SPEC says (FNV-1a 64 of <ns>/<svc>), as the product does", () => {
    for (const [ns, svc] of [
      ["mcs", "api-0"],
      ["a", "b"],
      ["ünï", "☃"],
    ] as const)
      assert.equal(derivedName(ns, svc), derivedServiceName(ns, svc));
  });

  it("expects a ServiceImport with each exporting cluster, its derived Service and the exporters' default gateways", () => {
    const api = service("mcs", "api-0");
    const expected = expectedShared(
      [
        withExports("east", [api], ["api-0", "no-service"]),
        withExports("west", [api], ["api-0"]),
        cluster("north", [api]),
      ],
      { localMcs: true, localClusterIPs: new Map([[`mcs/${derivedName("mcs", "api-0")}`, "10.96.1.1"]]) },
    );
    assert.deepEqual([...expected.keys()], ["import mcs/api-0"]);
    const imported = expected.get("import mcs/api-0");
    assert.equal(imported?.service?.name, derivedName("mcs", "api-0"));
    assert.deepEqual(imported?.serviceImport?.clusters, ["east", "west"]);
    assert.deepEqual(imported?.serviceImport?.ips, ["10.96.1.1"]);
    assert.deepEqual(imported?.serviceImport?.ports, ["http/TCP/80"]);
    // Both exporters' default gateways are at 198.18.0.2:4200 here: once per exporter.
    assert.deepEqual(imported?.endpoints?.addresses, [
      '198.18.0.2|true|[["http","TCP",4200]]',
      '198.18.0.2|true|[["http","TCP",4200]]',
    ]);
  });

  it("expects nothing when the local cluster does not serve ServiceImports", () => {
    assert.equal(expectedShared([withExports("east", [service("mcs", "api-0")], ["api-0"])]).size, 0);
  });
});

describe("chaos schedule: the mode steps", () => {
  const options = { seed: 5, clusters: ["east", "west", "north"], proxies: true };

  it("interleaves one mode step in three and keeps the other steps of the seed exactly", () => {
    const plain = new Schedule(options).take(200);
    const mixed = new Schedule({ ...options, modes: { mcs: true } }).take(300);
    assert.deepEqual(
      mixed.filter((s) => !isModeStep(s)),
      plain,
    );
    assert.ok(mixed.every((s, i) => isModeStep(s) === (i % 3 === 2)));
  });

  it("never leaves the headless Service without a host, and draws no ServiceExport without the MCS API", () => {
    const steps: Step[] = new Schedule({ ...options, modes: { mcs: false } }).take(900);
    const kinds = new Set(steps.filter(isModeStep).map((s) => s.kind));
    assert.ok(!kinds.has("service-export"));
    for (const kind of ["label-export", "annotate-export", "member", "mode-ports", "headless-hosts"] as const)
      assert.ok(kinds.has(kind), kind);
    for (const s of steps) if (s.kind === "headless-hosts") assert.ok(s.hosts.length >= 1 && s.hosts.length <= 3);
  });
});
