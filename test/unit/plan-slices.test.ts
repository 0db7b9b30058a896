/**
 * The pure planner for EndpointSlices (SPEC §9): the objects a mirror has in each
 * `--endpoints-api` mode, the slices' names, labels, owner, endpoints and ports, that a
 * slice as the API server returns it matches, conversion between modes, ownership and
 * garbage collection of slices.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { addressFamily } from "../../src/core/endpoint-slices.ts";
import type { EndpointsApi, ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, Endpoints, Service } from "../../src/core/objects.ts";
import { type MirrorPlan, type PlanInput, planMirror } from "../../src/core/plan.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const LABELS = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "mirror",
};
const SLICE_LABELS = {
  ...LABELS,
  "kubernetes.io/service-name": "web-east",
  "endpointslice.kubernetes.io/managed-by": "fleet-mirror",
};
const FQ_NAME = "web.shop.svc.cluster.local";
const ANNOTATIONS = {
  "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME,
  "mirror.linkerd.io/remote-gateway-identity": "gateway.mirror.identity",
};
const OWNER = { apiVersion: "v1", kind: "Service", name: "web-east", uid: "uid-svc", controller: true };

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
    },
    ports: [
      { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
      { protocol: "UDP", port: 53 },
    ],
    endpointsAnnotations: ANNOTATIONS,
    addresses: ["198.18.0.10", "198.18.0.11"],
    notReadyAddresses: [],
    endpointPorts: [
      { name: "http", protocol: "TCP", port: 4143 },
      { protocol: "UDP", port: 4143 },
    ],
    ...overrides,
  });
}

const service: Service = deepFreeze({
  apiVersion: "v1",
  kind: "Service",
  metadata: {
    name: "web-east",
    namespace: "shop",
    uid: "uid-svc",
    resourceVersion: "501",
    labels: LABELS,
    annotations: mirror().serviceAnnotations,
  },
  spec: {
    type: "ClusterIP",
    clusterIP: "10.96.0.5",
    ports: [
      { name: "http", protocol: "TCP", port: 80, targetPort: 8080 },
      { protocol: "UDP", port: 53, targetPort: 53 },
    ],
  },
});

const endpoints = (labels: Record<string, string> = LABELS): Endpoints =>
  deepFreeze({
    apiVersion: "v1",
    kind: "Endpoints",
    metadata: {
      name: "web-east",
      namespace: "shop",
      uid: "uid-ep",
      resourceVersion: "502",
      labels,
      annotations: ANNOTATIONS,
    },
    subsets: [
      {
        addresses: [{ ip: "198.18.0.10" }, { ip: "198.18.0.11" }],
        ports: [
          { name: "http", port: 4143, protocol: "TCP" },
          { port: 4143, protocol: "UDP" },
        ],
      },
    ],
  });

/** The IPv4 slice of `mirror()` as a real API server returns it: defaults filled in, endpoints reordered. */
function liveSlice(overrides: Partial<EndpointSlice> & { labels?: Record<string, string>; uid?: string } = {}) {
  const { labels, uid, ...rest } = overrides;
  return deepFreeze<EndpointSlice>({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: "web-east-ipv4",
      namespace: "shop",
      uid: uid ?? "uid-slice4",
      resourceVersion: "503",
      generation: 1,
      labels: labels ?? SLICE_LABELS,
      annotations: { ...ANNOTATIONS, "example.com/note": "kept" },
      ownerReferences: [OWNER],
      managedFields: [{ manager: "fleet-mirror" }],
    },
    addressType: "IPv4",
    endpoints: [
      { addresses: ["198.18.0.11"], conditions: { ready: true, serving: true, terminating: false } },
      { addresses: ["198.18.0.10"], conditions: { ready: true, serving: true, terminating: false } },
    ],
    ports: [
      { name: "", protocol: "UDP", port: 4143 },
      { name: "http", protocol: "TCP", port: 4143 },
    ],
    ...rest,
  });
}

type TestInput = Partial<Omit<PlanInput, "observed">> & {
  service?: Service | undefined;
  endpoints?: Endpoints | undefined;
  slices?: readonly EndpointSlice[];
};

