/**
 * A fleet-wide Service across shards end to end (SPEC §11, DESIGN §3 "Across shards"):
 * three `fleet-mirror run --leader-elect --shards 6 --endpoints-api endpointslices`
 * processes, six clusters (one remote API server registered under six names), each
 * showing the same member Service. The replica holding the fleet-wide Service's shard
 * writes the Service; each cluster's part is written by its host; the union holds every
 * cluster; a rolling restart of a replica writes nothing; kill -9 of the owner moves its
 * shards and a cluster registered afterwards joins the union.
 *
 * Short timings (Lease 4 s, renew deadline 3 s, retry 500 ms), as shards.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import { federatedShardOf } from "../../src/core/shards.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { fleetWideWrites, type ShardReplica, ShardReplicas, shortLeaseArgs } from "../helpers/shard-replicas.ts";

const TIMEOUT_MS = 90_000;
const SHARDS = 6;
const NS = "shop";
const NAME = "fed-federated";
const ARGS = [...shortLeaseArgs(SHARDS), "--endpoints-api", "endpointslices", "--max-threads", "2"];
const CLUSTERS = Array.from({ length: 6 }, (_, i) => `m${i}`);
const OWNING_SHARD = federatedShardOf(NS, NAME, SHARDS);

describe("a fleet-wide Service across three replicas and six shards", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let set: ShardReplicas;
  const replicas = () => set.replicas;
  const start = (identity: string) => set.start(identity);
  const settledHolders = (identities: readonly string[]) => set.settledHolders(identities);
  const quiet = (identities: readonly string[]) => set.quiet(identities);

  const parts = async (): Promise<V1EndpointSlice[]> =>
    (await discovery.listNamespacedEndpointSlice({ namespace: NS, labelSelector: "mirror.linkerd.io/federated=true" }))
      .items;

  /** Waits until the Service lists `clusters` and each of them has its part, with its address, owned by the Service. */
  async function waitForUnion(clusters: readonly string[]): Promise<void> {
    const expected = [...clusters].sort().join(",");
    await eventually(
      `${NS}/${NAME} with the parts of ${expected}`,
      async () => {
        const service = await fleet.localService(NS, NAME);
        if (service?.metadata?.annotations?.["mirror.linkerd.io/federated-clusters"] !== expected) return undefined;
        const all = await parts();
        const complete = clusters.every((c) =>
          all.some(
            (s) =>
              s.metadata?.name === `${NAME}-${c}-ipv4` &&
              s.endpoints?.[0]?.addresses[0] === "198.18.0.10" &&
              s.metadata?.ownerReferences?.[0]?.uid === service.metadata?.uid,
          ),
        );
        return complete ? true : undefined;
      },
      TIMEOUT_MS,
      200,
    );
  }

  /** Waits until `replica` reports the fleet-wide Service (its writer's status, published every second) if and only if it owns it. */
  async function waitForReport(replica: ShardReplica, owner: boolean): Promise<void> {
    const expected = JSON.stringify(owner ? [`${NS}/${NAME}`] : []);
    await eventually(
      `${replica.identity} to report the fleet-wide Service only if it owns it (${owner})`,
      async () => {
        const keys = ((await set.status(replica)).writer?.federated ?? []).map((f) => f.key);
        return JSON.stringify(keys) === expected ? true : undefined;
      },
      TIMEOUT_MS,
      200,
    );
  }

  const writes = () => fleetWideWrites(fleet);
  const scenario = (t: TestContext, body: () => Promise<void>) => set.scenario(t, body);

  before(async () => {
    fleet = await Fleet.start(["east"]);
    const admin = fleet.kubeConfig("local");
    await applyRbacYaml(admin, fileURLToPath(new URL("../../deploy/sharded/rbac-shards.yaml", import.meta.url)));
    discovery = admin.makeApiClient(DiscoveryV1Api);
    // The member's gateway: the default one (no §2 annotations on the member).
    await fleet.createGateway("east", {
      namespace: "linkerd-multicluster",
      name: "linkerd-gateway",
      ingress: [{ ip: "198.18.0.10" }],
    });
    await fleet.ensureNamespace("east", NS);
    await fleet.api("east").createNamespacedService({
      namespace: NS,
      body: {
        metadata: { name: "fed", labels: { "mirror.linkerd.io/federated": "member" } },
        spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
      },
    });
    for (const cluster of CLUSTERS) await fleet.register("east", { clusterName: cluster });
    set = new ShardReplicas(fleet, ARGS, SHARDS, TIMEOUT_MS);
  });
  after(async () => {
    await set?.killAll();
    await fleet?.stop();
  });

  it("the holder of the Service's shard writes it and reports it; every cluster's part is written; the union holds all six", async (t) => {
    await scenario(t, async () => {
      for (const id of ["replica-a", "replica-b", "replica-c"]) await start(id);
      const holders = await settledHolders(["replica-a", "replica-b", "replica-c"]);
      await waitForUnion(CLUSTERS);
      await quiet(["replica-a", "replica-b", "replica-c"]);
      for (const replica of replicas()) await waitForReport(replica, holders[OWNING_SHARD] === replica.identity);
    });
  });

  it("a rolling restart of a replica that does not own the Service writes nothing", async (t) => {
    await scenario(t, async () => {
      const holders = await settledHolders(["replica-a", "replica-b", "replica-c"]);
      const other = replicas().find((r) => r.identity !== holders[OWNING_SHARD]);
      assert.ok(other);
      const before = await writes();
      assert.equal(await other.process.stop("SIGTERM"), 0);
      await settledHolders(
        replicas()
          .filter((r) => r !== other)
          .map((r) => r.identity),
      );
      await start(other.identity);
      await settledHolders(["replica-a", "replica-b", "replica-c"]);
      await quiet(["replica-a", "replica-b", "replica-c"]);
      await waitForUnion(CLUSTERS);
      assert.equal(await writes(), before, "no Service or slice was written");
    });
  });

  it("kill -9 of the owner moves its shards; a cluster registered afterwards joins the union", async (t) => {
    await scenario(t, async () => {
      const holders = await settledHolders(["replica-a", "replica-b", "replica-c"]);
      const owner = replicas().find((r) => r.identity === holders[OWNING_SHARD]);
      assert.ok(owner);
      await owner.process.stop("SIGKILL");
      const survivors = replicas()
        .filter((r) => r !== owner)
        .map((r) => r.identity);
      const after = await settledHolders(survivors);
      assert.notEqual(after[OWNING_SHARD], owner.identity);
      await fleet.register("east", { clusterName: "m6" });
      await waitForUnion([...CLUSTERS, "m6"]);
      await quiet(survivors);
      for (const replica of replicas().filter((r) => r !== owner))
        await waitForReport(replica, after[OWNING_SHARD] === replica.identity);
    });
  });
});
