/**
 * The pure planner (SPEC §3–§6): what the local writer does for one local key, given the
 * desired mirror and the local objects as the API server returns them.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type DesiredMirror, viewGateway } from "../../src/core/desired.ts";
import { endpointIpProblem } from "../../src/core/ip.ts";
import type { ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { Endpoints, Service } from "../../src/core/objects.ts";
import { type MirrorPlan, type PlanInput, planMirror } from "../../src/core/plan.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const LABELS = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "mirror",
};
const FQ_NAME = "web.shop.svc.cluster.local";
const EXCLUDED = ["kube-system", "kube-public", "kube-node-lease"];

function mirror(overrides: Partial<DesiredMirror> = {}): DesiredMirror {
  return deepFreeze({
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
    ports: [
      { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
      { name: "admin", protocol: "TCP", port: 9990 },
    ],
    endpointsAnnotations: {
      "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
      "mirror.linkerd.io/remote-gateway-identity": "gateway.mirror.identity",
    },
    addresses: ["198.18.0.10", "198.18.0.11"],
    notReadyAddresses: [],
    endpointPorts: [
      { name: "http", protocol: "TCP", port: 4143 },
      { name: "admin", protocol: "TCP", port: 4143 },
    ],
    ...overrides,
  });
}

/** The mirror Service of `mirror()` as a real API server returns it: defaults filled in, extra metadata. */
function liveService(overrides: { labels?: Record<string, string>; uid?: string; deleting?: boolean } = {}): Service {
  return deepFreeze({
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: "web-east",
      namespace: "shop",
      uid: overrides.uid ?? "uid-svc",
      resourceVersion: "501",
      creationTimestamp: "2026-01-01T00:00:00Z",
      ...(overrides.deleting ? { deletionTimestamp: "2026-01-02T00:00:00Z" } : {}),
      labels: overrides.labels ?? LABELS,
      annotations: {
        "mirror.linkerd.io/remote-resource-version": "1234",
        "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
        "mirror.linkerd.io/remote-gateway-resource-version": "77",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "example.com/owner": "platform-team",
      },
      managedFields: [{ manager: "fleet-mirror", operation: "Update" }],
    },
    spec: {
      type: "ClusterIP",
      clusterIP: "10.96.12.34",
      clusterIPs: ["10.96.12.34"],
      sessionAffinity: "None",
      ipFamilies: ["IPv4"],
      ipFamilyPolicy: "SingleStack",
      internalTrafficPolicy: "Cluster",
      ports: [
        { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
        // targetPort defaulted by the API server to the port
        { name: "admin", protocol: "TCP", port: 9990, targetPort: 9990 },
      ],
    },
    status: { loadBalancer: {} },
  });
}

function liveEndpoints(overrides: { labels?: Record<string, string>; uid?: string } = {}): Endpoints {
  return deepFreeze({
    apiVersion: "v1",
    kind: "Endpoints",
    metadata: {
      name: "web-east",
      namespace: "shop",
      uid: overrides.uid ?? "uid-ep",
      resourceVersion: "502",
      labels: overrides.labels ?? LABELS,
      annotations: {
        "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
        "mirror.linkerd.io/remote-gateway-identity": "gateway.mirror.identity",
        "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z",
      },
    },
    subsets: [
      {
        // the API server keeps the order it was given; compare must not depend on it
        addresses: [{ ip: "198.18.0.11" }, { ip: "198.18.0.10" }],
        ports: [
          { name: "admin", port: 4143, protocol: "TCP" },
          { name: "http", port: 4143, protocol: "TCP" },
        ],
      },
    ],
  });
}

const USER_LABELS = { app: "web", team: "shop" };

/** A plan input with the observed objects named by kind; §3's Endpoints mode unless told. */
type TestInput = Partial<Omit<PlanInput, "observed">> & {
  service?: Service | undefined;
  endpoints?: Endpoints | undefined;
};

function plan(overrides: TestInput): MirrorPlan {
  const { service, endpoints, ...rest } = overrides;
  const observed: ObservedObject[] = [];
  if (service) observed.push({ kind: "Service", object: service });
  if (endpoints) observed.push({ kind: "Endpoints", object: endpoints });
  return planMirror({
    key: "shop/web-east",
    desired: mirror(),
    observed,
    endpointsApi: "endpoints",
    namespaceExists: true,
    createNamespaces: true,
    excludedNamespaces: EXCLUDED,
    gcAllowed: () => true,
    ...rest,
  });
}

