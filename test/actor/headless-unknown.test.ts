/**
 * Headless Services whose remote EndpointSlices cannot be read (SPEC §12), the actor
 * in-process against a real remote API server behind a fault proxy: a slice list that
 * never succeeds holds back nothing else of the cluster, and the Service's mirror
 * stays as the writer holds it (its hosts are unknown, which is not "none").
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { type FaultProxy, startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../../src/core/labels.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import { adminConnection } from "../helpers/connection.ts";
import { REMOTE_READER_RULES } from "../helpers/fleet.ts";
import { adminKubeConfig, eventually } from "../helpers/kube.ts";
import {
  type Batch,
  createExported,
  createGateway,
  ensureNamespace,
  FakeDesiredPort,
  type RunningActor,
  startActor,
  summary,
  upsertsIn,
} from "../helpers/remote-actor.ts";

const NS = "hl-unknown";

describe("headless Services whose remote slices cannot be read", () => {
  let plane: ControlPlane;
  let client: KubeClient;
  let proxy: FaultProxy;
  let connection: ConnectionSpec;
  const running: RunningActor[] = [];

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    const admin = adminConnection(plane.cluster("remote"));
    client = new KubeClient(admin, { requestTimeoutMs: 10_000 });
    proxy = await startFaultProxyFor(plane, "remote");
    // The proxy ends TLS, so the actor authenticates with a token of the least-privilege remote role.
    const token = await mintServiceAccountToken(adminKubeConfig(plane.cluster("remote")), {
      namespace: "hl-reader",
      serviceAccount: "reader",
      role: { kind: "ClusterRole", name: "hl-reader", rules: REMOTE_READER_RULES },
    });
    connection = { ...admin, server: proxy.url, auth: { kind: "token", token } };
  });
  after(async () => {
    await Promise.all(running.map((r) => r.actor.stop()));
    await proxy?.stop();
    client?.close();
    await plane?.stop();
  });

  /** A headless Service exported through `gw/gateway` (SPEC §2). */
  async function createHeadless(name: string): Promise<void> {
    await ensureNamespace(client, NS);
    await client.request("POST", `/api/v1/namespaces/${NS}/services`, {
      body: {
        metadata: { name, annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "hl-gw" } },
        spec: { clusterIP: "None", ports: [{ name: "http", port: 80, protocol: "TCP" }], selector: { app: name } },
      },
    });
  }

  it("one headless Service whose slice list fails forever (500) holds back no batch of its cluster, and is sent as unknown", async () => {
    await createGateway(client, "hl-gw", "198.18.0.41");
    await createExported(client, NS, "web", "hl-gw");
    const r = startActor(connection, { cluster: "east" });
    running.push(r);
    const first = await r.waitForBatch("the first complete set", (b) => b.complete);
    r.ack(first.seq);
    // `db`'s slices never list: every list of this namespace's slices is answered 500.
    proxy.setRules({
      errorRate: 1,
      errorStatus: 500,
      match: (method, path) => method === "GET" && path === `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`,
    });
    await createHeadless("db");
    await eventually("db's slice list refused", () => (proxy.stats.injectedErrors > 0 ? true : undefined));
    // The writer restarts: a complete set is owed on the new channel.
    const port = new FakeDesiredPort();
    const post = port.postMessage.bind(port);
    port.postMessage = (batch: Batch) => {
      post(batch);
      setImmediate(() => port.deliver({ type: "desired.ack", cluster: "east", epoch: 1, seq: batch.seq }));
    };
    r.actor.attachWriter(port);
    await createExported(client, NS, "later", "hl-gw");
    const seen = (): string => port.batches.map(summary).join(" ");
    const later = await eventually(
      () => `later's mirror on the new channel (batches: ${seen()})`,
      () => port.batches.find((b) => upsertsIn(b, NS).includes("later-east")),
      20_000,
    );
    const complete = port.batches.find((b) => b.complete);
    assert.ok(complete, `a complete set on the new channel (batches: ${seen()})`);
    assert.ok(complete.seq <= later.seq);
    assert.deepEqual(
      upsertsIn(complete, NS).filter((n) => n !== "later-east"),
      ["db-east", "web-east"],
    );
    const db = complete.upserts.find((m) => m.name === "db-east");
    assert.equal(db?.hostsUnknown, true, "db's hosts are unknown: the writer keeps what it holds of it");
    assert.equal(db?.headless, undefined);
    assert.deepEqual(r.faults, []);
  });
});
