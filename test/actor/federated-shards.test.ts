/**
 * Fleet-wide Services across shards (SPEC §11, DESIGN §3 "Across shards"): two writers
 * on one real local API server, each holding one of two shards, each fed the member of
 * the one cluster it hosts. The owner of the fleet-wide Service writes it; each host
 * writes its cluster's part; the owner learns the member it does not host from that part
 * (the local API), not through any channel between the writers.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import { systemClock } from "../../src/core/clock.ts";
import type { FederatedMember } from "../../src/core/federated.ts";
import { federatedShardOf, shardOf } from "../../src/core/shards.ts";
import type { ToWriterFromActor, WriterOptions } from "../../src/protocol/messages.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { apiRequests, FakeActorPort, type RunningWriter, startWriter, writerIdle } from "./writer-harness.ts";

const TIMEOUT_MS = 30_000;
const SHARDS = 2;
/** Writer A holds shard 0 (it hosts `east`), writer B shard 1 (it hosts `beta`). */
const A = [0];
const B = [1];
/** Registration order: east first, so east's ports win a conflict. */
const REGISTERED = ["east", "beta"];
/** Fleet-wide Services in this namespace are owned by shard 1 (writer B), which does not host east. */
const NS = "fed-b";
const SLICE_OPTIONS = { endpointsApi: "endpointslices", shards: SHARDS } as const;

let shardsSeq = 0;
/** Starts a writer of SHARDS shards holding `held` (as its replica's shard coordinator would tell it, `writer.shards`). */
async function startSharded(fleet: Fleet, held: readonly number[], options: Partial<WriterOptions> = SLICE_OPTIONS) {
  const writer = await startWriter(fleet, { ...options, shards: SHARDS });
  hold(writer, held);
  return writer;
}

/** The shards `writer` holds now, writable for an hour. */
function hold(writer: RunningWriter, held: readonly number[]): void {
  const writableUntil = systemClock.now() + 3_600_000;
  writer.actor.setShards(
    ++shardsSeq,
    held.map((shard) => ({ shard, writableUntil })),
  );
}

function fedMember(cluster: string, svc: string, address: string, port = 80): FederatedMember {
  return {
    cluster,
    namespace: NS,
    name: `${svc}-federated`,
    remote: `${NS}/${svc}`,
    ports: [{ name: "http", protocol: "TCP", port }],
    addresses: [address],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  };
}

function memberBatch(cluster: string, epoch: number, seq: number, members: FederatedMember[]): ToWriterFromActor {
  return { type: "desired.batch", cluster, epoch, seq, complete: true, upserts: [], deletes: [], members };
}

/** Registers every cluster (as the supervisor would, from all Secrets) and attaches the hosted one's channel. */
function connect(writer: RunningWriter, cluster: string, epoch: number): FakeActorPort {
  writer.actor.setKeep(REGISTERED, REGISTERED);
  const port = new FakeActorPort();
  writer.actor.attach(cluster, epoch, port);
  return port;
}

/** Writes by `verb/Kind/result` whose Kind is `kind`. */
function writesOf(writer: RunningWriter, kind: string): number {
  let total = 0;
  for (const [key, n] of Object.entries(writer.actor.status().writes)) if (key.split("/")[1] === kind) total += n;
  return total;
}

