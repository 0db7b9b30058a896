/**
 * The remote-cluster actor in-process, through its ports (a fake desired port plays the
 * local writer), against a real remote API server: batches, the credit rule of the
 * desired channel (cumulative acks, `resend`), and a clean stop.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { adminConnection } from "../helpers/connection.ts";
import { eventually } from "../helpers/kube.ts";
import {
  createExported,
  createGateway,
  type RunningActor,
  startActor,
  summary,
  upsertsIn,
} from "../helpers/remote-actor.ts";

describe("remote-cluster actor through its ports", () => {
  let plane: ControlPlane;
  let connection: ConnectionSpec;
  let client: KubeClient;
  const running: RunningActor[] = [];

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    connection = adminConnection(plane.cluster("remote"));
    client = new KubeClient(connection, { requestTimeoutMs: 10_000 });
  });
  after(async () => {
    await Promise.all(running.map((r) => r.actor.stop()));
    client?.close();
    await plane?.stop();
  });

  function start(options: Parameters<typeof startActor>[1] = {}): RunningActor {
    const r = startActor(connection, options);
    running.push(r);
    return r;
  }

  it("sends the full desired set as one complete batch after the first list, then deltas as Services change", async () => {
    await createGateway(client, "flow-gw", "198.18.0.21");
    await createExported(client, "flow", "a", "flow-gw");
    const r = start();
    const first = await r.waitForBatch("the first batch", () => true);
    assert.equal(first.seq, 1);
    assert.equal(first.complete, true);
    assert.deepEqual(upsertsIn(first, "flow"), ["a-east"]);
    assert.deepEqual(first.upserts.find((m) => m.name === "a-east")?.addresses, ["198.18.0.21"]);
    r.ack(1);
    await createExported(client, "flow", "b", "flow-gw");
    const delta = await r.waitForBatch("b's mirror", (b) => upsertsIn(b, "flow").includes("b-east"), 1);
    assert.equal(delta.complete, false);
    assert.deepEqual(upsertsIn(delta, "flow"), ["b-east"]);
    assert.deepEqual(r.faults, []);
  });

  it("holds back batches while maxInFlight are unacknowledged and sends the coalesced changes once acked", async () => {
    await createGateway(client, "held-gw", "198.18.0.22");
    const r = start({ maxInFlight: 1 });
    await r.waitForBatch("the complete batch", (b) => b.complete);
    await createExported(client, "held", "a", "held-gw");
    await createExported(client, "held", "b", "held-gw");
    await eventually("a flush refused for lack of credit, with both changes pending", () =>
      r.actor.flowState.refusedFlushes > 0 && r.actor.flowState.pendingChanges >= 2 ? true : undefined,
    );
    assert.equal(r.port.batches.length, 1, `nothing sent without an ack: ${r.port.batches.map(summary).join("; ")}`);
    r.ack(1);
    const next = await r.waitForBatch("the held changes", (b) => upsertsIn(b, "held").length > 0, 1);
    assert.equal(next.seq, 2);
    assert.deepEqual(upsertsIn(next, "held"), ["a-east", "b-east"], "both changes in one batch");
  });

  it("does not stall when an ack is lost, once a later ack arrives (acks are cumulative)", async () => {
    await createGateway(client, "lost-gw", "198.18.0.23");
    const r = start({ maxInFlight: 2 });
    await r.waitForBatch("the complete batch", (b) => b.complete);
    await createExported(client, "lost", "a", "lost-gw");
    await r.waitForBatch("batch 2", (b) => upsertsIn(b, "lost").includes("a-east"), 1);
    // The ack of batch 1 is lost; the ack of batch 2 covers it.
    r.ack(2);
    await createExported(client, "lost", "b", "lost-gw");
    const third = await r.waitForBatch("batch 3", (b) => upsertsIn(b, "lost").includes("b-east"), 2);
    await createExported(client, "lost", "c", "lost-gw");
    const fourth = await r.waitForBatch(
      "batch 4, without another ack",
      (b) => upsertsIn(b, "lost").includes("c-east"),
      2,
    );
    assert.deepEqual([third.seq, fourth.seq], [3, 4]);
    assert.deepEqual(r.actor.flowState, { ...r.actor.flowState, lastSent: 4, lastAcked: 2 });
  });

  it("answers an ack with resend: true with a complete batch of the whole desired set", async () => {
    await createGateway(client, "again-gw", "198.18.0.24");
    await createExported(client, "again", "a", "again-gw");
    await createExported(client, "again", "b", "again-gw");
    const r = start({ maxInFlight: 1 });
    await r.waitForBatch("the complete batch", (b) => b.complete && upsertsIn(b, "again").length === 2);
    // The writer could not keep batch 1: every credit is settled and a complete set follows.
    r.ack(1, { resend: true });
    const again = await r.waitForBatch("a complete batch after resend", (b) => b.complete, 1);
    assert.equal(again.seq, 2);
    assert.deepEqual(upsertsIn(again, "again"), ["a-east", "b-east"]);
    assert.deepEqual(again.deletes, []);
  });

  it("ignores acks of another epoch", async () => {
    await createGateway(client, "epoch-gw", "198.18.0.25");
    const r = start({ maxInFlight: 1, epoch: 7 });
    await r.waitForBatch("the complete batch", (b) => b.complete);
    r.ack(1, { epoch: 6 });
    r.ack(1, { epoch: 6, resend: true });
    await createExported(client, "epoch", "a", "epoch-gw");
    await eventually("a flush refused for lack of credit", () =>
      r.actor.flowState.refusedFlushes > 0 && r.actor.flowState.pendingChanges > 0 ? true : undefined,
    );
    assert.equal(r.port.batches.length, 1);
    r.ack(1);
    await r.waitForBatch("a's mirror once acked in its own epoch", (b) => upsertsIn(b, "epoch").includes("a-east"), 1);
  });

  it("stops cleanly: the watch ends, the desired port is closed and nothing more is sent or published", async () => {
    const r = start();
    await r.waitForBatch("the complete batch", (b) => b.complete);
    await eventually("a synced status", () => (r.statuses.at(-1)?.state === "synced" ? true : undefined));
    await r.actor.stop();
    assert.equal(r.port.closed, true);
    const batches = r.port.batches.length;
    const statuses = r.statuses.length;
    await createGateway(client, "after-stop-gw", "198.18.0.26");
    await createExported(client, "after-stop", "a", "after-stop-gw");
    // Another actor sees the change: by then a live one would have too.
    const witness = start();
    await witness.waitForBatch("the change, seen by a live actor", (b) => upsertsIn(b, "after-stop").length > 0);
    assert.equal(r.port.batches.length, batches);
    assert.equal(r.statuses.length, statuses);
    assert.deepEqual(r.faults, []);
    await r.actor.stop(); // idempotent
  });
});
