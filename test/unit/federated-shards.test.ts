/**
 * Fleet-wide Services across shards (SPEC §11, DESIGN §3 "Across shards"), the pure
 * parts: a part states its member's ports; the owner reads the members it does not
 * host from the parts; and, simulated over one shared store of objects standing for
 * the local API, two replicas that each host one member cluster converge to the same
 * objects as one writer would, whichever replica moves first, each writing only its own.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  FEDERATED_PORTS,
  memberFromPart,
  parsePortsAnnotation,
  portsAnnotation,
  shardedFederatedProblem,
  shardedMembers,
} from "../../src/core/federated-shards.ts";
import type { EndpointSlice, Endpoints } from "../../src/core/objects.ts";
import {
  ALT,
  assertEachWroteItsOwn,
  filled,
  HTTP,
  member,
  portsOf,
  type Replica,
  replicas,
  serviceOf,
  sliceOf,
  World,
} from "../helpers/federated-world.ts";
import { deepFreeze } from "../helpers/freeze.ts";

describe("a part's ports annotation", () => {
  it("is the same text for the same ports in any order, with defaults filled, and reads back", () => {
    const a = portsAnnotation([
      { name: "b", protocol: "TCP", port: 90 },
      { name: "a", protocol: "TCP", port: 80, targetPort: 8080 },
    ]);
    const b = portsAnnotation([
      { name: "a", protocol: "TCP", port: 80, targetPort: 8080 },
      { name: "b", protocol: "TCP", port: 90, targetPort: 90 },
    ]);
    assert.equal(a, b);
    assert.deepEqual(parsePortsAnnotation(a), [
      { name: "a", protocol: "TCP", port: 80, targetPort: 8080 },
      { name: "b", protocol: "TCP", port: 90, targetPort: 90 },
    ]);
  });

  it("reads nothing from an absent, malformed, empty or invalid annotation", () => {
    for (const text of [undefined, "", "{", "[]", '[{"protocol":"TCP","port":0}]', '[{"port":80}]', '"x"'])
      assert.equal(parsePortsAnnotation(text), undefined, String(text));
  });
});

function partSlice(
  cluster: string,
  family: "ipv4" | "ipv6",
  endpoints: NonNullable<EndpointSlice["endpoints"]>,
  annotations: Record<string, string> = { [FEDERATED_PORTS]: portsAnnotation(HTTP) },
): EndpointSlice {
  return deepFreeze({
    metadata: {
      name: `web-federated-${cluster}-${family}`,
      namespace: "shop",
      labels: {
        "mirror.linkerd.io/mirrored-service": "true",
        "mirror.linkerd.io/federated": "true",
        "mirror.linkerd.io/cluster-name": cluster,
        "kubernetes.io/service-name": "web-federated",
        "endpointslice.kubernetes.io/managed-by": "fleet-mirror",
      },
      annotations,
    },
    addressType: family === "ipv4" ? "IPv4" : "IPv6",
    endpoints,
    ports: [{ name: "http", protocol: "TCP", port: 4143 }],
  });
}

describe("memberFromPart and shardedMembers", () => {
  it("read a member from its part slices: ports from the annotation, addresses and readiness from both families", () => {
    const slices = [
      partSlice("west", "ipv4", [{ addresses: ["198.18.2.1"], conditions: { ready: true } }]),
      partSlice("west", "ipv6", [{ addresses: ["2001:db8::1"], conditions: { ready: false } }], {}),
    ];
    assert.deepEqual(memberFromPart("shop", "web-federated", "west", slices), {
      cluster: "west",
      namespace: "shop",
      name: "web-federated",
      remote: "shop/web",
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 80 }],
      addresses: ["198.18.2.1", "2001:db8::1"],
      notReadyAddresses: ["2001:db8::1"],
      endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
    });
  });

  it("take hosted members from the store, others from their parts; a part without ports is unreadable (unknown)", () => {
    const slices = [
      partSlice("east", "ipv4", []),
      partSlice("west", "ipv4", [{ addresses: ["198.18.2.1"] }]),
      partSlice("north", "ipv4", [], {}),
    ];
    const hostedEast = member("east", ["198.18.1.1"]);
    const result = shardedMembers({
      namespace: "shop",
      name: "web-federated",
      hosted: new Map([["east", hostedEast]]),
      slices,
      hosts: (c) => c === "east",
    });
    assert.equal(result.members.get("east"), hostedEast, "a hosted member wins over its own (lagging) part");
    assert.deepEqual(result.members.get("west")?.addresses, ["198.18.2.1"]);
    assert.deepEqual([...result.unreadable], ["north"]);
    assert.deepEqual([...result.partClusters].sort(), ["east", "north", "west"]);
  });

  it("sharding is refused for fleet-wide Services in endpoints mode only", () => {
    assert.match(shardedFederatedProblem(3, "endpoints") ?? "", /--endpoints-api endpoints/);
    assert.equal(shardedFederatedProblem(3, "endpointslices"), undefined);
    assert.equal(shardedFederatedProblem(3, "both"), undefined);
    assert.equal(shardedFederatedProblem(1, "endpoints"), undefined);
  });
});

describe("two replicas, one fleet-wide Service (simulated local API)", () => {
  const east = member("east", ["198.18.1.1"]);
  const west = member("west", ["198.18.2.1"]);

  it("converge to the union: the owner writes the Service, each host its cluster's part, with an ownerReference", () => {
    const world = new World();
    const rs = replicas(["west"], ["east"], [east, west]);
    world.settle(rs);
    assert.equal(serviceOf(world)?.metadata.annotations?.["mirror.linkerd.io/federated-clusters"], "east,west");
    for (const cluster of ["east", "west"]) {
      const slice = sliceOf(world, `web-federated-${cluster}-ipv4`);
      assert.equal(slice?.endpoints?.length, 1, `${cluster}'s part has its address`);
      assert.equal(
        (slice?.metadata["ownerReferences"] as { uid: string }[] | undefined)?.[0]?.uid,
        serviceOf(world)?.metadata.uid,
      );
    }
    assertEachWroteItsOwn(world, rs);
  });

  it("a host whose member the owner does not host announces it with an empty part; the owner then creates the Service", () => {
    const world = new World();
    const rs = replicas([], ["east"], [east]);
    const first = world.plan(rs[0] as Replica);
    assert.deepEqual(first.actions, [], "the owner sees no member yet");
    const announce = world.plan(rs[1] as Replica);
    assert.deepEqual(
      announce.actions.map((a) => `${a.verb} ${a.kind} ${a.name}`),
      ["create EndpointSlice web-federated-east-ipv4"],
    );
    const body = (announce.actions[0] as { body: EndpointSlice }).body;
    assert.deepEqual(body.endpoints, [], "no endpoints before the Service exists");
    assert.deepEqual(body.metadata["ownerReferences"], []);
    world.apply("b", announce.actions);
    world.settle(rs);
    assert.equal(serviceOf(world)?.metadata.annotations?.["mirror.linkerd.io/federated-clusters"], "east");
    assert.equal(sliceOf(world, "web-federated-east-ipv4")?.endpoints?.length, 1);
    assertEachWroteItsOwn(world, rs);
  });

  it("end in the same objects whichever replica moves first and however the clusters are split between them", () => {
    const north = member("north", ["198.18.3.1"], HTTP, ["198.18.3.1"]);
    const all = [east, west, north];
    const shapes = [];
    for (const [ownerHosts, otherHosts] of [
      [["east", "west", "north"], []],
      [["east"], ["west", "north"]],
      [[], ["east", "west", "north"]],
      [["north"], ["east", "west"]],
    ] as const) {
      for (const reverse of [false, true]) {
        const world = new World();
        const rs = replicas([...ownerHosts], [...otherHosts], all);
        world.settle(reverse ? [...rs].reverse() : rs);
        assertEachWroteItsOwn(world, rs);
        shapes.push(world.shape());
      }
    }
    for (const shape of shapes.slice(1)) assert.deepEqual(shape, shapes[0]);
  });

  it("a port conflict across shards: the first member by registration order sets the ports, the other host keeps its part empty and reports it", () => {
    const westAlt = member("west", ["198.18.2.1"], ALT);
    for (const order of [false, true]) {
      const world = new World();
      // The owner hosts west (second in registration order): east's ports win all the same.
      const rs = replicas(["west"], ["east"], [east, westAlt]);
      const last = world.settle(order ? [...rs].reverse() : rs);
      assert.deepEqual(portsOf(world), filled(HTTP));
      assert.equal(serviceOf(world)?.metadata.annotations?.["mirror.linkerd.io/federated-clusters"], "east");
      const part = sliceOf(world, "web-federated-west-ipv4");
      assert.deepEqual(part?.endpoints ?? [], [], "the excluded member's part has no endpoints");
      assert.equal(part?.metadata.annotations?.[FEDERATED_PORTS], portsAnnotation(ALT), "it still states its ports");
      assert.deepEqual(
        last.get("a")?.excluded?.map((e) => e.cluster),
        ["west"],
        "west's host (the owner here) reports it",
      );
      assert.deepEqual(last.get("b")?.excluded, []);
    }
    // The other way round: the excluded member's host does not own the Service; it follows the Service's ports.
    const world = new World();
    const rs = replicas(["east"], ["west"], [east, westAlt]);
    const last = world.settle(rs);
    assert.deepEqual(portsOf(world), filled(HTTP));
    assert.deepEqual(
      last.get("b")?.excluded?.map((e) => e.cluster),
      ["west"],
    );
    assert.match(last.get("b")?.excluded?.[0]?.message ?? "", /cluster west differ from those of cluster east/);
  });

  it("a member leaving on its host removes its part; the owner drops it from the annotation; the last one gone deletes the Service", () => {
    const world = new World();
    const rs = replicas(["west"], ["east"], [east, west]);
    world.settle(rs);
    (rs[1] as Replica).members = [];
    world.settle(rs);
    assert.equal(sliceOf(world, "web-federated-east-ipv4"), undefined);
    assert.equal(serviceOf(world)?.metadata.annotations?.["mirror.linkerd.io/federated-clusters"], "west");
    (rs[0] as Replica).members = [];
    world.settle(rs);
    assert.equal(world.objects.size, 0);
    assertEachWroteItsOwn(world, rs);
  });

  it("in both mode the owner writes the one Endpoints object from every part, the ones it reads included", () => {
    const world = new World("both");
    const rs = replicas(["west"], ["east"], [east, west]);
    world.settle(rs);
    const endpoints = world.objects.get("Endpoints/web-federated")?.object as Endpoints | undefined;
    assert.deepEqual((endpoints?.subsets ?? []).flatMap((s) => (s.addresses ?? []).map((a) => a.ip)).sort(), [
      "198.18.1.1",
      "198.18.2.1",
    ]);
    assertEachWroteItsOwn(world, rs);
  });

  it("over settled objects neither replica plans a write (a restart writes nothing)", () => {
    const world = new World();
    const rs = replicas(["west"], ["east"], [east, west]);
    world.settle(rs);
    for (const replica of rs) assert.deepEqual(world.plan({ ...replica }).actions, []);
  });
});
