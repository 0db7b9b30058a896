/**
 * The local writer sharded across replicas, in-process with in-memory local stores and
 * a recording API client: a key is planned and written only while its shard is held
 * and its deadline has not passed; an unregistered cluster's mirrors are collected only
 * by the holder of that cluster's shard; a namespace another replica created first
 * (AlreadyExists) is success; a shard given up is answered once its writes are done.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { FairTokenBucket } from "../../src/core/fair-bucket.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE } from "../../src/core/labels.ts";
import type { EndpointSlice, Endpoints, Namespace, Service } from "../../src/core/objects.ts";
import { shardOf } from "../../src/core/shards.ts";
import type { RequestOptions } from "../../src/kube/client.ts";
import { KubeApiError } from "../../src/kube/errors.ts";
import { silentLogger } from "../../src/log.ts";
import type { FromWriter } from "../../src/protocol/messages.ts";
import { LocalWriterActor } from "../../workers/local-writer/actor.ts";
import { DesiredStore } from "../../workers/local-writer/desired-store.ts";
import { FENCE_RECHECK_MS, WriteFence } from "../../workers/local-writer/fence.ts";
import { MutationCache } from "../../workers/local-writer/mutation-cache.ts";
import { MirrorReconciler } from "../../workers/local-writer/reconcile.ts";
import { WriterStats } from "../../workers/local-writer/status.ts";
import { WriteExecutor } from "../../workers/local-writer/write-executor.ts";
import { batch, desiredMirror, FakeActorPort, WRITER_OPTIONS } from "./writer-harness.ts";

const SHARDS = 6;

function apiError(method: string, path: string, status: number, reason: string): KubeApiError {
  return new KubeApiError({ method, path, server: "https://127.0.0.1:6443", status, reason, statusMessage: reason });
}
const DEAD = shardOf("dead", SHARDS);
const EAST = shardOf("east", SHARDS);
const OTHER = [0, 1, 2, 3, 4, 5].find((s) => s !== DEAD && s !== EAST) ?? 0;

function mirror(cluster: string): DesiredMirror {
  return {
    cluster,
    namespace: "shop",
    name: `web-${cluster}`,
    remote: "shop/web",
    labels: { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: cluster },
    serviceAnnotations: {},
    ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
    endpointsAnnotations: {},
    addresses: ["198.18.0.10"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  };
}

/** A writer's reconcile of a world holding one mirror of the unregistered cluster "dead" and desiring one of "east". */
function world(options: { namespace?: boolean; answer?: (method: string, path: string) => Promise<unknown> } = {}) {
  const clock = new ManualClock(1_000);
  const log = silentLogger();
  const labels = { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: "dead" };
  const services = new Map<string, Service>([
    [
      "shop/web-dead",
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web-dead", namespace: "shop", uid: "svc-uid", resourceVersion: "5", labels },
      } as Service,
    ],
  ]);
  const endpoints = new Map<string, Endpoints>();
  const slices = new Map<string, EndpointSlice>();
  const namespaces = new Map<string, Namespace>(
    options.namespace === false
      ? []
      : [["shop", { apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } } as Namespace]],
  );
  const requests: string[] = [];
  const release: () => void = () => {};
  const client = {
    request: async <T>(method: string, path: string, _options?: RequestOptions): Promise<T> => {
      requests.push(`${method} ${path}`);
      if (options.answer) return (await options.answer(method, path)) as T;
      // Nothing unlabelled holds a mirror's name.
      if (method === "GET") throw apiError(method, path, 404, "NotFound");
      return { metadata: { name: "x", uid: "u", resourceVersion: "9" } } as T;
    },
  };
  const desired = new DesiredStore();
  desired.setKeep(["east"]);
  desired.applyBatch({
    type: "desired.batch",
    cluster: "east",
    epoch: 1,
    seq: 1,
    complete: true,
    upserts: [mirror("east")],
    deletes: [],
  });
  const fence = new WriteFence(true, clock, log, SHARDS);
  const cache = new MutationCache(clock);
  const executor = new WriteExecutor({
    client,
    bucket: new FairTokenBucket(0, 1, clock),
    fence,
    cache,
    stats: new WriterStats(),
    log,
    block: () => {},
    blockedRecheckMs: 30_000,
  });
  const reconciler = new MirrorReconciler({
    desired,
    services,
    endpoints,
    slices,
    namespaces,
    cache,
    executor,
    client,
    options: { createNamespaces: true, excludedNamespaces: [], blockedRecheckMs: 30_000, endpointsApi: "endpoints" },
    log,
    recordEvent: () => {},
    ownership: () => fence.ownership,
  });
  const hold = (...shards: number[]) =>
    fence.setShards(shards.map((shard) => ({ shard, writableUntil: clock.now() + 3_000 })));
  return { reconciler, executor, fence, clock, requests, hold, services, release: () => release() };
}

