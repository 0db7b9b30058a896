/**
 * fleet-mirror next to the built-in controllers of a real cluster (the sandbox's
 * kube-controller-manager: EndpointSlice, EndpointSliceMirroring, namespace, garbage
 * collector): the mirroring controller derives the slices a real cluster would from the
 * mirror's Endpoints, nobody rewrites anybody's objects once converged, and deleting a
 * namespace that holds mirrors completes.
 *
 * The "no fighting" checks are written per `--endpoints-api` mode (SPEC §9).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import type { Config } from "../../src/config.ts";
import { ENDPOINTS_APIS, type EndpointsApi } from "../../src/core/mirror-kinds.ts";
import { mirrorName } from "../../src/core/naming.ts";
import type { WriterStatus } from "../../src/protocol/messages.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually, objectIdentity, statusCode } from "../helpers/kube.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

/** Every `--endpoints-api` mode (SPEC §9): the built-in controllers and DNS must work with each. */
const MODES: readonly EndpointsApi[] = ENDPOINTS_APIS;
const modeConfig = (mode: EndpointsApi): Partial<Config> => ({ endpointsApi: mode });

const MANAGED_BY = "endpointslice.kubernetes.io/managed-by";
const MIRRORING_CONTROLLER = "endpointslicemirroring-controller.k8s.io";
const ENDPOINTSLICE_CONTROLLER = "endpointslice-controller.k8s.io";
const SERVICE_NAME = "kubernetes.io/service-name";
const GATEWAY_IP = "198.18.0.10";

