/**
 * End to end on real API servers: priority tiers of a fleet-wide Service (SPEC §14).
 * east (priority 10) and west (priority 20) are members of `tiers/web`; a gateway
 * "dies" by losing its addresses (its member then has no ready endpoint, as with every
 * address dead, §10) and revives by getting them back. `--failback-delay` is 4 s here.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const GATEWAYS: Record<string, string> = { east: "198.18.1.1", west: "198.18.2.1" };
const GATEWAY = { namespace: "linkerd-multicluster", name: "linkerd-gateway" };
const SERVING = "mirror.linkerd.io/federated-serving-priority";
const STANDBY = "mirror.linkerd.io/federated-standby";
const FAILBACK_DELAY_MS = 4_000;

describe("priority tiers of fleet-wide Services (SPEC §14)", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let controller: Supervisor | undefined;

  async function start(): Promise<Supervisor> {
    const started = fleet.startInProcess({ endpointsApi: "endpointslices", failbackDelayMs: FAILBACK_DELAY_MS });
    controller = started;
    await eventually("the controller synced", () =>
      started.writerReady &&
      ["east", "west"].every((name) =>
        started.status().clusters.some((c) => c.cluster === name && c.state === "synced"),
      )
        ? true
        : undefined,
    );
    return started;
  }

  /** The part of `cluster`: whether it stands by, and its addresses with their readiness. */
  const partOf = (slices: Map<string, V1EndpointSlice>, cluster: string) => {
    const slice = slices.get(`web-federated-${cluster}-ipv4`);
    return {
      standby: slice?.metadata?.annotations?.[STANDBY] === "true",
      endpoints: (slice?.endpoints ?? []).map((e) => `${e.addresses.join()}:${e.conditions?.ready}`),
    };
  };

  /** Waits until the Service states `serving` and each part matches `parts`; returns the slices. */
  async function waitForServing(
    serving: string,
    parts: Record<string, { standby: boolean; endpoints: string[] }>,
  ): Promise<Map<string, V1EndpointSlice>> {
    return eventually(`priority ${serving} serving with parts ${JSON.stringify(parts)}`, async () => {
      const service = await fleet.localService("tiers", "web-federated");
      if (service?.metadata?.annotations?.[SERVING] !== serving) return undefined;
      const list = await discovery.listNamespacedEndpointSlice({ namespace: "tiers" });
      const slices = new Map(list.items.map((s) => [s.metadata?.name ?? "", s]));
      for (const [cluster, want] of Object.entries(parts))
        if (JSON.stringify(partOf(slices, cluster)) !== JSON.stringify(want)) return undefined;
      return slices;
    });
  }

  async function events(reason: string): Promise<string[]> {
    const list = await fleet.local.listNamespacedEvent({ namespace: "tiers" });
    return list.items
      .filter((e) => e.involvedObject.name === "web-federated" && e.reason === reason)
      .map((e) => e.message ?? "");
  }

  const switches = (direction: string) => controller?.counters().writer.tierSwitches[direction] ?? 0;
  const setGateway = (cluster: string, alive: boolean) =>
    fleet.setGatewayIngress(cluster, alive ? [{ ip: GATEWAYS[cluster] ?? "" }] : [], GATEWAY);

  const EAST_SERVES = {
    east: { standby: false, endpoints: ["198.18.1.1:true"] },
    west: { standby: true, endpoints: ["198.18.2.1:false"] },
  };
  const WEST_SERVES = {
    east: { standby: false, endpoints: [] },
    west: { standby: false, endpoints: ["198.18.2.1:true"] },
  };
  /** West serving, east alive again and serving with it until it has held for the failback delay. */
  const BOTH_READY = {
    east: { standby: false, endpoints: ["198.18.1.1:true"] },
    west: { standby: false, endpoints: ["198.18.2.1:true"] },
  };

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    for (const cluster of ["east", "west"]) {
      await fleet.createGateway(cluster, { ...GATEWAY, ingress: [{ ip: GATEWAYS[cluster] ?? "" }] });
      await fleet.ensureNamespace(cluster, "tiers");
      await fleet.api(cluster).createNamespacedService({
        namespace: "tiers",
        body: {
          metadata: { name: "web", labels: { "mirror.linkerd.io/federated": "member" } },
          spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
        },
      });
    }
    await fleet.register("east", { annotations: { "mirror.linkerd.io/priority": "10" } });
    await fleet.register("west", { annotations: { "mirror.linkerd.io/priority": "20" } });
    await start();
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("writes only the best tier's endpoints ready; the other tier's part stands by, not ready", async () => {
    await waitForServing("10", EAST_SERVES);
    const tiers = await eventually(
      "the tiers in status",
      () => controller?.status().writer?.federated?.find((f) => f.key === "tiers/web-federated")?.tiers,
    );
    assert.deepEqual(tiers, [
      { priority: 10, ready: 1, serving: true },
      { priority: 20, ready: 1, serving: false },
    ]);
  });

  it("fails over to the next tier at once when the best tier's gateways die, with a FederatedFailover Event", async () => {
    const before = switches("failover");
    await setGateway("east", false);
    await waitForServing("20", WEST_SERVES);
    // Counters reach the main thread with the writer's status, once a second.
    await eventually("one failover counted", () => (switches("failover") === before + 1 ? true : undefined));
    const messages = await eventually("a FederatedFailover Event", async () => {
      const found = await events("FederatedFailover");
      return found.length > 0 ? found : undefined;
    });
    assert.match(messages[0] ?? "", /tiers up to priority 10 fell short of 1 ready endpoint/);
  });

  it("does not fail back while the better tier's gateway flaps, though it flaps for longer than the failback delay", async () => {
    const failbacks = switches("failback");
    // Each flap waits until the writer has written it (east's part ready, or empty), so no
    // death goes unseen; the flapping goes on for twice the delay, so a wait that a death
    // did not start over would ripen in it. It ends on a death.
    const started = Date.now();
    let alive = false;
    while (alive || Date.now() - started < 2 * FAILBACK_DELAY_MS) {
      alive = !alive;
      await setGateway("east", alive);
      await waitForServing("20", alive ? BOTH_READY : WEST_SERVES);
    }
    // A writer report made after the last flap was written carries the switch counters.
    if (controller) await waitForWriterIdle(controller);
    assert.equal(switches("failback"), failbacks);
  });

  it("fails back only after the better tier held its ready endpoints for the failback delay, with a FederatedFailback Event", async () => {
    const revived = Date.now();
    await setGateway("east", true);
    await waitForServing("20", BOTH_READY);
    await waitForServing("10", EAST_SERVES);
    const waited = Date.now() - revived;
    assert.ok(waited >= FAILBACK_DELAY_MS, `failed back after ${waited} ms, before the ${FAILBACK_DELAY_MS} ms delay`);
    const messages = await eventually("a FederatedFailback Event", async () => {
      const found = await events("FederatedFailback");
      return found.length > 0 ? found : undefined;
    });
    assert.match(messages[0] ?? "", /tiers up to priority 10 held 1 ready endpoint\(s\) for \d+s/);
  });

  it("a restart over the converged tiers writes nothing", async () => {
    const identities = async () => {
      const list = await discovery.listNamespacedEndpointSlice({ namespace: "tiers" });
      const service = await fleet.localService("tiers", "web-federated");
      return [service, ...list.items].map((o) => `${o?.metadata?.name}@${o?.metadata?.resourceVersion}`).sort();
    };
    const converged = await identities();
    await controller?.stop();
    const restarted = await start();
    await waitForWriterIdle(restarted, { reports: 2 });
    assert.deepEqual(await identities(), converged);
    await waitForServing("10", EAST_SERVES);
  });

  it("reports an invalid priority annotation and counts the cluster at 100: the other tier serves at once", async () => {
    await fleet.editSecret("cluster-credentials-east", (secret) => {
      if (secret.metadata?.annotations) secret.metadata.annotations["mirror.linkerd.io/priority"] = "high";
    });
    const event = await fleet.waitForSecretEvent("cluster-credentials-east", "InvalidPriority");
    assert.match(
      event.message ?? "",
      /"high" is not a whole number from 0 to 1000; the cluster counts as priority 100/,
    );
    await waitForServing("20", {
      east: { standby: true, endpoints: ["198.18.1.1:false"] },
      west: { standby: false, endpoints: ["198.18.2.1:true"] },
    });
    const row = controller?.status().clusters.find((c) => c.cluster === "east");
    assert.deepEqual(
      row?.problems.map((p) => p.reason),
      ["invalid-priority"],
    );
  });
});
