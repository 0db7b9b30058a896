/**
 * End to end with the controller in this process (a Supervisor with real worker
 * threads), under faults: an actor thread that dies in each way a thread can die
 * (uncaught exception, unhandled rejection, process.exit, heap exhaustion), the local
 * API server down while remote changes pile up, and a local write rate limit.
 * In every case the other cluster keeps working and no mirror is lost or rewritten
 * (SPEC §1: a failing remote cluster never delays or blocks another, its mirrors are
 * kept; §4: mirrors converge, nothing is lost).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import type { Config } from "../../src/config.ts";
import { silentLogger } from "../../src/log.ts";
import { PROTOCOL_ERROR_LOG } from "../../src/protocol/guard.ts";
import type { ActorFaultKind, WriterStatus } from "../../src/protocol/messages.ts";
import { DEFAULT_RESTART_POLICY, type RestartPolicy } from "../../src/supervisor/restart-policy.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "../helpers/connection.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually, sleep } from "../helpers/kube.ts";
import { readLogFile } from "../helpers/log-file.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";
import { clusterRow, waitForActorThread, waitForClusterRow } from "../helpers/supervision.ts";

const TIMEOUT_MS = 60_000;
/** First restart delay in the fault tests: long enough to watch the other cluster meanwhile. */
const BACKOFF_MS = 6_000;
/** Writer status reports (one a second) the local API outage lasts at least. */
const OUTAGE_REPORTS = 5;

interface SupervisorChoice {
  readonly restartPolicy?: RestartPolicy;
  readonly testHooks?: boolean;
  readonly config?: Partial<Config>;
  readonly watchInactivityTimeoutMs?: number;
}

