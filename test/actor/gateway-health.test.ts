/**
 * Gateway health in the remote-cluster actor, in-process through its ports, against a
 * real remote API server: the probe is a fake the test answers (so no socket is ever
 * opened and the gateway addresses may be anywhere), the desired port records batches.
 * A liveness change sends one batch; probes that confirm the state send none.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../../src/core/labels.ts";
import type { Service } from "../../src/core/objects.ts";
import { PROBE_PERIOD } from "../../src/core/probe-spec.ts";
import { KubeClient } from "../../src/kube/client.ts";
import type { ProbeRequest, ProbeResult } from "../../workers/remote-cluster/http-probe.ts";
import { adminConnection } from "../helpers/connection.ts";
import { eventually } from "../helpers/kube.ts";
import { type Batch, ensureNamespace, type RunningActor, startActor } from "../helpers/remote-actor.ts";

const IP = "198.18.0.61";

/** A fake probe: answers each request as `healthy` says, and records them. */
class FakeProbes {
  healthy = true;
  readonly requests: ProbeRequest[] = [];
  readonly probe = async (request: ProbeRequest): Promise<ProbeResult> => {
    this.requests.push(request);
    return this.healthy
      ? { ok: true, status: 200, latencyMs: 1 }
      : { ok: false, reason: "status", status: 503, message: "HTTP 503", latencyMs: 1 };
  };

  /** Waits for `n` more requests than now. */
  async more(n: number): Promise<void> {
    const target = this.requests.length + n;
    await eventually(`${n} more probes`, () => (this.requests.length >= target ? true : undefined), 20_000, 20);
  }
}

describe("gateway health in the remote-cluster actor", () => {
  let plane: ControlPlane;
  let connection: ConnectionSpec;
  let client: KubeClient;
  const running: RunningActor[] = [];

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    connection = adminConnection(plane.cluster("remote"));
    client = new KubeClient(connection, { requestTimeoutMs: 10_000 });
    await ensureNamespace(client, "hgw");
    const created = await client.request<Service>("POST", "/api/v1/namespaces/hgw/services", {
      body: {
        metadata: { name: "gateway", annotations: { [PROBE_PERIOD]: "1" } },
        spec: {
          type: "LoadBalancer",
          ports: [
            { name: "incoming-port", port: 4143, protocol: "TCP" },
            { name: "mc-probe", port: 4191, protocol: "TCP" },
          ],
        },
      },
    });
    await client.request("PATCH", "/api/v1/namespaces/hgw/services/gateway/status", {
      contentType: "application/merge-patch+json",
      body: {
        metadata: { resourceVersion: created.metadata.resourceVersion },
        status: { loadBalancer: { ingress: [{ ip: IP }] } },
      },
    });
    await ensureNamespace(client, "hsvc");
    await client.request("POST", "/api/v1/namespaces/hsvc/services", {
      body: {
        metadata: { name: "web", annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "hgw" } },
        spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
      },
    });
  });
  after(async () => {
    await Promise.all(running.map((r) => r.actor.stop()));
    client?.close();
    await plane?.stop();
  });

  const web = (batch: Batch | undefined): DesiredMirror | undefined =>
    batch?.upserts.find((m) => m.namespace === "hsvc" && m.name === "web-east");

  it("sends one batch per liveness change, and none for probes that confirm it", async () => {
    const probes = new FakeProbes();
    const r = startActor(connection, { probe: probes.probe, batchDelayMs: 10 });
    running.push(r);
    const first = await r.waitForBatch("the complete set", (b) => b.complete);
    assert.deepEqual(web(first)?.addresses, [IP]);
    assert.deepEqual(web(first)?.notReadyAddresses, []);
    r.ack(first.seq);
    await probes.more(1);
    assert.deepEqual(
      [probes.requests[0]?.address, probes.requests[0]?.port, probes.requests[0]?.path, probes.requests[0]?.timeoutMs],
      [IP, 4191, "/ready", 1_000],
    );

    probes.healthy = false;
    const dead = await r.waitForBatch(
      "web's address not ready",
      (b) => web(b)?.notReadyAddresses.length === 1,
      first.seq,
    );
    assert.deepEqual(web(dead)?.notReadyAddresses, [IP]);
    assert.deepEqual(web(dead)?.addresses, [IP], "a dead address stays an endpoint");
    r.ack(dead.seq);
    await probes.more(3);
    assert.equal(r.port.batches.length, 2, "no batch for failures that confirm the state");
    const status = await eventually("the gateway's probe in the status", () =>
      r.statuses.at(-1)?.gateways.find((g) => g.key === "hgw/gateway" && g.probe?.dead === 1),
    );
    assert.deepEqual(status.probe?.deadAddresses, [IP]);
    assert.ok((r.statuses.at(-1)?.gatewayProbes?.["hgw/gateway"]?.failures["status"] ?? 0) >= 3);

    probes.healthy = true;
    const alive = await r.waitForBatch(
      "web's address ready again",
      (b) => web(b)?.notReadyAddresses.length === 0,
      dead.seq,
    );
    r.ack(alive.seq);
    await probes.more(3);
    assert.equal(r.port.batches.length, 3, "no batch for successes that confirm the state");

    assert.deepEqual(r.faults, []);
  });

  it("a fleet-wide member carries its own gateway's dead address, not ready (SPEC §11)", async () => {
    await client.request("POST", "/api/v1/namespaces/hsvc/services", {
      body: {
        metadata: {
          name: "fleet",
          labels: { "mirror.linkerd.io/federated": "member" },
          annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "hgw" },
        },
        spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
      },
    });
    const probes = new FakeProbes();
    const r = startActor(connection, { probe: probes.probe, batchDelayMs: 10 });
    running.push(r);
    const member = (b: Batch) => b.members?.find((m) => m.name === "fleet-federated");
    const first = await r.waitForBatch("the complete set", (b) => b.complete);
    assert.deepEqual(member(first)?.addresses, [IP]);
    assert.deepEqual(member(first)?.endpointPorts, [{ name: "http", protocol: "TCP", port: 4143 }]);
    assert.ok(
      first.upserts.some((m) => m.name === "fleet-east"),
      "an exported member has its own mirror too",
    );
    r.ack(first.seq);
    probes.healthy = false;
    const dead = await r.waitForBatch(
      "the member's address not ready",
      (b) => member(b)?.notReadyAddresses.length === 1,
      first.seq,
    );
    assert.deepEqual(member(dead)?.addresses, [IP]);
    assert.deepEqual(r.faults, []);
  });
});
