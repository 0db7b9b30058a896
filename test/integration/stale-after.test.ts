/**
 * The partition policy (SPEC §14, `--stale-after`) on real API servers: a remote cluster
 * reached through a fault proxy hangs; once its API server has been unreachable for
 * `--stale-after`, the endpoints of its unprobed gateway turn not ready in its mirror
 * and its fleet-wide part (nothing is deleted), and ready again as soon as it answers.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { V1Endpoints } from "@kubernetes/client-node";
import { startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { silentLogger } from "../../src/log.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "../helpers/connection.ts";
import { Fleet } from "../helpers/fleet.ts";
import { objectIdentity } from "../helpers/kube.ts";
import { waitForClusterRow } from "../helpers/supervision.ts";

const GATEWAY_IP = "198.18.0.10";
const STALE_AFTER_MS = 3_000;

/** The mirror's addresses: ready, and not ready. */
function readiness(ep: V1Endpoints): { ready: string[]; notReady: string[] } {
  const subsets = ep.subsets ?? [];
  return {
    ready: subsets.flatMap((s) => (s.addresses ?? []).map((a) => a.ip)),
    notReady: subsets.flatMap((s) => (s.notReadyAddresses ?? []).map((a) => a.ip)),
  };
}
const isReady = (ep: V1Endpoints) =>
  JSON.stringify(readiness(ep)) === JSON.stringify({ ready: [GATEWAY_IP], notReady: [] });
const isNotReady = (ep: V1Endpoints) =>
  JSON.stringify(readiness(ep)) === JSON.stringify({ ready: [], notReady: [GATEWAY_IP] });

describe("the partition policy --stale-after (SPEC §14)", () => {
  let fleet: Fleet;
  let supervisor: Supervisor | undefined;
  let proxy: Awaited<ReturnType<typeof startFaultProxyFor>> | undefined;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: GATEWAY_IP }] });
    // "far" is east reached through a fault proxy, whose gateway is not probed.
    proxy = await startFaultProxyFor(fleet.plane, "east");
    await fleet.registerThrough("far", "east", proxy.url);
    // Exported and a fleet-wide member: a mirror web-far and a part of web-federated.
    await fleet.createService("east", "part", "web", { labels: { "mirror.linkerd.io/federated": "member" } });
    supervisor = new Supervisor({
      config: fleet.config({ staleAfterMs: STALE_AFTER_MS }),
      localConnection: adminConnection(fleet.plane.cluster("local")),
      logger: silentLogger(),
      watchInactivityTimeoutMs: 2_000,
    });
    supervisor.start();
  });
  after(async () => {
    await supervisor?.stop();
    await proxy?.stop();
    await fleet?.stop();
  });

  it("turns an unreachable cluster's unprobed endpoints not ready after --stale-after in its mirror and its fleet-wide part, deletes nothing, and ready again once it answers", async () => {
    assert.ok(supervisor && proxy);
    await fleet.waitForEndpoints("part", "web-far", isReady, 60_000);
    await fleet.waitForEndpoints("part", "web-federated", isReady, 60_000);
    await waitForClusterRow(supervisor, "far", "synced", (r) => r.state === "synced");
    const service = await fleet.localService("part", "web-far");
    assert.ok(service);

    const stalledAt = Date.now();
    proxy.setRules({ stall: true });
    await waitForClusterRow(supervisor, "far", "stale", (r) => r.state === "stale");
    await fleet.waitForEndpoints("part", "web-far", isNotReady, 60_000);
    await fleet.waitForEndpoints("part", "web-federated", isNotReady, 60_000);
    const elapsed = Date.now() - stalledAt;
    assert.ok(elapsed >= STALE_AFTER_MS, `not ready after ${elapsed} ms, before --stale-after`);
    const kept = await fleet.localService("part", "web-far");
    assert.equal(kept && objectIdentity(kept), objectIdentity(service), "the mirror's Service is kept, untouched");

    proxy.setRules({});
    await waitForClusterRow(supervisor, "far", "synced again", (r) => r.state === "synced");
    await fleet.waitForEndpoints("part", "web-far", isReady, 60_000);
    await fleet.waitForEndpoints("part", "web-federated", isReady, 60_000);
  });
});
