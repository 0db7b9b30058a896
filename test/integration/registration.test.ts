/**
 * End to end on real API servers: SPEC §1, registering remote clusters through
 * credentials Secrets — ignored, invalid, duplicate, rotated, renamed, deleted and
 * unreachable registrations — asserted on the local API (mirrors present or absent,
 * their uids) and on the supervisor's status.
 *
 * One control plane and one controller for the whole file; every test uses its own
 * cluster names, Secret names and remote Services, so the tests do not interfere. A
 * cluster registered from remote `east` mirrors every exported Service of `east`, so a
 * test only asserts on the mirrors named after its own clusters.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Worker } from "node:worker_threads";
import type { V1Secret } from "@kubernetes/client-node";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import {
  CLUSTER_NAME,
  KUBECONFIG_KEY,
  MIRRORED_SERVICE,
  REMOTE_CLUSTER_DOMAIN,
  SECRET_TYPE,
} from "../../src/core/labels.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, Fleet, REMOTE_READER_RULES } from "../helpers/fleet.ts";
import { eventually, sleep, statusCode } from "../helpers/kube.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";
import { secretRow, waitForSecretRow } from "../helpers/supervision.ts";

const b64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");
describe("registering remote clusters through credentials Secrets", () => {
  let fleet: Fleet;
  let controller: Supervisor;
  let scratch: string;
  const listeners: Server[] = [];
  const sockets = new Set<Socket>();
  /** Every worker thread of this process that has not exited (the controller's are all of them). */
  const liveWorkers = new Set<Worker>();
  const trackWorker = (worker: Worker): void => {
    liveWorkers.add(worker);
    worker.once("exit", () => liveWorkers.delete(worker));
  };

  before(async () => {
    process.on("worker", trackWorker);
    scratch = mkdtempSync(join(tmpdir(), "fleet-mirror-registration-"));
    fleet = await Fleet.start(["east", "west"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createGateway("west", { ingress: [{ ip: "198.51.100.20" }] });
    // A thread per cluster (--max-threads 0): these tests follow each actor incarnation
    // by its own thread, and this suite registers more clusters than the default
    // placement keeps on threads of their own (test/integration/default-placement.test.ts).
    controller = fleet.startInProcess({ maxThreads: 0 });
  });
  after(async () => {
    process.off("worker", trackWorker);
    await controller?.stop();
    // A thread still alive after stop() is an orphan: end it so the file can exit, then fail.
    const orphans = [...liveWorkers];
    await Promise.all(orphans.map((w) => w.terminate()));
    await fleet?.stop();
    for (const socket of sockets) socket.destroy();
    await Promise.all(listeners.map((l) => new Promise<void>((resolve) => l.close(() => resolve()))));
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    assert.equal(orphans.length, 0, `${orphans.length} worker threads were still alive after the controller stopped`);
  });

  // -- helpers ---------------------------------------------------------------------

  function secretOf(
    name: string,
    opts: { cluster?: string; kubeconfig: string; type?: string; domain?: string },
  ): V1Secret {
    return {
      metadata: {
        name,
        namespace: CONTROLLER_NAMESPACE,
        annotations: {
          ...(opts.cluster !== undefined ? { [CLUSTER_NAME]: opts.cluster } : {}),
          [REMOTE_CLUSTER_DOMAIN]: opts.domain ?? "cluster.local",
        },
      },
      type: opts.type ?? SECRET_TYPE,
      data: { [KUBECONFIG_KEY]: b64(opts.kubeconfig) },
    };
  }

  async function registerAs(remote: string, cluster: string, secretName = cluster): Promise<string> {
    await fleet.createSecret(secretOf(secretName, { cluster, kubeconfig: await fleet.remoteKubeconfig(remote) }));
    return secretName;
  }

  async function deleteSecret(name: string): Promise<void> {
    await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name });
  }

  /** uids of the mirror Service and Endpoints `namespace/name` (undefined: absent). */
  async function mirrorUids(
    namespace: string,
    name: string,
  ): Promise<{ service: string | undefined; endpoints: string | undefined }> {
    const read = async (f: () => Promise<{ metadata?: { uid?: string } }>): Promise<string | undefined> => {
      try {
        return (await f()).metadata?.uid;
      } catch (error) {
        if (statusCode(error) === 404) return undefined;
        throw error;
      }
    };
    return {
      service: await read(() => fleet.local.readNamespacedService({ namespace, name })),
      endpoints: await read(() => fleet.local.readNamespacedEndpoints({ namespace, name })),
    };
  }

  async function waitForFullMirror(namespace: string, name: string): Promise<{ service: string; endpoints: string }> {
    await fleet.waitForEndpoints(namespace, name, (ep) => (ep.subsets?.length ?? 0) > 0);
    const { service, endpoints } = await mirrorUids(namespace, name);
    assert.ok(service && endpoints, `mirror ${namespace}/${name} has a Service and Endpoints`);
    return { service, endpoints };
  }

  /** Every local Service and Endpoints labelled as a mirror of `cluster`, as `Kind ns/name`. */
  async function mirrorsOf(cluster: string): Promise<string[]> {
    const labelSelector = `${MIRRORED_SERVICE}=true,${CLUSTER_NAME}=${cluster}`;
    const services = await fleet.local.listServiceForAllNamespaces({ labelSelector });
    const endpoints = await fleet.local.listEndpointsForAllNamespaces({ labelSelector });
    return [
      ...services.items.map((s) => `Service ${s.metadata?.namespace}/${s.metadata?.name}`),
      ...endpoints.items.map((e) => `Endpoints ${e.metadata?.namespace}/${e.metadata?.name}`),
    ].sort();
  }

  /**
   * Reads the mirror `namespace/name` every 50 ms until stopped, and records every
   * moment it was missing or had another uid than `expected` (Service or Endpoints).
   */
  function guardMirror(
    namespace: string,
    name: string,
    expected: { service: string; endpoints: string },
  ): { stop(): Promise<{ reads: number; problems: string[] }> } {
    let stopped = false;
    let reads = 0;
    const problems: string[] = [];
    const loop = (async () => {
      while (!stopped) {
        const now = await mirrorUids(namespace, name);
        reads += 1;
        if (now.service !== expected.service) problems.push(`Service uid ${String(now.service)}`);
        if (now.endpoints !== expected.endpoints) problems.push(`Endpoints uid ${String(now.endpoints)}`);
        await sleep(50);
      }
    })();
    return {
      async stop() {
        stopped = true;
        await loop;
        return { reads, problems };
      },
    };
  }

  /** A kubeconfig of the right shape for a server nobody answers at. */
  function kubeconfigFor(server: string, token = "unused-token"): string {
    return renderKubeconfig({
      cluster: "nowhere",
      server,
      caPem: fleet.plane.cluster("east").caPem,
      user: "fleet-mirror",
      auth: { token },
    });
  }

  async function closedPort(): Promise<number> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address && typeof address === "object");
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return address.port;
  }

  /** A port that accepts TCP connections and never answers (closed in after()). */
  async function silentPort(): Promise<number> {
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
    });
    listeners.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address && typeof address === "object");
    return address.port;
  }

  // -- tests -----------------------------------------------------------------------

  it("ignores Secrets of other types silently, even when they carry the registration annotations", async () => {
    await fleet.createService("east", "ignored", "svc1");
    const kubeconfig = await fleet.remoteKubeconfig("east");
    await fleet.createSecret(secretOf("ign-opaque", { cluster: "ign-opaque", kubeconfig, type: "Opaque" }));
    await fleet.createSecret(
      secretOf("ign-other", { cluster: "ign-other", kubeconfig, type: "example.com/remote-kubeconfig" }),
    );
    // Registered after the ignored ones: once its mirror exists, the controller has had
    // every chance to act on them.
    await registerAs("east", "ign-sentinel");
    await fleet.waitForMirror("ignored", "svc1-ign-sentinel");

    for (const name of ["ign-opaque", "ign-other"]) {
      assert.equal(await fleet.localService("ignored", `svc1-${name}`), undefined, `no mirror for ${name}`);
      assert.deepEqual(await mirrorsOf(name), []);
      assert.equal(secretRow(controller, name), undefined, `no status row for Secret ${name}`);
      assert.equal(controller.registry.registered.has(name), false);
      assert.equal(controller.actorThread(name), undefined);
      const events = (await fleet.local.listNamespacedEvent({ namespace: CONTROLLER_NAMESPACE })).items.filter(
        (e) => e.involvedObject.name === name,
      );
      assert.deepEqual(events, [], `no Event about Secret ${name}`);
    }
  });

  const invalidCases: {
    readonly title: string;
    readonly id: string;
    readonly secret: (fleet: Fleet, marker: string) => Promise<V1Secret>;
    readonly reason: string;
    readonly mentions: string;
    readonly fix: (secret: V1Secret, kubeconfig: string) => void;
    readonly cluster: string;
  }[] = [
    {
      title: "a Secret without the cluster-name annotation",
      id: "inv-noname",
      secret: async (f) => secretOf("inv-noname", { kubeconfig: await f.remoteKubeconfig("east") }),
      reason: "missing-cluster-name",
      mentions: CLUSTER_NAME,
      fix: (secret) => {
        secret.metadata = {
          ...secret.metadata,
          annotations: { ...(secret.metadata?.annotations ?? {}), [CLUSTER_NAME]: "inv-noname" },
        };
      },
      cluster: "inv-noname",
    },
    {
      title: "a Secret whose kubeconfig is not YAML",
      id: "inv-yaml",
      secret: async () =>
        secretOf("inv-yaml", { cluster: "inv-yaml", kubeconfig: "apiVersion: v1\nclusters: [ {server: \n" }),
      reason: "kubeconfig-unparsable",
      mentions: "YAML",
      fix: (secret, kubeconfig) => {
        secret.data = { [KUBECONFIG_KEY]: b64(kubeconfig) };
      },
      cluster: "inv-yaml",
    },
    {
      title: "a Secret whose kubeconfig authenticates with exec (SPEC §7)",
      id: "inv-exec",
      secret: async (f, marker) => {
        const c = f.plane.cluster("east");
        const kubeconfig = [
          "apiVersion: v1",
          "kind: Config",
          "clusters:",
          "- name: east",
          "  cluster:",
          `    server: ${JSON.stringify(c.server)}`,
          `    certificate-authority-data: ${b64(c.caPem)}`,
          "users:",
          "- name: exec-user",
          "  user:",
          "    exec:",
          "      apiVersion: client.authentication.k8s.io/v1",
          "      command: /bin/sh",
          `      args: ["-c", ${JSON.stringify(`touch ${marker}; echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x"}}'`)}]`,
          "      interactiveMode: Never",
          "contexts:",
          "- name: east",
          "  context:",
          "    cluster: east",
          "    user: exec-user",
          "current-context: east",
          "",
        ].join("\n");
        return secretOf("inv-exec", { cluster: "inv-exec", kubeconfig });
      },
      reason: "kubeconfig-forbidden-auth",
      mentions: "exec",
      fix: (secret, kubeconfig) => {
        secret.data = { [KUBECONFIG_KEY]: b64(kubeconfig) };
      },
      cluster: "inv-exec",
    },
  ];

  for (const c of invalidCases) {
    it(`reports ${c.title} as invalid (status and InvalidCredentials Event), registers nothing, and registers the cluster once the Secret is edited into a valid one`, async () => {
      await fleet.createService("east", "invalid", c.id);
      const marker = join(scratch, `${c.id}.ran`);
      await fleet.createSecret(await c.secret(fleet, marker));

      const row = await waitForSecretRow(controller, c.id, (r) => r.state === "invalid", "to be invalid");
      const reason = row.reason ?? "";
      assert.ok(reason.startsWith(`${c.reason}: `), `reason ${reason} starts with ${c.reason}`);
      assert.ok(reason.includes(c.mentions), `reason ${reason} mentions ${c.mentions}`);
      const event = await fleet.waitForSecretEvent(c.id, "InvalidCredentials");
      assert.equal(event.type, "Warning");
      const secret = await fleet.local.readNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: c.id });
      assert.equal(event.involvedObject.uid, secret.metadata?.uid);
      assert.equal(event.involvedObject.namespace, CONTROLLER_NAMESPACE);
      assert.ok(event.message?.includes(c.mentions), `Event message ${event.message} mentions ${c.mentions}`);

      // Registers nothing.
      assert.equal(controller.registry.registered.has(c.cluster), false);
      assert.equal(controller.actorThread(c.cluster), undefined);
      assert.equal(await fleet.localService("invalid", `${c.id}-${c.cluster}`), undefined);
      assert.deepEqual(await mirrorsOf(c.cluster), []);
      assert.equal(existsSync(marker), false, "the Secret's exec command never ran");

      const kubeconfig = await fleet.remoteKubeconfig("east");
      await fleet.editSecret(c.id, (secret) => c.fix(secret, kubeconfig));
      await waitForFullMirror("invalid", `${c.id}-${c.cluster}`);
      const registered = await waitForSecretRow(controller, c.id, (r) => r.state === "synced", "to be synced");
      assert.equal(registered.cluster, c.cluster);
      assert.equal(registered.reason, undefined);
      assert.equal(
        controller.registry.invalid.some((i) => i.secretKey === `${CONTROLLER_NAMESPACE}/${c.id}`),
        false,
      );
      assert.equal(existsSync(marker), false, "the Secret's exec command never ran");
    });
  }

  it("lets the first Secret registering a cluster win, reports the second as a duplicate, and deleting the duplicate touches nothing of the winner", async () => {
    await fleet.createService("east", "dup", "from-east");
    await fleet.createService("west", "dup", "from-west");
    await registerAs("east", "dup", "dup-first");
    const before = await waitForFullMirror("dup", "from-east-dup");
    const winnerThread = await eventually("actor of dup", () => controller.actorThread("dup"));
    const winnerRow = await waitForSecretRow(controller, "dup-first", (r) => r.state === "synced", "to be synced");

    // The same cluster name, pointing at another remote: if it won, west's Services would show.
    await registerAs("west", "dup", "dup-second");
    const duplicate = await waitForSecretRow(
      controller,
      "dup-second",
      (r) => r.state === "duplicate",
      "to be a duplicate",
    );
    assert.equal(duplicate.cluster, "dup");
    assert.ok(duplicate.reason?.includes(`${CONTROLLER_NAMESPACE}/dup-first`), `reason ${duplicate.reason}`);
    const event = await fleet.waitForSecretEvent("dup-second", "DuplicateCluster");
    assert.equal(event.type, "Warning");
    assert.ok(event.message?.includes("dup-first"), `Event message ${event.message}`);
    assert.equal(controller.registry.registered.get("dup")?.secretKey, `${CONTROLLER_NAMESPACE}/dup-first`);
    assert.equal(controller.actorThread("dup"), winnerThread, "the winner's actor was not restarted");

    const guard = guardMirror("dup", "from-east-dup", before);
    await deleteSecret("dup-second");
    await eventually("the duplicate's status row to go", () =>
      secretRow(controller, "dup-second") ? undefined : true,
    );
    // The registry change reached the writer (two reports after it, nothing queued or in
    // flight): a wrongful teardown would have been written by now.
    await waitForWriterIdle(controller, { reports: 2 });
    const { reads, problems } = await guard.stop();
    assert.ok(reads > 5, `the mirror was read ${reads} times`);
    assert.deepEqual(problems, [], "the winner's mirror never disappeared nor was recreated");

    assert.deepEqual(await mirrorUids("dup", "from-east-dup"), before);
    assert.equal(await fleet.localService("dup", "from-west-dup"), undefined, "west never mirrored as dup");
    assert.equal(controller.actorThread("dup"), winnerThread, "the winner's actor thread is the same");
    const after = secretRow(controller, "dup-first");
    assert.equal(after?.state, "synced");
    assert.equal(after?.restarts, winnerRow.restarts);
    assert.equal(controller.registry.registered.get("dup")?.secretKey, `${CONTROLLER_NAMESPACE}/dup-first`);
  });

  it("restarts only the rotated cluster's actor when its kubeconfig changes, and keeps its mirrors in place throughout", async () => {
    await fleet.createService("east", "rot", "web");
    await registerAs("east", "rot");
    await registerAs("west", "rot-peer");
    const before = await waitForFullMirror("rot", "web-rot");
    await waitForSecretRow(controller, "rot", (r) => r.state === "synced", "to be synced");
    await waitForSecretRow(controller, "rot-peer", (r) => r.state === "synced", "to be synced");
    const rotThread = await eventually("actor of rot", () => controller.actorThread("rot"));
    const peerThread = await eventually("actor of rot-peer", () => controller.actorThread("rot-peer"));
    const peerRestarts = secretRow(controller, "rot-peer")?.restarts;

    // A freshly minted token of another ServiceAccount for the same remote.
    const token = await mintServiceAccountToken(fleet.kubeConfig("east"), {
      namespace: "fleet-mirror-remote",
      serviceAccount: "fleet-mirror-reader-rotated",
      role: { kind: "ClusterRole", name: "fleet-mirror-remote-reader", rules: REMOTE_READER_RULES },
    });
    const east = fleet.plane.cluster("east");
    const rotated = renderKubeconfig({
      cluster: "east",
      server: east.server,
      caPem: east.caPem,
      user: "fleet-mirror-rotated",
      auth: { token },
    });

    const guard = guardMirror("rot", "web-rot", before);
    await fleet.editSecret("rot", (secret) => {
      secret.data = { [KUBECONFIG_KEY]: b64(rotated) };
    });
    const newThread = await eventually("a new actor thread for rot", () => {
      const t = controller.actorThread("rot");
      return t && t !== rotThread ? t : undefined;
    });
    assert.notEqual(newThread.threadId, rotThread.threadId);
    await waitForSecretRow(controller, "rot", (r) => r.state === "synced", "to be synced again");
    // The new actor's desired set reaches the writer: a Service exported after the
    // rotation is mirrored, so its complete snapshot has been applied too; the writer idle
    // after that: a late garbage collection would have been written by now.
    await fleet.createService("east", "rot", "after-rotation");
    await fleet.waitForMirror("rot", "after-rotation-rot");
    await waitForWriterIdle(controller);
    const { reads, problems } = await guard.stop();
    assert.ok(reads > 5, `the mirror was read ${reads} times`);
    assert.deepEqual(problems, [], "the mirror never disappeared nor was recreated during the rotation");

    assert.deepEqual(await mirrorUids("rot", "web-rot"), before);
    assert.equal(controller.actorThread("rot-peer"), peerThread, "the other cluster's actor is the same thread");
    assert.equal(secretRow(controller, "rot-peer")?.restarts, peerRestarts);
    assert.equal(secretRow(controller, "rot-peer")?.state, "synced");
  });

  it("leaves exactly one actor thread per cluster after several rotations in quick succession", async () => {
    await fleet.createService("east", "rot-burst", "web");
    await registerAs("east", "rot-burst");
    const before = await waitForFullMirror("rot-burst", "web-rot-burst");
    const first = await eventually("actor of rot-burst", () => controller.actorThread("rot-burst"));

    const guard = guardMirror("rot-burst", "web-rot-burst", before);
    const east = fleet.plane.cluster("east");
    const tokens = await Promise.all(
      [1, 2, 3].map((i) =>
        mintServiceAccountToken(fleet.kubeConfig("east"), {
          namespace: "fleet-mirror-remote",
          serviceAccount: `fleet-mirror-reader-burst-${i}`,
          role: { kind: "ClusterRole", name: "fleet-mirror-remote-reader", rules: REMOTE_READER_RULES },
        }),
      ),
    );
    // Each edit lands while the actor of the previous one is still stopping or starting.
    for (const token of tokens) {
      const kubeconfig = renderKubeconfig({
        cluster: "east",
        server: east.server,
        caPem: east.caPem,
        user: "u",
        auth: { token },
      });
      await fleet.editSecret("rot-burst", (secret) => {
        secret.data = { [KUBECONFIG_KEY]: b64(kubeconfig) };
      });
    }
    await eventually("a new actor thread for rot-burst", () => {
      const t = controller.actorThread("rot-burst");
      return t && t !== first ? t : undefined;
    });
    await waitForSecretRow(controller, "rot-burst", (r) => r.state === "synced", "to be synced again");
    await fleet.createService("east", "rot-burst", "after-burst");
    await fleet.waitForMirror("rot-burst", "after-burst-rot-burst");
    const { problems } = await guard.stop();
    assert.deepEqual(problems, [], "the mirror never disappeared nor was recreated during the rotations");

    // Every live thread is the writer or the current actor of a registered cluster.
    let unaccounted = 0;
    try {
      await eventually(
        "every thread to be the writer or a registered cluster's current actor",
        () => {
          const actors = new Set<Worker | undefined>();
          for (const cluster of controller.registry.registered.keys()) actors.add(controller.actorThread(cluster));
          unaccounted = [...liveWorkers].filter((w) => !actors.has(w)).length - 1; // the writer
          return unaccounted === 0 ? true : undefined;
        },
        15_000,
      );
    } catch {
      assert.fail(`${unaccounted} orphaned actor thread(s) still running after the rotations`);
    }
  });

  it("removes the old name's mirrors and creates the new name's when the cluster-name annotation changes", async () => {
    await fleet.createService("east", "ren", "web");
    await registerAs("east", "ren-old", "ren");
    await waitForFullMirror("ren", "web-ren-old");

    await fleet.editSecret("ren", (secret) => {
      secret.metadata = {
        ...secret.metadata,
        annotations: { ...(secret.metadata?.annotations ?? {}), [CLUSTER_NAME]: "ren-new" },
      };
    });
    await waitForFullMirror("ren", "web-ren-new");
    await eventually("every mirror of ren-old to be gone", async () =>
      (await mirrorsOf("ren-old")).length === 0 ? true : undefined,
    );
    assert.deepEqual(await mirrorUids("ren", "web-ren-old"), { service: undefined, endpoints: undefined });
    const row = await waitForSecretRow(
      controller,
      "ren",
      (r) => r.cluster === "ren-new" && r.state === "synced",
      "to be ren-new",
    );
    assert.equal(row.cluster, "ren-new");
    assert.equal(
      controller.status().clusters.some((r) => r.cluster === "ren-old"),
      false,
    );
    assert.equal(controller.actorThread("ren-old"), undefined);
  });

  it("deletes every mirror Service and Endpoints of a cluster when its Secret is deleted, keeps the Namespace, and leaves other clusters' mirrors untouched", async () => {
    // del-ns is created by fleet-mirror (for whichever cluster of remote east writes
    // first); del-labelled looks exactly like a Namespace fleet-mirror created for del.
    await fleet.local.createNamespace({
      body: { metadata: { name: "del-labelled", labels: { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: "del" } } },
    });
    await fleet.createService("east", "del-ns", "web");
    await fleet.createService("east", "del-labelled", "api");
    await registerAs("east", "del");
    await registerAs("east", "del-peer");
    await waitForFullMirror("del-ns", "web-del");
    await waitForFullMirror("del-labelled", "api-del");
    const peer = await waitForFullMirror("del-ns", "web-del-peer");
    const namespaces = await Promise.all(["del-ns", "del-labelled"].map((name) => fleet.local.readNamespace({ name })));
    for (const ns of namespaces) assert.equal(ns.metadata?.labels?.[MIRRORED_SERVICE], "true");
    assert.ok((await mirrorsOf("del")).length >= 4);

    await deleteSecret("del");
    await eventually("every mirror of del to be gone", async () =>
      (await mirrorsOf("del")).length === 0 ? true : undefined,
    );
    assert.deepEqual(await mirrorUids("del-ns", "web-del"), { service: undefined, endpoints: undefined });
    assert.deepEqual(await mirrorUids("del-labelled", "api-del"), { service: undefined, endpoints: undefined });

    for (const ns of namespaces) {
      const name = ns.metadata?.name ?? "";
      const still = await fleet.local.readNamespace({ name });
      assert.equal(still.metadata?.uid, ns.metadata?.uid, `Namespace ${name} is the same`);
      assert.equal(still.metadata?.deletionTimestamp, undefined, `Namespace ${name} is not being deleted`);
      assert.deepEqual(still.metadata?.labels, ns.metadata?.labels, `Namespace ${name} is not modified`);
    }
    assert.deepEqual(await mirrorUids("del-ns", "web-del-peer"), peer, "the other cluster's mirror is untouched");
    assert.equal(secretRow(controller, "del"), undefined);
    assert.equal(controller.actorThread("del"), undefined);
  });

  it("never lets unreachable remotes delay another cluster: registered first, they stay syncing (with a reason once a request fails) while the healthy cluster's mirrors appear promptly", async () => {
    await fleet.createService("west", "reach", "web");
    const refused = await closedPort();
    const silent = await silentPort();
    // More silent remotes than actors may start at once (maxConcurrentStarts, default 4).
    const unreachable = [
      "unreach-refused",
      "unreach-silent-1",
      "unreach-silent-2",
      "unreach-silent-3",
      "unreach-silent-4",
    ];
    for (const cluster of unreachable) {
      const port = cluster === "unreach-refused" ? refused : silent;
      await fleet.createSecret(secretOf(cluster, { cluster, kubeconfig: kubeconfigFor(`https://127.0.0.1:${port}`) }));
    }
    await eventually("the unreachable clusters to be registered", () =>
      unreachable.every((c) => controller.registry.registered.has(c)) ? true : undefined,
    );

    const started = Date.now();
    await registerAs("west", "reach");
    await fleet.waitForMirror("reach", "web-reach", () => true, 15_000);
    await fleet.waitForEndpoints("reach", "web-reach", (ep) => (ep.subsets?.length ?? 0) > 0, 15_000);
    const took = Date.now() - started;
    assert.ok(took < 15_000, `the healthy cluster's mirror took ${took} ms`);
    assert.equal(secretRow(controller, "reach")?.state, "synced");

    const refusedRow = await waitForSecretRow(
      controller,
      "unreach-refused",
      (r) => (r.state === "syncing" || r.state === "stale") && r.reason !== undefined,
      "to be syncing with a reason",
    );
    assert.equal(refusedRow.cluster, "unreach-refused");
    assert.ok(refusedRow.reason && refusedRow.reason.length > 0);
    for (const cluster of unreachable) {
      // On a loaded machine the last thread may still be starting: wait, do not race it.
      await waitForSecretRow(
        controller,
        cluster,
        (r) => r.state === "syncing" || r.state === "stale",
        "to be syncing or stale",
      );
      assert.deepEqual(await mirrorsOf(cluster), []);
    }
  });

  it("keeps the mirrors of a registered cluster whose remote becomes unreachable, and deletes them when its Secret is deleted", async () => {
    await fleet.createService("east", "flaky", "web");
    await registerAs("east", "flaky");
    const before = await waitForFullMirror("flaky", "web-flaky");
    const thread = await eventually("actor of flaky", () => controller.actorThread("flaky"));

    const guard = guardMirror("flaky", "web-flaky", before);
    const refused = await closedPort();
    await fleet.editSecret("flaky", (secret) => {
      secret.data = { [KUBECONFIG_KEY]: b64(kubeconfigFor(`https://127.0.0.1:${refused}`)) };
    });
    await eventually("a new actor thread for flaky", () => {
      const t = controller.actorThread("flaky");
      return t && t !== thread ? t : undefined;
    });
    await waitForSecretRow(
      controller,
      "flaky",
      (r) => r.state === "syncing" && r.reason !== undefined,
      "to fail to list",
    );
    // The new incarnation reached the writer and failed to list (no complete snapshot):
    // two writer reports later with nothing queued or in flight, a wrongful garbage
    // collection would have been written.
    await waitForWriterIdle(controller, { reports: 2 });
    const { reads, problems } = await guard.stop();
    assert.ok(reads > 5, `the mirror was read ${reads} times`);
    assert.deepEqual(problems, [], "the mirror stayed while the remote was unreachable");
    assert.deepEqual(await mirrorUids("flaky", "web-flaky"), before);

    await deleteSecret("flaky");
    await eventually("every mirror of flaky to be gone", async () =>
      (await mirrorsOf("flaky")).length === 0 ? true : undefined,
    );
    assert.equal(controller.actorThread("flaky"), undefined);
  });

  it("keeps a registered cluster's mirrors while its Secret is edited into an invalid one, and resumes when it is fixed", async () => {
    await fleet.createService("east", "typo", "web");
    await registerAs("east", "typo");
    const before = await waitForFullMirror("typo", "web-typo");

    const guard = guardMirror("typo", "web-typo", before);
    const good = await fleet.local.readNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: "typo" });
    await fleet.editSecret("typo", (secret) => {
      secret.data = { [KUBECONFIG_KEY]: b64("apiVersion: v1\nclusters: [ {server: \n") };
    });
    await waitForSecretRow(controller, "typo", (r) => r.state === "invalid" && r.cluster === "typo", "to be invalid");
    await fleet.waitForSecretEvent("typo", "InvalidCredentials");
    assert.equal(controller.actorThread("typo"), undefined, "an invalid Secret has no actor");
    // The registry change reached the writer: two reports later with nothing queued or in
    // flight, a wrongful garbage collection would have been written.
    await waitForWriterIdle(controller, { reports: 2 });
    await fleet.editSecret("typo", (secret) => {
      secret.data = good.data ?? {};
    });
    await waitForSecretRow(controller, "typo", (r) => r.state === "synced", "to be synced again");
    await fleet.createService("east", "typo", "after-fix");
    await fleet.waitForMirror("typo", "after-fix-typo");
    const { reads, problems } = await guard.stop();
    assert.ok(reads > 5, `the mirror was read ${reads} times`);
    assert.deepEqual(problems, [], "the mirror stayed while the Secret was invalid");
  });
});
