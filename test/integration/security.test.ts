/**
 * Security and faults, end to end (SPEC §7, and the "survive faults" issue): the
 * controller runs with the least-privilege identities of `deploy/rbac/` and is refused
 * anything beyond them; credential rotation leaks neither file descriptors nor
 * connections; SIGTERM with writes in flight exits promptly; SIGKILL at any moment
 * converges after a restart without deleting a mirror that is still wanted.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, DiscoveryV1Api, type V1Service } from "@kubernetes/client-node";
import { CLUSTER_NAME } from "../../src/core/labels.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { eventually, kubeConfigFromString, sleep, statusCode } from "../helpers/kube.ts";
import { waitForControllerIdle } from "../helpers/settle.ts";

const TIMEOUT_MS = 90_000;
/** Open file descriptors of a process, and its ESTABLISHED TCP connections to `port`. */
function resources(pid: number, port: number): { fds: number; connections: number } {
  const fdDir = `/proc/${pid}/fd`;
  const inodes = new Set<string>();
  const fds = readdirSync(fdDir);
  for (const fd of fds) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`${fdDir}/${fd}`));
      if (match?.[1]) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  let connections = 0;
  for (const table of ["tcp", "tcp6"]) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      const remote = fields[2];
      const state = fields[3];
      const inode = fields[9];
      if (!remote || state !== "01" || !inode || !inodes.has(inode)) continue;
      if (Number.parseInt(remote.slice(remote.lastIndexOf(":") + 1), 16) === port) connections += 1;
    }
  }
  return { fds: fds.length, connections };
}

