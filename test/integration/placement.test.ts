/**
 * End to end with the controller in this process (a Supervisor with real worker
 * threads) and `--max-threads 2`: five clusters packed on two threads all mirror; an
 * exception in one packed actor restarts that actor alone (its neighbours keep their
 * thread and keep mirroring); a thread that dies restarts exactly the actors it hosted,
 * on a new thread, each with its own restart history, and no other. Mirrors are kept
 * throughout (SPEC §1: a failing remote cluster never delays or blocks another).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Worker } from "node:worker_threads";
import { pino } from "pino";
import { type Logger, silentLogger } from "../../src/log.ts";
import { DEFAULT_RESTART_POLICY } from "../../src/supervisor/restart-policy.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "../helpers/connection.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { clusterRow, waitForActorThread, waitForClusterRow } from "../helpers/supervision.ts";

const TIMEOUT_MS = 60_000;
const BACKOFF_MS = 4_000;

/** Five cluster names over two remote API servers; placement (sorted, least-loaded) puts c0,c2,c4 on slot 0 and c1,c3 on slot 1. */
const CLUSTERS = ["c0", "c1", "c2", "c3", "c4"] as const;
const REMOTE_OF: Record<string, string> = { c0: "east", c1: "west", c2: "east", c3: "west", c4: "east" };
const SLOT0 = ["c0", "c2", "c4"];
const SLOT1 = ["c1", "c3"];

