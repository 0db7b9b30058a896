/**
 * End to end on real API servers: fleet-mirror touches only what it owns (SPEC §5),
 * restores what is changed by hand (SPEC §4), and creates namespaces only when allowed
 * (SPEC §3).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { V1Endpoints, V1Service } from "@kubernetes/client-node";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { waitForLocalEcho, waitForWriterIdle } from "../helpers/settle.ts";

const MIRROR_LABELS = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "gateway",
};
const GATEWAY_IP = "198.18.0.10";

const ipsOf = (ep: V1Endpoints): string[] => (ep.subsets?.[0]?.addresses ?? []).map((a) => a.ip).sort();

describe("ownership and hand edits", () => {
  let fleet: Fleet;
  let controller: Supervisor;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: GATEWAY_IP }], identity: "gw.east.identity" });
    await fleet.register("east");
    controller = fleet.startInProcess();
    await waitSynced();
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  async function waitSynced(): Promise<void> {
    await eventually("east synced and the writer ready", () =>
      controller.writerReady && controller.status().clusters.some((c) => c.cluster === "east" && c.state === "synced")
        ? true
        : undefined,
    );
  }

  function problem(key: string, reason: string) {
    return controller
      .status()
      .clusters.find((c) => c.cluster === "east")
      ?.problems.find((p) => p.key === key && p.reason === reason);
  }

  async function localNamespace(name: string, labels: Record<string, string> = {}) {
    return fleet.local.createNamespace({ body: { metadata: { name, labels } } });
  }

  async function localEndpoints(namespace: string, name: string): Promise<V1Endpoints | undefined> {
    try {
      return await fleet.local.readNamespacedEndpoints({ namespace, name });
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  async function conflictEvent(namespace: string, name: string) {
    return eventually(`a MirrorNameConflict Event for ${namespace}/${name}`, async () => {
      const events = await fleet.local.listNamespacedEvent({ namespace });
      return events.items.find(
        (e) => e.reason === "MirrorNameConflict" && e.involvedObject.name === name && e.type === "Warning",
      );
    });
  }

  /** The fields a write would change, for "left as is" comparisons. */
  const snapshot = (o: V1Service | V1Endpoints) =>
    JSON.stringify({
      rv: o.metadata?.resourceVersion,
      uid: o.metadata?.uid,
      labels: o.metadata?.labels,
      annotations: o.metadata?.annotations,
      spec: "spec" in o ? o.spec : undefined,
      subsets: "subsets" in o ? o.subsets : undefined,
    });

  describe("a user's object holding a mirror's name", () => {
    it("leaves a user's Service as is, reports the conflict, and creates the mirror once the user deletes it", async () => {
      const ns = await localNamespace("own-1", { team: "shop" });
      const mine = await fleet.local.createNamespacedService({
        namespace: "own-1",
        body: {
          metadata: { name: "web-east", labels: { app: "web" }, annotations: { owner: "me" } },
          spec: { selector: { app: "web" }, ports: [{ name: "http", port: 8080, protocol: "TCP" }] },
        },
      });
      await fleet.createService("east", "own-1", "web");

      const reported = await eventually("the user-owned conflict in status()", () =>
        problem("own-1/web-east", "user-owned"),
      );
      assert.match(reported.message, /own-1\/web-east/);
      const event = await conflictEvent("own-1", "web-east");
      assert.equal(event.involvedObject.kind, "Service");
      // Decided (the problem is reported); a later report with nothing queued or in flight:
      // no write followed the decision.
      await waitForWriterIdle(controller);
      const still = await fleet.localService("own-1", "web-east");
      assert.ok(still);
      assert.equal(snapshot(still), snapshot(mine));
      assert.equal(
        await localEndpoints("own-1", "web-east"),
        undefined,
        "no mirror Endpoints next to a user's Service",
      );
      const nsAfter = await fleet.local.readNamespace({ name: "own-1" });
      assert.equal(nsAfter.metadata?.resourceVersion, ns.metadata?.resourceVersion, "the namespace is never modified");

      await fleet.local.deleteNamespacedService({ namespace: "own-1", name: "web-east" });
      const svc = await fleet.waitForMirror(
        "own-1",
        "web-east",
        (s) => s.metadata?.labels?.["mirror.linkerd.io/mirrored-service"] === "true",
        15_000,
      );
      assert.deepEqual(svc.metadata?.labels, MIRROR_LABELS);
      await fleet.waitForEndpoints("own-1", "web-east", (e) => ipsOf(e).join() === GATEWAY_IP);
      await eventually("the conflict to clear from status()", () =>
        problem("own-1/web-east", "user-owned") ? undefined : true,
      );
    });

    it("leaves a user's Endpoints as is and creates no mirror Service next to them, until the user deletes them", async () => {
      await localNamespace("own-2");
      const mine = await fleet.local.createNamespacedEndpoints({
        namespace: "own-2",
        body: {
          metadata: { name: "api-east", labels: { app: "api" } },
          subsets: [{ addresses: [{ ip: "198.51.100.99" }], ports: [{ name: "http", port: 9000, protocol: "TCP" }] }],
        },
      });
      await fleet.createService("east", "own-2", "api");
      await eventually("the user-owned conflict in status()", () => problem("own-2/api-east", "user-owned"));
      await conflictEvent("own-2", "api-east");
      // Decided (the problem is reported); a later report with nothing queued or in flight:
      // no write followed the decision.
      await waitForWriterIdle(controller);
      assert.equal(
        await fleet.localService("own-2", "api-east"),
        undefined,
        "a mirror Service would select the user's Endpoints",
      );
      const still = await localEndpoints("own-2", "api-east");
      assert.ok(still);
      assert.equal(snapshot(still), snapshot(mine));

      await fleet.local.deleteNamespacedEndpoints({ namespace: "own-2", name: "api-east" });
      await fleet.waitForMirror("own-2", "api-east", () => true, 15_000);
      const ep = await fleet.waitForEndpoints("own-2", "api-east", (e) => ipsOf(e).join() === GATEWAY_IP);
      assert.deepEqual(ep.metadata?.labels, MIRROR_LABELS);
    });

    it("treats a Service labelled mirrored-service but without a cluster name as the user's", async () => {
      await localNamespace("own-5");
      const mine = await fleet.local.createNamespacedService({
        namespace: "own-5",
        body: {
          metadata: { name: "web-east", labels: { "mirror.linkerd.io/mirrored-service": "true" } },
          spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
        },
      });
      await fleet.createService("east", "own-5", "web");
      await eventually("the user-owned conflict in status()", () => problem("own-5/web-east", "user-owned"));
      // Decided (the problem is reported); a later report with nothing queued or in flight:
      // no write followed the decision.
      await waitForWriterIdle(controller);
      const still = await fleet.localService("own-5", "web-east");
      assert.ok(still);
      assert.equal(snapshot(still), snapshot(mine));
      assert.equal(await localEndpoints("own-5", "web-east"), undefined);
    });
  });

  describe("a mirror changed by hand is restored", () => {
    before(async () => {
      await fleet.createService("east", "hand", "web", {
        ports: [
          { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
          { name: "grpc", port: 9090, protocol: "TCP" },
        ],
      });
      await fleet.waitForEndpoints("hand", "web-east", (e) => ipsOf(e).join() === GATEWAY_IP);
    });

    const portsOk = (s: V1Service) =>
      JSON.stringify(s.spec?.ports?.map((p) => [p.name, p.protocol, p.port, p.targetPort])) ===
      JSON.stringify([
        ["http", "TCP", 80, 8080],
        ["grpc", "TCP", 9090, 9090],
      ]);

    it("re-creates a mirror Service deleted by hand", async () => {
      const before = await fleet.waitForMirror("hand", "web-east");
      await fleet.local.deleteNamespacedService({ namespace: "hand", name: "web-east" });
      const restored = await fleet.waitForMirror("hand", "web-east", (s) => s.metadata?.uid !== before.metadata?.uid);
      assert.deepEqual(restored.metadata?.labels, MIRROR_LABELS);
      assert.ok(portsOk(restored));
    });

    it("re-creates mirror Endpoints deleted by hand", async () => {
      const before = await fleet.waitForEndpoints("hand", "web-east", () => true);
      await fleet.local.deleteNamespacedEndpoints({ namespace: "hand", name: "web-east" });
      const restored = await fleet.waitForEndpoints(
        "hand",
        "web-east",
        (e) => e.metadata?.uid !== before.metadata?.uid && ipsOf(e).join() === GATEWAY_IP,
      );
      assert.deepEqual(restored.metadata?.labels, MIRROR_LABELS);
    });

    it("restores ports edited by hand", async () => {
      await fleet.local.patchNamespacedService({
        namespace: "hand",
        name: "web-east",
        body: [{ op: "replace", path: "/spec/ports/0/port", value: 81 }],
      });
      const restored = await fleet.waitForMirror("hand", "web-east", portsOk);
      assert.equal(restored.spec?.ports?.[0]?.port, 80);
    });

    it("restores a mirror annotation edited by hand and keeps a foreign annotation added by hand", async () => {
      await fleet.local.patchNamespacedService({
        namespace: "hand",
        name: "web-east",
        body: [
          {
            op: "replace",
            path: "/metadata/annotations/mirror.linkerd.io~1remote-svc-fq-name",
            value: "evil.example.com",
          },
          { op: "add", path: "/metadata/annotations/example.com~1note", value: "kept" },
        ],
      });
      const restored = await fleet.waitForMirror(
        "hand",
        "web-east",
        (s) => s.metadata?.annotations?.["mirror.linkerd.io/remote-svc-fq-name"] === "web.hand.svc.cluster.local",
      );
      assert.equal(restored.metadata?.annotations?.["example.com/note"], "kept");
      // A foreign annotation alone is not fought over: no further write. An idle report
      // alone cannot rule a write loop out (between its writes the key waits on the watch,
      // neither queued nor in flight): the writer must have seen its own write come back.
      await waitForLocalEcho(fleet, controller, "east");
      const later = await fleet.waitForMirror("hand", "web-east");
      assert.equal(later.metadata?.resourceVersion, restored.metadata?.resourceVersion);
    });

    it("restores the Endpoints addresses edited by hand", async () => {
      await fleet.local.patchNamespacedEndpoints({
        namespace: "hand",
        name: "web-east",
        body: [{ op: "replace", path: "/subsets/0/addresses", value: [{ ip: "203.0.113.66" }] }],
      });
      await fleet.waitForEndpoints("hand", "web-east", (e) => ipsOf(e).join() === GATEWAY_IP);
    });

    it("removes a selector added by hand and restores the ClusterIP type", async () => {
      await fleet.local.patchNamespacedService({
        namespace: "hand",
        name: "web-east",
        body: [
          { op: "add", path: "/spec/selector", value: { app: "hijack" } },
          { op: "replace", path: "/spec/type", value: "NodePort" },
        ],
      });
      const restored = await fleet.waitForMirror(
        "hand",
        "web-east",
        (s) => s.spec?.type === "ClusterIP" && s.spec.selector === undefined,
      );
      assert.ok(portsOk(restored));
      assert.ok(restored.spec?.ports?.every((p) => p.nodePort === undefined));
    });
  });

  describe("leftover Endpoints of its own, found at start-up", () => {
    let leftover: V1Endpoints;
    let writesBefore: number;

    before(async () => {
      // Endpoints labelled as east's mirror, but no Service, and stale content: left
      // over from an earlier run. (While a controller runs, east's mirror with no
      // exported counterpart would simply be garbage-collected.)
      await controller.stop();
      await localNamespace("own-3");
      leftover = await fleet.local.createNamespacedEndpoints({
        namespace: "own-3",
        body: {
          metadata: { name: "web-east", labels: MIRROR_LABELS },
          subsets: [{ addresses: [{ ip: "198.51.100.1" }], ports: [{ name: "http", port: 1, protocol: "TCP" }] }],
        },
      });
      await fleet.createService("east", "own-3", "web");
      writesBefore = await fleet.localWriteCount();
      controller = fleet.startInProcess();
      await waitSynced();
    });

    it("adopts them and updates them in place, without a write loop", async () => {
      const ep = await fleet.waitForEndpoints("own-3", "web-east", (e) => ipsOf(e).join() === GATEWAY_IP);
      assert.equal(ep.metadata?.uid, leftover.metadata?.uid, "updated in place, not re-created");
      assert.equal(ep.metadata?.annotations?.["mirror.linkerd.io/remote-svc-fq-name"], "web.own-3.svc.cluster.local");
      assert.deepEqual(
        ep.subsets?.[0]?.ports?.map((p) => [p.name, p.port]),
        [["http", 4143]],
      );
      const svc = await fleet.waitForMirror("own-3", "web-east");
      assert.deepEqual(svc.metadata?.labels, MIRROR_LABELS);
      // One Service create and one Endpoints update; every other mirror was intact.
      await waitForWriterIdle(controller);
      const writes = (await fleet.localWriteCount()) - writesBefore;
      assert.ok(writes <= 4, `${writes} writes to the local API server after a restart with one leftover`);
      const status = controller.status().writer;
      assert.equal(status?.writes["create/Endpoints/409"] ?? 0, 0, JSON.stringify(status?.writes));
      // No write loop (see "keeps a foreign annotation"): once the writer has seen its own
      // writes come back, neither object was written again.
      const identity = await fleet.currentMirrorIdentity("own-3", "web-east");
      await waitForLocalEcho(fleet, controller, "east");
      assert.equal(await fleet.currentMirrorIdentity("own-3", "web-east"), identity, "written again: a write loop");
    });
  });

  describe("with namespace creation turned off", () => {
    before(async () => {
      await controller.stop();
      controller = fleet.startInProcess({ createNamespaces: false });
      await waitSynced();
    });

    it("skips and reports a mirror whose namespace is missing, and creates it once the namespace exists, leaving the namespace as is", async () => {
      await fleet.createService("east", "ns-off", "web");
      await eventually("the namespace-missing problem in status()", () =>
        problem("ns-off/web-east", "namespace-missing"),
      );
      // Decided (the problem is reported); a later report with nothing queued or in flight:
      // no write followed the decision.
      await waitForWriterIdle(controller);
      await assert.rejects(fleet.local.readNamespace({ name: "ns-off" }), (error) => statusCode(error) === 404);

      const ns = await localNamespace("ns-off", { team: "platform" });
      const svc = await fleet.waitForMirror("ns-off", "web-east", () => true, 15_000);
      assert.deepEqual(svc.metadata?.labels, MIRROR_LABELS);
      await fleet.waitForEndpoints("ns-off", "web-east", (e) => ipsOf(e).join() === GATEWAY_IP);
      const nsAfter = await fleet.local.readNamespace({ name: "ns-off" });
      assert.equal(nsAfter.metadata?.resourceVersion, ns.metadata?.resourceVersion);
      assert.deepEqual(nsAfter.metadata?.labels, ns.metadata?.labels);
      await eventually("the problem to clear", () =>
        problem("ns-off/web-east", "namespace-missing") ? undefined : true,
      );
    });

    it("keeps the mirrors that already exist in place", async () => {
      await fleet.waitForMirror("hand", "web-east");
      await fleet.waitForEndpoints("own-3", "web-east", (e) => ipsOf(e).join() === GATEWAY_IP);
    });
  });
});
