/**
 * End to end on real API servers: SPEC §2–§4, the mirror's exact shape and how it
 * follows the remote Service and its gateway.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";

describe("mirroring a remote Service", () => {
  let fleet: Fleet;
  let controller: Supervisor;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }], identity: "gw.east.identity" });
    await fleet.register("east");
    controller = fleet.startInProcess();
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("creates the mirror Service and Endpoints with exactly the SPEC's labels, annotations, ports and addresses", async () => {
    const remote = await fleet.createService("east", "shop", "web", {
      ports: [
        { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
        { name: "grpc", port: 9090, protocol: "TCP" },
      ],
    });
    const svc = await fleet.waitForMirror("shop", "web-east");
    assert.deepEqual(svc.metadata?.labels, {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/cluster-name": "east",
      "mirror.linkerd.io/remote-gateway-name": "gateway",
      "mirror.linkerd.io/remote-gateway-ns": "gateway",
    });
    assert.equal(
      svc.metadata?.annotations?.["mirror.linkerd.io/remote-resource-version"],
      remote.metadata?.resourceVersion,
    );
    assert.equal(svc.metadata?.annotations?.["mirror.linkerd.io/remote-svc-fq-name"], "web.shop.svc.cluster.local");
    assert.ok(svc.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-resource-version"]);
    assert.equal(svc.spec?.type, "ClusterIP");
    assert.equal(svc.spec?.selector, undefined);
    assert.deepEqual(
      svc.spec?.ports?.map((p) => [p.name, p.protocol, p.port, p.targetPort]),
      [
        ["http", "TCP", 80, 8080],
        ["grpc", "TCP", 9090, 9090],
      ],
    );
    const ep = await fleet.waitForEndpoints("shop", "web-east", (e) => (e.subsets?.length ?? 0) > 0);
    assert.equal(ep.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-identity"], "gw.east.identity");
    assert.deepEqual(
      ep.subsets?.[0]?.addresses?.map((a) => a.ip),
      ["198.18.0.10"],
    );
    assert.deepEqual(ep.subsets?.[0]?.ports?.map((p) => [p.name, p.port]).sort(), [
      ["grpc", 4143],
      ["http", 4143],
    ]);
    const ns = await fleet.local.readNamespace({ name: "shop" });
    assert.equal(ns.metadata?.labels?.["mirror.linkerd.io/mirrored-service"], "true");
    assert.equal(ns.metadata?.labels?.["mirror.linkerd.io/cluster-name"], "east");
  });

  it("creates a new namespace once, however many mirrors land in it at the same time", async () => {
    const namespacePosts = async (): Promise<number> => {
      let total = 0;
      for (const line of (await fleet.localMetrics()).split("\n")) {
        if (
          line.startsWith("apiserver_request_total{") &&
          line.includes('verb="POST"') &&
          line.includes('resource="namespaces"')
        ) {
          total += Number(line.slice(line.lastIndexOf(" ") + 1));
        }
      }
      return total;
    };
    const before = await namespacePosts();
    await Promise.all(Array.from({ length: 20 }, (_, i) => fleet.createService("east", "burst", `svc-${i}`)));
    for (let i = 0; i < 20; i++) await fleet.waitForMirror("burst", `svc-${i}-east`);
    assert.equal((await namespacePosts()) - before, 1, "one POST for the one new namespace");
  });

  it("follows a port change and deletes the mirror when the remote Service is unexported", async () => {
    await fleet.createService("east", "shop", "cart");
    await fleet.waitForMirror("shop", "cart-east");
    await fleet.patchService("east", "shop", "cart", (svc) => {
      if (svc.spec?.ports?.[0]) svc.spec.ports[0].port = 8081;
    });
    await fleet.waitForMirror("shop", "cart-east", (s) => s.spec?.ports?.[0]?.port === 8081);
    await fleet.unexport("east", "shop", "cart");
    await fleet.waitForNoMirror("shop", "cart-east");
  });
});
