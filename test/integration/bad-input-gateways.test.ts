/**
 * End to end on real API servers: bad input for gateway health (SPEC §10) and fleet-wide
 * Services (SPEC §11), the part of the bad-input table (docs/DESIGN.md "Bad input: what
 * each gets") that needs probed gateways and EndpointSlices; the other cases are in
 * bad-input.test.ts, which runs in `endpoints` mode. Every case is one test and asserts
 * a specific report (log line, Event, metric, status) and that the healthy cluster goes
 * on mirroring; the last test checks that the healthy cluster was never written.
 *
 * Remote `west` backs the healthy cluster `healthy`, remote `east` the cluster `hostile`.
 * Both probe their gateways at addresses of a /28 of 203.0.113.0/24 made local for the
 * test (sandbox/local-addresses.ts): no probe ever leaves the machine.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import { claimLocal, type LocalRoute } from "../../sandbox/local-addresses.ts";
import { ProbeServer } from "../../sandbox/probe-server.ts";
import { PROBE_PATH, PROBE_PERIOD } from "../../src/core/probe-spec.ts";
import { createLogger } from "../../src/log.ts";
import type { ClusterRow } from "../../src/status/fleet-view.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually, objectIdentity, statusCode } from "../helpers/kube.ts";
import { supervisorMetrics } from "../helpers/metrics.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

/** /28s this file may claim; the first one nobody holds is used (a run killed earlier may hold one). */
const PREFIXES = ["203.0.113.16/28", "203.0.113.32/28", "203.0.113.48/28"];
const MEMBER = { "mirror.linkerd.io/federated": "member" };