describe("isolation under faults", () => {
  let fleet: Fleet;
  const running = new Set<Supervisor>();

  function startSupervisor(choice: SupervisorChoice = {}): Supervisor {
    const supervisor = new Supervisor({
      config: fleet.config(choice.config),
      localConnection: adminConnection(fleet.plane.cluster("local")),
      logger: silentLogger(),
      ...(choice.restartPolicy ? { restartPolicy: choice.restartPolicy } : {}),
      ...(choice.testHooks ? { testHooks: true } : {}),
      ...(choice.watchInactivityTimeoutMs ? { watchInactivityTimeoutMs: choice.watchInactivityTimeoutMs } : {}),
    });
    supervisor.start();
    running.add(supervisor);
    return supervisor;
  }

  async function stopSupervisor(supervisor: Supervisor): Promise<void> {
    await supervisor.stop();
    running.delete(supervisor);
  }

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createGateway("west", { ingress: [{ ip: "198.18.0.20" }] });
    await fleet.register("east");
    await fleet.register("west");
  });
  after(async () => {
    for (const supervisor of running) await supervisor.stop();
    await fleet?.stop();
  });

  const faults: readonly { kind: ActorFaultKind; what: string; reason: RegExp }[] = [
    { kind: "throw", what: "an uncaught exception", reason: /uncaught exception/ },
    { kind: "reject", what: "an unhandled promise rejection", reason: /unhandled promise rejection/ },
    { kind: "exit", what: "process.exit(3)", reason: /exited with code 3/ },
    { kind: "oom", what: "heap exhaustion", reason: /out of memory/ },
  ];
  for (const fault of faults) {
    it(`restarts an actor thread killed by ${fault.what} with backoff, reports why, keeps its mirrors, and the other cluster keeps mirroring`, async () => {
      const ns = `fault-${fault.kind}`;
      await fleet.createService("east", ns, "web");
      await fleet.createService("west", ns, "web");
      const supervisor = startSupervisor({
        testHooks: true,
        restartPolicy: { ...DEFAULT_RESTART_POLICY, initialMs: BACKOFF_MS },
      });
      try {
        const eastMirror = await fleet.mirrorIdentity(ns, "web-east");
        const westMirror = await fleet.mirrorIdentity(ns, "web-west");
        await waitForClusterRow(supervisor, "east", "synced", (r) => r.state === "synced");
        const crashed = await waitForActorThread(supervisor, "east");

        const injectedAt = Date.now();
        supervisor.injectActorFault("east", fault.kind);
        const failing = await waitForClusterRow(supervisor, "east", "failing after the fault", (r) => r.restarts === 1);
        const crashedAt = Date.now();
        assert.equal(failing.state, "failing");
        assert.match(failing.reason ?? "", fault.reason);
        assert.equal(supervisor.actorThread("east"), undefined, "east is down for now");

        await fleet.createService("east", ns, "during-outage");
        await fleet.createService("west", ns, "during-outage");
        await fleet.mirrorIdentity(ns, "during-outage-west");
        assert.equal(supervisor.actorThread("east"), undefined, "west was mirrored while east was still down");
        assert.equal(clusterRow(supervisor, "east")?.state, "failing");
        assert.equal(await fleet.localService(ns, "during-outage-east"), undefined);
        assert.equal(
          await fleet.currentMirrorIdentity(ns, "web-east"),
          eastMirror,
          "east's mirror is kept during the outage",
        );

        await waitForActorThread(supervisor, "east", crashed);
        const restartedAfter = Date.now() - injectedAt;
        assert.ok(
          restartedAfter >= BACKOFF_MS - 200,
          `restarted after the backoff, not hot (${restartedAfter} ms; the crash was seen after ${crashedAt - injectedAt} ms)`,
        );
        await fleet.mirrorIdentity(ns, "during-outage-east");
        const eastRow = await waitForClusterRow(supervisor, "east", "synced again", (r) => r.state === "synced");
        assert.equal(eastRow.restarts, 1);
        assert.equal(eastRow.reason, undefined, "a running actor carries no crash reason");
        assert.equal(clusterRow(supervisor, "west")?.restarts, 0);
        assert.equal(clusterRow(supervisor, "west")?.state, "synced");
        assert.equal(
          await fleet.currentMirrorIdentity(ns, "web-east"),
          eastMirror,
          "the restart did not rewrite east's mirror",
        );
        assert.equal(await fleet.currentMirrorIdentity(ns, "web-west"), westMirror);
      } finally {
        await stopSupervisor(supervisor);
      }
    });
  }

  it("refuses fault injection unless the supervisor was built with test hooks, in the supervisor and in the actor", async () => {
    const ns = "no-hooks";
    await fleet.createService("east", ns, "web");
    // The actors log to a file here: the refusal is asserted on their log.
    const logFile = join(fleet.plane.dir, "no-hooks.log");
    const supervisor = startSupervisor({
      restartPolicy: { ...DEFAULT_RESTART_POLICY, initialMs: 50 },
      config: { logLevel: "error", logFile },
    });
    try {
      await fleet.mirrorIdentity(ns, "web-east");
      await waitForClusterRow(supervisor, "east", "synced", (r) => r.state === "synced");
      const thread = await waitForActorThread(supervisor, "east");
      assert.throws(() => supervisor.injectActorFault("east", "exit"), /testHooks/);

      // Bypassing the supervisor with a well-formed message (it names a hosted cluster and
      // a real fault): only the actor's test-hooks gate stands between it and process.exit.
      thread.postMessage({ type: "actor.inject-fault", cluster: "east", kind: "exit" });
      const refusal = await eventually("the actor's log to show the refusal", () =>
        readLogFile(logFile).find((l) => /refused, this actor was not started with test hooks/.test(l.err ?? "")),
      );
      assert.equal(refusal.msg, PROTOCOL_ERROR_LOG);
      // Malformed messages are protocol errors too (rejected by the decoder, before the gate).
      thread.postMessage({ type: "actor.inject-fault", cluster: "east", kind: "no-such-fault" });
      thread.postMessage({ type: "no-such-message" });
      await eventually("the actor's log to show three ignored messages", () =>
        readLogFile(logFile).filter((l) => l.msg === PROTOCOL_ERROR_LOG).length >= 3 ? true : undefined,
      );
      assert.equal(supervisor.actorThread("east"), thread, "the same thread is still running");
      assert.equal(clusterRow(supervisor, "east")?.restarts, 0);

      await fleet.createService("east", ns, "still-working");
      await fleet.mirrorIdentity(ns, "still-working-east");
      assert.equal(supervisor.actorThread("east"), thread);
    } finally {
      await stopSupervisor(supervisor);
    }
  });

  it("reports a remote API that hangs as stale since the hang, keeps its mirrors, leaves the other cluster alone, and resumes by itself when it answers again", async () => {
    const ns = "hung";
    // "far" is east reached through a fault proxy; east itself stays registered directly.
    const proxy = await startFaultProxyFor(fleet.plane, "east");
    const secretName = "cluster-credentials-far";
    const supervisors: Supervisor[] = [];
    try {
      await fleet.registerThrough("far", "east", proxy.url);
      await fleet.createService("east", ns, "web");
      await fleet.createService("west", ns, "web");
      const supervisor = startSupervisor({ watchInactivityTimeoutMs: 2_000 });
      supervisors.push(supervisor);
      const farMirror = await fleet.mirrorIdentity(ns, "web-far");
      await fleet.mirrorIdentity(ns, "web-west");
      await waitForClusterRow(supervisor, "far", "synced", (r) => r.state === "synced");

      const stalledAt = Date.now();
      proxy.setRules({ stall: true });
      const stale = await waitForClusterRow(supervisor, "far", "stale with a reason", (r) => r.state === "stale");
      assert.ok(stale.since !== undefined && stale.since >= stalledAt, `stale since ${stale.since} >= ${stalledAt}`);
      assert.ok(stale.since <= Date.now());
      assert.match(stale.reason ?? "", /no bytes for 2000 ms|ETIMEDOUT|timed out/i);

      await fleet.createService("east", ns, "during-hang");
      await fleet.createService("west", ns, "during-hang");
      await fleet.mirrorIdentity(ns, "during-hang-west");
      await fleet.mirrorIdentity(ns, "during-hang-east"); // the same API reached directly is fine
      assert.equal(clusterRow(supervisor, "west")?.state, "synced");
      // The thing under test is time passing: longer than the inactivity timeout (2 s), the
      // row must still say stale since the hang began, and the change must still be
      // unmirrored. The window is proved by far's watcher failing twice more meanwhile
      // (each failure is a whole attempt that got nothing through).
      const failed = () =>
        Object.values(supervisor.counters().clusters.get("far")?.failuresByReason ?? {}).reduce((a, b) => a + b, 0);
      const failuresAtStale = failed();
      await eventually("two more failed attempts of far's watcher", () =>
        failed() >= failuresAtStale + 2 ? true : undefined,
      );
      const still = clusterRow(supervisor, "far");
      assert.equal(still?.state, "stale", "still stale while the API hangs");
      assert.equal(still?.since, stale.since, "stale since the hang began, not since the last retry");
      assert.equal(still?.restarts, 0, "a hang is the watcher's business, not a crash");
      assert.equal(await fleet.localService(ns, "during-hang-far"), undefined);
      assert.equal(await fleet.currentMirrorIdentity(ns, "web-far"), farMirror, "a hung cluster's mirrors are kept");

      proxy.setRules({});
      await fleet.mirrorIdentity(ns, "during-hang-far");
      const resumed = await waitForClusterRow(supervisor, "far", "synced again", (r) => r.state === "synced");
      assert.equal(resumed.restarts, 0, "resumed by its watcher, not by a restart");
      assert.equal(await fleet.currentMirrorIdentity(ns, "web-far"), farMirror);
    } finally {
      for (const supervisor of supervisors) await stopSupervisor(supervisor);
      await proxy.stop();
      await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: secretName }).catch(() => {});
    }
  });

  it("loses nothing while the local API server is down: every remote change made meanwhile is mirrored once it returns, the writer reports its status every second throughout, and its queue stays bounded by the mirrors", async (t) => {
    const ns = "local-down";
    const count = 20;
    const flips = 10;
    const names = Array.from({ length: count }, (_, i) => `svc-${i}`);
    await fleet.createService("west", ns, "web");
    const supervisor = startSupervisor();
    try {
      const westMirror = await fleet.mirrorIdentity(ns, "web-west");
      await waitForClusterRow(supervisor, "east", "synced", (r) => r.state === "synced");
      const idle = await waitForWriterIdle(supervisor);
      const eastBefore = idle.clusters["east"]?.mirrors ?? 0;

      // Killed, not stopped: with the controller's watches open, a SIGTERM'd kube-apiserver
      // drains until the sandbox's 10 s grace ends in a SIGKILL anyway. (Counting those 10 s
      // as outage is what made the old "20 samples" assertion fail: it sampled only the rest.)
      const stopping = Date.now();
      await fleet.plane.stopApiServer("local", { kill: true });
      const downAt = Date.now();
      // Writer reports received while the API server is down (each writer.status message is
      // decoded into a new object, so a different object is a new report). Counting reports,
      // not the test's own timer ticks: the supervisor keeps the last report forever, so
      // sampling it says nothing about whether the writer is still reporting.
      const reports: WriterStatus[] = [];
      let latest = supervisor.status().writer;
      const onStatus = (): void => {
        const w = supervisor.status().writer;
        if (w && w !== latest) reports.push(w);
        latest = w;
      };
      supervisor.on("status", onStatus);
      let upAt = downAt;
      try {
        // 20 new exported Services, then 200 changes to them (10 port flips each).
        await Promise.all(names.map((name) => fleet.createService("east", ns, name)));
        await Promise.all(
          names.map(async (name) => {
            for (let flip = 1; flip <= flips; flip++) {
              await fleet.patchService("east", ns, name, (svc) => {
                const port = svc.spec?.ports?.[0];
                if (port) port.port = 1000 + flip;
              });
            }
          }),
        );
        // The outage lasts until the writer holds the 20 new mirrors' desired state and has
        // reported at least OUTAGE_REPORTS times while the API server was down.
        await eventually(
          () =>
            `${OUTAGE_REPORTS} writer reports during the outage, the last holding east's new mirrors (${reports.length} reports, east ${JSON.stringify(latest?.clusters["east"])})`,
          () =>
            reports.length >= OUTAGE_REPORTS && (reports.at(-1)?.clusters["east"]?.mirrors ?? 0) >= eastBefore + count
              ? true
              : undefined,
          TIMEOUT_MS,
          20,
        );
      } finally {
        supervisor.off("status", onStatus);
        upAt = Date.now();
        await fleet.plane.startApiServer("local");
      }
      const outageS = (upAt - downAt) / 1000;
      t.diagnostic(
        `the API server took ${downAt - stopping} ms to stop; down ${outageS.toFixed(1)} s; ${reports.length} writer reports meanwhile`,
      );
      // One report a second (STATUS_INTERVAL_MS), a second or two of slack on a loaded machine.
      assert.ok(
        reports.length >= Math.floor(outageS) - 2,
        `the writer reported its status every second during the outage (${reports.length} reports in ${outageS.toFixed(1)} s)`,
      );
      const maxQueueDepth = Math.max(...reports.map((w) => w.queueDepth));
      const maxInFlight = Math.max(...reports.map((w) => w.inFlight));
      assert.ok(maxQueueDepth <= 2 * count, `writer queue depth ${maxQueueDepth} during the outage`);
      assert.ok(maxInFlight <= fleet.config().writeConcurrency, `writes in flight ${maxInFlight}`);

      for (const name of names) {
        await fleet.waitForMirror(ns, `${name}-east`, (svc) => svc.spec?.ports?.[0]?.port === 1000 + flips, TIMEOUT_MS);
        await fleet.waitForEndpoints(ns, `${name}-east`, (e) => (e.subsets?.length ?? 0) > 0, TIMEOUT_MS);
      }
      assert.equal(
        await fleet.currentMirrorIdentity(ns, "web-west"),
        westMirror,
        "an existing mirror is not rewritten",
      );
      const writer = await waitForWriterIdle(supervisor);
      assert.equal(writer.clusters["east"]?.mirrors, clusterRow(supervisor, "east")?.exportedServices);
      assert.equal(clusterRow(supervisor, "east")?.state, "synced");
      assert.equal(clusterRow(supervisor, "west")?.state, "synced");
      assert.equal(supervisor.status().writerRestarts, 0, "the writer rode out the outage without a restart");
    } finally {
      await stopSupervisor(supervisor);
    }
  });

  it("throttles local writes to --write-qps / --write-burst and still converges every mirror", async () => {
    const ns = "throttled";
    const qps = 2;
    const burst = 2;
    const names = Array.from({ length: 10 }, (_, i) => `svc-${i}`);
    const supervisor = startSupervisor({ config: { writeQps: qps, writeBurst: burst } });
    try {
      await waitForClusterRow(supervisor, "east", "synced", (r) => r.state === "synced");
      // No wait for the bucket to refill: it never holds more than `burst` tokens, so the
      // bound below (burst + qps · interval) holds from any start, full or spent.
      await waitForWriterIdle(supervisor);

      const samples: { at: number; writes: number }[] = [{ at: Date.now(), writes: await fleet.localWriteCount() }];
      await Promise.all(names.map((name) => fleet.createService("east", ns, name)));
      let converged = false;
      const deadline = Date.now() + TIMEOUT_MS;
      while (!converged) {
        assert.ok(Date.now() < deadline, "every mirror converged in time");
        await sleep(250);
        samples.push({ at: Date.now(), writes: await fleet.localWriteCount() });
        const present = await Promise.all(
          names.map(async (name) => {
            try {
              const e = await fleet.local.readNamespacedEndpoints({ namespace: ns, name: `${name}-east` });
              return (e.subsets?.length ?? 0) > 0;
            } catch {
              return false;
            }
          }),
        );
        converged = present.every(Boolean);
      }
      // Writes that completed while the mirrors were being read count too: the sample
      // above was taken before that read, which takes a while on a loaded machine.
      samples.push({ at: Date.now(), writes: await fleet.localWriteCount() });
      const first = samples[0];
      const last = samples[samples.length - 1];
      assert.ok(first && last);
      const total = last.writes - first.writes;
      // One Namespace, then a Service and an Endpoints per mirror.
      assert.ok(total >= 2 * names.length, `${total} writes`);
      // Over every interval between two samples, at most burst + qps · interval writes
      // (+1: a write counted at completion may have taken its token just before the interval).
      for (let i = 0; i < samples.length; i++) {
        for (let j = i + 1; j < samples.length; j++) {
          const a = samples[i];
          const b = samples[j];
          if (!a || !b) continue;
          const allowed = burst + (qps * (b.at - a.at)) / 1000 + 1;
          assert.ok(
            b.writes - a.writes <= allowed,
            `${b.writes - a.writes} writes in ${b.at - a.at} ms (allowed ${allowed.toFixed(1)})`,
          );
        }
      }
      const seconds = (last.at - first.at) / 1000;
      assert.ok(
        seconds >= (total - burst) / qps - 1,
        `${total} writes took ${seconds.toFixed(1)} s: the rate limit was binding`,
      );
      for (const name of names) await fleet.mirrorIdentity(ns, `${name}-east`);
    } finally {
      await stopSupervisor(supervisor);
    }
  });
});
