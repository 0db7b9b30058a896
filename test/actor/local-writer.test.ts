/**
 * The local-writer actor run in-process through its ports (fake desired channels, a
 * list for the supervisor) against a real local API server: the desired-channel rules
 * (every batch answered, never acknowledged and dropped), one DELETE per object, and a
 * restart that writes nothing when nothing changed.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { EventRequest } from "../../src/protocol/messages.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { apiRequests, batch, desiredMirror, FakeActorPort, startWriter, writerIdle } from "./writer-harness.ts";

const TIMEOUT_MS = 30_000;

describe("the local writer, driven through its ports", () => {
  let fleet: Fleet;

  before(async () => {
    fleet = await Fleet.start([]);
  });
  after(async () => {
    await fleet?.stop();
  });

  it("writes the mirror a batch asks for and acknowledges the batch by its seq", async () => {
    const writer = await startWriter(fleet);
    try {
      const port = new FakeActorPort();
      writer.actor.setKeep(["east"]);
      writer.actor.attach("east", 1, port);
      port.send(batch("east", 1, 1, { complete: true, upserts: [desiredMirror("east", "basic", "web")] }));
      assert.deepEqual(await port.waitForAck((a) => a.seq === 1, "ack of seq 1"), {
        type: "desired.ack",
        cluster: "east",
        epoch: 1,
        seq: 1,
      });
      await fleet.waitForMirror("basic", "web-east", () => true, TIMEOUT_MS);
      await fleet.waitForEndpoints("basic", "web-east", (e) => (e.subsets?.length ?? 0) > 0, TIMEOUT_MS);
    } finally {
      await writer.stop();
    }
  });

  it("absorbs and writes a batch of a cluster the keep set does not list yet: a channel the supervisor attached is for a registered cluster", async () => {
    const writer = await startWriter(fleet);
    try {
      writer.actor.setKeep(["east"]); // "fresh" registered after the last writer.clusters
      const port = new FakeActorPort();
      writer.actor.attach("fresh", 1, port);
      port.send(batch("fresh", 1, 1, { complete: true, upserts: [desiredMirror("fresh", "keep-race", "web")] }));
      const ack = await port.waitForAck((a) => a.seq === 1, "ack of seq 1");
      assert.equal(ack.resend, undefined, "absorbed, not rejected");
      await fleet.waitForMirror("keep-race", "web-fresh", () => true, TIMEOUT_MS);
      assert.equal(writer.actor.status().clusters["fresh"]?.mirrors, 1);
      // The keep set still removes a cluster: its mirrors go, its channel is closed.
      writer.actor.setKeep(["east"]);
      await fleet.waitForNoMirror("keep-race", "web-fresh", TIMEOUT_MS);
      assert.equal(port.closed, true, "the unregistered cluster's channel is closed");
    } finally {
      await writer.stop();
    }
  });

  it("answers a malformed batch with a resend ack: its own seq when readable, else the highest seq seen on the channel", async () => {
    const writer = await startWriter(fleet);
    try {
      const port = new FakeActorPort();
      writer.actor.setKeep(["bad"]);
      writer.actor.attach("bad", 3, port);
      port.send(batch("bad", 3, 1, { upserts: [desiredMirror("bad", "malformed", "web")] }));
      await port.waitForAck((a) => a.seq === 1, "ack of seq 1");
      port.send({
        type: "desired.batch",
        cluster: "bad",
        epoch: 3,
        seq: 2,
        complete: false,
        upserts: "no",
        deletes: [],
      });
      assert.deepEqual(await port.waitForAck((a) => a.seq === 2, "ack of the malformed seq 2"), {
        type: "desired.ack",
        cluster: "bad",
        epoch: 3,
        seq: 2,
        resend: true,
      });
      port.send({ nonsense: true });
      await eventually("an answer to the unreadable message", () => (port.acks.length === 3 ? true : undefined));
      assert.deepEqual(port.acks[2], { type: "desired.ack", cluster: "bad", epoch: 3, seq: 2, resend: true });
      port.send(batch("other", 3, 3, { upserts: [desiredMirror("other", "malformed", "web")] }));
      assert.deepEqual(await port.waitForAck((a) => a.seq === 3, "ack of a batch of another cluster"), {
        type: "desired.ack",
        cluster: "bad",
        epoch: 3,
        seq: 3,
        resend: true,
      });
      // Nothing of the rejected batches was absorbed; the good one still is.
      assert.equal(writer.actor.status().clusters["bad"]?.mirrors, 1);
      assert.equal(writer.actor.status().clusters["other"], undefined);
      assert.ok(writer.actor.status().lastError, "the rejection is reported");
    } finally {
      await writer.stop();
    }
  });

  it("deletes a mirror that is no longer desired with one DELETE per object, never a second one", async () => {
    const writer = await startWriter(fleet);
    const names = Array.from({ length: 12 }, (_, i) => `svc-${i}`);
    try {
      const port = new FakeActorPort();
      writer.actor.setKeep(["gone"]);
      writer.actor.attach("gone", 1, port);
      port.send(
        batch("gone", 1, 1, { complete: true, upserts: names.map((n) => desiredMirror("gone", "tombstones", n)) }),
      );
      for (const n of names) await fleet.waitForMirror("tombstones", `${n}-gone`, () => true, TIMEOUT_MS);
      await writerIdle(writer.actor);
      const deletesBefore =
        (await apiRequests(fleet, "DELETE", "services")) + (await apiRequests(fleet, "DELETE", "endpoints"));
      // A delta that removes them, then a complete set (which re-checks every mirror of
      // the cluster at once, while the deletes are still on their way through the watch).
      port.send(batch("gone", 1, 2, { deletes: names.map((n) => `tombstones/${n}-gone`) }));
      port.send(batch("gone", 1, 3, { complete: true }));
      for (const n of names) await fleet.waitForNoMirror("tombstones", `${n}-gone`, TIMEOUT_MS);
      const status = await writerIdle(writer.actor);
      const deletesAfter =
        (await apiRequests(fleet, "DELETE", "services")) + (await apiRequests(fleet, "DELETE", "endpoints"));
      assert.equal(deletesAfter - deletesBefore, 2 * names.length, "one DELETE per Service and per Endpoints");
      assert.equal(status.writes["delete/Service/404"], undefined, JSON.stringify(status.writes));
      assert.equal(status.writes["delete/Endpoints/404"], undefined, JSON.stringify(status.writes));
    } finally {
      await writer.stop();
    }
  });

  it("a stale owner of a colliding mirror name releases it: its objects are deleted and the claimant's mirror created (F8)", async () => {
    const writer = await startWriter(fleet);
    try {
      // b-c exports `a` and c exports `a-b`: both mirrors are named a-b-c.
      const bc = new FakeActorPort();
      const c = new FakeActorPort();
      writer.actor.setKeep(["b-c", "c"]);
      writer.actor.attach("b-c", 1, bc);
      writer.actor.attach("c", 1, c);
      bc.send(batch("b-c", 1, 1, { complete: true, upserts: [desiredMirror("b-c", "stale-owner", "a")] }));
      const stale = await fleet.waitForMirror(
        "stale-owner",
        "a-b-c",
        (s) => s.metadata?.labels?.["mirror.linkerd.io/cluster-name"] === "b-c",
        TIMEOUT_MS,
      );
      c.send(batch("c", 1, 1, { complete: true, upserts: [desiredMirror("c", "stale-owner", "a-b")] }));
      await eventually("cluster c reported blocked on the name", () =>
        writer.actor.status().clusters["c"]?.blocked.some((b) => b.reason === "owned-by-other-cluster")
          ? true
          : undefined,
      );
      // b-c stops exporting `a`: it no longer claims the name, and may be collected.
      bc.send(batch("b-c", 1, 2, { deletes: ["stale-owner/a-b-c"] }));
      const claimed = await fleet.waitForMirror(
        "stale-owner",
        "a-b-c",
        (s) => s.metadata?.labels?.["mirror.linkerd.io/cluster-name"] === "c",
        20_000,
      );
      assert.notEqual(claimed.metadata?.uid, stale.metadata?.uid, "b-c's Service was deleted, c's created");
      await fleet.waitForEndpoints(
        "stale-owner",
        "a-b-c",
        (e) => e.metadata?.labels?.["mirror.linkerd.io/cluster-name"] === "c",
        TIMEOUT_MS,
      );
      const status = await writerIdle(writer.actor);
      assert.deepEqual(status.clusters["c"]?.blocked ?? [], [], "c is no longer reported blocked");
    } finally {
      await writer.stop();
    }
  });

  it("a restarted writer with nothing changed writes nothing: no mirror write and no Event identical to one already recorded", async () => {
    const mirrors = [desiredMirror("calm", "restart", "web"), desiredMirror("calm", "restart", "cart")];
    const event: EventRequest = {
      involved: { kind: "Secret", apiVersion: "v1", namespace: "fleet-mirror", name: "calm", uid: "calm-uid-1" },
      type: "Normal",
      reason: "ClusterRegistered",
      message: "cluster calm registered (https://127.0.0.1:1)",
    };
    const first = await startWriter(fleet);
    try {
      const port = new FakeActorPort();
      first.actor.setKeep(["calm"]);
      first.actor.attach("calm", 1, port);
      port.send(batch("calm", 1, 1, { complete: true, upserts: mirrors }));
      await first.actor.recordEvent(event);
      assert.equal(first.actor.status().writes["create/Event/ok"], 1);
      await fleet.waitForEndpoints("restart", "cart-calm", (e) => (e.subsets?.length ?? 0) > 0, TIMEOUT_MS);
      await writerIdle(first.actor);
    } finally {
      await first.stop();
    }

    const writesBefore = await fleet.localWriteCount();
    const eventsBefore = await apiRequests(fleet, "POST", "events");
    const second = await startWriter(fleet);
    try {
      const port = new FakeActorPort();
      second.actor.setKeep(["calm"]);
      second.actor.attach("calm", 2, port);
      port.send(batch("calm", 2, 1, { complete: true, upserts: mirrors }));
      await port.waitForAck((a) => a.seq === 1, "ack of seq 1");
      await second.actor.recordEvent(event);
      const status = await writerIdle(second.actor);
      assert.deepEqual(status.writes, {}, "no write at all");
      assert.equal(await fleet.localWriteCount(), writesBefore, "the API server saw no mirror write");
      assert.equal(await apiRequests(fleet, "POST", "events"), eventsBefore, "the API server saw no Event POST");
      // A changed state still gets its Event.
      await second.actor.recordEvent({ ...event, type: "Warning", reason: "InvalidCredentials", message: "changed" });
      assert.equal(await apiRequests(fleet, "POST", "events"), eventsBefore + 1);
      assert.equal(second.actor.status().writes["create/Event/ok"], 1);
    } finally {
      await second.stop();
    }
  });
});
