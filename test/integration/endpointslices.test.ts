/**
 * End to end on real API servers: a mirror's addresses as EndpointSlices (SPEC §9) in
 * each `--endpoints-api` mode; converting between modes (restarting the controller with
 * the other flag) deletes only owned objects; a user's slice under a mirror's name is
 * reported and left alone; a restart over intact slices writes nothing; the slices of a
 * cluster whose Secret was deleted are garbage-collected. No kube-controller-manager
 * runs here: every slice that exists was made by fleet-mirror or by the test.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import type { EndpointsApi } from "../../src/core/mirror-kinds.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const GATEWAY_IP = "198.18.0.10";
const MIRROR_LABELS = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "gateway",
};
const MIRROR_KINDS = ["Service", "Endpoints", "EndpointSlice", "Namespace"];

describe("EndpointSlices (SPEC §9)", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let controller: Supervisor | undefined;

  async function start(mode: EndpointsApi, clusters: readonly string[] = ["east"]): Promise<Supervisor> {
    const started = fleet.startInProcess({ endpointsApi: mode });
    controller = started;
    await eventually(`the controller synced in ${mode} mode`, () =>
      started.writerReady &&
      clusters.every((name) => started.status().clusters.some((c) => c.cluster === name && c.state === "synced"))
        ? true
        : undefined,
    );
    return started;
  }

  async function restart(mode: EndpointsApi, clusters?: readonly string[]): Promise<Supervisor> {
    await controller?.stop();
    controller = undefined;
    return start(mode, clusters);
  }

  /** Every slice in `namespace` (any owner), by name. */
  async function slices(namespace: string): Promise<Map<string, V1EndpointSlice>> {
    const list = await discovery.listNamespacedEndpointSlice({ namespace });
    return new Map(list.items.map((s) => [s.metadata?.name ?? "", s]));
  }

  async function endpointsExist(namespace: string, name: string): Promise<boolean> {
    try {
      await fleet.local.readNamespacedEndpoints({ namespace, name });
      return true;
    } catch (error) {
      if (statusCode(error) === 404) return false;
      throw error;
    }
  }

  /** Waits until the names of the slices in `namespace` are exactly `names`, and returns them. */
  async function waitForSlices(
    namespace: string,
    names: readonly string[],
    check: (found: Map<string, V1EndpointSlice>) => boolean = () => true,
  ): Promise<Map<string, V1EndpointSlice>> {
    return eventually(`slices ${names.join(", ")} in ${namespace}`, async () => {
      const found = await slices(namespace);
      return [...found.keys()].sort().join() === [...names].sort().join() && check(found) ? found : undefined;
    });
  }

  const identity = (o: { metadata?: { uid?: string; resourceVersion?: string } } | undefined) =>
    `${o?.metadata?.uid}@${o?.metadata?.resourceVersion}`;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    await fleet.createGateway("east", { ingress: [{ ip: GATEWAY_IP }], identity: "gw.east.identity" });
    await fleet.register("east");
    await start("endpointslices");
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("endpointslices: the Service and one IPv4 slice, no Endpoints; labels, owner, annotations, endpoints, ports", async () => {
    await fleet.createService("east", "es-basic", "web", {
      ports: [
        { name: "http", port: 80, protocol: "TCP" },
        { name: "dns", port: 53, protocol: "UDP" },
      ],
    });
    const service = await fleet.waitForMirror("es-basic", "web-east");
    const found = await waitForSlices("es-basic", ["web-east-ipv4"]);
    const slice = found.get("web-east-ipv4");
    assert.deepEqual(slice?.metadata?.labels, {
      ...MIRROR_LABELS,
      "kubernetes.io/service-name": "web-east",
      "endpointslice.kubernetes.io/managed-by": "fleet-mirror",
    });
    assert.equal(
      slice?.metadata?.annotations?.["mirror.linkerd.io/remote-svc-fq-name"],
      "web.es-basic.svc.cluster.local",
    );
    assert.equal(slice?.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-identity"], "gw.east.identity");
    assert.deepEqual(
      slice?.metadata?.ownerReferences?.map((r) => [r.kind, r.name, r.uid, r.controller]),
      [["Service", "web-east", service.metadata?.uid, true]],
    );
    assert.equal(slice?.addressType, "IPv4");
    assert.deepEqual(
      slice?.endpoints?.map((e) => [
        e.addresses,
        e.conditions?.ready,
        e.conditions?.serving,
        e.conditions?.terminating,
      ]),
      [[[GATEWAY_IP], true, true, false]],
    );
    assert.deepEqual(slice?.ports?.map((p) => [p.name, p.protocol, p.port]).sort(), [
      ["dns", "UDP", 4143],
      ["http", "TCP", 4143],
    ]);
    assert.equal(await endpointsExist("es-basic", "web-east"), false);
  });

  it("restores a slice edited or deleted by hand (SPEC §4): a slice event reconciles its mirror", async () => {
    await fleet.createService("east", "es-edit", "web");
    const found = await waitForSlices("es-edit", ["web-east-ipv4"]);
    const slice = found.get("web-east-ipv4") as V1EndpointSlice;
    await discovery.replaceNamespacedEndpointSlice({
      namespace: "es-edit",
      name: "web-east-ipv4",
      body: { ...slice, endpoints: [{ addresses: ["198.18.0.99"], conditions: { ready: true } }] },
    });
    await waitForSlices(
      "es-edit",
      ["web-east-ipv4"],
      (f) => f.get("web-east-ipv4")?.endpoints?.[0]?.addresses[0] === GATEWAY_IP,
    );
    await discovery.deleteNamespacedEndpointSlice({ namespace: "es-edit", name: "web-east-ipv4" });
    const recreated = await waitForSlices(
      "es-edit",
      ["web-east-ipv4"],
      (f) => f.get("web-east-ipv4")?.metadata?.uid !== slice.metadata?.uid,
    );
    assert.deepEqual(
      recreated.get("web-east-ipv4")?.endpoints?.map((e) => e.addresses),
      [[GATEWAY_IP]],
    );
  });

  it("gives a dual-stack gateway one slice per address family", async () => {
    await fleet.createGateway("east", { name: "dual", ingress: [{ ip: "198.18.0.20" }, { ip: "2001:db8::20" }] });
    await fleet.createService("east", "es-dual", "web", { gateway: { name: "dual", namespace: "gateway" } });
    const found = await waitForSlices("es-dual", ["web-east-ipv4", "web-east-ipv6"]);
    assert.equal(found.get("web-east-ipv4")?.addressType, "IPv4");
    assert.deepEqual(
      found.get("web-east-ipv4")?.endpoints?.map((e) => e.addresses),
      [["198.18.0.20"]],
    );
    assert.equal(found.get("web-east-ipv6")?.addressType, "IPv6");
    assert.deepEqual(
      found.get("web-east-ipv6")?.endpoints?.map((e) => e.addresses),
      [["2001:db8::20"]],
    );
  });

  it("gives an unusable gateway one IPv4 slice without endpoints, filled once the gateway is usable", async () => {
    await fleet.createGateway("east", { name: "late" });
    await fleet.createService("east", "es-unusable", "web", { gateway: { name: "late", namespace: "gateway" } });
    const found = await waitForSlices("es-unusable", ["web-east-ipv4"]);
    assert.deepEqual(found.get("web-east-ipv4")?.endpoints ?? [], []);
    await fleet.setGatewayIngress("east", [{ ip: "198.18.0.30" }], { name: "late", namespace: "gateway" });
    await waitForSlices(
      "es-unusable",
      ["web-east-ipv4"],
      (f) => f.get("web-east-ipv4")?.endpoints?.[0]?.addresses[0] === "198.18.0.30",
    );
  });

  it("reports a user's slice holding the mirror's slice name, creates nothing of the mirror, and leaves the slice as it is", async () => {
    await fleet.ensureNamespace("local", "es-user");
    const user = await discovery.createNamespacedEndpointSlice({
      namespace: "es-user",
      body: {
        metadata: { name: "web-east-ipv4", labels: { app: "web" } },
        addressType: "IPv4",
        endpoints: [{ addresses: ["10.1.2.3"] }],
        ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      },
    });
    await fleet.createService("east", "es-user", "web");
    const problem = await eventually("the user-owned conflict in status()", () =>
      controller
        ?.status()
        .clusters.find((c) => c.cluster === "east")
        ?.problems.find((p) => p.key === "es-user/web-east" && p.reason === "user-owned"),
    );
    assert.match(problem.message, /EndpointSlice es-user\/web-east-ipv4/);
    await eventually("a MirrorNameConflict Event", async () => {
      const events = await fleet.local.listNamespacedEvent({ namespace: "es-user" });
      return events.items.find((e) => e.reason === "MirrorNameConflict" && e.involvedObject.name === "web-east");
    });
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    const now = await discovery.readNamespacedEndpointSlice({ namespace: "es-user", name: "web-east-ipv4" });
    assert.equal(identity(now), identity(user));
    assert.deepEqual(now.metadata?.labels, { app: "web" });
    // Found before the mirror Service was created: the mirror is blocked as a whole.
    assert.equal(await fleet.localService("es-user", "web-east"), undefined);
    const writes = controller?.status().writer?.writes ?? {};
    assert.equal(writes["create/EndpointSlice/409"] ?? 0, 0, JSON.stringify(writes));
  });

  it("deletes the slices of a cluster whose Secret was deleted (SPEC §6)", async () => {
    await fleet.createService("east", "es-gc", "web");
    const secret = await fleet.register("east", { clusterName: "removed" });
    await waitForSlices("es-gc", ["web-east-ipv4", "web-removed-ipv4"]);
    await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: secret });
    await fleet.waitForNoMirror("es-gc", "web-removed");
    await waitForSlices("es-gc", ["web-east-ipv4"]);
  });

  it("makes zero writes when restarted over intact slices", async () => {
    // One unnamed port: the API server fills in the slice port's name ("") and protocol.
    await fleet.createService("east", "es-restart", "web", { ports: [{ port: 80 }] });
    await waitForSlices("es-restart", ["web-east-ipv4"]);
    const before = identity((await slices("es-restart")).get("web-east-ipv4"));
    const restarted = await restart("endpointslices");
    await eventually("the writer to hold east's complete desired state", () =>
      restarted.status().writer?.clusters["east"]?.complete ? true : undefined,
    );
    const idle = await waitForWriterIdle(restarted, { reports: 2 });
    // Not even an attempt: the mirror blocked by the user's slice of es-user is re-checked
    // by reads only.
    const mirrorWrites = Object.entries(idle.writes).filter(([key]) => MIRROR_KINDS.includes(key.split("/")[1] ?? ""));
    assert.deepEqual(mirrorWrites, []);
    assert.equal(identity((await slices("es-restart")).get("web-east-ipv4")), before);
  });

  it("converts endpoints → endpointslices → both → endpoints, deleting only owned objects", async () => {
    const ns = "es-convert";
    const MANAGED_BY = "endpointslice.kubernetes.io/managed-by";
    const MIRRORING = "endpointslicemirroring-controller.k8s.io";
    /** The slices of `ns` made by the sandbox's real EndpointSliceMirroring controller. */
    const mirroredByBuiltIn = async (): Promise<string[]> =>
      [...(await slices(ns)).values()]
        .filter((s) => s.metadata?.labels?.[MANAGED_BY] === MIRRORING)
        .map((s) => s.metadata?.name ?? "");
    /** Waits until the slices of `ns` other than the built-in controller's are exactly `names`. */
    const waitForOwnAndForeign = (names: readonly string[]) =>
      eventually(`slices ${names.join(", ")} (besides the built-in controller's) in ${ns}`, async () => {
        const found = [...(await slices(ns)).values()]
          .filter((s) => s.metadata?.labels?.[MANAGED_BY] !== MIRRORING)
          .map((s) => s.metadata?.name ?? "");
        return found.sort().join() === [...names].sort().join() ? true : undefined;
      });

    await restart("endpoints");
    await fleet.createService("east", ns, "web");
    await fleet.waitForEndpoints(ns, "web-east", (e) => (e.subsets?.length ?? 0) > 0);
    // In endpoints mode the real EndpointSliceMirroring controller derives a slice from
    // the mirror's Endpoints, as in a real cluster: its object, never fleet-mirror's.
    await eventually("the built-in controller's slice of the mirror Endpoints", async () =>
      (await mirroredByBuiltIn()).length === 1 ? true : undefined,
    );
    // A slice of another controller that names the mirror and copies its labels: never ours.
    const foreignSlice = await discovery.createNamespacedEndpointSlice({
      namespace: ns,
      body: {
        metadata: {
          generateName: "web-east-",
          labels: {
            ...MIRROR_LABELS,
            "kubernetes.io/service-name": "web-east",
            [MANAGED_BY]: "other-controller.example.com",
          },
        },
        addressType: "IPv4",
        endpoints: [{ addresses: [GATEWAY_IP] }],
        ports: [{ name: "http", port: 4143, protocol: "TCP" }],
      },
    });
    const foreignName = foreignSlice.metadata?.name ?? "";
    const foreign = () => [foreignName];

    await restart("endpointslices");
    await waitForOwnAndForeign([...foreign(), "web-east-ipv4"]);
    await eventually("the owned Endpoints to be deleted", async () =>
      (await endpointsExist(ns, "web-east")) ? undefined : true,
    );

    await restart("both");
    const ep = await fleet.waitForEndpoints(
      ns,
      "web-east",
      (e) => e.metadata?.labels?.["endpointslice.kubernetes.io/skip-mirror"] === "true",
    );
    assert.deepEqual(
      ep.subsets?.[0]?.addresses?.map((a) => a.ip),
      [GATEWAY_IP],
    );
    await waitForOwnAndForeign([...foreign(), "web-east-ipv4"]);
    // skip-mirror holds the built-in controller off: it keeps no slice of its own.
    await eventually("no built-in slice while the Endpoints say skip-mirror", async () =>
      (await mirroredByBuiltIn()).length === 0 ? true : undefined,
    );

    await restart("endpoints");
    await waitForOwnAndForeign(foreign());
    await fleet.waitForEndpoints(
      ns,
      "web-east",
      (e) => e.metadata?.labels?.["endpointslice.kubernetes.io/skip-mirror"] === undefined,
    );
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    const after = (await slices(ns)).get(foreignName);
    assert.equal(identity(after), identity(foreignSlice), "the other controller's slice is never touched");
    // Every other mirror was converted too; the user's slice of es-user is still there as it was.
    const ours = await discovery.listEndpointSliceForAllNamespaces({
      labelSelector: "endpointslice.kubernetes.io/managed-by=fleet-mirror",
    });
    assert.deepEqual(
      ours.items.map((s) => s.metadata?.name),
      [],
    );
    assert.ok((await slices("es-user")).has("web-east-ipv4"));
  });
});