describe("placement: --max-threads packs actors on shared threads, with fault containment per actor", () => {
  let fleet: Fleet;
  const running = new Set<Supervisor>();

  function startSupervisor(logger: Logger = silentLogger()): Supervisor {
    const supervisor = new Supervisor({
      config: fleet.config({ maxThreads: 2 }),
      localConnection: adminConnection(fleet.plane.cluster("local")),
      logger,
      restartPolicy: { ...DEFAULT_RESTART_POLICY, initialMs: BACKOFF_MS },
      testHooks: true,
    });
    supervisor.start();
    running.add(supervisor);
    return supervisor;
  }

  async function stopSupervisor(supervisor: Supervisor): Promise<void> {
    await supervisor.stop();
    running.delete(supervisor);
  }

  /** Every cluster synced and mirroring `ns/web`; returns the mirrors' identities. */
  async function allMirroring(supervisor: Supervisor, ns: string): Promise<Map<string, string>> {
    const identities = new Map<string, string>();
    for (const c of CLUSTERS) {
      identities.set(c, await fleet.mirrorIdentity(ns, `web-${c}`));
      await waitForClusterRow(supervisor, c, "synced", (r) => r.state === "synced");
    }
    return identities;
  }

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createGateway("west", { ingress: [{ ip: "198.18.0.20" }] });
    for (const c of CLUSTERS) await fleet.register(REMOTE_OF[c] ?? "east", { clusterName: c });
  });
  after(async () => {
    for (const supervisor of running) await supervisor.stop();
    await fleet?.stop();
  });

  it("hosts 5 clusters on 2 threads, packed evenly, and every one mirrors", async () => {
    const ns = "packed";
    await fleet.createService("east", ns, "web");
    await fleet.createService("west", ns, "web");
    const supervisor = startSupervisor();
    try {
      await allMirroring(supervisor, ns);
      const threads = new Map<string, Worker>();
      for (const c of CLUSTERS) threads.set(c, await waitForActorThread(supervisor, c));
      assert.equal(new Set(threads.values()).size, 2, "two threads in all");
      const t0 = threads.get("c0");
      const t1 = threads.get("c1");
      assert.notEqual(t0, t1);
      for (const c of SLOT0) assert.equal(threads.get(c), t0, `${c} shares c0's thread`);
      for (const c of SLOT1) assert.equal(threads.get(c), t1, `${c} shares c1's thread`);

      await fleet.createService("east", ns, "later");
      await fleet.createService("west", ns, "later");
      for (const c of CLUSTERS) await fleet.mirrorIdentity(ns, `later-${c}`);
      for (const c of CLUSTERS) assert.equal(clusterRow(supervisor, c)?.restarts, 0);
    } finally {
      await stopSupervisor(supervisor);
    }
  });

  it("an exception in one packed actor restarts that actor alone, on the same thread; its neighbours keep their thread and keep mirroring", async () => {
    const ns = "packed-throw";
    await fleet.createService("east", ns, "web");
    await fleet.createService("west", ns, "web");
    const supervisor = startSupervisor();
    try {
      const mirrors = await allMirroring(supervisor, ns);
      const t0 = await waitForActorThread(supervisor, "c0");
      const t1 = await waitForActorThread(supervisor, "c1");
      assert.equal(supervisor.actorThread("c2"), t0);

      const injectedAt = Date.now();
      supervisor.injectActorFault("c2", "throw");
      const failing = await waitForClusterRow(supervisor, "c2", "failing after the fault", (r) => r.restarts === 1);
      assert.equal(failing.state, "failing");
      assert.match(failing.reason ?? "", /uncaught exception/);
      assert.equal(supervisor.actorThread("c2"), undefined, "c2's actor is down for now");

      // Its neighbours on the same thread, and the other thread, mirror meanwhile.
      await fleet.createService("east", ns, "during");
      await fleet.createService("west", ns, "during");
      for (const c of ["c0", "c4", "c1", "c3"]) await fleet.mirrorIdentity(ns, `during-${c}`);
      assert.equal(supervisor.actorThread("c2"), undefined, "the others were mirrored while c2 was still down");
      assert.equal(await fleet.localService(ns, "during-c2"), undefined);
      assert.equal(
        await fleet.currentMirrorIdentity(ns, "web-c2"),
        mirrors.get("c2"),
        "c2's mirror is kept while it is down",
      );

      const back = await waitForActorThread(supervisor, "c2");
      assert.ok(Date.now() - injectedAt >= BACKOFF_MS - 200, "restarted after its backoff");
      assert.equal(back, t0, "restarted on its thread, which never stopped");
      await fleet.mirrorIdentity(ns, "during-c2");
      const c2 = await waitForClusterRow(supervisor, "c2", "synced again", (r) => r.state === "synced");
      assert.equal(c2.restarts, 1);
      for (const c of ["c0", "c4"]) assert.equal(supervisor.actorThread(c), t0, `${c} kept its thread`);
      for (const c of SLOT1) assert.equal(supervisor.actorThread(c), t1, `${c} kept its thread`);
      for (const c of ["c0", "c1", "c3", "c4"]) {
        assert.equal(clusterRow(supervisor, c)?.restarts, 0, `${c} was not restarted`);
        assert.equal(clusterRow(supervisor, c)?.state, "synced");
      }
      for (const c of CLUSTERS)
        assert.equal(await fleet.currentMirrorIdentity(ns, `web-${c}`), mirrors.get(c), `web-${c} intact`);
    } finally {
      await stopSupervisor(supervisor);
    }
  });

  it("unregistering a packed cluster stops its actor alone; its thread keeps the others and takes the cluster back when it returns", async () => {
    const ns = "packed-unregister";
    await fleet.createService("east", ns, "web");
    await fleet.createService("west", ns, "web");
    const supervisor = startSupervisor();
    try {
      const mirrors = await allMirroring(supervisor, ns);
      const t0 = await waitForActorThread(supervisor, "c0");
      await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: "cluster-credentials-c4" });
      await fleet.waitForNoMirror(ns, "web-c4", TIMEOUT_MS);
      assert.equal(supervisor.actorThread("c4"), undefined);
      for (const c of ["c0", "c2"]) assert.equal(supervisor.actorThread(c), t0, `${c} kept its thread`);
      await fleet.createService("east", ns, "after");
      for (const c of ["c0", "c2"]) await fleet.mirrorIdentity(ns, `after-${c}`);

      await fleet.register("east", { clusterName: "c4" });
      await fleet.mirrorIdentity(ns, "after-c4");
      assert.equal(await waitForActorThread(supervisor, "c4"), t0, "placed on the least-loaded thread again");
      for (const c of CLUSTERS) assert.equal(clusterRow(supervisor, c)?.restarts, 0);
      for (const c of ["c0", "c1", "c2", "c3"])
        assert.equal(await fleet.currentMirrorIdentity(ns, `web-${c}`), mirrors.get(c), `web-${c} intact`);
    } finally {
      await stopSupervisor(supervisor);
    }
  });

  it("a Secret deleted and recreated before its old actor has stopped: the old stop completes, the new actor starts on the same thread, its neighbours are untouched", async () => {
    const ns = "packed-recreate";
    await fleet.createService("east", ns, "web");
    await fleet.createService("west", ns, "web");
    const lines: string[] = [];
    const supervisor = startSupervisor(pino({ level: "info" }, { write: (line: string) => void lines.push(line) }));
    try {
      const mirrors = await allMirroring(supervisor, ns);
      const t0 = await waitForActorThread(supervisor, "c0");
      const threadId = t0.threadId;
      assert.equal(supervisor.actorThread("c4"), t0);
      let t0Exited = false;
      t0.once("exit", () => {
        t0Exited = true;
      });
      // A slow stop, made deterministic: c4's `actor.stopped` replies are held back
      // until the Secret is back and a new incarnation runs (delivered in order after).
      const held: unknown[][] = [];
      let holding = true;
      const emit = t0.emit.bind(t0);
      t0.emit = (name: string | symbol, ...args: unknown[]): boolean => {
        const m = args[0] as { type?: unknown; cluster?: unknown } | undefined;
        if (holding && name === "message" && m?.type === "actor.stopped" && m.cluster === "c4") {
          held.push(args);
          return true;
        }
        return emit(name, ...args);
      };
      const oldUid = supervisor.registry.registered.get("c4")?.secretUid;
      await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: "cluster-credentials-c4" });
      await eventually(
        "c4 unregistered",
        () => (supervisor.registry.registered.has("c4") ? undefined : true),
        TIMEOUT_MS,
        5,
      );
      await fleet.register("east", { clusterName: "c4" });
      await eventually(
        "c4 registered again by the new Secret, running on its thread, while its old stop is pending",
        () => {
          const uid = supervisor.registry.registered.get("c4")?.secretUid;
          const running = uid !== undefined && uid !== oldUid && supervisor.actorThread("c4") === t0;
          return running && held.length === 1 ? true : undefined;
        },
        TIMEOUT_MS,
        5,
      );
      holding = false;
      for (const args of held) emit("message", ...args);
      await eventually(
        "the old incarnation of c4 reported stopped, or its thread terminated",
        () => (t0Exited || lines.some((l) => /"cluster":"c4"/.test(l) && /stopped/.test(l)) ? true : undefined),
        TIMEOUT_MS,
      );
      assert.equal(t0Exited, false, "the shared thread was terminated: the old incarnation's stop timed out");
      assert.equal(supervisor.actorThread("c4"), t0);
      assert.equal(t0.threadId, threadId);
      for (const c of ["c0", "c2"]) assert.equal(supervisor.actorThread(c), t0, `${c} kept its thread`);
      await fleet.createService("east", ns, "after");
      for (const c of ["c0", "c2", "c4"]) await fleet.mirrorIdentity(ns, `after-${c}`);
      for (const c of ["c0", "c1", "c2", "c3"]) {
        assert.equal(clusterRow(supervisor, c)?.restarts, 0, `${c} was not restarted`);
        assert.equal(await fleet.currentMirrorIdentity(ns, `web-${c}`), mirrors.get(c), `web-${c} intact`);
      }
      assert.equal(clusterRow(supervisor, "c4")?.restarts, 0, "the new c4 started cleanly");
      assert.ok(!lines.some((l) => /timed out/.test(l)), "no stop timed out");
    } finally {
      await stopSupervisor(supervisor);
    }
  });

  it("a thread that dies restarts exactly the actors it hosted, on a new thread, and none of the other thread's", async () => {
    const ns = "packed-exit";
    await fleet.createService("east", ns, "web");
    await fleet.createService("west", ns, "web");
    const supervisor = startSupervisor();
    try {
      const mirrors = await allMirroring(supervisor, ns);
      const t0 = await waitForActorThread(supervisor, "c0");
      const t1 = await waitForActorThread(supervisor, "c1");

      supervisor.injectActorFault("c1", "exit");
      for (const c of SLOT1) {
        const failing = await waitForClusterRow(
          supervisor,
          c,
          "failing after its thread died",
          (r) => r.restarts === 1,
        );
        assert.equal(failing.state, "failing");
        assert.match(failing.reason ?? "", /exited with code 3/);
      }
      for (const c of SLOT1) assert.equal(supervisor.actorThread(c), undefined);

      await fleet.createService("east", ns, "during");
      for (const c of SLOT0) await fleet.mirrorIdentity(ns, `during-${c}`);
      for (const c of SLOT1)
        assert.equal(await fleet.currentMirrorIdentity(ns, `web-${c}`), mirrors.get(c), `web-${c} kept`);

      const next = await waitForActorThread(supervisor, "c1", t1);
      assert.notEqual(next, t0);
      assert.equal(await waitForActorThread(supervisor, "c3", t1), next, "c1 and c3 share the new thread");
      await fleet.createService("west", ns, "during");
      for (const c of SLOT1) await fleet.mirrorIdentity(ns, `during-${c}`);
      for (const c of SLOT1) {
        const r = await waitForClusterRow(supervisor, c, "synced again", (x) => x.state === "synced");
        assert.equal(r.restarts, 1, `${c} restarted once`);
      }
      for (const c of SLOT0) {
        assert.equal(supervisor.actorThread(c), t0, `${c} kept its thread`);
        assert.equal(clusterRow(supervisor, c)?.restarts, 0, `${c} was not restarted`);
      }
      for (const c of CLUSTERS)
        assert.equal(await fleet.currentMirrorIdentity(ns, `web-${c}`), mirrors.get(c), `web-${c} intact`);
    } finally {
      await stopSupervisor(supervisor);
    }
  });
});