describe("the writer sharded across replicas", () => {
  it("holds no shard until told, and then plans nothing and writes nothing", async () => {
    const { reconciler, requests } = world();
    assert.deepEqual(await reconciler.reconcile("shop/web-dead"), { kind: "done" });
    assert.deepEqual(await reconciler.reconcile("shop/web-east"), { kind: "done" });
    assert.deepEqual(requests, []);
  });

  it("collects an unregistered cluster's mirror only in the replica holding that cluster's shard", async () => {
    const other = world();
    other.hold(EAST, OTHER);
    assert.deepEqual(await other.reconciler.reconcile("shop/web-dead"), { kind: "done" });
    assert.deepEqual(other.requests, [], "a replica without the shard of `dead` deleted its mirror");

    const holder = world();
    holder.hold(DEAD);
    assert.deepEqual(await holder.reconciler.reconcile("shop/web-dead"), { kind: "done" });
    assert.deepEqual(holder.requests, ["DELETE /api/v1/namespaces/shop/services/web-dead"]);
  });

  it("writes a cluster's mirror only while its shard is held and before the shard's deadline", async () => {
    const { reconciler, requests, hold, clock } = world();
    hold(DEAD);
    assert.deepEqual(await reconciler.reconcile("shop/web-east"), { kind: "done" });
    assert.equal(requests.length, 0, "east's shard is not held: not even read");
    hold(EAST);
    clock.advance(3_000);
    assert.deepEqual(await reconciler.reconcile("shop/web-east"), { kind: "requeue-after", ms: FENCE_RECHECK_MS });
    assert.deepEqual(
      requests.filter((r) => !r.startsWith("GET ")),
      [],
      "east's shard deadline passed",
    );
    hold(EAST);
    assert.deepEqual(await reconciler.reconcile("shop/web-east"), { kind: "done" });
    assert.ok(
      requests.some((r) => r === "POST /api/v1/namespaces/shop/services"),
      requests.join("\n"),
    );
  });

  it("treats a namespace another replica created first (AlreadyExists) as created, and goes on with the mirror", async () => {
    const alreadyExists = apiError("POST", "/api/v1/namespaces", 409, "AlreadyExists");
    const { reconciler, requests, hold } = world({
      namespace: false,
      answer: async (method, path) => {
        if (method === "POST" && path === "/api/v1/namespaces") throw alreadyExists;
        if (method === "GET") throw apiError(method, path, 404, "NotFound");
        return { metadata: { name: "x", uid: "u", resourceVersion: "9" } };
      },
    });
    hold(EAST);
    assert.deepEqual(await reconciler.reconcile("shop/web-east"), { kind: "done" });
    assert.equal(requests.filter((r) => r === "POST /api/v1/namespaces").length, 1, requests.join("\n"));
    assert.ok(
      requests.some((r) => r === "POST /api/v1/namespaces/shop/services"),
      `the mirror was not written after AlreadyExists:\n${requests.join("\n")}`,
    );
  });

  it("answers that a shard given up has nothing in flight only once its last write is answered", async () => {
    let answer: () => void = () => {};
    const { executor, requests, hold, reconciler } = world({
      answer: (method) =>
        method === "DELETE"
          ? new Promise((resolve) => {
              answer = () => resolve({});
            })
          : Promise.resolve({}),
    });
    hold(DEAD);
    const reconciling = reconciler.reconcile("shop/web-dead");
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(requests, ["DELETE /api/v1/namespaces/shop/services/web-dead"]);
    hold();
    let drained = false;
    const waiting = executor.whenDrained([DEAD]).then(() => {
      drained = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(drained, false, "answered while the shard's DELETE was in flight");
    answer();
    await waiting;
    await reconciling;
    assert.equal(drained, true);
    await executor.whenDrained([DEAD]);
  });
});

describe("conflicts of shards given up", () => {
  it("drops a blocked key of a shard no longer held from the reported conflicts", async () => {
    const { reconciler, hold, services } = world();
    // A user's Service holds east's mirror name: east's mirror is blocked.
    services.set("shop/web-east", {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "web-east", namespace: "shop", uid: "user-uid", resourceVersion: "3" },
    } as Service);
    hold(EAST);
    await reconciler.reconcile("shop/web-east");
    assert.deepEqual(
      reconciler
        .blockedByCluster()
        .get("east")
        ?.map((b) => [b.key, b.reason]),
      [["shop/web-east", "user-owned"]],
    );
    // East's shard is given up (the handoff re-queues the keys of the clusters it forgets).
    hold(OTHER);
    assert.deepEqual(await reconciler.reconcile("shop/web-east"), { kind: "done" });
    assert.deepEqual([...reconciler.blockedByCluster().keys()], [], "a conflict of a shard given up is still reported");
  });
});

it("the clusters of these tests are in different shards", () => {
  assert.notEqual(DEAD, EAST);
});

describe("the writer actor's held shards (writer.shards)", () => {
  it("attaches and absorbs only clusters of held shards, forgets a dropped shard's clusters, ignores an older message, and answers each", async () => {
    const sent: FromWriter[] = [];
    const actor = new LocalWriterActor(
      { server: "https://127.0.0.1:1", auth: { kind: "token", token: "t" } },
      { ...WRITER_OPTIONS, fenced: true, shards: SHARDS },
      { supervisor: (message) => sent.push(message) },
      { logger: silentLogger() },
    );
    const fenced = () => sent.flatMap((m) => (m.type === "writer.shards-fenced" ? [m.seq] : []));
    const early = new FakeActorPort();
    actor.attach("east", 1, early);
    assert.equal(early.closed, true, "a cluster of a shard not held is refused");

    actor.setShards(1, [{ shard: EAST, writableUntil: Number.MAX_SAFE_INTEGER }]);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(fenced(), [1]);
    const port = new FakeActorPort();
    actor.attach("east", 2, port);
    assert.equal(port.closed, false);
    port.send(batch("east", 2, 1, { complete: true, upserts: [desiredMirror("east", "shop", "web")] }));
    assert.deepEqual(port.acks.at(-1), { type: "desired.ack", cluster: "east", epoch: 2, seq: 1 });
    assert.equal(actor.status().clusters["east"]?.complete, true);

    actor.setShards(2, [{ shard: OTHER, writableUntil: Number.MAX_SAFE_INTEGER }]);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(port.closed, true, "the dropped shard's channel is closed");
    assert.equal(actor.status().clusters["east"], undefined, "its desired state is forgotten");
    assert.deepEqual([...actor.ownership.held], [OTHER]);

    actor.setShards(1, [{ shard: EAST, writableUntil: Number.MAX_SAFE_INTEGER }]);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual([...actor.ownership.held], [OTHER], "an older message changes nothing");
    assert.deepEqual(fenced(), [1, 2, 2]);
    await actor.stop();
  });
});