function plan(overrides: TestInput, mode: EndpointsApi = "endpointslices"): MirrorPlan {
  const { service: svc, endpoints: ep, slices = [], ...rest } = overrides;
  const observed: ObservedObject[] = [
    ...(svc ? [{ kind: "Service" as const, object: svc }] : []),
    ...(ep ? [{ kind: "Endpoints" as const, object: ep }] : []),
    ...slices.map((object) => ({ kind: "EndpointSlice" as const, object })),
  ];
  return planMirror({
    key: "shop/web-east",
    desired: mirror(),
    observed,
    endpointsApi: mode,
    namespaceExists: true,
    createNamespaces: true,
    excludedNamespaces: [],
    gcAllowed: () => true,
    ...rest,
  });
}

const summary = (actions: readonly WriteAction[]): string[] => actions.map((a) => `${a.verb} ${a.kind} ${a.name}`);

function body(action: WriteAction | undefined): Record<string, unknown> {
  assert.ok(action && "body" in action, `expected a create or update, got ${JSON.stringify(action)}`);
  return action.body as Record<string, unknown>;
}

describe("planMirror with EndpointSlices: the objects of each mode", () => {
  it("endpointslices: a new mirror gets its Service first; its slices wait for the Service's uid", () => {
    assert.deepEqual(summary(plan({}).actions), ["create Service web-east"]);
    assert.deepEqual(summary(plan({ service }).actions), ["create EndpointSlice web-east-ipv4"]);
  });

  it("endpoints: exactly the Service and Endpoints of §3, and never a slice", () => {
    assert.deepEqual(summary(plan({ service }, "endpoints").actions), ["create Endpoints web-east"]);
  });

  it("both: Endpoints labelled skip-mirror, and the slices", () => {
    const p = plan({ service }, "both");
    assert.deepEqual(summary(p.actions), ["create Endpoints web-east", "create EndpointSlice web-east-ipv4"]);
    assert.deepEqual((body(p.actions[0]).metadata as { labels: unknown }).labels, {
      ...LABELS,
      "endpointslice.kubernetes.io/skip-mirror": "true",
    });
  });

  it("writes a slice with the mirror labels, service-name, fleet-mirror's managed-by, the owner, the §3 annotations", () => {
    const slice = body(plan({ service }).actions[0]);
    assert.deepEqual(slice, {
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: "web-east-ipv4",
        namespace: "shop",
        labels: SLICE_LABELS,
        annotations: ANNOTATIONS,
        ownerReferences: [OWNER],
      },
      addressType: "IPv4",
      endpoints: [
        { addresses: ["198.18.0.10"], conditions: { ready: true, serving: true, terminating: false } },
        { addresses: ["198.18.0.11"], conditions: { ready: true, serving: true, terminating: false } },
      ],
      ports: [
        { name: "http", protocol: "TCP", port: 4143 },
        { protocol: "UDP", port: 4143 },
      ],
    });
  });

  it("never uses a managed-by value of the built-in controllers", () => {
    const labels = (body(plan({ service }).actions[0]).metadata as { labels: Record<string, string> }).labels;
    assert.doesNotMatch(labels["endpointslice.kubernetes.io/managed-by"] ?? "", /k8s\.io$/);
  });

  it("gives a dual-stack gateway one slice per family", () => {
    const desired = mirror({ addresses: ["198.18.0.10", "2001:db8::1", "2001:db8::2"] });
    const p = plan({ service, desired });
    assert.deepEqual(summary(p.actions), ["create EndpointSlice web-east-ipv4", "create EndpointSlice web-east-ipv6"]);
    const v6 = body(p.actions[1]);
    assert.equal(v6["addressType"], "IPv6");
    assert.deepEqual(
      (v6["endpoints"] as { addresses: string[] }[]).map((e) => e.addresses),
      [["2001:db8::1"], ["2001:db8::2"]],
    );
  });

  it("gives an IPv6-only gateway one IPv6 slice only", () => {
    const p = plan({ service, desired: mirror({ addresses: ["2001:db8::1"] }) });
    assert.deepEqual(summary(p.actions), ["create EndpointSlice web-east-ipv6"]);
  });

  it("classes an IPv4-mapped IPv6 address as IPv4, the only slice type the API server accepts it in", () => {
    assert.equal(addressFamily("::ffff:198.18.0.1"), "ipv4");
    assert.equal(addressFamily("2001:db8::1"), "ipv6");
    assert.equal(addressFamily("198.18.0.1"), "ipv4");
  });

  it("gives an unusable gateway one IPv4 slice without endpoints", () => {
    const p = plan({ service, desired: mirror({ addresses: [], endpointPorts: [] }) });
    assert.deepEqual(summary(p.actions), ["create EndpointSlice web-east-ipv4"]);
    assert.deepEqual(body(p.actions[0])["endpoints"], []);
    assert.equal(body(p.actions[0])["addressType"], "IPv4");
  });

  it("makes dead gateway addresses endpoints that are neither ready nor serving (SPEC §10)", () => {
    const p = plan({ service, desired: mirror({ notReadyAddresses: ["198.18.0.11"] }) });
    assert.deepEqual(body(p.actions[0])["endpoints"], [
      { addresses: ["198.18.0.10"], conditions: { ready: true, serving: true, terminating: false } },
      { addresses: ["198.18.0.11"], conditions: { ready: false, serving: false, terminating: false } },
    ]);
  });
});

