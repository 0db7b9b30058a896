/**
 * A remote whose answers make its actor exhaust a shared thread's heap, with real worker
 * threads: the controller in this process packs two clusters on one thread
 * (`--max-threads 1`, `--actor-max-old-space-mb 16`); cluster `heavy`'s remote answers
 * its Services list with 48 MiB of Services (under the 64 MiB body cap, over the
 * thread's heap once decoded). Every such death is charged to `heavy`: its neighbour
 * `calm` restarts at once, is never failing nor crash-looping, and keeps mirroring; at
 * its second offence `heavy` gets a thread of its own (an `ActorQuarantined` Event), and
 * from then on its deaths no longer touch `calm`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "../../src/log.ts";
import { DEFAULT_RESTART_POLICY } from "../../src/supervisor/restart-policy.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "../helpers/connection.ts";
import { Fleet } from "../helpers/fleet.ts";
import { type HostileRemote, startHostileRemote } from "../helpers/hostile-remote.ts";
import { eventually } from "../helpers/kube.ts";
import { clusterRow, waitForClusterRow } from "../helpers/supervision.ts";

const NS = "thread-faults";
const TIMEOUT_MS = 180_000;

describe("a shared actor thread whose heap one remote exhausts", () => {
  let fleet: Fleet;
  let heavy: HostileRemote;
  let supervisor: Supervisor | undefined;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.40" }] });
    await fleet.createService("east", NS, "web");
    await fleet.register("east", { clusterName: "calm" });
    heavy = await startHostileRemote({ bodyBytes: 48 * 2 ** 20 });
  });
  after(async () => {
    await supervisor?.stop();
    await heavy?.close();
    await fleet?.stop();
  });

  it("is charged to that remote's actor alone, which ends up on a thread of its own; its neighbour never backs off", async () => {
    const running = new Supervisor({
      // The hostile remote speaks plain http: allowed only with --allow-insecure-remotes.
      config: fleet.config({ maxThreads: 1, actorMaxOldGenerationMb: 16, allowInsecureRemotes: true }),
      localConnection: adminConnection(fleet.plane.cluster("local")),
      logger: silentLogger(),
      restartPolicy: { ...DEFAULT_RESTART_POLICY, initialMs: 500 },
    });
    supervisor = running;
    running.start();
    await fleet.mirrorIdentity(NS, "web-calm");
    await waitForClusterRow(running, "calm", "synced", (r) => r.state === "synced");

    const calmStates = new Set<string>();
    const watchCalm = setInterval(() => {
      const row = clusterRow(running, "calm");
      if (row) calmStates.add(row.state);
    }, 20);
    try {
      await fleet.createSecret(
        fleet.secretBody({ secretName: "heavy", clusterName: "heavy", kubeconfig: heavy.kubeconfig("heavy") }),
      );
      // Each death takes V8 some seconds of collections near the limit first.
      const quarantined = await eventually(
        "Event ActorQuarantined on Secret heavy",
        async () => (await fleet.secretEvents("heavy", "ActorQuarantined"))[0],
        TIMEOUT_MS,
      );
      assert.match(quarantined.message ?? "", /thread of its own/);
      // Once alone, heavy's thread dies again; calm's thread is no longer its.
      const alone = await waitForClusterRow(
        running,
        "heavy",
        "a death on its own thread",
        (r) => r.restarts >= 3,
        TIMEOUT_MS,
      );
      assert.notEqual(running.actorThread("calm"), undefined);
      assert.notEqual(
        running.actorThread("heavy"),
        running.actorThread("calm"),
        `heavy alone: ${JSON.stringify(alone)}`,
      );
      await fleet.createService("east", NS, "after");
      await fleet.mirrorIdentity(NS, "after-calm");
      await eventually(
        "calm synced",
        () => (clusterRow(running, "calm")?.state === "synced" ? true : undefined),
        TIMEOUT_MS,
      );
    } finally {
      clearInterval(watchCalm);
    }
    const calm = clusterRow(running, "calm");
    assert.equal(calm?.restarts, 0, "calm's restarts were never its failures");
    for (const state of ["failing", "crash-loop"])
      assert.ok(!calmStates.has(state), `calm was never ${state}: ${[...calmStates].join(", ")}`);
    assert.ok(heavy.stats.lists >= 3, `heavy listed ${heavy.stats.lists} times`);
  });
});