describe("fleet-wide Services across two shards, two writers on one local API server", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;

  before(async () => {
    fleet = await Fleet.start([]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    // The fixture's premise: east is shard 0's, beta shard 1's, and NS's fleet-wide Services shard 1's.
    assert.equal(shardOf("east", SHARDS), 0);
    assert.equal(shardOf("beta", SHARDS), 1);
    for (const svc of ["web", "api", "cart"]) assert.equal(federatedShardOf(NS, `${svc}-federated`, SHARDS), 1);
  });
  after(async () => {
    await fleet?.stop();
  });

  const slice = async (name: string): Promise<V1EndpointSlice | undefined> =>
    (await discovery.listNamespacedEndpointSlice({ namespace: NS })).items.find((s) => s.metadata?.name === name);

  async function waitForSlice(
    name: string,
    what: string,
    ok: (s: V1EndpointSlice) => boolean,
  ): Promise<V1EndpointSlice> {
    return eventually(
      what,
      async () => {
        const found = await slice(name);
        return found && ok(found) ? found : undefined;
      },
      TIMEOUT_MS,
    );
  }

  async function waitForService(svc: string, clusters: string) {
    return eventually(
      `${NS}/${svc}-federated annotated ${clusters}`,
      async () => {
        const service = await fleet.localService(NS, `${svc}-federated`);
        return service?.metadata?.annotations?.["mirror.linkerd.io/federated-clusters"] === clusters
          ? service
          : undefined;
      },
      TIMEOUT_MS,
    );
  }

  it("the owner writes the Service, each host its cluster's part; the union converges, and a member leaving on its host leaves the union", async () => {
    const a = await startSharded(fleet, A);
    const b = await startSharded(fleet, B);
    try {
      const east = connect(a, "east", 1);
      const beta = connect(b, "beta", 1);
      east.send(memberBatch("east", 1, 1, [fedMember("east", "web", "198.18.1.1")]));
      beta.send(memberBatch("beta", 1, 1, [fedMember("beta", "web", "198.18.2.1")]));
      const service = await waitForService("web", "beta,east");
      for (const [cluster, address] of [
        ["east", "198.18.1.1"],
        ["beta", "198.18.2.1"],
      ] as const) {
        const part = await waitForSlice(
          `web-federated-${cluster}-ipv4`,
          `${cluster}'s part with its address, owned by the Service`,
          (s) =>
            s.endpoints?.[0]?.addresses[0] === address &&
            s.metadata?.ownerReferences?.[0]?.uid === service.metadata?.uid,
        );
        assert.ok(part.metadata?.annotations?.["mirror.linkerd.io/federated-ports"], "the part states its ports");
      }
      await writerIdle(a.actor);
      await writerIdle(b.actor);
      assert.equal(writesOf(a, "Service"), 0, "writer A does not own the Service and never wrote it");
      assert.ok(writesOf(b, "Service") >= 1, "writer B, the owner, wrote it");
      assert.ok(writesOf(a, "EndpointSlice") >= 1, "writer A wrote east's part");

      // East leaves on its host: its part goes, the owner drops it from the annotation.
      east.send(memberBatch("east", 1, 2, []));
      await eventually(
        "east's part deleted",
        async () => ((await slice("web-federated-east-ipv4")) ? undefined : true),
        TIMEOUT_MS,
      );
      await waitForService("web", "beta");
      assert.equal(writesOf(a, "Service"), 0);
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it("a port conflict across shards: east (first registered) sets the ports; beta's host keeps its part empty and reports beta port-conflict", async () => {
    const a = await startSharded(fleet, A);
    const b = await startSharded(fleet, B);
    try {
      // Beta first: the owner (B, beta's host) creates the Service with beta's ports, then east's part turns it.
      const beta = connect(b, "beta", 1);
      beta.send(memberBatch("beta", 1, 1, [fedMember("beta", "api", "198.18.2.1", 8080)]));
      await waitForService("api", "beta");
      const east = connect(a, "east", 1);
      east.send(memberBatch("east", 1, 1, [fedMember("east", "api", "198.18.1.1", 80)]));
      const service = await waitForService("api", "east");
      assert.deepEqual(
        service.spec?.ports?.map((p) => p.port),
        [80],
      );
      const part = await waitForSlice(
        "api-federated-beta-ipv4",
        "beta's part emptied",
        (s) => (s.endpoints ?? []).length === 0,
      );
      assert.match(part.metadata?.annotations?.["mirror.linkerd.io/federated-ports"] ?? "", /8080/);
      await waitForSlice("api-federated-east-ipv4", "east's part with its address", (s) => s.endpoints?.length === 1);
      const blocked = await eventually(
        "beta reported port-conflict by its host",
        () => b.actor.status().clusters["beta"]?.blocked.find((x) => x.key === `${NS}/api-federated`),
        TIMEOUT_MS,
      );
      assert.equal(blocked.reason, "port-conflict");
      assert.deepEqual(a.actor.status().clusters["east"]?.blocked, []);
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it("a restart of either writer, and the owner's shard taken over by the other, write nothing", async () => {
    const eastMember = fedMember("east", "cart", "198.18.1.1");
    const betaMember = fedMember("beta", "cart", "198.18.2.1");
    let a = await startSharded(fleet, A);
    let b = await startSharded(fleet, B);
    const writes = async (): Promise<number> => {
      let total = 0;
      for (const verb of ["POST", "PUT", "DELETE"])
        for (const resource of ["services", "endpointslices", "namespaces"])
          total += await apiRequests(fleet, verb, resource);
      return total;
    };
    try {
      connect(a, "east", 1).send(memberBatch("east", 1, 1, [eastMember]));
      connect(b, "beta", 1).send(memberBatch("beta", 1, 1, [betaMember]));
      await waitForService("cart", "beta,east");
      await waitForSlice(
        "cart-federated-east-ipv4",
        "east's part owned",
        (s) => (s.metadata?.ownerReferences ?? []).length === 1,
      );
      await waitForSlice(
        "cart-federated-beta-ipv4",
        "beta's part owned",
        (s) => (s.metadata?.ownerReferences ?? []).length === 1,
      );
      await writerIdle(a.actor);
      await writerIdle(b.actor);
      const before = await writes();

      await a.stop();
      a = await startSharded(fleet, A);
      const eastAgain = connect(a, "east", 2);
      eastAgain.send(memberBatch("east", 2, 1, [eastMember]));
      await eastAgain.waitForAck((ack) => ack.seq === 1, "east's set absorbed");
      await writerIdle(a.actor);

      await b.stop();
      b = await startSharded(fleet, B);
      const betaAgain = connect(b, "beta", 2);
      betaAgain.send(memberBatch("beta", 2, 1, [betaMember]));
      await betaAgain.waitForAck((ack) => ack.seq === 1, "beta's set absorbed");
      await writerIdle(b.actor);
      assert.equal(await writes(), before, "a restart of either writer wrote nothing");

      // B leaves; A takes over shard 1: it now owns the Service and hosts beta, whose set it has not
      // received (unknown): beta's part is kept as observed, the Service is left as it is.
      await b.stop();
      hold(a, [0, 1]);
      await writerIdle(a.actor);
      assert.equal(await writes(), before, "the takeover wrote nothing while beta is unknown");
      assert.equal(
        (await waitForService("cart", "beta,east")).metadata?.annotations?.["mirror.linkerd.io/federated-clusters"],
        "beta,east",
      );

      // The Service's status is its owner's to report: A reports it while it holds shard 1,
      // and stops as soon as it gives that shard up (no other change comes to re-reduce it).
      const reported = (): boolean => (a.actor.status().federated ?? []).some((f) => f.key === `${NS}/cart-federated`);
      await eventually("A, the owner now, reports the fleet-wide Service", () => (reported() ? true : undefined));
      hold(a, A);
      await eventually("A, no longer the owner, stops reporting it", () => (reported() ? undefined : true));
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it("with --endpoints-api endpoints a sharded writer writes no fleet-wide object and reports each member it hosts", async () => {
    const a = await startSharded(fleet, A, { endpointsApi: "endpoints" });
    try {
      connect(a, "east", 1).send(memberBatch("east", 1, 1, [fedMember("east", "shop", "198.18.1.1")]));
      const blocked = await eventually(
        "east reported",
        () => a.actor.status().clusters["east"]?.blocked.find((x) => x.key === `${NS}/shop-federated`),
        TIMEOUT_MS,
      );
      assert.equal(blocked.reason, "sharded-endpoints-api");
      await writerIdle(a.actor);
      assert.equal(await fleet.localService(NS, "shop-federated"), undefined);
      assert.equal(writesOf(a, "Service") + writesOf(a, "Endpoints") + writesOf(a, "EndpointSlice"), 0);
    } finally {
      await a.stop();
    }
  });
});
