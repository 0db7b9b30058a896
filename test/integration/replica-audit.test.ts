/**
 * Who writes, read from the local API server's audit log: two `fleet-mirror run
 * --leader-elect` replicas as OS processes, each with its own Pod-bound token (so the log
 * names the replica of every write; see test/helpers/audit.ts and replicas.ts). The
 * standby makes no write at all, not even a failed one; every mirror write is the
 * leader's; a leader cut off the local API (its fault proxy stalls everything) makes no
 * write that reaches the server after its renew deadline, even when the network heals
 * before its Lease can be taken, and the standby takes over.
 *
 * Short timings, as in leader-election.test.ts: Lease 4 s, renew deadline 3 s, retry
 * 500 ms: the deadline leaves a 1 s margin before the Lease can be taken.
 */
import assert from "node:assert/strict";
import { after, before, describe, it, type TestContext } from "node:test";
import { CoordinationV1Api, type V1Lease } from "@kubernetes/client-node";
import { CONTROLLER_MANAGER_USER } from "../../sandbox/controller-manager.ts";
import { AuditLog, describeWrites, MIRROR_RESOURCES } from "../helpers/audit.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually, sleep, statusCode } from "../helpers/kube.ts";
import { type Replica, Replicas } from "../helpers/replicas.ts";
import { SHORT_LEASE_TIMINGS } from "../helpers/shard-replicas.ts";

const LEASE = "fleet-mirror";
const LEASE_DURATION_MS = 4_000;
const RENEW_DEADLINE_MS = 3_000;
const ELECTING = ["--leader-elect", ...SHORT_LEASE_TIMINGS];

/** The Lease's renewTime as epoch ms (client-node may hand MicroTime over as a Date or a string). */
function renewTimeMs(lease: V1Lease | undefined): number {
  const value: unknown = lease?.spec?.renewTime;
  if (value instanceof Date) return value.getTime();
  return typeof value === "string" ? Date.parse(value) : Number.NaN;
}

