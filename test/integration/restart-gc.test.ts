/**
 * End to end with the controller as a separate OS process (`fleet-mirror run`): what a
 * restart does to the mirrors (SPEC §4 "a restart ... makes zero writes", §6 start-up
 * garbage collection, never on a partial or failed list) and how SIGTERM ends it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { AdminStatus } from "../../src/admin/source.ts";
import { SIGTERM_LISTENER_MARKER } from "../fixtures/sigterm-marker-line.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { eventually, objectIdentity, statusCode } from "../helpers/kube.ts";
import { waitForControllerIdle } from "../helpers/settle.ts";

const MARKER_FIXTURE = new URL("../fixtures/sigterm-listener-marker.ts", import.meta.url).pathname;

const TIMEOUT_MS = 60_000;

describe("restarting the controller process", () => {
  let fleet: Fleet;
  const running = new Set<ControllerProcess>();

  async function startController(execArgv: readonly string[] = []): Promise<ControllerProcess> {
    const controller = await fleet.startProcess([], { execArgv });
    running.add(controller);
    return controller;
  }

  async function stopController(
    controller: ControllerProcess,
    signal: NodeJS.Signals = "SIGTERM",
  ): Promise<number | null> {
    const code = await controller.stop(signal);
    running.delete(controller);
    return code;
  }

  /** Mirror Service and Endpoints identities, once the Endpoints are filled. */
  async function mirrorIdentity(namespace: string, name: string): Promise<{ service: string; endpoints: string }> {
    const service = await fleet.waitForMirror(namespace, name, () => true, TIMEOUT_MS);
    const endpoints = await fleet.waitForEndpoints(namespace, name, (e) => (e.subsets?.length ?? 0) > 0, TIMEOUT_MS);
    return { service: objectIdentity(service), endpoints: objectIdentity(endpoints) };
  }

  async function currentIdentity(namespace: string, name: string): Promise<{ service: string; endpoints: string }> {
    const service = await fleet.local.readNamespacedService({ namespace, name });
    const endpoints = await fleet.local.readNamespacedEndpoints({ namespace, name });
    return { service: objectIdentity(service), endpoints: objectIdentity(endpoints) };
  }

  async function waitForNoEndpoints(namespace: string, name: string): Promise<void> {
    await eventually(
      `endpoints ${namespace}/${name} to be gone`,
      async () => {
        try {
          await fleet.local.readNamespacedEndpoints({ namespace, name });
          return undefined;
        } catch (error) {
          if (statusCode(error) === 404) return true;
          throw error;
        }
      },
      TIMEOUT_MS,
    );
  }

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createGateway("west", { ingress: [{ ip: "198.18.0.20" }] });
    await fleet.register("east");
    await fleet.register("west");
  });
  after(async () => {
    for (const controller of running) await controller.stop("SIGKILL");
    await fleet?.stop();
  });

  for (const signal of ["SIGTERM", "SIGKILL"] as const) {
    it(`garbage-collects, updates and leaves untouched what changed while it was stopped (${signal})`, async () => {
      const ns = `down-${signal.toLowerCase()}`;
      for (const name of ["gone", "unexported", "changed", "kept"]) await fleet.createService("east", ns, name);
      await fleet.createService("west", ns, "kept");
      const first = await startController();
      const before = {
        keptEast: await mirrorIdentity(ns, "kept-east"),
        keptWest: await mirrorIdentity(ns, "kept-west"),
      };
      for (const name of ["gone-east", "unexported-east", "changed-east"]) await mirrorIdentity(ns, name);

      const code = await stopController(first, signal);
      if (signal === "SIGTERM") assert.equal(code, 0, first.output);
      await fleet.deleteService("east", ns, "gone");
      await fleet.unexport("east", ns, "unexported");
      await fleet.patchService("east", ns, "changed", (svc) => {
        if (svc.spec?.ports?.[0]) svc.spec.ports[0].port = 8081;
      });

      const second = await startController();
      try {
        await fleet.waitForNoMirror(ns, "gone-east", TIMEOUT_MS);
        await waitForNoEndpoints(ns, "gone-east");
        await fleet.waitForNoMirror(ns, "unexported-east", TIMEOUT_MS);
        await waitForNoEndpoints(ns, "unexported-east");
        await fleet.waitForMirror(ns, "changed-east", (s) => s.spec?.ports?.[0]?.port === 8081, TIMEOUT_MS);

        assert.deepEqual(await currentIdentity(ns, "kept-east"), before.keptEast);
        assert.deepEqual(await currentIdentity(ns, "kept-west"), before.keptWest);
        await fleet.local.readNamespace({ name: ns }); // namespaces are never deleted
      } finally {
        await stopController(second);
      }
    });
  }

  it("deletes the mirrors of a cluster whose Secret was deleted while it was stopped, and keeps the others", async () => {
    const ns = "secret-gone";
    await fleet.createService("east", ns, "web");
    await fleet.createService("west", ns, "web");
    const secretName = await fleet.register("east", { clusterName: "removed" });
    const first = await startController();
    const keptEast = await mirrorIdentity(ns, "web-east");
    const keptWest = await mirrorIdentity(ns, "web-west");
    await mirrorIdentity(ns, "web-removed");
    assert.equal(await stopController(first), 0, first.output);

    await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: secretName });

    const second = await startController();
    try {
      await fleet.waitForNoMirror(ns, "web-removed", TIMEOUT_MS);
      await waitForNoEndpoints(ns, "web-removed");
      const leftovers = await fleet.local.listServiceForAllNamespaces({
        labelSelector: "mirror.linkerd.io/cluster-name=removed",
      });
      assert.deepEqual(
        leftovers.items.map((s) => s.metadata?.name),
        [],
      );
      assert.deepEqual(await currentIdentity(ns, "web-east"), keptEast);
      assert.deepEqual(await currentIdentity(ns, "web-west"), keptWest);
    } finally {
      await stopController(second);
    }
  });

  it("makes zero local writes when it restarts with every mirror intact", async () => {
    const ns = "intact";
    for (const name of ["a", "b", "c"]) {
      await fleet.createService("east", ns, name, {
        ports: [
          { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
          { name: "grpc", port: 9090, protocol: "TCP" },
        ],
      });
      await fleet.createService("west", ns, name, { ports: [{ port: 53, protocol: "UDP" }] });
    }
    const first = await startController();
    for (const name of ["a", "b", "c"]) {
      await mirrorIdentity(ns, `${name}-east`);
      await mirrorIdentity(ns, `${name}-west`);
    }
    await waitForControllerIdle(await first.adminUrl(), ["east", "west"]);
    assert.equal(await stopController(first), 0, first.output);
    const writesBefore = await fleet.localWriteCount();

    const second = await startController();
    try {
      await second.waitForLog("local stores synced; writer ready");
      await second.waitForLog("cluster east is synced");
      await second.waitForLog("cluster west is synced");
      // Proving that something did NOT happen: the writer holds both clusters' complete
      // desired sets and has nothing queued or in flight, so any (wrong) write was made.
      await waitForControllerIdle(await second.adminUrl(), ["east", "west"]);
      assert.equal(await fleet.localWriteCount(), writesBefore, second.output);
    } finally {
      await stopController(second);
    }
  });

  it("never collects the mirrors of a cluster whose API is down at start-up, and reconciles once it is back", async () => {
    const ns = "remote-down";
    await fleet.createService("east", ns, "stays");
    await fleet.createService("east", ns, "deleted-meanwhile");
    await fleet.createService("west", ns, "web");
    const first = await startController();
    const stays = await mirrorIdentity(ns, "stays-east");
    const deletedMeanwhile = await mirrorIdentity(ns, "deleted-meanwhile-east");
    await mirrorIdentity(ns, "web-west");
    assert.equal(await stopController(first), 0, first.output);

    await fleet.deleteService("east", ns, "deleted-meanwhile");
    await fleet.plane.stopApiServer("east");
    let second: ControllerProcess | undefined;
    try {
      second = await startController();
      await second.waitForLog("local stores synced; writer ready");
      await second.waitForLog("cluster west is synced");
      await fleet.createService("west", ns, "added");
      await mirrorIdentity(ns, "added-west");

      // Proving that something did NOT happen: east's actor has failed to list (its row
      // carries the reason), and the writer, holding west's complete set, has nothing queued
      // or in flight: a wrongful collection of east's mirrors would have been written.
      const adminUrl = await second.adminUrl();
      await eventually("east failing to list, with a reason", async () => {
        const status = (await (await fetch(`${adminUrl}/status`)).json()) as AdminStatus;
        const east = status.clusters?.find((r) => r.cluster === "east");
        return east && east.state !== "synced" && east.reason !== undefined ? east : undefined;
      });
      await waitForControllerIdle(adminUrl, ["west"]);
      assert.deepEqual(await currentIdentity(ns, "stays-east"), stays);
      assert.deepEqual(await currentIdentity(ns, "deleted-meanwhile-east"), deletedMeanwhile);
      assert.ok(!second.logMessages().includes("cluster east is synced"), "east cannot have been listed");
    } finally {
      await fleet.plane.startApiServer("east");
    }
    try {
      await fleet.waitForNoMirror(ns, "deleted-meanwhile-east", TIMEOUT_MS);
      await fleet.createService("east", ns, "added");
      await mirrorIdentity(ns, "added-east");
      assert.deepEqual(await currentIdentity(ns, "stays-east"), stays);
    } finally {
      if (second) await stopController(second);
    }
  });

  it("exits 0 promptly on SIGTERM and leaves the mirrors in place", async (t) => {
    const ns = "sigterm";
    await fleet.createService("east", ns, "web");
    const controller = await startController();
    await controller.waitForLog("local stores synced; writer ready");
    const mirror = await mirrorIdentity(ns, "web-east");
    await waitForControllerIdle(await controller.adminUrl(), ["east", "west"]);

    const started = Date.now();
    const code = await stopController(controller, "SIGTERM");
    const tookMs = Date.now() - started;
    t.diagnostic(`exited ${tookMs} ms after SIGTERM`);

    assert.equal(code, 0, controller.output);
    assert.ok(tookMs < 5_000, `took ${tookMs} ms to exit`);
    assert.ok(controller.logMessages().includes("stopped"), controller.output);
    assert.deepEqual(await currentIdentity(ns, "web-east"), mirror);
  });

  it("exits 0 on a SIGTERM that arrives while it is still starting (modules loading, nothing written yet)", async () => {
    // From the moment main.ts listens for SIGTERM (its first import): before that the
    // signal is Node's default, fatal by design, and how long Node takes to get there is
    // the machine's (test/fixtures/sigterm-listener-marker.ts says when).
    for (const delayMs of [0, 300]) {
      const controller = await startController(["--import", MARKER_FIXTURE]);
      await eventually(
        "SIGTERM listener",
        () => (controller.output.includes(SIGTERM_LISTENER_MARKER) ? true : undefined),
        30_000,
        5,
      );
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      const code = await stopController(controller, "SIGTERM");
      assert.equal(code, 0, `SIGTERM after ${delayMs} ms: ${controller.output}`);
    }
  });
});
