/**
 * Gateway health end to end (SPEC §10), on real API servers and real HTTP probe servers
 * at 198.51.100.x, a documentation range made local to this machine for the test (no
 * probe ever leaves the host). Each remote cluster's gateway has an `mc-probe` port and
 * probe-period 1 s.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { V1Endpoints } from "@kubernetes/client-node";
import { type LocalRoute, makeLocal } from "../../sandbox/local-addresses.ts";
import { ProbeServer } from "../../sandbox/probe-server.ts";
import { PROBE_PATH, PROBE_PERIOD } from "../../src/core/probe-spec.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const EAST_IP = "198.51.100.11";
const WEST_IP = "198.51.100.21";
const BAD_IP = "198.51.100.31";
const PROBE_PORT = 4191;

const ready = (ep: V1Endpoints): string[] => (ep.subsets?.[0]?.addresses ?? []).map((a) => a.ip).sort();
const notReady = (ep: V1Endpoints): string[] => (ep.subsets?.[0]?.notReadyAddresses ?? []).map((a) => a.ip).sort();
const same = (a: readonly string[], b: readonly string[]): boolean => JSON.stringify(a) === JSON.stringify(b);

describe("gateway health", () => {
  let route: LocalRoute;
  let fleet: Fleet;
  let controller: Supervisor;
  const servers = new Map<string, ProbeServer>();

  /** A probed gateway `gateway/gateway` in `cluster` at `ip`, with extra annotations. */
  async function probedGateway(cluster: string, ip: string, annotations: Record<string, string> = {}): Promise<void> {
    await fleet.createGateway(cluster, {});
    await fleet.patchService(cluster, "gateway", "gateway", (svc) => {
      svc.metadata = { ...svc.metadata, annotations: { ...svc.metadata?.annotations, ...annotations } };
      svc.spec?.ports?.push({ name: "mc-probe", port: PROBE_PORT, protocol: "TCP" });
    });
    await fleet.setGatewayIngress(cluster, [{ ip }]);
  }

  /** Gateway `gateway/gateway` of `cluster` as the controller's status shows it. */
  function gatewayStatus(cluster: string) {
    return controller
      .status()
      .clusters.find((c) => c.cluster === cluster)
      ?.gateways.find((g) => g.key === "gateway/gateway");
  }

  /** The cluster's probe counters for its gateway (never going down). */
  function probeCounters(cluster: string) {
    return controller.counters().clusters.get(cluster)?.gatewayProbes["gateway/gateway"];
  }

  /**
   * Waits until `cluster`'s `reason` failures have grown by at least `n` since `before`
   * (counters reach the main thread in the actor's status, once a second).
   */
  async function failuresGrow(cluster: string, reason: string, before: number, n: number): Promise<void> {
    await eventually(`${n} more ${reason} failures of ${cluster}'s gateway`, () =>
      (probeCounters(cluster)?.failures[reason] ?? 0) - before >= n ? true : undefined,
    );
  }

  /** Endpoints writes the local writer made so far (any verb and result). */
  function endpointsWrites(): number {
    let n = 0;
    for (const [key, count] of Object.entries(controller.counters().writer.writes))
      if (/^[^/]+\/Endpoints\//.test(key)) n += count;
    return n;
  }

  const endpoints = (cluster: string, check: (ep: V1Endpoints) => boolean) =>
    fleet.waitForEndpoints("health", `web-${cluster}`, check, 30_000);

  before(async () => {
    route = await makeLocal("198.51.100.0/24");
    for (const ip of [EAST_IP, WEST_IP, BAD_IP]) servers.set(ip, await ProbeServer.start(ip, PROBE_PORT));
    fleet = await Fleet.start(["east", "west", "bad"]);
    await probedGateway("east", EAST_IP, { [PROBE_PERIOD]: "1" });
    await probedGateway("west", WEST_IP, { [PROBE_PERIOD]: "1", [PROBE_PATH]: "/live" });
    // Nonsense annotations: reported, and the defaults are used (3 s, /ready).
    await probedGateway("bad", BAD_IP, { [PROBE_PERIOD]: "-1", [PROBE_PATH]: "ready" });
    for (const cluster of ["east", "west", "bad"]) {
      await fleet.createService(cluster, "health", "web");
      await fleet.register(cluster);
    }
    controller = fleet.startInProcess();
    await eventually("every cluster synced", () => {
      const states = controller.status().clusters.map((c) => c.state);
      return controller.writerReady && states.length === 3 && states.every((s) => s === "synced") ? true : undefined;
    });
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    for (const server of servers.values()) await server.stop();
    await route?.release();
  });

  const server = (ip: string): ProbeServer => servers.get(ip) as ProbeServer;

  it("probes each gateway at its mc-probe port and path; a 2xx gateway's address is ready", async () => {
    await endpoints("east", (ep) => same(ready(ep), [EAST_IP]) && notReady(ep).length === 0);
    await endpoints("west", (ep) => same(ready(ep), [WEST_IP]) && notReady(ep).length === 0);
    await eventually("both gateways probed at their paths", () =>
      (server(EAST_IP).requests.get("/ready") ?? 0) > 0 && (server(WEST_IP).requests.get("/live") ?? 0) > 0
        ? true
        : undefined,
    );
    const status = await eventually("east's probe in the status", () => gatewayStatus("east")?.probe);
    assert.deepEqual(
      { ...status, lastFailure: undefined },
      {
        port: PROBE_PORT,
        path: "/ready",
        periodSeconds: 1,
        alive: 1,
        dead: 0,
        deadAddresses: [],
        lastFailure: undefined,
      },
    );
    await eventually("answered probes have a latency", () =>
      (probeCounters("east")?.latency.count ?? 0) > 0 ? true : undefined,
    );
  });

  it("reports nonsense probe annotations and probes with the defaults instead", async () => {
    const gateway = await eventually("bad's probe problems in the status", () =>
      gatewayStatus("bad")?.probeProblems?.length === 2 ? gatewayStatus("bad") : undefined,
    );
    assert.match(gateway?.probeProblems?.[0] ?? "", /probe-period "-1" .*using 3/);
    assert.match(gateway?.probeProblems?.[1] ?? "", /probe-path "ready" does not start with \/: using \/ready/);
    assert.equal(gateway?.probe?.periodSeconds, 3);
    assert.equal(gateway?.probe?.path, "/ready");
    await eventually("bad's gateway probed at /ready", () =>
      (server(BAD_IP).requests.get("/ready") ?? 0) > 0 ? true : undefined,
    );
    await endpoints("bad", (ep) => same(ready(ep), [BAD_IP]));
  });

  it("marks an address not ready after 3 failed probes with one write, and writes nothing for probes that confirm it", async () => {
    const westBefore = await fleet.local.readNamespacedEndpoints({ namespace: "health", name: "web-west" });
    await waitForWriterIdle(controller);
    const writesBefore = endpointsWrites();
    const failuresBefore = probeCounters("east")?.failures["status"] ?? 0;
    server(EAST_IP).mode = "unavailable";
    const dead = await endpoints("east", (ep) => same(notReady(ep), [EAST_IP]));
    assert.deepEqual(ready(dead), [], "the dead address is no longer ready");
    await failuresGrow("east", "status", failuresBefore, 3);
    await waitForWriterIdle(controller);
    assert.equal(endpointsWrites() - writesBefore, 1, "one write for the change");
    // Three more failed probes confirm the state: nothing is sent, nothing is written.
    await failuresGrow("east", "status", probeCounters("east")?.failures["status"] ?? 0, 3);
    await waitForWriterIdle(controller, { reports: 2 });
    assert.equal(endpointsWrites() - writesBefore, 1, "no write for probes that confirm the state");
    const status = gatewayStatus("east")?.probe;
    assert.deepEqual([status?.alive, status?.dead, status?.deadAddresses], [0, 1, [EAST_IP]]);
    assert.match(status?.lastFailure ?? "", /HTTP 503/);
    const westAfter = await fleet.local.readNamespacedEndpoints({ namespace: "health", name: "web-west" });
    assert.equal(westAfter.metadata?.resourceVersion, westBefore.metadata?.resourceVersion, "west untouched");

    server(EAST_IP).mode = "ok";
    await endpoints("east", (ep) => same(ready(ep), [EAST_IP]) && notReady(ep).length === 0);
    await waitForWriterIdle(controller);
    assert.equal(endpointsWrites() - writesBefore, 2, "one more write when it is alive again");
  });

  it("counts a probe that is accepted and never answered as a timeout, and leaves the other clusters' probes and mirrors alone", async () => {
    const westBefore = await fleet.local.readNamespacedEndpoints({ namespace: "health", name: "web-west" });
    const westProbes = probeCounters("west")?.latency.count ?? 0;
    const timeoutsBefore = probeCounters("east")?.failures["timeout"] ?? 0;
    server(EAST_IP).mode = "hang";
    await endpoints("east", (ep) => same(notReady(ep), [EAST_IP]));
    await failuresGrow("east", "timeout", timeoutsBefore, 3);
    // West went on probing at its own pace meanwhile (1 s), answered every time.
    await eventually("west's probes go on", () =>
      (probeCounters("west")?.latency.count ?? 0) - westProbes >= 3 ? true : undefined,
    );
    assert.equal(probeCounters("west")?.failures["timeout"], 0);
    const westAfter = await fleet.local.readNamespacedEndpoints({ namespace: "health", name: "web-west" });
    assert.equal(westAfter.metadata?.resourceVersion, westBefore.metadata?.resourceVersion, "west untouched");
    server(EAST_IP).mode = "ok";
    await endpoints("east", (ep) => same(ready(ep), [EAST_IP]));
  });

  it("counts refused connections when the probe server is gone, and is ready again once it is back", async () => {
    const refusedBefore = probeCounters("east")?.failures["refused"] ?? 0;
    await server(EAST_IP).stop();
    await endpoints("east", (ep) => same(notReady(ep), [EAST_IP]));
    await failuresGrow("east", "refused", refusedBefore, 3);
    await server(EAST_IP).restart();
    await endpoints("east", (ep) => same(ready(ep), [EAST_IP]));
  });

  it("stops probing a gateway whose mc-probe port is removed: its addresses count alive", async () => {
    server(EAST_IP).mode = "unavailable";
    await endpoints("east", (ep) => same(notReady(ep), [EAST_IP]));
    await fleet.patchService("east", "gateway", "gateway", (svc) => {
      if (svc.spec?.ports) svc.spec.ports = svc.spec.ports.filter((p) => p.name !== "mc-probe");
    });
    await endpoints("east", (ep) => same(ready(ep), [EAST_IP]) && notReady(ep).length === 0);
    await eventually("east's gateway no longer probed", () => (gatewayStatus("east")?.probe ? undefined : true));
    const received = server(EAST_IP).received;
    const failures = probeCounters("east")?.failures["status"] ?? 0;
    // Two west probes (1 s each) later, east has received none.
    const westProbes = (probeCounters("west")?.latency.count ?? 0) + 2;
    await eventually("two more west probes", () =>
      (probeCounters("west")?.latency.count ?? 0) >= westProbes ? true : undefined,
    );
    assert.equal(server(EAST_IP).received, received, "no probe after the port was removed");
    assert.equal(probeCounters("east")?.failures["status"], failures, "its counters stay, and do not go back");
  });
});
