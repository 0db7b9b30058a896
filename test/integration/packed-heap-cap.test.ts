/**
 * A packed actor thread's heap limit is capped (`--packed-thread-max-old-space-mb`,
 * supervisor/thread-heap.ts), with real worker threads on real API servers: three
 * clusters packed on one thread (`--max-threads 1`) at `--actor-max-old-space-mb 16`
 * would give the thread 3 × 16 MB; with the cap at 24 MB, V8's limit for the thread is
 * 24 MB of old generation (plus its young generation), so a leak in one of its actors
 * stops the thread there instead of growing toward the container's memory limit.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { silentLogger } from "../../src/log.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "../helpers/connection.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForClusterRow } from "../helpers/supervision.ts";

const NS = "heap-cap";
const CLUSTERS = ["c0", "c1", "c2"];
const MIB = 2 ** 20;

describe("a packed actor thread's heap limit", () => {
  let fleet: Fleet;
  let supervisor: Supervisor | undefined;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.41" }] });
    await fleet.createService("east", NS, "web");
    for (const clusterName of CLUSTERS) await fleet.register("east", { clusterName, secretName: clusterName });
  });
  after(async () => {
    await supervisor?.stop();
    await fleet?.stop();
  });

  it("is the packed-thread cap, not the actor limit times the actors it hosts", async () => {
    const running = new Supervisor({
      config: fleet.config({ maxThreads: 1, actorMaxOldGenerationMb: 16, packedThreadMaxOldGenerationMb: 24 }),
      localConnection: adminConnection(fleet.plane.cluster("local")),
      logger: silentLogger(),
    });
    supervisor = running;
    running.start();
    for (const c of CLUSTERS) await waitForClusterRow(running, c, "synced", (r) => r.state === "synced");
    const thread = await eventually("the packed thread's heap statistics", async () =>
      (await running.threadHeapStatistics()).find((h) => h.thread.startsWith("remote-cluster/")),
    );
    const limitMb = thread.limit / MIB;
    // V8's limit is the old generation plus the young one (3 MB per actor here).
    assert.ok(limitMb >= 24 && limitMb < 3 * 16, `${thread.thread}: heap limit ${limitMb.toFixed(1)} MB`);
    assert.equal(running.actorThread("c0"), running.actorThread("c2"), "the three clusters share the thread");
  });
});