describe("writes per replica, from the local API server's audit log", () => {
  let fleet: Fleet;
  let audit: AuditLog;
  let leases: CoordinationV1Api;
  let replicas: Replicas;

  async function readLease(): Promise<V1Lease | undefined> {
    try {
      return await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name: LEASE });
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  async function waitForHolder(identity: string, timeoutMs = 60_000): Promise<V1Lease> {
    return eventually(
      `Lease holder ${identity}`,
      async () => {
        const lease = await readLease();
        return lease?.spec?.holderIdentity === identity ? lease : undefined;
      },
      timeoutMs,
      50,
    );
  }

  /** Runs a test's body; on failure its replicas' last lines go to the diagnostics; then every replica ends. */
  async function scenario(t: TestContext, body: () => Promise<void>): Promise<void> {
    replicas = new Replicas(fleet);
    try {
      await body();
    } catch (error) {
      t.diagnostic(replicas.tails());
      t.diagnostic(`audit writes by identity: ${JSON.stringify(audit.countByIdentity({ includeFailed: true }))}`);
      t.diagnostic(describeWrites(audit.all().filter((w) => w.identity.startsWith("replica-"))));
      throw error;
    } finally {
      await replicas.stop();
      await deleteLease();
    }
  }

  async function deleteLease(): Promise<void> {
    try {
      await leases.deleteNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name: LEASE });
    } catch (error) {
      if (statusCode(error) !== 404) throw error;
    }
  }

  /** A leader `leader` (started first, so it wins) and a standby that has seen it hold the Lease. */
  async function leaderAndStandby(leader: string, standby: string): Promise<[Replica, Replica]> {
    const a = await replicas.add(leader, { args: ELECTING, proxied: true });
    await waitForHolder(leader);
    const b = await replicas.add(standby, { args: ELECTING });
    await b.waitForLog(new RegExp(`is held by ${leader}`));
    return [a, b];
  }

  before(async () => {
    fleet = await Fleet.start(["east"], { audit: true });
    const local = fleet.plane.cluster("local");
    assert.ok(local.auditLogPath, "the local API server writes an audit log");
    audit = new AuditLog(local.auditLogPath, fleet.kubeConfig("local"));
    leases = fleet.kubeConfig("local").makeApiClient(CoordinationV1Api);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.register("east");
  });
  after(async () => {
    await replicas?.stop();
    await fleet?.stop();
  });

  it("the standby makes no write at all, not even a failed one, and every mirror write is the leader's", async (t) => {
    const ns = "standby-audit";
    await scenario(t, async () => {
      const [leader, standby] = await leaderAndStandby("replica-a", "replica-b");
      const since = Date.now();
      await Promise.all(["web", "cart", "api"].map((name) => fleet.createService("east", ns, name)));
      await Promise.all(["web", "cart", "api"].map((name) => fleet.waitForMirror(ns, `${name}-east`)));
      // Several retry periods with a change to mirror: time for a wrong standby to act.
      await fleet.patchService("east", ns, "web", (svc) => {
        svc.spec = { ...svc.spec, ports: [{ name: "http", port: 81, targetPort: 8080, protocol: "TCP" }] };
      });
      await fleet.waitForMirror(ns, "web-east", (svc) => svc.spec?.ports?.[0]?.port === 81);
      // The window a wrong standby had to act in: four retry periods after the change was
      // mirrored, counted as the leader's renewals the API server received since.
      const mirrored = await audit.flush();
      await eventually("four renewals of the Lease since the change was mirrored", async () => {
        await audit.flush();
        return audit.writes({ identity: leader.name, resources: ["leases"], since: mirrored }).length >= 4
          ? true
          : undefined;
      });

      assert.deepEqual(audit.writes({ identity: standby.name, includeFailed: true }), [], "the standby wrote");
      const mirrorWrites = audit.writes({ namespace: ns, resources: MIRROR_RESOURCES, since });
      assert.ok(
        mirrorWrites.some((w) => w.resource === "services" && w.verb === "create" && w.name === "web-east"),
        `no create of the mirror web-east in ${JSON.stringify(mirrorWrites)}`,
      );
      const byOthers = mirrorWrites.filter((w) => w.identity !== leader.name && w.username !== CONTROLLER_MANAGER_USER);
      assert.deepEqual(byOthers, [], "mirror writes by someone other than the leader");
      const renewals = audit.writes({ identity: leader.name, resources: ["leases"], since });
      assert.ok(renewals.length >= 2, `the leader renewed ${renewals.length} times`);
    });
  });

  it("a leader cut off the local API makes no write that reaches it after its renew deadline, even if the network heals before the Lease expires", async (t) => {
    const ns = "partition-audit";
    await scenario(t, async () => {
      const [leader, standby] = await leaderAndStandby("replica-c", "replica-d");
      await fleet.createService("east", ns, "before");
      await fleet.waitForMirror(ns, "before-east");

      leader.partition();
      const cut = Date.now();
      // The leader's remote watch is not cut: it sees this change and would mirror it if
      // nothing stopped it.
      await fleet.createService("east", ns, "during");
      // Renewals that left before the cut may still land: the last one to land sets the deadline.
      await audit.flush();
      const lastRenewal = renewTimeMs(await readLease());
      assert.ok(Number.isFinite(lastRenewal), "the Lease has a renewTime");
      const deadline = lastRenewal + RENEW_DEADLINE_MS;
      const takeable = lastRenewal + LEASE_DURATION_MS;
      // Heal between the deadline and the Lease's expiry: a leader that kept writing
      // past its deadline would reach the API server now, before anyone else leads.
      await sleep(Math.max(0, deadline + 300 - Date.now()));
      leader.heal();
      const healed = Date.now();

      await waitForHolder(standby.name);
      const acquired = Date.now();
      await fleet.waitForMirror(ns, "during-east", () => true, 60_000);
      const end = await audit.flush();
      t.diagnostic(
        `cut → last renewal ${lastRenewal - cut} ms, → healed ${healed - cut} ms, → standby leads ${acquired - cut} ms, leader exits ${JSON.stringify(leader.exits)}`,
      );

      const late = audit.writes({ identity: leader.name, since: deadline, includeFailed: true });
      assert.deepEqual(late, [], "the cut-off leader wrote after its renew deadline");
      assert.ok(acquired >= takeable, `the standby led ${takeable - acquired} ms before the Lease could be taken`);
      const exit = await eventually("the cut-off leader to exit", () => leader.exits[0], 10_000);
      assert.equal(exit.code, 1, "a leader that lost its Lease exits non-zero");
      const duringWriters = new Set(
        audit
          .writes({ namespace: ns, resources: MIRROR_RESOURCES, since: cut, until: end })
          .filter((w) => w.name === "during-east")
          .map((w) => w.identity),
      );
      assert.deepEqual([...duringWriters], [standby.name], "the mirror made during the cut is the new leader's");
    });
  });
});