describe("planMirror with EndpointSlices: matching what the API server returns", () => {
  it("plans nothing over an intact slice, whatever defaults, order and foreign annotations the API server added", () => {
    assert.deepEqual(plan({ service, slices: [liveSlice()] }), { actions: [] });
    assert.deepEqual(
      plan(
        {
          service,
          endpoints: endpoints({ ...LABELS, "endpointslice.kubernetes.io/skip-mirror": "true" }),
          slices: [liveSlice()],
        },
        "both",
      ),
      {
        actions: [],
      },
    );
  });

  it("plans nothing over an intact empty slice the API server returns with endpoints null", () => {
    const desired = mirror({ addresses: [], endpointPorts: [] });
    assert.deepEqual(plan({ service, desired, slices: [liveSlice({ endpoints: null, ports: null })] }), {
      actions: [],
    });
  });

  const updates: { what: string; slice: EndpointSlice; desired?: DesiredMirror }[] = [
    { what: "an address changed", slice: liveSlice(), desired: mirror({ addresses: ["198.18.0.10", "198.18.0.12"] }) },
    {
      what: "an address became not ready",
      slice: liveSlice(),
      desired: mirror({ notReadyAddresses: ["198.18.0.10"] }),
    },
    { what: "a port changed", slice: liveSlice({ ports: [{ name: "http", protocol: "TCP", port: 4143 }] }) },
    { what: "a mirror label was edited", slice: liveSlice({ labels: { ...SLICE_LABELS, extra: "x" } }) },
    {
      what: "the identity annotation changed",
      slice: liveSlice(),
      desired: mirror({ endpointsAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": FQ_NAME } }),
    },
    {
      what: "the owner is a Service of another uid (the Service was recreated)",
      slice: liveSlice(),
      desired: mirror(),
    },
  ];
  for (const { what, slice, desired } of updates) {
    it(`updates the slice when ${what}, keeping its resourceVersion and foreign annotations`, () => {
      const svc = what.startsWith("the owner")
        ? deepFreeze({ ...service, metadata: { ...service.metadata, uid: "uid-new" } })
        : service;
      const p = plan({ service: svc, slices: [slice], ...(desired ? { desired } : {}) });
      assert.deepEqual(summary(p.actions), ["update EndpointSlice web-east-ipv4"]);
      const meta = body(p.actions[0])["metadata"] as {
        resourceVersion: string;
        annotations: Record<string, string>;
        ownerReferences: unknown[];
      };
      assert.equal(meta.resourceVersion, "503");
      assert.equal(meta.annotations["example.com/note"], "kept");
      assert.deepEqual(meta.ownerReferences, [{ ...OWNER, uid: svc.metadata.uid }]);
    });
  }

  it("replaces a slice whose addressType differs (immutable): deleted, then created by the next plan", () => {
    const p = plan({ service, slices: [liveSlice({ addressType: "IPv6" })] });
    assert.deepEqual(p.actions, [
      {
        verb: "delete",
        kind: "EndpointSlice",
        namespace: "shop",
        name: "web-east-ipv4",
        uid: "uid-slice4",
        cluster: "east",
      },
    ]);
  });
});

describe("planMirror with EndpointSlices: converting between modes", () => {
  const skip = { ...LABELS, "endpointslice.kubernetes.io/skip-mirror": "true" };

  it("endpoints → endpointslices: writes the slice first, then deletes the owned Endpoints", () => {
    const p = plan({ service, endpoints: endpoints() });
    assert.deepEqual(summary(p.actions), ["create EndpointSlice web-east-ipv4", "delete Endpoints web-east"]);
  });

  it("endpointslices → endpoints: writes the Endpoints first, then deletes the owned slices", () => {
    const p = plan({ service, slices: [liveSlice()] }, "endpoints");
    assert.deepEqual(summary(p.actions), ["create Endpoints web-east", "delete EndpointSlice web-east-ipv4"]);
  });

  it("endpoints → both: labels the Endpoints skip-mirror and adds the slice; both → endpoints removes both", () => {
    assert.deepEqual(summary(plan({ service, endpoints: endpoints() }, "both").actions), [
      "update Endpoints web-east",
      "create EndpointSlice web-east-ipv4",
    ]);
    assert.deepEqual(
      summary(plan({ service, endpoints: endpoints(skip), slices: [liveSlice()] }, "endpoints").actions),
      ["update Endpoints web-east", "delete EndpointSlice web-east-ipv4"],
    );
  });

  it("deletes the slice of a family the gateway no longer has", () => {
    const v6 = liveSlice({ addressType: "IPv6", uid: "uid-slice6" });
    const stale = deepFreeze({ ...v6, metadata: { ...v6.metadata, name: "web-east-ipv6" } });
    const p = plan({ service, slices: [liveSlice(), stale] });
    assert.deepEqual(summary(p.actions), ["delete EndpointSlice web-east-ipv6"]);
  });
});

describe("planMirror with EndpointSlices: ownership and garbage collection (SPEC §5, §6)", () => {
  it("blocks as user-owned, untouched, when a slice under our name lacks our labels or our managed-by", () => {
    for (const labels of [
      { app: "web" },
      { ...SLICE_LABELS, "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io" },
      { ...SLICE_LABELS, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io" },
    ]) {
      for (const mode of ["endpointslices", "endpoints", "both"] as const) {
        const p = plan({ service, slices: [liveSlice({ labels })] }, mode);
        assert.deepEqual(p.actions, [], `${mode} ${JSON.stringify(labels)}`);
        assert.equal(p.blocked?.reason, "user-owned");
        assert.match(p.blocked?.message ?? "", /EndpointSlice shop\/web-east-ipv4/);
      }
    }
  });

  it("blocks as owned-by-other-cluster when the slice is another cluster's that still claims the name", () => {
    const p = plan({
      service,
      slices: [liveSlice({ labels: { ...SLICE_LABELS, "mirror.linkerd.io/cluster-name": "west" } })],
      claimants: ["east", "west"],
    });
    assert.equal(p.blocked?.reason, "owned-by-other-cluster");
    assert.deepEqual(p.actions, []);
  });

  it("deletes the owned slices of a mirror no longer desired, with uid preconditions, only when GC is allowed", () => {
    const input = { desired: undefined, service, slices: [liveSlice()] };
    assert.deepEqual(summary(plan(input).actions), ["delete Service web-east", "delete EndpointSlice web-east-ipv4"]);
    assert.deepEqual(plan({ ...input, gcAllowed: () => false }).actions, []);
    const userSlice = liveSlice({ labels: { ...SLICE_LABELS, "endpointslice.kubernetes.io/managed-by": "someone" } });
    assert.deepEqual(plan({ desired: undefined, slices: [userSlice] }).actions, []);
  });
});
