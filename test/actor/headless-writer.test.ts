/**
 * The local writer and a headless mirror with many hosts (SPEC §12), through its ports
 * against a real local API server, at the default write rate: one batch of a headless
 * mirror and its per-host mirrors becomes one Service and one slice per host plus the
 * headless mirror, whose slice holds every per-host Service's cluster IP with its
 * hostname and is rewritten a few times while the hosts appear, not once per host: the
 * writes per created host stay at 2 (its Service and its slice). Across a restart whose
 * first set says the hosts are unknown, the per-host mirrors stay; once the hosts are
 * known without one of them, that one is collected at once, not at the next resync.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api } from "@kubernetes/client-node";
import { headlessMirrors, hostsUnknown } from "../../src/core/headless.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { apiRequests, batch, desiredMirror, FakeActorPort, startWriter, writerIdle } from "./writer-harness.ts";

const HOSTS = 300;
const NS = "hl-restart";

describe("the local writer with a headless mirror of many hosts", () => {
  let fleet: Fleet;

  before(async () => {
    fleet = await Fleet.start([]);
  });
  after(async () => {
    await fleet?.stop();
  });

  it(`writes ${HOSTS} per-host mirrors and the headless mirror from one batch, about 2 writes per host`, async () => {
    // The default write rate limit: the hosts appear over seconds, as in production.
    const writer = await startWriter(fleet, { endpointsApi: "endpointslices", concurrency: 8, qps: 50, burst: 10 });
    try {
      const hostnames = Array.from({ length: HOSTS }, (_, i) => `db-${i}`);
      const { mirrors } = headlessMirrors(desiredMirror("east", "big", "db"), hostnames);
      assert.equal(mirrors.length, HOSTS + 1);
      const writesBefore = (await apiRequests(fleet, "POST", "services")) + (await sliceWrites(fleet));
      const port = new FakeActorPort();
      writer.actor.setKeep(["east"]);
      writer.actor.attach("east", 1, port);
      port.send(batch("east", 1, 1, { complete: true, upserts: mirrors }));

      const discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
      await eventually(
        `the headless slice to hold ${HOSTS} hostnames`,
        async () => {
          const slice = await discovery.readNamespacedEndpointSlice({ namespace: "big", name: "db-east-ipv4" });
          const named = (slice.endpoints ?? []).filter((e) => e.hostname?.startsWith("db-"));
          return named.length === HOSTS ? true : undefined;
        },
        120_000,
        200,
      );
      await writerIdle(writer.actor);
      const web7 = await fleet.local.readNamespacedService({ namespace: "big", name: "db-7-east" });
      const slice = await discovery.readNamespacedEndpointSlice({ namespace: "big", name: "db-east-ipv4" });
      assert.deepEqual(slice.endpoints?.find((e) => e.hostname === "db-7")?.addresses, [web7.spec?.clusterIP]);
      const writes = (await apiRequests(fleet, "POST", "services")) + (await sliceWrites(fleet)) - writesBefore;
      // Each host: its Service and its slice; the headless mirror: its Service, its slice
      // and a few rewrites while the hosts appear (one per host would make 3 each).
      const perHost = (writes - 2) / HOSTS;
      assert.ok(perHost <= 2.1, `${writes} writes for ${HOSTS} hosts: ${perHost.toFixed(3)} per host`);
    } finally {
      await writer.stop();
    }
  });

  it("keeps its per-host mirrors while unknown, and collects the one the known hosts leave out as soon as they are known", async () => {
    const parent = desiredMirror("east", NS, "db");
    // Before the restart: hosts db-0 and db-1 mirrored.
    const first = await startWriter(fleet, { endpointsApi: "endpointslices" });
    try {
      const port = new FakeActorPort();
      first.actor.setKeep(["east"]);
      first.actor.attach("east", 1, port);
      port.send(batch("east", 1, 1, { complete: true, upserts: headlessMirrors(parent, ["db-0", "db-1"]).mirrors }));
      await fleet.waitForMirror(NS, "db-0-east");
      await fleet.waitForMirror(NS, "db-1-east");
      await writerIdle(first.actor);
    } finally {
      await first.stop();
    }
    const db0 = await fleet.local.readNamespacedService({ namespace: NS, name: "db-0-east" });

    // The restart: a new writer, and the cluster's first set says the hosts are unknown.
    const writer = await startWriter(fleet, { endpointsApi: "endpointslices", resyncPeriodMs: 10 * 60_000 });
    try {
      const port = new FakeActorPort();
      writer.actor.setKeep(["east"]);
      writer.actor.attach("east", 1, port);
      port.send(batch("east", 1, 1, { complete: true, upserts: [hostsUnknown(parent)] }));
      await writerIdle(writer.actor);
      const kept = await fleet.localService(NS, "db-0-east");
      assert.equal(kept?.metadata?.uid, db0.metadata?.uid, "kept while the hosts are unknown");

      // The slices list at last: db-1 and db-3, db-0 gone (a scale-down while stopped).
      const known = headlessMirrors(parent, ["db-1", "db-3"]).mirrors;
      port.send(batch("east", 1, 2, { upserts: known }));
      await fleet.waitForMirror(NS, "db-3-east");
      await fleet.waitForNoMirror(NS, "db-0-east", 20_000);
      assert.ok(await fleet.localService(NS, "db-1-east"), "db-1 stays");
    } finally {
      await writer.stop();
    }
  });
});

async function sliceWrites(fleet: Fleet): Promise<number> {
  return (await apiRequests(fleet, "POST", "endpointslices")) + (await apiRequests(fleet, "PUT", "endpointslices"));
}