function summary(actions: readonly WriteAction[]): string[] {
  return actions.map((a) => `${a.verb} ${a.kind}`);
}

function body(action: WriteAction | undefined): Record<string, unknown> {
  assert.ok(action && "body" in action, `expected a create or update, got ${JSON.stringify(action)}`);
  return action.body as Record<string, unknown>;
}

describe("planMirror: creating and keeping a mirror", () => {
  it("creates the namespace, then the Service, then the Endpoints when nothing exists locally", () => {
    const p = plan({ namespaceExists: false });
    assert.equal(p.blocked, undefined);
    assert.deepEqual(summary(p.actions), ["create Namespace", "create Service", "create Endpoints"]);
    const [ns, svc, ep] = p.actions;
    assert.deepEqual(body(ns), {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: {
        name: "shop",
        labels: { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/cluster-name": "east" },
      },
    });
    assert.deepEqual(body(svc), {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "web-east",
        namespace: "shop",
        labels: LABELS,
        annotations: mirror().serviceAnnotations,
      },
      spec: {
        type: "ClusterIP",
        ports: [
          { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
          { name: "admin", protocol: "TCP", port: 9990 },
        ],
      },
    });
    assert.deepEqual(body(ep), {
      apiVersion: "v1",
      kind: "Endpoints",
      metadata: { name: "web-east", namespace: "shop", labels: LABELS, annotations: mirror().endpointsAnnotations },
      subsets: [
        {
          addresses: [{ ip: "198.18.0.10" }, { ip: "198.18.0.11" }],
          ports: [
            { name: "http", port: 4143, protocol: "TCP" },
            { name: "admin", port: 4143, protocol: "TCP" },
          ],
        },
      ],
    });
  });

  it("does not create the namespace when it exists", () => {
    assert.deepEqual(summary(plan({}).actions), ["create Service", "create Endpoints"]);
  });

  it("creates Endpoints without subsets while the gateway is unusable", () => {
    const p = plan({ desired: mirror({ addresses: [], endpointPorts: [] }) });
    assert.deepEqual(body(p.actions[1]).subsets, []);
  });

  it("plans nothing when the observed objects match, whatever defaults and foreign annotations the API server added", () => {
    const p = plan({ service: liveService(), endpoints: liveEndpoints() });
    assert.deepEqual(p, { actions: [] });
  });

  it("plans nothing for matching Endpoints without subsets while the gateway is unusable", () => {
    const unusable = mirror({ addresses: [], endpointPorts: [] });
    const { subsets: _subsets, ...withoutSubsets } = liveEndpoints();
    for (const endpoints of [withoutSubsets, deepFreeze({ ...withoutSubsets, subsets: [] })]) {
      assert.deepEqual(plan({ desired: unusable, service: liveService(), endpoints }), { actions: [] });
    }
    assert.deepEqual(summary(plan({ desired: unusable, service: liveService(), endpoints: liveEndpoints() }).actions), [
      "update Endpoints",
    ]);
  });

  it("puts dead gateway addresses under notReadyAddresses and updates only when liveness changes (SPEC §10)", () => {
    const oneDead = mirror({ notReadyAddresses: ["198.18.0.11"] });
    const p = plan({ desired: oneDead, service: liveService(), endpoints: liveEndpoints() });
    assert.deepEqual(summary(p.actions), ["update Endpoints"]);
    const [subset] = body(p.actions[0]).subsets as { addresses?: unknown; notReadyAddresses?: unknown }[];
    assert.deepEqual(subset?.addresses, [{ ip: "198.18.0.10" }]);
    assert.deepEqual(subset?.notReadyAddresses, [{ ip: "198.18.0.11" }]);
    const allDead = mirror({ notReadyAddresses: ["198.18.0.10", "198.18.0.11"] });
    const [deadSubset] = body(plan({ desired: allDead }).actions[1]).subsets as Record<string, unknown>[];
    assert.equal(
      deadSubset?.addresses,
      undefined,
      "no ready address: the field is absent, as the API server returns it",
    );
  });

  it("creates only the missing half of a mirror", () => {
    assert.deepEqual(summary(plan({ service: liveService() }).actions), ["create Endpoints"]);
    assert.deepEqual(summary(plan({ endpoints: liveEndpoints() }).actions), ["create Service"]);
  });
});

describe("planMirror: updating a mirror that differs", () => {
  const cases: { what: string; desired?: DesiredMirror; service?: Service; endpoints?: Endpoints; expect: string[] }[] =
    [
      {
        what: "a port number changed",
        desired: mirror({ ports: [{ name: "http", protocol: "TCP", port: 81, targetPort: 8080 }] }),
        expect: ["update Service"],
      },
      {
        what: "a targetPort changed",
        desired: mirror({
          ports: [
            { name: "http", protocol: "TCP", port: 80, targetPort: "web" },
            { name: "admin", protocol: "TCP", port: 9990 },
          ],
        }),
        expect: ["update Service"],
      },
      {
        what: "a port protocol changed",
        desired: mirror({
          ports: [
            { name: "http", protocol: "UDP", port: 80, targetPort: 8080 },
            { name: "admin", protocol: "TCP", port: 9990 },
          ],
        }),
        expect: ["update Service"],
      },
      {
        what: "the gateway labels changed",
        desired: mirror({ labels: { ...LABELS, "mirror.linkerd.io/remote-gateway-name": "gw-2" } }),
        expect: ["update Endpoints", "update Service"],
      },
      {
        what: "a foreign label was added by hand",
        service: deepFreeze({
          ...liveService(),
          metadata: { ...liveService().metadata, labels: { ...LABELS, extra: "x" } },
        }),
        expect: ["update Service"],
      },
      {
        what: "the remote resourceVersion annotation changed",
        desired: mirror({
          serviceAnnotations: { ...mirror().serviceAnnotations, "mirror.linkerd.io/remote-resource-version": "1300" },
        }),
        expect: ["update Service"],
      },
      {
        what: "the gateway resourceVersion annotation disappeared (gateway deleted)",
        desired: mirror({
          serviceAnnotations: {
            "mirror.linkerd.io/remote-resource-version": "1234",
            "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
          },
          addresses: [],
          endpointPorts: [],
        }),
        expect: ["update Endpoints", "update Service"],
      },
      {
        what: "the gateway identity changed",
        desired: mirror({
          endpointsAnnotations: {
            "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
            "mirror.linkerd.io/remote-gateway-identity": "gateway.mirror.identity-2",
          },
        }),
        expect: ["update Endpoints"],
      },
      {
        what: "the gateway addresses changed",
        desired: mirror({ addresses: ["198.51.100.1"] }),
        expect: ["update Endpoints"],
      },
      {
        what: "the gateway incoming-port changed",
        desired: mirror({
          endpointPorts: [
            { name: "http", protocol: "TCP", port: 4144 },
            { name: "admin", protocol: "TCP", port: 4144 },
          ],
        }),
        expect: ["update Endpoints"],
      },
      {
        what: "the gateway became unusable",
        desired: mirror({ addresses: [], endpointPorts: [] }),
        expect: ["update Endpoints"],
      },
      {
        what: "a selector was added by hand",
        service: deepFreeze({ ...liveService(), spec: { ...liveService().spec, selector: { app: "web" } } }),
        expect: ["update Service"],
      },
      {
        what: "the type was changed by hand",
        service: deepFreeze({ ...liveService(), spec: { ...liveService().spec, type: "NodePort" } }),
        expect: ["update Service"],
      },
    ];
  for (const c of cases) {
    it(`updates when ${c.what}`, () => {
      const p = plan({
        desired: c.desired ?? mirror(),
        service: c.service ?? liveService(),
        endpoints: c.endpoints ?? liveEndpoints(),
      });
      assert.equal(p.blocked, undefined);
      assert.deepEqual(summary(p.actions), c.expect);
    });
  }

  it("updates the Service in place: resourceVersion and clusterIP kept, foreign annotations kept, selector dropped", () => {
    const observed = deepFreeze({ ...liveService(), spec: { ...liveService().spec, selector: { app: "web" } } });
    const desired = mirror({
      ports: [{ name: "http", protocol: "TCP", port: 81, targetPort: 8080 }],
      serviceAnnotations: { ...mirror().serviceAnnotations, "mirror.linkerd.io/remote-resource-version": "1300" },
    });
    const [action] = plan({ desired, service: observed, endpoints: liveEndpoints() }).actions;
    assert.equal(action?.verb, "update");
    const b = body(action) as { metadata: Service["metadata"]; spec: NonNullable<Service["spec"]> };
    assert.equal(b.metadata.resourceVersion, "501");
    assert.equal(b.metadata.uid, "uid-svc");
    assert.deepEqual(b.metadata.labels, LABELS);
    assert.deepEqual(b.metadata.annotations, {
      "mirror.linkerd.io/remote-resource-version": "1300",
      "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
      "mirror.linkerd.io/remote-gateway-resource-version": "77",
      "kubectl.kubernetes.io/last-applied-configuration": "{}",
      "example.com/owner": "platform-team",
    });
    assert.equal(b.spec.clusterIP, "10.96.12.34");
    assert.equal(b.spec.type, "ClusterIP");
    assert.equal(b.spec.selector, undefined);
    assert.deepEqual(b.spec.ports, [{ name: "http", protocol: "TCP", port: 81, targetPort: 8080 }]);
  });

  it("drops mirror annotations we no longer want while keeping foreign ones on update", () => {
    const desired = mirror({
      endpointsAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME },
      addresses: [],
      endpointPorts: [],
    });
    const [action] = plan({ desired, service: liveService(), endpoints: liveEndpoints() }).actions;
    const b = body(action) as { metadata: Endpoints["metadata"]; subsets: unknown };
    assert.equal(b.metadata.resourceVersion, "502");
    assert.deepEqual(b.metadata.annotations, {
      "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
      "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z",
    });
    assert.deepEqual(b.subsets, []);
  });
});

