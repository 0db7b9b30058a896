/**
 * End to end on real API servers: how mirrors follow their gateway (SPEC §2–§4, §8),
 * and which exported Services cannot be mirrored (SPEC §3).
 */
import assert from "node:assert/strict";
import { lookup } from "node:dns/promises";
import { after, before, describe, it } from "node:test";
import type { V1Endpoints } from "@kubernetes/client-node";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const subsetsOf = (ep: V1Endpoints): number => ep.subsets?.length ?? 0;
const ipsOf = (ep: V1Endpoints): string[] => (ep.subsets?.[0]?.addresses ?? []).map((a) => a.ip).sort();
const portsOf = (ep: V1Endpoints): [string | undefined, number][] =>
  (ep.subsets?.[0]?.ports ?? []).map((p): [string | undefined, number] => [p.name, p.port]).sort();
const same = (a: readonly string[], b: readonly string[]): boolean => JSON.stringify(a) === JSON.stringify(b);

describe("mirrors and their gateways", () => {
  let fleet: Fleet;
  let controller: Supervisor;

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    // Same-named gateways (gateway/gateway) in both clusters, different addresses.
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }], identity: "gw.east.identity" });
    await fleet.createGateway("west", { ingress: [{ ip: "198.51.100.20" }], identity: "gw.west.identity" });
    await fleet.register("east");
    await fleet.register("west");
    // The default gateway resolve period (60 s): a hostname must be resolved as soon as a
    // Service uses its gateway, not only at the next periodic round.
    controller = fleet.startInProcess();
    await eventually("both clusters synced", () => {
      const states = controller.status().clusters.map((c) => c.state);
      return controller.writerReady && states.length === 2 && states.every((s) => s === "synced") ? true : undefined;
    });
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  /** Problems the controller reports for `cluster`, as status() shows them. */
  function problems(cluster: string) {
    return controller.status().clusters.find((c) => c.cluster === cluster)?.problems ?? [];
  }

  describe("the Endpoints are filled as soon as the gateway is usable, whatever the order", () => {
    it("fills them when the gateway gets its ingress after the Service was exported", async () => {
      const gw = { name: "gw-late", namespace: "gw-order-1" };
      await fleet.createGateway("east", gw);
      await fleet.createService("east", "order-1", "web", { gateway: gw });
      await fleet.waitForMirror("order-1", "web-east");
      const empty = await fleet.waitForEndpoints("order-1", "web-east", () => true);
      assert.equal(subsetsOf(empty), 0);
      assert.equal(empty.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"], "gw-late");
      await fleet.setGatewayIngress("east", [{ ip: "198.18.0.31" }], gw);
      const ep = await fleet.waitForEndpoints("order-1", "web-east", (e) => subsetsOf(e) > 0);
      assert.deepEqual(ipsOf(ep), ["198.18.0.31"]);
      assert.deepEqual(portsOf(ep), [["http", 4143]]);
    });

    it("fills them when the gateway Service is created only after the Service was exported", async () => {
      const gw = { name: "gw-later", namespace: "gw-order-2" };
      await fleet.createService("east", "order-2", "web", { gateway: gw });
      await fleet.waitForMirror("order-2", "web-east");
      const empty = await fleet.waitForEndpoints("order-2", "web-east", () => true);
      assert.equal(subsetsOf(empty), 0);
      await fleet.createGateway("east", { ...gw, ingress: [{ ip: "198.18.0.32" }] });
      const ep = await fleet.waitForEndpoints("order-2", "web-east", (e) => subsetsOf(e) > 0);
      assert.deepEqual(ipsOf(ep), ["198.18.0.32"]);
      const svc = await fleet.waitForMirror(
        "order-2",
        "web-east",
        (s) => s.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-resource-version"] !== undefined,
      );
      assert.ok(svc);
    });

    it("fills them right away when the gateway was usable before the Service was exported", async () => {
      const gw = { name: "gw-early", namespace: "gw-order-3" };
      await fleet.createGateway("east", { ...gw, ingress: [{ ip: "198.18.0.33" }, { ip: "198.18.0.3" }], port: 4200 });
      await fleet.createService("east", "order-3", "web", {
        gateway: gw,
        ports: [
          { name: "http", port: 80, protocol: "TCP" },
          { name: "dns", port: 53, protocol: "UDP" },
        ],
      });
      const ep = await fleet.waitForEndpoints("order-3", "web-east", (e) => subsetsOf(e) > 0);
      assert.deepEqual(ipsOf(ep), ["198.18.0.3", "198.18.0.33"]);
      assert.deepEqual((ep.subsets?.[0]?.ports ?? []).map((p) => [p.name, p.protocol, p.port]).sort(), [
        ["dns", "UDP", 4200],
        ["http", "TCP", 4200],
      ]);
    });
  });

  it("leaves the Endpoints empty while the gateway has no port named incoming-port, and fills them once it has", async () => {
    const gw = { name: "gw-noport", namespace: "gw-port" };
    await fleet.createGateway("east", { ...gw, ingress: [{ ip: "198.18.0.40" }], portName: "other", port: 4300 });
    await fleet.createService("east", "port-1", "web", { gateway: gw });
    await fleet.waitForMirror("port-1", "web-east");
    const empty = await fleet.waitForEndpoints("port-1", "web-east", () => true);
    assert.equal(subsetsOf(empty), 0);
    await eventually("gateway reported unusable", () =>
      controller
        .status()
        .clusters.find((c) => c.cluster === "east")
        ?.gateways.find((g) => g.key === "gw-port/gw-noport" && !g.usable && /incoming-port/.test(g.reason ?? "")),
    );
    await fleet.patchService("east", gw.namespace, gw.name, (svc) => {
      const port = svc.spec?.ports?.[0];
      if (port) port.name = "incoming-port";
    });
    const ep = await fleet.waitForEndpoints("port-1", "web-east", (e) => subsetsOf(e) > 0);
    assert.deepEqual(ipsOf(ep), ["198.18.0.40"]);
    assert.deepEqual(portsOf(ep), [["http", 4300]]);
  });

  describe("hostname ingress", () => {
    it("resolves a hostname ingress as soon as a Service uses the gateway, and never puts the hostname in an address", async () => {
      // The only names this sandbox resolves are loopback ones, which the API server
      // refuses in Endpoints: the resolved IPs show in the gateway's status, the
      // Endpoints stay empty (no write loop), and a usable IP next to them is used.
      const resolved = [...new Set((await lookup("localhost", { all: true })).map((a) => a.address))].sort();
      const gw = { name: "gw-host", namespace: "gw-host" };
      // The gateway is shaped while no Service uses it yet, then a Service is exported.
      await fleet.createGateway("east", { ...gw, ingress: [{ hostname: "localhost" }] });
      await fleet.createService("east", "host-1", "web", { gateway: gw });
      await fleet.waitForMirror("host-1", "web-east");
      const reason = await eventually(
        "the gateway's resolved addresses in status()",
        () =>
          controller
            .status()
            .clusters.find((c) => c.cluster === "east")
            ?.gateways.find((g) => g.key === "gw-host/gw-host" && /cannot be Endpoints addresses/.test(g.reason ?? ""))
            ?.reason,
        15_000,
      );
      const listed = /address\(es\) (.*) cannot be/.exec(reason)?.[1] ?? "";
      assert.deepEqual(
        listed.split(", ").map((entry) => entry.replace(/ \(.*\)$/, "")),
        resolved,
      );
      const empty = await fleet.waitForEndpoints("host-1", "web-east", () => true);
      assert.equal(subsetsOf(empty), 0);

      await fleet.setGatewayIngress(
        "east",
        [{ hostname: "localhost" }, { ip: "198.18.0.91" }, { ip: "198.18.0.9" }],
        gw,
      );
      const ep = await fleet.waitForEndpoints("host-1", "web-east", (e) => subsetsOf(e) > 0);
      assert.deepEqual(ipsOf(ep), ["198.18.0.9", "198.18.0.91"]);
      assert.deepEqual(
        (ep.subsets?.[0]?.addresses ?? []).map((a) => a.ip),
        ["198.18.0.9", "198.18.0.91"],
        "addresses are written sorted",
      );
      for (const address of ep.subsets?.[0]?.addresses ?? []) assert.equal(address.hostname, undefined);
      const writes = controller.status().writer?.writes ?? {};
      assert.equal(writes["create/Endpoints/422"] ?? 0, 0, JSON.stringify(writes));
      assert.equal(writes["update/Endpoints/422"] ?? 0, 0, JSON.stringify(writes));
    });

    it("never writes a loopback ingress IP of the gateway into the Endpoints", async () => {
      const gw = { name: "gw-loopback", namespace: "gw-host" };
      await fleet.createGateway("east", { ...gw, ingress: [{ ip: "127.0.0.1" }] });
      await fleet.createService("east", "host-4", "web", { gateway: gw });
      await fleet.waitForMirror("host-4", "web-east");
      const empty = await fleet.waitForEndpoints("host-4", "web-east", () => true);
      assert.equal(subsetsOf(empty), 0);
      await fleet.setGatewayIngress("east", [{ ip: "127.0.0.1" }, { ip: "198.18.0.94" }], gw);
      const ep = await fleet.waitForEndpoints("host-4", "web-east", (e) => subsetsOf(e) > 0);
      assert.deepEqual(ipsOf(ep), ["198.18.0.94"]);
    });

    it("empties the Endpoints when the gateway's hostname does not resolve", async () => {
      const gw = { name: "gw-host-2", namespace: "gw-host" };
      await fleet.createGateway("east", { ...gw, ingress: [{ ip: "198.18.0.50" }] });
      await fleet.createService("east", "host-2", "web", { gateway: gw });
      await fleet.waitForEndpoints("host-2", "web-east", (e) => same(ipsOf(e), ["198.18.0.50"]));
      await fleet.setGatewayIngress("east", [{ hostname: "does-not-exist.invalid" }], gw);
      const ep = await fleet.waitForEndpoints("host-2", "web-east", (e) => subsetsOf(e) === 0);
      assert.deepEqual(ep.subsets ?? [], []);
      const svc = await fleet.localService("host-2", "web-east");
      assert.ok(svc, "the mirror Service stays");
    });

    it("moves the gateway labels to the new gateway even when its hostname does not resolve (no stale labels)", async () => {
      const good = { name: "gw-good", namespace: "gw-switch" };
      const bad = { name: "gw-unresolvable", namespace: "gw-switch" };
      await fleet.createGateway("east", { ...good, ingress: [{ ip: "198.18.0.60" }] });
      await fleet.createGateway("east", { ...bad, ingress: [{ hostname: "does-not-exist.invalid" }] });
      await fleet.createService("east", "host-3", "web", { gateway: good });
      await fleet.waitForEndpoints("host-3", "web-east", (e) => same(ipsOf(e), ["198.18.0.60"]));
      await fleet.patchService("east", "host-3", "web", (svc) => {
        if (svc.metadata)
          svc.metadata.annotations = {
            ...svc.metadata.annotations,
            "mirror.linkerd.io/gateway-name": bad.name,
            "mirror.linkerd.io/gateway-ns": bad.namespace,
          };
      });
      const ep = await fleet.waitForEndpoints(
        "host-3",
        "web-east",
        (e) => e.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"] === bad.name,
      );
      assert.equal(subsetsOf(ep), 0);
      assert.deepEqual(ep.metadata?.labels, {
        "mirror.linkerd.io/mirrored-service": "true",
        "mirror.linkerd.io/cluster-name": "east",
        "mirror.linkerd.io/remote-gateway-name": bad.name,
        "mirror.linkerd.io/remote-gateway-ns": bad.namespace,
      });
      const svc = await fleet.waitForMirror(
        "host-3",
        "web-east",
        (s) => s.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"] === bad.name,
      );
      assert.equal(svc.metadata?.labels?.["mirror.linkerd.io/remote-gateway-ns"], bad.namespace);
    });
  });

  describe("a gateway change touches only the mirrors of its own cluster", () => {
    it("updates every mirror of east when east's gateway IP changes, and leaves west's mirrors untouched", async () => {
      await fleet.createService("east", "multi", "web");
      await fleet.createService("east", "multi", "api");
      await fleet.createService("west", "multi", "web");
      for (const name of ["web-east", "api-east"]) {
        await fleet.waitForEndpoints("multi", name, (e) => same(ipsOf(e), ["198.18.0.10"]));
      }
      const westBefore = await fleet.waitForEndpoints("multi", "web-west", (e) => same(ipsOf(e), ["198.51.100.20"]));
      const westSvcBefore = await fleet.waitForMirror("multi", "web-west");

      await fleet.setGatewayIngress("east", [{ ip: "198.18.0.11" }]);
      for (const name of ["web-east", "api-east"]) {
        await fleet.waitForEndpoints("multi", name, (e) => same(ipsOf(e), ["198.18.0.11"]));
      }
      // Proves a non-event: east's change is mirrored, and a later writer report shows nothing
      // queued or in flight, so a wrong write to west's mirror would have happened by now.
      await waitForWriterIdle(controller);
      const westAfter = await fleet.local.readNamespacedEndpoints({ namespace: "multi", name: "web-west" });
      const westSvcAfter = await fleet.local.readNamespacedService({ namespace: "multi", name: "web-west" });
      assert.equal(westAfter.metadata?.resourceVersion, westBefore.metadata?.resourceVersion);
      assert.equal(westSvcAfter.metadata?.resourceVersion, westSvcBefore.metadata?.resourceVersion);
      assert.deepEqual(ipsOf(westAfter), ["198.51.100.20"]);
    });

    it("carries an identity change of the gateway to the Endpoints of its mirrors", async () => {
      await fleet.waitForEndpoints(
        "multi",
        "web-east",
        (e) => e.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-identity"] === "gw.east.identity",
      );
      await fleet.patchService("east", "gateway", "gateway", (svc) => {
        if (svc.metadata)
          svc.metadata.annotations = {
            ...svc.metadata.annotations,
            "mirror.linkerd.io/gateway-identity": "gw.east.identity-2",
          };
      });
      for (const name of ["web-east", "api-east"]) {
        await fleet.waitForEndpoints(
          "multi",
          name,
          (e) => e.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-identity"] === "gw.east.identity-2",
        );
      }
      const west = await fleet.local.readNamespacedEndpoints({ namespace: "multi", name: "web-west" });
      assert.equal(west.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-identity"], "gw.west.identity");
    });

    it("empties the Endpoints of east's mirrors when east's gateway is deleted, and keeps their Services", async () => {
      const westBefore = await fleet.local.readNamespacedEndpoints({ namespace: "multi", name: "web-west" });
      await fleet.deleteService("east", "gateway", "gateway");
      for (const name of ["web-east", "api-east"]) {
        await fleet.waitForEndpoints("multi", name, (e) => subsetsOf(e) === 0);
        const svc = await fleet.waitForMirror(
          "multi",
          name,
          (s) => s.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-resource-version"] === undefined,
        );
        assert.equal(svc.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"], "gateway");
      }
      await waitForWriterIdle(controller);
      const westAfter = await fleet.local.readNamespacedEndpoints({ namespace: "multi", name: "web-west" });
      assert.equal(westAfter.metadata?.resourceVersion, westBefore.metadata?.resourceVersion);
    });
  });

  it("reports a too-long mirror name and a Service without ports, skips them, and mirrors the cluster's other Services", async () => {
    const gw = { name: "gw-problems", namespace: "gw-problems" };
    await fleet.createGateway("east", { ...gw, ingress: [{ ip: "198.18.0.70" }] });
    const longName = `svc-${"x".repeat(56)}`; // 60 characters: the mirror name would be 65
    assert.equal(longName.length, 60);
    await fleet.createService("east", "problems", longName, { gateway: gw });
    const exported = { "mirror.linkerd.io/gateway-name": gw.name, "mirror.linkerd.io/gateway-ns": gw.namespace };
    await fleet.api("east").createNamespacedService({
      namespace: "problems",
      body: {
        metadata: { name: "headless", annotations: exported },
        spec: { clusterIP: "None", selector: { app: "headless" } },
      },
    });
    await fleet.api("east").createNamespacedService({
      namespace: "problems",
      body: {
        metadata: { name: "external", annotations: exported },
        spec: { type: "ExternalName", externalName: "example.com" },
      },
    });
    await fleet.createService("east", "problems", "web", { gateway: gw });

    const found = await eventually("the problems in status()", () => {
      const ps = problems("east").filter((p) => p.remote?.startsWith("problems/"));
      return ps.length >= 3 ? ps : undefined;
    });
    assert.deepEqual(found.map((p) => [p.remote, p.reason]).sort(), [
      ["problems/external", "no-ports"],
      ["problems/headless", "no-ports"],
      [`problems/${longName}`, "mirror-name-invalid"],
    ]);
    await fleet.waitForEndpoints("problems", "web-east", (e) => same(ipsOf(e), ["198.18.0.70"]));
    // Each skipped Service is also reported as a Warning Event on the cluster's Secret.
    await eventually("MirrorSkipped Events on east's credentials Secret", async () => {
      const events = await fleet.local.listNamespacedEvent({ namespace: CONTROLLER_NAMESPACE });
      const skipped = events.items.filter(
        (e) =>
          e.reason === "MirrorSkipped" &&
          e.involvedObject.name === "cluster-credentials-east" &&
          e.message?.includes("problems/"),
      );
      return skipped.length >= 3 ? true : undefined;
    });
    const local = await fleet.local.listNamespacedService({ namespace: "problems" });
    assert.deepEqual(
      local.items.map((s) => s.metadata?.name),
      ["web-east"],
    );

    // Fixing the problem (adding a port) makes the Service mirrored; the report goes away.
    await fleet.patchService("east", "problems", "headless", (svc) => {
      if (svc.spec) svc.spec.ports = [{ name: "tcp", port: 7000, protocol: "TCP" }];
    });
    await fleet.waitForMirror("problems", "headless-east", (s) => s.spec?.ports?.[0]?.port === 7000);
    await eventually("the headless problem to clear", () =>
      problems("east").some((p) => p.remote === "problems/headless") ? undefined : true,
    );
  });

  it("never mirrors an exported Service of an excluded namespace into the local one", async () => {
    const gw = { name: "gw-excluded", namespace: "gw-excluded" };
    await fleet.createGateway("east", { ...gw, ingress: [{ ip: "198.18.0.80" }] });
    await fleet.createService("east", "kube-public", "leak", { gateway: gw });
    await fleet.createService("east", "not-excluded", "leak", { gateway: gw });
    await fleet.waitForMirror("not-excluded", "leak-east");
    const problem = await eventually("the excluded-namespace problem", () =>
      problems("east").find((p) => p.remote === "kube-public/leak"),
    );
    assert.equal(problem.reason, "excluded-namespace");
    await waitForWriterIdle(controller);
    assert.equal(await fleet.localService("kube-public", "leak-east"), undefined);
    const endpoints = await fleet.local.listNamespacedEndpoints({ namespace: "kube-public" });
    assert.deepEqual(
      endpoints.items.filter((e) => e.metadata?.name === "leak-east"),
      [],
    );
  });
});
