/**
 * End to end on real API servers: fleet-wide Services (SPEC §11). Two member clusters,
 * each with its default gateway: the Service `<svc>-federated` has one part (slices)
 * per member cluster; ports that conflict leave the later member out and are reported;
 * the last member gone deletes it; a user's Service of that name is never touched; a
 * restart writes nothing, even while a member cluster's API server is down (its part is
 * kept); the Endpoints mode holds every member's addresses in one object.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1EndpointSlice, type V1ServicePort } from "@kubernetes/client-node";
import type { EndpointsApi } from "../../src/core/mirror-kinds.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForMarker, waitForWriterIdle } from "../helpers/settle.ts";

const GATEWAYS: Record<string, string> = { east: "198.18.1.1", west: "198.18.2.1" };
const MEMBER = { "mirror.linkerd.io/federated": "member" };
const FLEET_LABELS = { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/federated": "true" };
const CLUSTERS = "mirror.linkerd.io/federated-clusters";
const HTTP: V1ServicePort[] = [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }];

describe("fleet-wide Services (SPEC §11)", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let controller: Supervisor | undefined;

  async function start(mode: EndpointsApi, synced: readonly string[] = ["east", "west"]): Promise<Supervisor> {
    const started = fleet.startInProcess({ endpointsApi: mode });
    controller = started;
    await eventually(`the controller synced in ${mode} mode`, () =>
      started.writerReady &&
      synced.every((name) => started.status().clusters.some((c) => c.cluster === name && c.state === "synced"))
        ? true
        : undefined,
    );
    return started;
  }

  async function restart(mode: EndpointsApi, synced?: readonly string[]): Promise<Supervisor> {
    await controller?.stop();
    controller = undefined;
    return start(mode, synced);
  }

  /** A remote Service labelled as a member, with no export annotations: it uses the cluster's default gateway. */
  async function createMember(cluster: string, namespace: string, name: string, ports = HTTP): Promise<void> {
    await fleet.ensureNamespace(cluster, namespace);
    await fleet
      .api(cluster)
      .createNamespacedService({ namespace, body: { metadata: { name, labels: MEMBER }, spec: { ports } } });
  }

  async function leave(cluster: string, namespace: string, name: string): Promise<void> {
    await fleet.patchService(cluster, namespace, name, (svc) => {
      if (svc.metadata) svc.metadata.labels = {};
    });
  }

  async function slices(namespace: string): Promise<Map<string, V1EndpointSlice>> {
    const list = await discovery.listNamespacedEndpointSlice({ namespace });
    return new Map(list.items.map((s) => [s.metadata?.name ?? "", s]));
  }

  async function waitForSlices(namespace: string, names: readonly string[]): Promise<Map<string, V1EndpointSlice>> {
    return eventually(`slices ${names.join(", ")} in ${namespace}`, async () => {
      const found = await slices(namespace);
      return [...found.keys()].sort().join() === [...names].sort().join() ? found : undefined;
    });
  }

  const addressesOf = (slice: V1EndpointSlice | undefined) =>
    (slice?.endpoints ?? []).map((e) => [e.addresses.join(), e.conditions?.ready]);

  const blockedOf = (cluster: string) => controller?.status().writer?.clusters[cluster]?.blocked ?? [];

  const identity = (o: { metadata?: { uid?: string; resourceVersion?: string } } | undefined) =>
    `${o?.metadata?.uid}@${o?.metadata?.resourceVersion}`;

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    for (const cluster of ["east", "west"]) {
      await fleet.createGateway(cluster, {
        namespace: "linkerd-multicluster",
        name: "linkerd-gateway",
        ingress: [{ ip: GATEWAYS[cluster] ?? "" }],
        identity: `gw.${cluster}`,
      });
    }
    // Registration order: east's Secret first.
    await fleet.register("east");
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // creationTimestamp has 1 s resolution
    await fleet.register("west");
    await start("endpointslices");
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("is the union of every member cluster's gateway, one part per cluster, annotated with the clusters", async () => {
    await createMember("east", "fed", "web");
    await createMember("west", "fed", "web");
    const service = await fleet.waitForMirror(
      "fed",
      "web-federated",
      (s) => s.metadata?.annotations?.[CLUSTERS] === "east,west",
    );
    assert.deepEqual(service.metadata?.labels, FLEET_LABELS);
    assert.deepEqual(
      service.spec?.ports?.map((p) => [p.name, p.port, p.targetPort]),
      [["http", 80, 8080]],
    );
    const found = await waitForSlices("fed", ["web-federated-east-ipv4", "web-federated-west-ipv4"]);
    for (const cluster of ["east", "west"]) {
      const slice = found.get(`web-federated-${cluster}-ipv4`);
      assert.deepEqual(addressesOf(slice), [[GATEWAYS[cluster], true]]);
      assert.deepEqual(slice?.metadata?.labels, {
        ...FLEET_LABELS,
        "mirror.linkerd.io/cluster-name": cluster,
        "kubernetes.io/service-name": "web-federated",
        "endpointslice.kubernetes.io/managed-by": "fleet-mirror",
      });
      assert.equal(slice?.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-identity"], `gw.${cluster}`);
      assert.deepEqual(
        slice?.metadata?.ownerReferences?.map((r) => [r.kind, r.name, r.uid]),
        [["Service", "web-federated", service.metadata?.uid]],
      );
      assert.deepEqual(
        slice?.ports?.map((p) => [p.name, p.port]),
        [["http", 4143]],
      );
    }
    // A member is not exported: no mirror of its own.
    assert.equal(await fleet.localService("fed", "web-east"), undefined);
  });

  it("leaves out a later member whose ports differ, and reports it on its cluster and as an Event", async () => {
    await createMember("east", "fed", "api");
    await createMember("west", "fed", "api", [{ name: "http", port: 81, targetPort: 8080, protocol: "TCP" }]);
    await fleet.waitForMirror("fed", "api-federated", (s) => s.metadata?.annotations?.[CLUSTERS] === "east");
    const blocked = await eventually("west's member reported", () =>
      blockedOf("west").find((b) => b.key === "fed/api-federated"),
    );
    assert.equal(blocked.reason, "port-conflict");
    assert.match(blocked.message, /cluster west differ from those of cluster east/);
    await eventually("a FederatedPortConflict Event", async () => {
      const events = await fleet.local.listNamespacedEvent({ namespace: "fed" });
      return events.items.find(
        (e) => e.reason === "FederatedPortConflict" && e.involvedObject.name === "api-federated",
      );
    });
    const found = await slices("fed");
    assert.ok(found.has("api-federated-east-ipv4"));
    assert.ok(!found.has("api-federated-west-ipv4"));
  });

  it("never touches a user's Service named like a fleet-wide Service, and reports it", async () => {
    await fleet.ensureNamespace("local", "shop");
    const users = await fleet.local.createNamespacedService({
      namespace: "shop",
      body: { metadata: { name: "cart-federated", labels: { app: "cart" } }, spec: { ports: [{ port: 9 }] } },
    });
    await createMember("east", "shop", "cart");
    const blocked = await eventually("the conflict reported on east", () =>
      blockedOf("east").find((b) => b.key === "shop/cart-federated"),
    );
    assert.equal(blocked.reason, "user-owned");
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    const now = await fleet.local.readNamespacedService({ namespace: "shop", name: "cart-federated" });
    assert.equal(identity(now), identity(users));
    assert.deepEqual(now.metadata?.labels, { app: "cart" });
    assert.equal((await slices("shop")).size, 0);
  });

  it("a remote Service named like a fleet-wide Service cannot capture a part's slice name, whichever came first (F5)", async () => {
    const gateway = { name: "linkerd-gateway", namespace: "linkerd-multicluster" };
    const mirrorBlocked = (namespace: string) =>
      eventually(`east's mirror ${namespace}/web-federated-east reported`, () =>
        blockedOf("east").find((b) => b.key === `${namespace}/web-federated-east`),
      );
    const fleetBlocked = (namespace: string) =>
      ["east", "west"].flatMap((c) => blockedOf(c)).filter((b) => b.key === `${namespace}/web-federated`);
    // The part first: east (a member of `web`) then exports `web-federated`, whose mirror's
    // slice would be named web-federated-east-ipv4 too.
    await createMember("east", "collide", "web");
    await createMember("west", "collide", "web");
    const parts = await waitForSlices("collide", ["web-federated-east-ipv4", "web-federated-west-ipv4"]);
    await fleet.createService("east", "collide", "web-federated", { gateway });
    assert.equal((await mirrorBlocked("collide")).reason, "owned-by-other-service");
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    assert.deepEqual(fleetBlocked("collide"), []);
    const after = await slices("collide");
    assert.equal(identity(after.get("web-federated-east-ipv4")), identity(parts.get("web-federated-east-ipv4")));
    assert.equal(await fleet.localService("collide", "web-federated-east"), undefined);
    // Unexported: the part stays as it is.
    await fleet.deleteService("east", "collide", "web-federated");
    await waitForMarker(fleet, "east", { cluster: "east" });
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    assert.equal(
      identity((await slices("collide")).get("web-federated-east-ipv4")),
      identity(parts.get("web-federated-east-ipv4")),
    );

    // The mirror first: its slice gives the name up to the part when east becomes a member.
    await fleet.createService("east", "collide-2", "web-federated", { gateway });
    await waitForSlices("collide-2", ["web-federated-east-ipv4"]);
    await createMember("east", "collide-2", "web");
    await mirrorBlocked("collide-2");
    const taken = await eventually("east's part under the name", async () => {
      const slice = (await slices("collide-2")).get("web-federated-east-ipv4");
      return slice?.metadata?.labels?.["kubernetes.io/service-name"] === "web-federated" ? slice : undefined;
    });
    assert.deepEqual(addressesOf(taken), [[GATEWAYS["east"], true]]);
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    assert.deepEqual(fleetBlocked("collide-2"), []);
  });

  it("a restart over intact fleet-wide Services writes nothing", async () => {
    const service = await fleet.waitForMirror("fed", "web-federated");
    const before = [...(await slices("fed")).values()].map(identity).sort();
    await restart("endpointslices");
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    assert.equal(identity(await fleet.localService("fed", "web-federated")), identity(service));
    assert.deepEqual([...(await slices("fed")).values()].map(identity).sort(), before);
  });

  it("keeps the part of a member cluster whose API server is down, across a controller restart", async () => {
    const westSlice = (await slices("fed")).get("web-federated-west-ipv4");
    assert.ok(westSlice);
    await fleet.plane.stopApiServer("west");
    try {
      await restart("endpointslices", ["east"]);
      await waitForWriterIdle(controller as Supervisor, { reports: 2 });
      const service = await fleet.localService("fed", "web-federated");
      assert.equal(service?.metadata?.annotations?.[CLUSTERS], "east,west");
      assert.equal(identity((await slices("fed")).get("web-federated-west-ipv4")), identity(westSlice));
    } finally {
      await fleet.plane.startApiServer("west");
    }
    await eventually("west synced again", () =>
      controller?.status().clusters.some((c) => c.cluster === "west" && c.state === "synced") ? true : undefined,
    );
  });

  it("a member cluster leaving drops its part; the last member leaving deletes the fleet-wide Service", async () => {
    await leave("east", "fed", "web");
    await fleet.waitForMirror("fed", "web-federated", (s) => s.metadata?.annotations?.[CLUSTERS] === "west");
    await eventually("east's part deleted", async () =>
      (await slices("fed")).has("web-federated-east-ipv4") ? undefined : true,
    );
    await leave("west", "fed", "web");
    await fleet.waitForNoMirror("fed", "web-federated");
    await eventually("west's part deleted", async () =>
      (await slices("fed")).has("web-federated-west-ipv4") ? undefined : true,
    );
  });

  it("endpoints mode: one Endpoints object holds every member cluster's addresses; the slices are removed", async () => {
    await createMember("east", "fed-ep", "db", [{ name: "pg", port: 5432, protocol: "TCP" }]);
    await createMember("west", "fed-ep", "db", [{ name: "pg", port: 5432, protocol: "TCP" }]);
    await waitForSlices("fed-ep", ["db-federated-east-ipv4", "db-federated-west-ipv4"]);
    await restart("endpoints");
    const endpoints = await fleet.waitForEndpoints(
      "fed-ep",
      "db-federated",
      (e) =>
        (e.subsets ?? [])
          .flatMap((s) => (s.addresses ?? []).map((a) => a.ip))
          .sort()
          .join() === [GATEWAYS["east"], GATEWAYS["west"]].sort().join(),
    );
    assert.deepEqual(endpoints.metadata?.labels, FLEET_LABELS);
    const ports = new Set((endpoints.subsets ?? []).flatMap((s) => (s.ports ?? []).map((p) => `${p.name}:${p.port}`)));
    assert.deepEqual([...ports], ["pg:4143"]);
    await eventually("the fleet-wide slices removed", async () => {
      const left = [...(await slices("fed-ep")).values()].filter(
        (s) => s.metadata?.labels?.["endpointslice.kubernetes.io/managed-by"] === "fleet-mirror",
      );
      return left.length === 0 ? true : undefined;
    });
    const service = await fleet.localService("fed-ep", "db-federated");
    await restart("endpoints");
    await waitForWriterIdle(controller as Supervisor, { reports: 2 });
    assert.equal(identity(await fleet.localService("fed-ep", "db-federated")), identity(service));
    const again = await fleet.local.readNamespacedEndpoints({ namespace: "fed-ep", name: "db-federated" });
    assert.equal(identity(again), identity(endpoints));
  });
});