describe("planMirror: ownership (SPEC §5)", () => {
  const userService = deepFreeze({ ...liveService(), metadata: { ...liveService().metadata, labels: USER_LABELS } });
  const userEndpoints = deepFreeze({
    ...liveEndpoints(),
    metadata: { ...liveEndpoints().metadata, labels: USER_LABELS },
  });

  it("blocks as user-owned, with no action at all, when a Service without the mirror labels holds the name", () => {
    for (const endpoints of [undefined, liveEndpoints()]) {
      const p = plan({ service: userService, endpoints, namespaceExists: false });
      assert.deepEqual(p.actions, []);
      assert.equal(p.blocked?.reason, "user-owned");
    }
  });

  it("blocks as user-owned, with no action at all, when Endpoints without the mirror labels hold the name", () => {
    for (const service of [undefined, liveService()]) {
      const p = plan({ service, endpoints: userEndpoints, namespaceExists: false });
      assert.deepEqual(p.actions, []);
      assert.equal(p.blocked?.reason, "user-owned");
    }
  });

  it("treats an object with mirrored-service=true but no cluster name, or mirrored-service not true, as user-owned", () => {
    for (const labels of [
      { "mirror.linkerd.io/mirrored-service": "true" },
      { ...LABELS, "mirror.linkerd.io/mirrored-service": "false" },
      { "mirror.linkerd.io/cluster-name": "east" },
    ]) {
      const p = plan({ service: liveService({ labels }), endpoints: liveEndpoints() });
      assert.deepEqual(p.actions, [], JSON.stringify(labels));
      assert.equal(p.blocked?.reason, "user-owned", JSON.stringify(labels));
    }
  });

  it("blocks as owned-by-other-cluster when the objects are another cluster's mirror that still claims the name, or cannot be collected yet", () => {
    const west = { ...LABELS, "mirror.linkerd.io/cluster-name": "west" };
    for (const [service, endpoints] of [
      [liveService({ labels: west }), liveEndpoints({ labels: west })],
      [undefined, liveEndpoints({ labels: west })],
      [liveService({ labels: west }), undefined],
    ] as const) {
      for (const p of [
        plan({ service, endpoints, claimants: ["east", "west"] }),
        plan({ service, endpoints, claimants: ["east"], gcAllowed: (cluster) => cluster !== "west" }),
      ]) {
        assert.deepEqual(p.actions, []);
        assert.equal(p.blocked?.reason, "owned-by-other-cluster");
      }
    }
  });

  it("deletes the objects of another cluster that no longer claims the name and may be collected, then releases it", () => {
    const west = { ...LABELS, "mirror.linkerd.io/cluster-name": "west" };
    const p = plan({
      service: liveService({ labels: west }),
      endpoints: liveEndpoints({ labels: west }),
      claimants: ["east"],
    });
    assert.equal(p.blocked, undefined);
    assert.equal(p.released, "west");
    assert.deepEqual(
      p.actions.map((a) => (a.verb === "delete" ? `${a.kind} ${a.uid} ${a.cluster}` : a.verb)),
      ["Service uid-svc west", "Endpoints uid-ep west"],
    );
  });

  it("adopts leftover Endpoints that carry our labels: creates the Service and updates the Endpoints", () => {
    const leftover = deepFreeze({
      apiVersion: "v1",
      kind: "Endpoints",
      metadata: { name: "web-east", namespace: "shop", uid: "uid-left", resourceVersion: "9", labels: LABELS },
    });
    const p = plan({ endpoints: leftover });
    assert.equal(p.blocked, undefined);
    assert.deepEqual(summary(p.actions), ["create Service", "update Endpoints"]);
    assert.equal((body(p.actions[1]).metadata as { resourceVersion?: string }).resourceVersion, "9");
  });
});

