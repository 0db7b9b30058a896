/**
 * The default placement end to end (no `--max-threads` flag: "auto"), with the
 * controller in this process (a Supervisor with real worker threads) on real API
 * servers. The host is given as 2 CPUs and no memory limit, so the rule's budget is
 * the one this 2-vCPU machine gets: a thread per cluster up to 4 clusters, then packed
 * on 2 threads. 4 clusters get a thread each; when the fleet grows to 6 while running,
 * the 2 new clusters start on the 2 shared threads and no running actor moves; restarted, the same fleet
 * is packed from the start. `status` (/status) and /metrics show each step.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Worker } from "node:worker_threads";
import { createMetrics } from "../../src/admin/metrics.ts";
import { runAdminSource } from "../../src/admin/run-source.ts";
import { alwaysLeading } from "../../src/leader/leadership.ts";
import { silentLogger } from "../../src/log.ts";
import type { PlacementStatus } from "../../src/status/placement-status.ts";
import { autoBudget } from "../../src/supervisor/default-placement.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "../helpers/connection.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForActorThread, waitForClusterRow } from "../helpers/supervision.ts";

const HOST = { cpus: 2, memoryLimitBytes: undefined };
const SMALL = ["c0", "c1", "c2", "c3"];
const GROWN = ["c0", "c1", "c2", "c3", "c4", "c5"];
const remoteOf = (c: string) => (Number(c.slice(1)) % 2 === 0 ? "east" : "west");

describe("default placement: a thread per cluster for a small fleet, packed past the threshold", () => {
  let fleet: Fleet;
  const running = new Set<Supervisor>();

  function startSupervisor(): Supervisor {
    const config = fleet.config();
    assert.equal(config.maxThreads, "auto", "no flag: the default placement");
    const supervisor = new Supervisor({
      config,
      localConnection: adminConnection(fleet.plane.cluster("local")),
      logger: silentLogger(),
      hostLimits: HOST,
    });
    supervisor.start();
    running.add(supervisor);
    return supervisor;
  }

  async function stopSupervisor(supervisor: Supervisor): Promise<void> {
    await supervisor.stop();
    running.delete(supervisor);
  }

  async function allMirroring(supervisor: Supervisor, clusters: readonly string[], ns: string): Promise<void> {
    for (const c of clusters) {
      await fleet.mirrorIdentity(ns, `web-${c}`);
      await waitForClusterRow(supervisor, c, "synced", (r) => r.state === "synced");
    }
  }

  /** Resolves with the placement once `check` holds for it. */
  function placementWhen(supervisor: Supervisor, what: string, check: (p: PlacementStatus) => boolean) {
    return eventually(
      () => `placement ${what} (now ${JSON.stringify(supervisor.status().placement)})`,
      () => {
        const p = supervisor.status().placement;
        return p && check(p) ? p : undefined;
      },
      60_000,
    );
  }

  const metricsOf = (supervisor: Supervisor) =>
    createMetrics(
      runAdminSource(
        () => supervisor,
        () => alwaysLeading("me"),
      ),
    ).metrics();

  before(async () => {
    assert.deepEqual([autoBudget(HOST).isolatedUpTo, autoBudget(HOST).threads], [4, 2], "the rule's budget here");
    fleet = await Fleet.start(["east", "west"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createGateway("west", { ingress: [{ ip: "198.18.0.20" }] });
    await fleet.createService("east", "auto", "web");
    await fleet.createService("west", "auto", "web");
    for (const c of SMALL) await fleet.register(remoteOf(c), { clusterName: c });
  });
  after(async () => {
    for (const supervisor of running) await supervisor.stop();
    await fleet?.stop();
  });

  it("4 clusters: a thread each; growing to 6 starts the 2 new ones on 2 shared threads and moves none of the first 4; restarted, all 6 are packed on 2", async () => {
    const supervisor = startSupervisor();
    let first = new Map<string, Worker>();
    try {
      await allMirroring(supervisor, SMALL, "auto");
      for (const c of SMALL) first.set(c, await waitForActorThread(supervisor, c));
      assert.equal(new Set(first.values()).size, 4, "a thread of its own for each cluster");
      const isolated = await placementWhen(supervisor, "isolated, 4 threads", (p) => p.threads === 4);
      assert.deepEqual([isolated.setting, isolated.mode, isolated.blastRadius], ["auto", "isolated", 1]);
      assert.match(isolated.reason, /^auto: 4 clusters ≤ 4 → a thread per cluster; more are packed on 2 threads/);
      const text = await metricsOf(supervisor);
      assert.match(text, /^fleet_mirror_placement_threads 4$/m);
      assert.match(text, /^fleet_mirror_placement_blast_radius_clusters 1$/m);
      assert.match(text, /^fleet_mirror_placement_info\{setting="auto",mode="isolated"\} 1$/m);

      // The fleet grows past 4 while running.
      for (const c of GROWN.slice(4)) await fleet.register(remoteOf(c), { clusterName: c });
      await allMirroring(supervisor, GROWN, "auto");
      const packed = await placementWhen(supervisor, "packed, 4 + 2 threads", (p) => p.mode === "packed");
      assert.equal(packed.packedThreads, 2);
      assert.equal(packed.threads, 6, "the first 4 keep their own threads, the new ones run on the 2 shared ones");
      assert.match(packed.reason, /^auto: 6 clusters > 4 → packed on 2 threads/);
      for (const c of SMALL) assert.equal(supervisor.actorThread(c), first.get(c), `${c} was not moved`);
      const shared = new Set(GROWN.slice(4).map((c) => supervisor.actorThread(c)));
      assert.equal(shared.size, 2, "the new clusters run on the 2 shared threads");
      for (const w of shared) assert.ok(w && ![...first.values()].includes(w), "a shared thread is a new one");
      for (const c of GROWN) assert.equal(supervisor.status().clusters.find((r) => r.cluster === c)?.restarts, 0);
      const grown = await metricsOf(supervisor);
      assert.match(grown, /^fleet_mirror_placement_info\{setting="auto",mode="packed"\} 1$/m);
      // Each shared slot holds 3 clusters once the first 4 restart onto their slots.
      assert.match(grown, /^fleet_mirror_placement_blast_radius_clusters 3$/m);
    } finally {
      await stopSupervisor(supervisor);
    }

    // Restarted with 6 clusters registered: packed from the first start.
    const restarted = startSupervisor();
    try {
      await allMirroring(restarted, GROWN, "auto");
      first = new Map(GROWN.map((c) => [c, restarted.actorThread(c) as Worker]));
      assert.equal(new Set(first.values()).size, 2, "6 clusters on 2 threads");
      const p = await placementWhen(restarted, "packed on 2", (s) => s.mode === "packed" && s.threads === 2);
      assert.equal(p.blastRadius, 3);
    } finally {
      await stopSupervisor(restarted);
    }
  });
});