/** Requests the local API server refused with 403, by verb and resource, from its own metrics. */
async function forbidden(fleet: Fleet): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const line of (await fleet.localMetrics()).split("\n")) {
    if (!line.startsWith("apiserver_request_total{") || !line.includes('code="403"')) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1] ?? "?";
    const resource = /resource="([a-z]*)"/.exec(line)?.[1] ?? "?";
    const key = `${verb} ${resource}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1)));
  }
  return counts;
}

describe("security and faults", () => {
  let fleet: Fleet;
  const running = new Set<ControllerProcess>();

  async function startController(): Promise<ControllerProcess> {
    const controller = await fleet.startProcess();
    running.add(controller);
    return controller;
  }

  async function stopController(controller: ControllerProcess, signal: NodeJS.Signals = "SIGTERM") {
    const code = await controller.stop(signal);
    running.delete(controller);
    return code;
  }

  /** Local mirror Services of cluster east in `namespace`: name → uid. */
  async function mirrorUids(namespace: string): Promise<Map<string, string>> {
    const list = await fleet.local.listNamespacedService({ namespace, labelSelector: `${CLUSTER_NAME}=east` });
    return new Map(list.items.map((s: V1Service) => [s.metadata?.name ?? "", s.metadata?.uid ?? ""]));
  }

  /** Exported remote Services of east in `namespace`, as the names of their mirrors (the oracle). */
  async function expectedMirrors(namespace: string): Promise<string[]> {
    const list = await fleet.api("east").listNamespacedService({ namespace });
    return list.items
      .filter((s) => s.metadata?.annotations?.["mirror.linkerd.io/gateway-name"] !== undefined)
      .filter((s) => s.metadata?.annotations?.["mirror.linkerd.io/gateway-ns"] !== undefined)
      .map((s) => `${s.metadata?.name}-east`)
      .sort();
  }

  async function waitForConverged(namespace: string): Promise<Map<string, string>> {
    const expected = await expectedMirrors(namespace);
    let actual: string[] = [];
    return eventually(
      () => `mirrors of ${namespace} to be exactly ${expected.length} (have ${actual.length}: ${actual.join(",")})`,
      async () => {
        const uids = await mirrorUids(namespace);
        actual = [...uids.keys()].sort();
        return JSON.stringify(actual) === JSON.stringify(expected) ? uids : undefined;
      },
      TIMEOUT_MS,
      250,
    );
  }

  /**
   * Polls the mirrors of `namespace` until stopped, and records every mirror whose uid
   * changed or that disappeared after it had appeared.
   */
  function watchUids(namespace: string, initial: Map<string, string>) {
    const seen = new Map(initial);
    const lost = new Map<string, string>();
    let stopped = false;
    let polls = 0;
    const loop = (async () => {
      while (!stopped) {
        const now = await mirrorUids(namespace);
        for (const [name, uid] of seen) {
          const current = now.get(name);
          if (current !== uid) lost.set(name, current === undefined ? `deleted (was ${uid})` : `${uid} → ${current}`);
        }
        for (const [name, uid] of now) if (!seen.has(name)) seen.set(name, uid);
        polls++;
        await sleep(100);
      }
    })();
    return {
      lost,
      /** Resolves once the poller has compared the mirrors twice more (a whole poll after the call). */
      async polledAgain(): Promise<void> {
        const from = polls;
        await eventually("two more polls of the mirrors", () => (polls >= from + 2 ? true : undefined));
      },
      async stop(): Promise<void> {
        stopped = true;
        await loop;
      },
    };
  }

  /** 403s after the test that provokes them on purpose: the controller must never be refused. */
  let forbiddenBaseline: Map<string, number> | undefined;
  async function assertNeverForbidden(): Promise<void> {
    if (!forbiddenBaseline) return;
    const now = await forbidden(fleet);
    const refused = [...now].filter(([key, n]) => n !== (forbiddenBaseline?.get(key) ?? 0));
    assert.deepEqual(refused, [], "the local API server refused the controller something (verb resource, total)");
  }

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.register("east");
  });
  after(async () => {
    for (const controller of running) await controller.stop("SIGKILL");
    await fleet?.stop();
  });

  it("runs the controller with a token that is refused anything beyond deploy/rbac", async () => {
    const local = kubeConfigFromString(fleet.controllerKubeconfig()).makeApiClient(CoreV1Api);
    const localDiscovery = kubeConfigFromString(fleet.controllerKubeconfig()).makeApiClient(DiscoveryV1Api);
    const remoteDiscovery = kubeConfigFromString(await fleet.remoteKubeconfig("east")).makeApiClient(DiscoveryV1Api);
    const remote = kubeConfigFromString(await fleet.remoteKubeconfig("east")).makeApiClient(CoreV1Api);
    await fleet.ensureNamespace("local", "elsewhere");
    await fleet.local.createNamespacedSecret({
      namespace: "elsewhere",
      body: { metadata: { name: "not-yours" }, stringData: { password: "hunter2" } },
    });

    const denied: [string, () => Promise<unknown>][] = [
      ["delete a namespace", () => local.deleteNamespace({ name: "elsewhere" })],
      [
        "update a namespace",
        () => local.replaceNamespace({ name: "elsewhere", body: { metadata: { name: "elsewhere" } } }),
      ],
      [
        "read a Secret in another namespace",
        () => local.readNamespacedSecret({ namespace: "elsewhere", name: "not-yours" }),
      ],
      ["list Secrets cluster-wide", () => local.listSecretForAllNamespaces()],
      [
        "write a Secret in its own namespace",
        () => local.createNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, body: { metadata: { name: "mine" } } }),
      ],
      ["read an Event", () => local.readNamespacedEvent({ namespace: CONTROLLER_NAMESPACE, name: "any" })],
      ["delete Events", () => local.deleteCollectionNamespacedEvent({ namespace: CONTROLLER_NAMESPACE })],
      ["list Pods", () => local.listPodForAllNamespaces()],
      ["list ConfigMaps", () => local.listNamespacedConfigMap({ namespace: CONTROLLER_NAMESPACE })],
      [
        "delete EndpointSlices by collection",
        () => localDiscovery.deleteCollectionNamespacedEndpointSlice({ namespace: CONTROLLER_NAMESPACE }),
      ],
      [
        "remote: create an EndpointSlice",
        () =>
          remoteDiscovery.createNamespacedEndpointSlice({
            namespace: "gateway",
            body: { metadata: { name: "x" }, addressType: "IPv4", endpoints: [] },
          }),
      ],
      [
        "remote: create a Service",
        () =>
          remote.createNamespacedService({
            namespace: "gateway",
            body: { metadata: { name: "x" }, spec: { ports: [{ port: 1 }] } },
          }),
      ],
      ["remote: read a Secret", () => remote.listSecretForAllNamespaces()],
      ["remote: list Endpoints", () => remote.listEndpointsForAllNamespaces()],
      ["remote: list Namespaces", () => remote.listNamespace()],
    ];
    for (const [what, attempt] of denied) {
      await assert.rejects(attempt, (error) => statusCode(error) === 403, `${what} must be forbidden`);
    }

    // ... while what SPEC §7 grants works.
    await local.listNamespacedSecret({ namespace: CONTROLLER_NAMESPACE });
    await local.listServiceForAllNamespaces();
    await local.listEndpointsForAllNamespaces();
    await localDiscovery.listEndpointSliceForAllNamespaces();
    await local.listNamespace();
    await local.listEventForAllNamespaces({ fieldSelector: "reportingComponent=fleet-mirror" });
    await remote.listServiceForAllNamespaces();
    // Headless Services read their remote EndpointSlices (SPEC §7, §12): a read, nothing more.
    await remoteDiscovery.listEndpointSliceForAllNamespaces();
    forbiddenBaseline = await forbidden(fleet);
  });

  it("rotates the remote credentials 100 times without leaking descriptors or connections, and keeps the mirrors", async (t) => {
    const ns = "rotation";
    for (const name of ["a", "b", "c", "d", "e"]) await fleet.createService("east", ns, name);
    const controller = await startController();
    const pid = controller.child.pid;
    assert.ok(pid, "the controller process has a pid");
    const port = fleet.plane.cluster("east").port;
    const initial = await waitForConverged(ns);
    await controller.waitForLog("cluster east is synced");
    // The baseline of a controller with nothing left to do (writer idle, east complete).
    await waitForControllerIdle(await controller.adminUrl(), ["east"]);
    const baseline = resources(pid, port);
    t.diagnostic(`before: ${baseline.fds} fds, ${baseline.connections} connections to east`);

    const watch = watchUids(ns, initial);
    try {
      for (let i = 0; i < 100; i++) {
        const token = await fleet.mintRemoteToken("east");
        await fleet.local.replaceNamespacedSecret({
          namespace: CONTROLLER_NAMESPACE,
          name: "cluster-credentials-east",
          body: fleet.secretBody({
            secretName: "cluster-credentials-east",
            clusterName: "east",
            kubeconfig: await fleet.remoteKubeconfig("east", token),
          }),
        });
        await sleep(i % 10 === 9 ? 1_000 : 50);
      }
      // The newest credentials are in use: a change made now is mirrored.
      await fleet.createService("east", ns, "after-rotation");
      await fleet.waitForMirror(ns, "after-rotation-east", () => true, TIMEOUT_MS);
    } finally {
      await watch.stop();
    }
    let last = baseline;
    await eventually(
      () => `resources to settle (now ${last.fds} fds, ${last.connections} connections)`,
      () => {
        last = resources(pid, port);
        return last.fds <= baseline.fds + 10 && last.connections <= baseline.connections + 2 ? true : undefined;
      },
      30_000,
      500,
    );
    t.diagnostic(`after: ${last.fds} fds, ${last.connections} connections to east`);
    assert.deepEqual([...watch.lost], [], "no mirror was deleted or recreated during the rotations");
    const final = await mirrorUids(ns);
    for (const [name, uid] of initial) assert.equal(final.get(name), uid, `${name} kept its uid`);
    assert.equal(controller.child.exitCode, null, "the controller is still running");
    assert.equal(await stopController(controller), 0, controller.output.slice(-4_000));
    await assertNeverForbidden();
  });

  it("exits 0 within 5 s on SIGTERM with writes in flight, and a restarted controller converges", async (t) => {
    const ns = "sigterm-inflight";
    await fleet.ensureNamespace("east", ns);
    const controller = await startController();
    await controller.waitForLog("local stores synced; writer ready");
    await controller.waitForLog("cluster east is synced");
    await Promise.all(Array.from({ length: 50 }, (_, i) => fleet.createService("east", ns, `svc-${i}`)));
    await eventually("a first mirror to be written", async () => ((await mirrorUids(ns)).size > 0 ? true : undefined));

    const started = Date.now();
    const code = await stopController(controller, "SIGTERM");
    const tookMs = Date.now() - started;
    const written = (await mirrorUids(ns)).size;
    t.diagnostic(`exited with ${code} ${tookMs} ms after SIGTERM; ${written}/50 mirrors written by then`);
    assert.equal(code, 0, `signal ${controller.child.signalCode ?? "none"}\n${controller.output.slice(-4_000)}`);
    assert.ok(tookMs < 5_000, `took ${tookMs} ms to exit`);

    const second = await startController();
    try {
      // The first controller may have finished every write before it exited, so the mirrors
      // alone do not show that the second one is up: wait for its own sync, which also
      // means its signal handlers are installed before it is stopped.
      await second.waitForLog("cluster east is synced");
      const uids = await waitForConverged(ns);
      assert.equal(uids.size, 50);
    } finally {
      assert.equal(await stopController(second), 0);
    }
    await assertNeverForbidden();
  });

  it("converges after a SIGKILL at a random moment of an export storm, never deleting a wanted mirror", async (t) => {
    const ns = "sigkill-storm";
    const initialNames = Array.from({ length: 20 }, (_, i) => `old-${i}`);
    for (const name of initialNames) await fleet.createService("east", ns, name);
    const first = await startController();
    const initial = await waitForConverged(ns);

    // Mirrors that stay wanted throughout: the 10 old Services never unexported.
    const keptOld = new Map([...initial].filter(([name]) => Number(name.split("-")[1]) % 2 === 0));
    const watch = watchUids(ns, keptOld);
    const killAfterMs = Math.floor(Math.random() * 2_000);
    t.diagnostic(`SIGKILL ${killAfterMs} ms into the storm`);
    const storm = Promise.all([
      ...Array.from({ length: 50 }, (_, i) => fleet.createService("east", ns, `new-${i}`)),
      ...initialNames.filter((_, i) => i % 2 === 1).map((name) => fleet.unexport("east", ns, name)),
    ]);
    let second: ControllerProcess | undefined;
    try {
      await sleep(killAfterMs);
      await stopController(first, "SIGKILL");
      await storm;
      await sleep(Math.floor(Math.random() * 500));
      second = await startController();
      const converged = await waitForConverged(ns);
      assert.equal(converged.size, 10 + 50);
      for (const [name, uid] of keptOld) assert.equal(converged.get(name), uid, `${name} kept its uid`);
      // A wanted mirror created by the first process and seen by the poller must have survived
      // too: once the second process has nothing left to do, the poller looks once more.
      await waitForControllerIdle(await second.adminUrl(), ["east"]);
      await watch.polledAgain();
    } finally {
      await watch.stop();
      if (second) await stopController(second);
    }
    const stillWanted = new Set(await expectedMirrors(ns));
    const lostWanted = [...watch.lost].filter(([name]) => stillWanted.has(name));
    assert.deepEqual(lostWanted, [], "no mirror of a still-exported Service was deleted");
    await assertNeverForbidden();
  });
});
