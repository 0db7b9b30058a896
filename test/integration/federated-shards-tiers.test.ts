/**
 * Priority tiers of a fleet-wide Service across shards (SPEC §14 "Sharded"), end to end:
 * two `fleet-mirror run --leader-elect --shards 2` processes, so each replica holds one
 * shard. `near` (priority 10) is on shard 1, `far` (priority 20) on shard 0, and
 * `tiers/web-federated` is owned by shard 0: the replica owning the Service hosts the
 * worse tier and the local member, the other one the better tier. A gateway "dies" by
 * losing its addresses and revives by getting them back; `--failback-delay` is 4 s.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1Endpoint, type V1EndpointSlice } from "@kubernetes/client-node";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import { federatedShardOf, shardOf } from "../../src/core/shards.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { fleetWideWrites, ShardReplicas, shortLeaseArgs } from "../helpers/shard-replicas.ts";

const TIMEOUT_MS = 90_000;
const SHARDS = 2;
const NS = "tiers";
const NAME = "web-federated";
const FAILBACK_DELAY_MS = 4_000;
const ARGS = [
  ...shortLeaseArgs(SHARDS),
  "--expected-replicas",
  "2",
  "--endpoints-api",
  "endpointslices",
  "--failback-delay",
  `${FAILBACK_DELAY_MS}ms`,
  "--max-threads",
  "1",
];
const IDENTITIES = ["replica-a", "replica-b"];
const GATEWAY = { namespace: "linkerd-multicluster", name: "linkerd-gateway" };
const GATEWAYS: Record<string, string> = { near: "198.18.1.1", far: "198.18.2.1" };
const MEMBER = { "mirror.linkerd.io/federated": "member" };
const SERVING = "mirror.linkerd.io/federated-serving-priority";
const STANDBY = "mirror.linkerd.io/federated-standby";

type Part = { standby: boolean; endpoints: string[] };

const podEndpoint = (ready: boolean): V1Endpoint => ({
  addresses: ["10.244.0.5"],
  conditions: { ready, serving: ready, terminating: false },
});

describe("priority tiers of a fleet-wide Service across two replicas (SPEC §14, sharded)", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let replicas: ShardReplicas;

  /** The part of `cluster`: whether it stands by, and its addresses with their readiness. */
  const partOf = (slices: Map<string, V1EndpointSlice>, cluster: string): Part => {
    const slice = slices.get(`${NAME}-${cluster}-ipv4`);
    return {
      standby: slice?.metadata?.annotations?.[STANDBY] === "true",
      endpoints: (slice?.endpoints ?? []).map((e) => `${e.addresses.join()}:${e.conditions?.ready}`),
    };
  };

  /** Waits until the Service states `serving` and each part matches `parts`. */
  async function waitForServing(serving: string, parts: Record<string, Part>): Promise<void> {
    await eventually(
      `priority ${serving} serving with parts ${JSON.stringify(parts)}`,
      async () => {
        const service = await fleet.localService(NS, NAME);
        if (service?.metadata?.annotations?.[SERVING] !== serving) return undefined;
        const list = await discovery.listNamespacedEndpointSlice({ namespace: NS });
        const slices = new Map(list.items.map((s) => [s.metadata?.name ?? "", s]));
        for (const [cluster, want] of Object.entries(parts))
          if (JSON.stringify(partOf(slices, cluster)) !== JSON.stringify(want)) return undefined;
        return true;
      },
      TIMEOUT_MS,
      100,
    );
  }

  /** Events of `reason` on the fleet-wide Service, each with its count. */
  async function events(reason: string): Promise<{ message: string; count: number }[]> {
    const list = await fleet.local.listNamespacedEvent({ namespace: NS });
    return list.items
      .filter((e) => e.involvedObject.name === NAME && e.reason === reason)
      .map((e) => ({ message: e.message ?? "", count: e.count ?? 1 }));
  }

  /** Each replica's count of switches in `direction` (its `/metrics`), by identity. */
  async function switches(direction: string): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const r of replicas.replicas) {
      const line = (await replicas.metrics(r))
        .split("\n")
        .find((l) => l.startsWith(`fleet_mirror_federated_switches_total{direction="${direction}"}`));
      counts[r.identity] = Number(line?.slice(line.lastIndexOf(" ") + 1) ?? 0);
    }
    return counts;
  }

  const setGateway = (cluster: string, alive: boolean) =>
    fleet.setGatewayIngress(cluster, alive ? [{ ip: GATEWAYS[cluster] ?? "" }] : [], GATEWAY);

  const NEAR_SERVES = {
    near: { standby: false, endpoints: ["198.18.1.1:true"] },
    far: { standby: true, endpoints: ["198.18.2.1:false"] },
  };

  before(async () => {
    // The fixture's premise: the two tiers on different shards, the Service owned by far's.
    assert.equal(shardOf("near", SHARDS), 1);
    assert.equal(shardOf("far", SHARDS), 0);
    assert.equal(federatedShardOf(NS, NAME, SHARDS), 0);
    fleet = await Fleet.start(["near", "far"]);
    const admin = fleet.kubeConfig("local");
    await applyRbacYaml(admin, new URL("../../deploy/sharded/rbac-shards.yaml", import.meta.url).pathname);
    discovery = admin.makeApiClient(DiscoveryV1Api);
    for (const cluster of ["near", "far"]) {
      await fleet.createGateway(cluster, { ...GATEWAY, ingress: [{ ip: GATEWAYS[cluster] ?? "" }] });
      await fleet.ensureNamespace(cluster, NS);
      await fleet.api(cluster).createNamespacedService({
        namespace: NS,
        body: {
          metadata: { name: "web", labels: MEMBER },
          spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
        },
      });
    }
    await fleet.register("near", { annotations: { "mirror.linkerd.io/priority": "10" } });
    await fleet.register("far", { annotations: { "mirror.linkerd.io/priority": "20" } });
    replicas = new ShardReplicas(fleet, ARGS, SHARDS, TIMEOUT_MS);
  });
  after(async () => {
    await replicas?.killAll();
    await fleet?.stop();
  });

  it("the better tier serves and the worse one, hosted by the other replica, stands by", async (t) => {
    await replicas.scenario(t, async () => {
      for (const id of IDENTITIES) await replicas.start(id);
      const holders = await replicas.settledHolders(IDENTITIES);
      assert.notEqual(holders[0], holders[1], "each replica holds one shard");
      await waitForServing("10", NEAR_SERVES);
    });
  });

  it("fails over at once when the better tier's gateway dies, decided once (one replica counts it)", async (t) => {
    await replicas.scenario(t, async () => {
      await setGateway("near", false);
      await waitForServing("20", {
        near: { standby: false, endpoints: [] },
        far: { standby: false, endpoints: ["198.18.2.1:true"] },
      });
      const found = await eventually("a FederatedFailover Event", async () => {
        const list = await events("FederatedFailover");
        return list.length > 0 ? list : undefined;
      });
      assert.deepEqual(
        found.map((e) => e.count),
        [1],
      );
      assert.match(found[0]?.message ?? "", /tiers up to priority 10 fell short of 1 ready endpoint/);
      const counted = await eventually("the failover counted", async () => {
        const counts = await switches("failover");
        return Object.values(counts).some((n) => n > 0) ? counts : undefined;
      });
      assert.deepEqual(Object.values(counted).sort(), [0, 1], "only the Service's owner counts the switch");
    });
  });

  it("fails back only after the better tier held its ready endpoints for the failback delay", async (t) => {
    await replicas.scenario(t, async () => {
      const revived = Date.now();
      await setGateway("near", true);
      await waitForServing("20", {
        near: { standby: false, endpoints: ["198.18.1.1:true"] },
        far: { standby: false, endpoints: ["198.18.2.1:true"] },
      });
      await waitForServing("10", NEAR_SERVES);
      const waited = Date.now() - revived;
      assert.ok(
        waited >= FAILBACK_DELAY_MS,
        `failed back after ${waited} ms, before the ${FAILBACK_DELAY_MS} ms delay`,
      );
      const found = await eventually("a FederatedFailback Event", async () => {
        const list = await events("FederatedFailback");
        return list.length > 0 ? list : undefined;
      });
      assert.match(found[0]?.message ?? "", /tiers up to priority 10 held 1 ready endpoint\(s\) for \d+s/);
    });
  });

  it("the local member is written by the Service's owner and serves first; both remote tiers stand by", async (t) => {
    await replicas.scenario(t, async () => {
      await fleet.ensureNamespace("local", NS);
      await fleet.local.createNamespacedService({
        namespace: NS,
        body: {
          metadata: { name: "web", labels: MEMBER },
          spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
        },
      });
      await discovery.createNamespacedEndpointSlice({
        namespace: NS,
        body: {
          metadata: { name: "web-own", labels: { "kubernetes.io/service-name": "web" } },
          addressType: "IPv4",
          endpoints: [podEndpoint(true)],
          ports: [{ name: "http", port: 80, protocol: "TCP" }],
        },
      });
      await waitForServing("0", {
        local: { standby: false, endpoints: ["10.244.0.5:true"] },
        near: { standby: true, endpoints: ["198.18.1.1:false"] },
        far: { standby: true, endpoints: ["198.18.2.1:false"] },
      });
      const service = await fleet.localService(NS, NAME);
      assert.equal(service?.metadata?.annotations?.["mirror.linkerd.io/federated-clusters"], "far,local,near");
      // The local endpoints not ready: the next tier (near, on the other replica) serves at once.
      const slice = await discovery.readNamespacedEndpointSlice({ namespace: NS, name: "web-own" });
      slice.endpoints = [podEndpoint(false)];
      await discovery.replaceNamespacedEndpointSlice({ namespace: NS, name: "web-own", body: slice });
      await waitForServing("10", {
        local: { standby: false, endpoints: ["10.244.0.5:false"] },
        near: { standby: false, endpoints: ["198.18.1.1:true"] },
        far: { standby: true, endpoints: ["198.18.2.1:false"] },
      });
    });
  });

  it("a restart of both replicas over the converged world writes no Service or slice", async (t) => {
    await replicas.scenario(t, async () => {
      await replicas.quiet(IDENTITIES);
      const before = await fleetWideWrites(fleet);
      for (const r of replicas.replicas) assert.equal(await r.process.stop("SIGTERM"), 0);
      for (const id of IDENTITIES) await replicas.start(id);
      await replicas.settledHolders(IDENTITIES);
      await replicas.quiet(IDENTITIES);
      await waitForServing("10", {
        local: { standby: false, endpoints: ["10.244.0.5:false"] },
        near: { standby: false, endpoints: ["198.18.1.1:true"] },
        far: { standby: true, endpoints: ["198.18.2.1:false"] },
      });
      assert.equal(await fleetWideWrites(fleet), before, "no Service or slice was written");
    });
  });
});