describe("planMirror: namespaces", () => {
  it("blocks as namespace-missing, with no action, when the namespace is absent and creation is off", () => {
    const p = plan({ namespaceExists: false, createNamespaces: false });
    assert.deepEqual(p.actions, []);
    assert.equal(p.blocked?.reason, "namespace-missing");
  });

  it("never writes into an excluded namespace, even when a desired mirror names one", () => {
    for (const namespace of EXCLUDED) {
      const p = plan({ desired: mirror({ namespace }), key: `${namespace}/web-east`, namespaceExists: false });
      assert.deepEqual(p.actions, []);
      assert.equal(p.blocked?.reason, "excluded-namespace");
    }
  });
});

describe("planMirror: deletion (SPEC §4, §6)", () => {
  it("deletes an owned Service and Endpoints that are no longer desired, with their uid as precondition", () => {
    const p = plan({ desired: undefined, service: liveService(), endpoints: liveEndpoints() });
    assert.deepEqual(p.actions, [
      { verb: "delete", kind: "Service", namespace: "shop", name: "web-east", uid: "uid-svc", cluster: "east" },
      { verb: "delete", kind: "Endpoints", namespace: "shop", name: "web-east", uid: "uid-ep", cluster: "east" },
    ]);
  });

  it("deletes nothing while garbage collection of the owning cluster is not allowed", () => {
    const asked: string[] = [];
    const p = plan({
      desired: undefined,
      service: liveService(),
      endpoints: liveEndpoints(),
      gcAllowed: (cluster) => {
        asked.push(cluster);
        return false;
      },
    });
    assert.deepEqual(p.actions, []);
    assert.ok(asked.every((c) => c === "east"));
  });

  it("asks about the owner of each object, not about another cluster", () => {
    const west = { ...LABELS, "mirror.linkerd.io/cluster-name": "west" };
    const p = plan({
      desired: undefined,
      service: liveService({ labels: west }),
      endpoints: liveEndpoints(),
      gcAllowed: (cluster) => cluster === "east",
    });
    assert.deepEqual(summary(p.actions), ["delete Endpoints"]);
  });

  it("never deletes a user's Service or Endpoints", () => {
    const p = plan({
      desired: undefined,
      service: liveService({ labels: USER_LABELS }),
      endpoints: liveEndpoints({ labels: { "mirror.linkerd.io/mirrored-service": "true" } }),
    });
    assert.deepEqual(p.actions, []);
  });

  it("does not delete again an object that is already being deleted", () => {
    const p = plan({ desired: undefined, service: liveService({ deleting: true }), endpoints: undefined });
    assert.deepEqual(p.actions, []);
  });

  it("plans nothing when nothing is desired and nothing exists", () => {
    assert.deepEqual(plan({ desired: undefined }).actions, []);
  });

  it("never plans a Namespace deletion or update, nor any write on an object it does not own, in any situation", () => {
    const users = [undefined, liveService({ labels: USER_LABELS })];
    const services = [undefined, liveService(), ...users, liveService({ labels: { ...LABELS, x: "y" } })];
    const endpointsList = [undefined, liveEndpoints(), liveEndpoints({ labels: USER_LABELS }), liveEndpoints()];
    const desires = [undefined, mirror(), mirror({ addresses: [] }), mirror({ namespace: "kube-system" })];
    let plans = 0;
    for (const desired of desires)
      for (const service of services)
        for (const endpoints of endpointsList)
          for (const namespaceExists of [true, false])
            for (const createNamespaces of [true, false])
              for (const gc of [true, false]) {
                const p = plan({
                  desired,
                  service,
                  endpoints,
                  namespaceExists,
                  createNamespaces,
                  gcAllowed: () => gc,
                });
                plans += 1;
                for (const a of p.actions) {
                  if (a.kind === "Namespace") assert.equal(a.verb, "create");
                  if (a.verb === "create" && a.kind !== "Namespace") {
                    assert.ok(desired, "create without a desired mirror");
                    assert.notEqual(a.namespace, "kube-system");
                  }
                  if (a.verb === "update" || a.verb === "delete") {
                    const observed = a.kind === "Service" ? service : endpoints;
                    assert.equal(observed?.metadata.labels?.["mirror.linkerd.io/mirrored-service"], "true");
                    assert.ok(observed?.metadata.labels?.["mirror.linkerd.io/cluster-name"]);
                  }
                  if (a.verb === "delete") assert.ok(gc);
                }
                if (p.blocked) assert.deepEqual(p.actions, []);
              }
    assert.ok(plans > 100);
  });
});

