/**
 * LeaderElector in process, on the real API server, with the controller's least-privilege
 * token: of two electors racing for a missing Lease exactly one leads; stop() releases so
 * a standby takes over at its next try; a deleted Lease is lost and never recreated; a
 * hanging API server costs the Lease at the renew deadline, and nothing is written after.
 *
 * Each test has a Lease of its own (`in-process-<n>`): the single leader's Role grants the
 * Lease `fleet-mirror` alone, so these tests add deploy/sharded/'s Role (get and update of
 * any Lease in the namespace, as a sharded replica has). Timings: Lease 3 s, deadline 2 s,
 * retry 300 ms. A negative assertion waits for a positive marker first: a number of the
 * standby's reads of the Lease, or the elector's loop ended, or the proxy done with every
 * request it held.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { type FaultProxy, startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { LeaderElector } from "../../src/leader/elector.ts";
import { silentLogger } from "../../src/log.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually, statusCode } from "../helpers/kube.ts";

const RETRY_MS = 300;

describe("LeaderElector in process, on the real API server (least-privilege token)", () => {
  let fleet: Fleet;
  let leases: CoordinationV1Api;
  let proxy: FaultProxy;
  const electors: LeaderElector[] = [];
  const clients: KubeClient[] = [];
  /** Identity → the GETs of its Lease it sent so far (each is one try of the elector). */
  const reads = new Map<string, number>();
  let leaseNumber = 0;

  /** An elector on Lease `name`; timings Lease 3 s / deadline 2 s / retry 300 ms. Counts its reads. */
  function elector(identity: string, name: string, connection = fleet.controllerConnection()): LeaderElector {
    const client = new KubeClient(connection, { userAgent: `test/${identity}` });
    clients.push(client);
    const request = client.request.bind(client);
    client.request = ((method, path, options) => {
      if (method === "GET" && path.endsWith(`/leases/${name}`)) reads.set(identity, (reads.get(identity) ?? 0) + 1);
      return request(method, path, options);
    }) as typeof client.request;
    const e = new LeaderElector({
      client,
      namespace: CONTROLLER_NAMESPACE,
      name,
      identity,
      leaseDurationMs: 3_000,
      renewDeadlineMs: 2_000,
      retryPeriodMs: RETRY_MS,
      logger: silentLogger(),
    });
    electors.push(e);
    return e;
  }

  /** Resolves once `identity` sent `n` more reads of its Lease than when called: `n` tries of the elector. */
  async function tries(identity: string, n: number): Promise<void> {
    const from = reads.get(identity) ?? 0;
    await eventually(`${n} tries of ${identity}`, () => ((reads.get(identity) ?? 0) - from >= n ? true : undefined));
  }

  function nextLease(): string {
    leaseNumber += 1;
    return `in-process-${leaseNumber}`;
  }

  async function leaseHolder(name: string): Promise<string> {
    const lease = await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name });
    return lease.spec?.holderIdentity ?? "";
  }

  before(async () => {
    fleet = await Fleet.start([]);
    leases = fleet.kubeConfig("local").makeApiClient(CoordinationV1Api);
    await applyRbacYaml(
      fleet.kubeConfig("local"),
      fileURLToPath(new URL("../../deploy/sharded/rbac-shards.yaml", import.meta.url)),
    );
    proxy = await startFaultProxyFor(fleet.plane, "local");
  });
  after(async () => {
    await Promise.all(electors.map((e) => e.stop()));
    for (const client of clients) client.close();
    await proxy?.stop();
    await fleet?.stop();
  });

  it("of two electors racing for a missing Lease exactly one leads; the other sees it as the holder", async () => {
    const name = nextLease();
    const a = elector("a", name);
    const b = elector("b", name);
    const started: string[] = [];
    a.on("started-leading", () => started.push("a"));
    b.on("started-leading", () => started.push("b"));
    a.run();
    b.run();
    const winner = await eventually("a leader", () => started[0]);
    const loser = winner === "a" ? b : a;
    await eventually("the loser to observe the holder", () =>
      loser.leadership().holder === winner ? true : undefined,
    );
    // Five more tries of the loser, each a read of a live Lease: it must stay a standby.
    await tries(winner === "a" ? "b" : "a", 5);
    assert.deepEqual(started, [winner]);
    assert.equal(loser.isLeader, false);
    assert.equal(await leaseHolder(name), winner);
    const lease = await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name });
    assert.equal(lease.spec?.leaseTransitions, 0);
    assert.equal(lease.spec?.leaseDurationSeconds, 3);
  });

  it("stop() releases the Lease and a standby takes it at its next try, without waiting for it to expire", async () => {
    const name = nextLease();
    const a = elector("c", name);
    a.run();
    await eventually("c to lead", () => (a.isLeader ? true : undefined));
    const b = elector("d", name);
    let stoppedLeading = false;
    a.on("stopped-leading", () => {
      stoppedLeading = true;
    });
    b.run();
    await eventually("d to observe c", () => (b.leadership().holder === "c" ? true : undefined));
    const stopped = Date.now();
    await a.stop();
    await eventually("d to lead", () => (b.isLeader ? true : undefined), 5_000, 20);
    const took = Date.now() - stopped;
    assert.ok(took < 1_500, `the standby took ${took} ms (retry 300 ms, Lease 3 s)`);
    assert.equal(stoppedLeading, false, "stop() is not a loss");
    assert.equal(a.leadership().leading, false);
    assert.equal(await leaseHolder(name), "d");
  });

  it("a leader whose Lease is deleted loses leadership at its next renewal and does not recreate it", async () => {
    const name = nextLease();
    const a = elector("e", name);
    const lost: string[] = [];
    a.on("stopped-leading", (reason) => lost.push(reason));
    a.run();
    await eventually("e to lead", () => (a.isLeader ? true : undefined));
    await leases.deleteNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name });
    await eventually("e to lose leadership", () => lost[0], 5_000, 20);
    assert.deepEqual(lost, ["the Lease was deleted"]);
    // stop() resolves once the elector's loop has ended (a lost Lease is not released):
    // whatever it would have written after the loss has been sent by then.
    await a.stop();
    await assert.rejects(
      leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name }),
      (error) => statusCode(error) === 404,
    );
  });

  it("a leader whose API server hangs loses leadership at the renew deadline, not later, and never writes again", async () => {
    const name = nextLease();
    const local = fleet.plane.cluster("local");
    const viaProxy = {
      server: proxy.url,
      caPem: local.caPem,
      auth: { kind: "token" as const, token: fleet.controllerToken },
    };
    const a = elector("f", name, viaProxy);
    const lost: number[] = [];
    let renewals = 0;
    a.on("stopped-leading", () => lost.push(Date.now()));
    a.on("renewed", () => {
      renewals += 1;
    });
    a.run();
    await eventually("f to lead", () => (a.isLeader ? true : undefined));
    let version: string | undefined;
    try {
      await eventually("a few renewals", () => (renewals >= 2 ? true : undefined));
      const stalled = Date.now();
      proxy.setRules({ stall: true });
      await eventually("f to lose leadership", () => lost[0], 10_000, 20);
      const after = (lost[0] ?? 0) - stalled;
      // Renewed at most one retry period (300 ms) before the stall; deadline 2 s from that renewal.
      assert.ok(after <= 2_100 && after >= 1_500, `lost leadership ${after} ms after the stall`);
      assert.equal(a.isLeader, false);
      // Read directly, not through the stalled proxy: the Lease as the elector left it.
      version = (await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name })).metadata?.resourceVersion;
    } finally {
      proxy.setRules({});
    }
    // Held requests go on now, unless their client gave up: wait until the proxy holds none
    // and has answered every one it forwarded. None may have been a renewal or a release.
    await eventually("the proxy done with every held request", () =>
      proxy.stats.openRequests === 0 ? true : undefined,
    );
    const lease = await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name });
    assert.equal(lease.metadata?.resourceVersion, version, "the elector wrote the Lease after losing it");
    assert.equal(lease.spec?.holderIdentity, "f", "a lost Lease is not released: it expires");
    assert.equal(lost.length, 1);
  });
});