describe("bad input for gateway health and fleet-wide Services", () => {
  let route: LocalRoute;
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let controller: Supervisor;
  let scratch: string;
  let logFile: string;
  /** Probe servers: the healthy gateway's, the hung one's, the one with nonsense annotations. */
  let healthyProbe: ProbeServer;
  let hungProbe: ProbeServer;
  let oddProbe: ProbeServer;
  let healthyBefore: Record<string, string>;

  const ip = (n: number): string => {
    const [a, b, c, d] = route.range.split("/")[0]?.split(".").map(Number) ?? [];
    return `${a}.${b}.${c}.${(d ?? 0) + n}`;
  };

  /** A LoadBalancer gateway with an `mc-probe` port answered by `probe`. */
  async function probedGateway(
    cluster: string,
    name: string,
    probe: ProbeServer,
    annotations: Record<string, string>,
  ): Promise<void> {
    await fleet.ensureNamespace(cluster, "gateway");
    await fleet.api(cluster).createNamespacedService({
      namespace: "gateway",
      body: {
        metadata: { name, annotations },
        spec: {
          type: "LoadBalancer",
          ports: [
            { name: "incoming-port", port: 4143, protocol: "TCP" },
            { name: "mc-probe", port: probe.port, protocol: "TCP" },
          ],
        },
      },
    });
    await fleet.setGatewayIngress(cluster, [{ ip: probe.address }], { namespace: "gateway", name });
  }

  function clusterRow(cluster: string): ClusterRow | undefined {
    return controller.status().clusters.find((r) => r.cluster === cluster);
  }

  const gatewayOf = (cluster: string, key: string) => clusterRow(cluster)?.gateways.find((g) => g.key === key);
  const probeCounters = (cluster: string, key: string) =>
    controller.counters().clusters.get(cluster)?.gatewayProbes[key];

  const metrics = (): Promise<string> => supervisorMetrics(controller);

  function logLines(): { level: number; msg: string; [field: string]: unknown }[] {
    let text = "";
    try {
      text = readFileSync(logFile, "utf8");
    } catch {
      return [];
    }
    return text.split("\n").flatMap((line) => {
      try {
        return line.trim() ? [JSON.parse(line)] : [];
      } catch {
        return []; // a line cut by a concurrent write
      }
    });
  }

  async function slice(namespace: string, name: string): Promise<V1EndpointSlice | undefined> {
    try {
      return await discovery.readNamespacedEndpointSlice({ namespace, name });
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  const readiness = (s: V1EndpointSlice | undefined): string[] =>
    (s?.endpoints ?? []).map((e) => `${e.addresses.join()}=${e.conditions?.ready === false ? "not-ready" : "ready"}`);

  /** uid and resourceVersion of the healthy cluster's mirror, its slice and its probe's gateway. */
  async function healthyIdentities(): Promise<Record<string, string>> {
    const service = await fleet.local.readNamespacedService({ namespace: "steady", name: "web-healthy" });
    const ipv4 = await slice("steady", "web-healthy-ipv4");
    return { service: objectIdentity(service), slice: ipv4 ? objectIdentity(ipv4) : "missing" };
  }

  /** The healthy cluster still mirrors: a Service exported now shows up locally. */
  async function healthyStillMirrors(tag: string): Promise<void> {
    await fleet.createService("west", "steady", `probe-${tag}`);
    await fleet.waitForMirror("steady", `probe-${tag}-healthy`);
    assert.equal(clusterRow("healthy")?.state, "synced");
  }

  before(async () => {
    const claimed = await claimLocal(PREFIXES);
    assert.ok(claimed, `one of ${PREFIXES.join(", ")} can be made local`);
    route = claimed;
    scratch = mkdtempSync(join(tmpdir(), "fleet-mirror-bad-gateways-"));
    logFile = join(scratch, "controller.log");
    healthyProbe = await ProbeServer.start(ip(1));
    hungProbe = await ProbeServer.start(ip(2));
    oddProbe = await ProbeServer.start(ip(3));
    fleet = await Fleet.start(["east", "west"]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    await probedGateway("west", "gateway", healthyProbe, { [PROBE_PERIOD]: "1" });
    await probedGateway("east", "gateway", hungProbe, { [PROBE_PERIOD]: "1" });
    for (const cluster of ["east", "west"])
      await fleet.createGateway(cluster, {
        namespace: "linkerd-multicluster",
        name: "linkerd-gateway",
        ingress: [{ ip: cluster === "east" ? "198.18.3.1" : "198.18.4.1" }],
      });
    await fleet.createService("west", "steady", "web");
    await fleet.register("west", { clusterName: "healthy" });
    await fleet.register("east", { clusterName: "hostile" });
    controller = new Supervisor({
      config: fleet.config({ logLevel: "info", logFile, endpointsApi: "endpointslices" }),
      localConnection: fleet.controllerConnection(),
      logger: createLogger("info", { actor: "supervisor" }, logFile),
    });
    controller.start();
    await eventually("the healthy mirror's slice with its gateway ready", async () =>
      readiness(await slice("steady", "web-healthy-ipv4")).join() === `${ip(1)}=ready` ? true : undefined,
    );
    healthyBefore = await healthyIdentities();
  });

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    for (const probe of [healthyProbe, hungProbe, oddProbe]) await probe?.stop();
    await route?.release();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  const cases: { name: string; run: () => Promise<void> }[] = [
    {
      name: "a gateway port named mc-probe with number 0 is refused by the remote API server (422), so nothing is probed",
      run: async () => {
        await fleet.ensureNamespace("east", "gateway");
        await assert.rejects(
          fleet.api("east").createNamespacedService({
            namespace: "gateway",
            body: {
              metadata: { name: "port-zero" },
              spec: {
                type: "LoadBalancer",
                ports: [
                  { name: "incoming-port", port: 4143, protocol: "TCP" },
                  { name: "mc-probe", port: 0, protocol: "TCP" },
                ],
              },
            },
          }),
          (error: unknown) => {
            assert.equal(statusCode(error), 422);
            assert.match(String((error as { body?: unknown }).body ?? error), /ports\[1\]\.port.*between 1 and 65535/);
            return true;
          },
        );
      },
    },
    {
      name: "nonsense probe annotations get a log line, the gateway's status, one InvalidProbeConfig Event each and the metric, and the defaults are probed",
      run: async () => {
        await probedGateway("east", "odd", oddProbe, { [PROBE_PERIOD]: "abc", [PROBE_PATH]: "ready" });
        await fleet.createService("east", "odd", "web", { gateway: { namespace: "gateway", name: "odd" } });
        const gateway = await eventually("the odd gateway's problems in the status", () => {
          const g = gatewayOf("hostile", "gateway/odd");
          return g?.probeProblems?.length === 2 ? g : undefined;
        });
        assert.equal(gateway.probe?.periodSeconds, 3, "the default period");
        assert.equal(gateway.probe?.path, "/ready", "the default path");
        const events = await eventually("two InvalidProbeConfig Events", async () => {
          const found = await fleet.secretEvents("cluster-credentials-hostile", "InvalidProbeConfig");
          return found.length === 2 ? found : undefined;
        });
        const messages = events.map((e) => e.message ?? "").sort();
        assert.match(
          messages[0] ?? "",
          /^cluster hostile: gateway gateway\/odd: annotation mirror\.linkerd\.io\/probe-path "ready" does not start with \/: using \/ready$/,
        );
        assert.match(
          messages[1] ?? "",
          /^cluster hostile: gateway gateway\/odd: annotation mirror\.linkerd\.io\/probe-period "abc" is not a whole number of seconds in 1-3600: using 3$/,
        );
        for (const e of events) assert.equal(e.type, "Warning");
        assert.match(
          await metrics(),
          /^fleet_mirror_gateway_probe_config_invalid\{cluster="hostile",gateway="gateway\/odd"\} 2$/m,
        );
        const line = logLines().find((l) => l.gateway === "gateway/odd" && Array.isArray(l.problems));
        assert.equal(line?.level, 40, "logged as a warning");
        await eventually("the odd gateway probed at /ready", () =>
          (oddProbe.requests.get("/ready") ?? 0) >= 2 ? true : undefined,
        );
        // Probes and statuses went on since (2 probes at 3 s): no Event was sent again.
        assert.equal((await fleet.secretEvents("cluster-credentials-hostile", "InvalidProbeConfig")).length, 2);
        assert.deepEqual(readiness(await slice("odd", "web-hostile-ipv4")), [`${ip(3)}=ready`]);
      },
    },
    {
      name: "a gateway whose probe hangs forever turns not ready after 3 timeouts while the healthy cluster's probes and mirrors go on",
      run: async () => {
        await fleet.createService("east", "slow", "web");
        await eventually("the hung gateway's address ready first", async () =>
          readiness(await slice("slow", "web-hostile-ipv4")).join() === `${ip(2)}=ready` ? true : undefined,
        );
        const healthyAnswered = probeCounters("healthy", "gateway/gateway")?.latency.count ?? 0;
        hungProbe.mode = "hang";
        await eventually("the hung gateway's address not ready", async () =>
          readiness(await slice("slow", "web-hostile-ipv4")).join() === `${ip(2)}=not-ready` ? true : undefined,
        );
        // Counters reach the main thread in the actor's status, once a second.
        await eventually("3 timeouts of the hung gateway", () =>
          (probeCounters("hostile", "gateway/gateway")?.failures["timeout"] ?? 0) >= 3 ? true : undefined,
        );
        // Meanwhile the healthy gateway was probed every second, and answered each time.
        await eventually("3 more answered probes of the healthy gateway", () =>
          (probeCounters("healthy", "gateway/gateway")?.latency.count ?? 0) - healthyAnswered >= 3 ? true : undefined,
        );
        assert.equal(probeCounters("healthy", "gateway/gateway")?.failures["timeout"], 0);
        await healthyStillMirrors("during-hang");
        hungProbe.mode = "ok";
        await eventually("the hung gateway's address ready again", async () =>
          readiness(await slice("slow", "web-hostile-ipv4")).join() === `${ip(2)}=ready` ? true : undefined,
        );
      },
    },
    {
      name: "a user's EndpointSlice named like a fleet-wide slice is never touched: the fleet-wide Service is not written and the conflict is reported",
      run: async () => {
        await fleet.ensureNamespace("local", "fleet");
        const users = await discovery.createNamespacedEndpointSlice({
          namespace: "fleet",
          body: {
            metadata: { name: "web-federated-hostile-ipv4", labels: { app: "users" } },
            addressType: "IPv4",
            endpoints: [{ addresses: ["10.9.9.9"] }],
            ports: [{ name: "http", port: 80, protocol: "TCP" }],
          },
        });
        // The conflicting member first: a fleet-wide Service created by the healthy member
        // alone would hold no conflict yet (the user's slice is only in the hostile part).
        const member = async (remote: string, cluster: string) => {
          await fleet.ensureNamespace(remote, "fleet");
          await fleet.api(remote).createNamespacedService({
            namespace: "fleet",
            body: { metadata: { name: "web", labels: MEMBER }, spec: { ports: [{ name: "http", port: 80 }] } },
          });
          const blocked = await eventually(`the conflict on ${cluster}'s entry`, () =>
            controller.status().writer?.clusters[cluster]?.blocked.find((b) => b.key === "fleet/web-federated"),
          );
          assert.equal(blocked.reason, "user-owned");
          assert.match(blocked.message, /EndpointSlice fleet\/web-federated-hostile-ipv4 exists/);
        };
        await member("east", "hostile");
        await member("west", "healthy");
        await eventually("a FederatedNameConflict Event", async () => {
          const events = await fleet.local.listNamespacedEvent({ namespace: "fleet" });
          return events.items.find((e) => e.reason === "FederatedNameConflict" && e.type === "Warning");
        });
        assert.match(await metrics(), /^fleet_mirror_conflicts [1-9]/m);
        await waitForWriterIdle(controller, { reports: 2 });
        assert.equal(await fleet.localService("fleet", "web-federated"), undefined, "not written");
        const now = await slice("fleet", "web-federated-hostile-ipv4");
        assert.equal(now && objectIdentity(now), objectIdentity(users), "the user's slice was never written");
        // The name freed, the fleet-wide Service follows (the blocked key is rechecked).
        await discovery.deleteNamespacedEndpointSlice({ namespace: "fleet", name: "web-federated-hostile-ipv4" });
        await fleet.waitForMirror(
          "fleet",
          "web-federated",
          (s) => s.metadata?.annotations?.["mirror.linkerd.io/federated-clusters"] === "healthy,hostile",
        );
        await eventually("both member clusters' slices", async () =>
          (await slice("fleet", "web-federated-hostile-ipv4")) && (await slice("fleet", "web-federated-healthy-ipv4"))
            ? true
            : undefined,
        );
      },
    },
  ];

  for (const [index, c] of cases.entries()) {
    it(c.name, async () => {
      await c.run();
      await healthyStillMirrors(String(index));
    });
  }

  it("never wrote the healthy cluster's mirror or slice, nor restarted or failed its probes", async () => {
    assert.deepEqual(await healthyIdentities(), healthyBefore);
    const row = clusterRow("healthy");
    assert.equal(row?.state, "synced");
    assert.equal(row?.restarts, 0);
    const failures = probeCounters("healthy", "gateway/gateway")?.failures ?? {};
    assert.deepEqual(
      Object.values(failures).filter((n) => n > 0),
      [],
      "the healthy gateway never failed a probe",
    );
    assert.equal(gatewayOf("healthy", "gateway/gateway")?.probeProblems, undefined);
  });
});
