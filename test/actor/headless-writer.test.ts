/**
 * The local writer and a headless mirror with many hosts (SPEC §12), through its ports
 * against a real local API server, at the default write rate: one batch of a headless
 * mirror and its per-host mirrors becomes one Service and one slice per host plus the
 * headless mirror, whose slice holds every per-host Service's cluster IP with its
 * hostname and is rewritten a few times while the hosts appear, not once per host: the
 * writes per created host stay at 2 (its Service and its slice).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api } from "@kubernetes/client-node";
import { headlessMirrors } from "../../src/core/headless.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { apiRequests, batch, desiredMirror, FakeActorPort, startWriter, writerIdle } from "./writer-harness.ts";

const HOSTS = 300;

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
});

async function sliceWrites(fleet: Fleet): Promise<number> {
  return (await apiRequests(fleet, "POST", "endpointslices")) + (await apiRequests(fleet, "PUT", "endpointslices"));
}