describe("fleet-mirror beside kube-controller-manager's built-in controllers", () => {
  let fleet: Fleet;
  let slices: DiscoveryV1Api;
  let markers = 0;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    slices = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    await fleet.createGateway("east", { ingress: [{ ip: GATEWAY_IP }] });
    await fleet.register("east");
  });
  after(async () => {
    await fleet?.stop();
  });

  async function slicesOf(namespace: string, service: string): Promise<V1EndpointSlice[]> {
    const list = await slices.listNamespacedEndpointSlice({ namespace, labelSelector: `${SERVICE_NAME}=${service}` });
    return list.items;
  }

  async function waitForSlice(
    namespace: string,
    service: string,
    check: (slice: V1EndpointSlice) => boolean,
  ): Promise<V1EndpointSlice> {
    return eventually(`an EndpointSlice of ${namespace}/${service}`, async () =>
      (await slicesOf(namespace, service)).find(check),
    );
  }

  /**
   * Evidence that kube-controller-manager has processed what came before: a selector-less
   * Service and Endpoints of the test's own, made now, and the slice the mirroring
   * controller derives from them. Its informers deliver in order, so earlier changes in
   * the namespace have reached it by then.
   */
  async function controllerManagerMarker(namespace: string): Promise<void> {
    const name = `kcm-marker-${++markers}`;
    await fleet.local.createNamespacedService({
      namespace,
      body: { metadata: { name }, spec: { ports: [{ name: "p", port: 1 }] } },
    });
    await fleet.local.createNamespacedEndpoints({
      namespace,
      body: { metadata: { name }, subsets: [{ addresses: [{ ip: "198.18.0.99" }], ports: [{ name: "p", port: 1 }] }] },
    });
    await waitForSlice(namespace, name, (s) => s.metadata?.labels?.[MANAGED_BY] === MIRRORING_CONTROLLER);
  }

  /** Writes of Services, Endpoints, EndpointSlices and Namespaces (not Events) since the writer started. */
  function objectWrites(status: WriterStatus): number {
    return Object.entries(status.writes)
      .filter(([key]) => !key.split("/")[1]?.startsWith("Event"))
      .reduce((sum, [, n]) => sum + n, 0);
  }

  /** uid@resourceVersion of the mirror Service, its Endpoints (if any) and each of its slices. */
  async function mirrorObjects(namespace: string, name: string): Promise<string[]> {
    const service = await fleet.local.readNamespacedService({ namespace, name });
    const identities = [`Service ${objectIdentity(service)}`];
    try {
      identities.push(`Endpoints ${objectIdentity(await fleet.local.readNamespacedEndpoints({ namespace, name }))}`);
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
    }
    for (const slice of await slicesOf(namespace, name)) {
      identities.push(`EndpointSlice ${slice.metadata?.name} ${objectIdentity(slice)}`);
    }
    return identities.sort();
  }

  it("the EndpointSliceMirroring controller derives from a mirror's Endpoints the slice a real cluster would", async () => {
    const controller = fleet.startInProcess(modeConfig("endpoints"));
    try {
      await fleet.createService("east", "shop", "web", {
        ports: [
          { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
          { name: "grpc", port: 9090, protocol: "TCP" },
        ],
      });
      const endpoints = await fleet.waitForEndpoints("shop", "web-east", (e) => (e.subsets?.length ?? 0) > 0);
      const slice = await waitForSlice("shop", "web-east", (s) => (s.endpoints?.length ?? 0) > 0);
      assert.equal(slice.metadata?.labels?.[MANAGED_BY], MIRRORING_CONTROLLER);
      assert.equal(slice.addressType, "IPv4");
      assert.deepEqual(
        slice.endpoints?.map((e) => [e.addresses, e.conditions?.ready]),
        [[[GATEWAY_IP], true]],
      );
      assert.deepEqual(slice.ports?.map((p) => [p.name, p.protocol, p.port]).sort(), [
        ["grpc", "TCP", 4143],
        ["http", "TCP", 4143],
      ]);
      // Owned by the Endpoints it mirrors: deleting the mirror takes the slice with it.
      assert.deepEqual(
        slice.metadata?.ownerReferences?.map((o) => [o.kind, o.name, o.uid]),
        [["Endpoints", "web-east", endpoints.metadata?.uid]],
      );

      // It follows the mirror: a new gateway address reaches the slice through the Endpoints.
      await fleet.setGatewayIngress("east", [{ ip: "198.18.0.11" }]);
      await waitForSlice("shop", "web-east", (s) => s.endpoints?.[0]?.addresses?.[0] === "198.18.0.11");
      await fleet.setGatewayIngress("east", [{ ip: GATEWAY_IP }]);
      await waitForSlice("shop", "web-east", (s) => s.endpoints?.[0]?.addresses?.[0] === GATEWAY_IP);
      await fleet.deleteService("east", "shop", "web");
      await fleet.waitForNoMirror("shop", "web-east");
      await eventually("the mirrored slice garbage-collected", async () =>
        (await slicesOf("shop", "web-east")).length === 0 ? true : undefined,
      );
    } finally {
      await controller.stop();
    }
  });

  for (const mode of MODES) {
    describe(`--endpoints-api=${mode}`, () => {
      const namespace = `calm-${mode}`;
      let controller: Supervisor;
      before(() => {
        controller = fleet.startInProcess(modeConfig(mode));
      });
      after(async () => {
        await controller?.stop();
      });

      it("once converged, neither fleet-mirror nor kube-controller-manager writes the mirror, its Endpoints or its slices again", async () => {
        await fleet.createService("east", namespace, "api");
        const name = mirrorName("api", "east");
        await fleet.waitForMirror(namespace, name);
        if (mode === "endpointslices") {
          await waitForSlice(namespace, name, (s) => (s.endpoints?.length ?? 0) > 0);
        } else {
          await fleet.waitForEndpoints(namespace, name, (e) => (e.subsets?.length ?? 0) > 0);
          // With fleet-mirror's own slices (both), its Endpoints carry skip-mirror: no
          // mirrored slice may appear; without them (endpoints), the mirrored one must.
          if (mode === "endpoints") {
            await waitForSlice(namespace, name, (s) => s.metadata?.labels?.[MANAGED_BY] === MIRRORING_CONTROLLER);
          }
        }
        await controllerManagerMarker(namespace);
        const settled = await waitForWriterIdle(controller, { reports: 2 });
        const before = await mirrorObjects(namespace, name);

        // Whatever kube-controller-manager does now, it does after the marker; whatever
        // fleet-mirror does in answer, the writer has done once it is idle again.
        await controllerManagerMarker(namespace);
        const later = await waitForWriterIdle(controller, { reports: 2 });
        assert.deepEqual(await mirrorObjects(namespace, name), before);
        assert.equal(objectWrites(later), objectWrites(settled), JSON.stringify(later.writes));

        const managers = (await slicesOf(namespace, name)).map((s) => s.metadata?.labels?.[MANAGED_BY]);
        assert.ok(!managers.includes(ENDPOINTSLICE_CONTROLLER), `no slice of the selector-less mirror: ${managers}`);
        if (mode === "endpoints") assert.deepEqual(managers, [MIRRORING_CONTROLLER]);
        else assert.ok(managers.length > 0 && !managers.includes(MIRRORING_CONTROLLER), `${managers}`);
      });

      it("deleting a namespace that holds mirrors completes, and the mirror comes back in a new one", async (t) => {
        const doomed = `doomed-${mode}`;
        await fleet.createService("east", doomed, "db");
        const name = mirrorName("db", "east");
        await fleet.waitForMirror(doomed, name);
        const original = await fleet.local.readNamespace({ name: doomed });
        const writesBefore = objectWrites(await waitForWriterIdle(controller));

        await fleet.local.deleteNamespace({ name: doomed });
        // The namespace controller empties and finalizes it: that uid disappears for good.
        // The remote still exports db, so fleet-mirror then creates the namespace anew
        // (SPEC §3) with the mirror in it (SPEC §4).
        await eventually(
          `namespace ${doomed} (uid ${original.metadata?.uid}) finalized`,
          async () => {
            try {
              const now = await fleet.local.readNamespace({ name: doomed });
              return now.metadata?.uid !== original.metadata?.uid ? true : undefined;
            } catch (error) {
              if (statusCode(error) === 404) return true;
              throw error;
            }
          },
          60_000,
        );
        const restored = await fleet.waitForMirror(doomed, name, () => true, 60_000);
        if (mode === "endpointslices") await waitForSlice(doomed, name, (s) => (s.endpoints?.length ?? 0) > 0);
        else await fleet.waitForEndpoints(doomed, name, (e) => (e.subsets?.length ?? 0) > 0, 60_000);
        const status = await waitForWriterIdle(controller, { reports: 2 });
        const spent = objectWrites(status) - writesBefore;
        const refused = Object.entries(status.writes).filter(([key]) => /\/(403|409|404)$/.test(key));
        t.diagnostic(
          `writes while ${doomed} was deleted and restored: ${spent}; refused so far: ${JSON.stringify(refused)}`,
        );
        // Writes into the terminating namespace are refused; the writer's backoff keeps
        // them few. Bound: far below one a second for the time termination takes.
        assert.ok(
          spent < 30,
          `writes while the namespace was deleted and restored: ${spent} ${JSON.stringify(refused)}`,
        );
        assert.notEqual(restored.metadata?.uid, undefined);
      });
    });
  }
});