describe("addresses the writer may put in Endpoints (the API server's endpoint IP rules)", () => {
  it("accepts ordinary IPv4 and IPv6 addresses", () => {
    for (const ip of [
      "198.18.0.10",
      "10.0.0.1",
      "224.1.0.5",
      "2001:db8::1",
      "fd00::2",
      "fec0::1",
      "::ffff:198.18.0.1",
    ]) {
      assert.equal(endpointIpProblem(ip), undefined, ip);
    }
  });

  it("refuses unspecified, loopback, link-local and link-local multicast addresses, and non-IPs", () => {
    const refused: [string, string][] = [
      ["0.0.0.0", "unspecified"],
      ["::", "unspecified"],
      ["127.0.0.1", "loopback"],
      ["127.8.9.10", "loopback"],
      ["::1", "loopback"],
      ["::ffff:127.0.0.1", "loopback"],
      ["169.254.169.254", "link-local"],
      ["fe80::1", "link-local"],
      ["224.0.0.251", "link-local multicast"],
      ["ff02::1", "link-local multicast"],
      ["localhost", "not an IP address"],
      ["1.2.3.256", "not an IP address"],
      ["1::2::3", "not an IP address"],
    ];
    for (const [ip, problem] of refused) assert.equal(endpointIpProblem(ip), problem, ip);
  });

  it("leaves refused addresses out of a gateway's view and says why when none is left", () => {
    const gateway = (ingress: { ip?: string; hostname?: string }[]) =>
      deepFreeze({
        metadata: { name: "gateway", namespace: "mirror", resourceVersion: "7" },
        spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143 }] },
        status: { loadBalancer: { ingress } },
      });
    const lookup = (hostname: string) => (hostname === "gw.example" ? ["127.0.0.1", "198.18.0.7"] : ["127.0.0.1"]);
    assert.deepEqual(viewGateway(gateway([{ hostname: "gw.example" }, { ip: "169.254.1.1" }]), lookup).addresses, [
      "198.18.0.7",
    ]);
    const view = viewGateway(gateway([{ hostname: "localhost" }]), lookup);
    assert.deepEqual(view.addresses, []);
    assert.match(view.unusable ?? "", /127\.0\.0\.1 \(loopback\) cannot be Endpoints addresses/);
  });
});
