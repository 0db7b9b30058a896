/**
 * The writer's desired channels in-process with fake ports: one channel per cluster,
 * the newest epoch wins, and every message is answered exactly once.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { silentLogger } from "../../src/log.ts";
import type { ToWriterFromActor } from "../../src/protocol/messages.ts";
import { DesiredChannels } from "../../workers/local-writer/desired-channels.ts";
import { batch, FakeActorPort } from "./writer-harness.ts";

function channels(absorb: (batch: ToWriterFromActor) => boolean = () => true) {
  const absorbed: ToWriterFromActor[] = [];
  const rejected: string[] = [];
  const desired = new DesiredChannels({
    absorb: (b) => {
      absorbed.push(b);
      return absorb(b);
    },
    rejected: (cluster) => rejected.push(cluster),
    log: silentLogger(),
  });
  return { desired, absorbed, rejected };
}

describe("DesiredChannels", () => {
  it("closes an older epoch's channel when a newer one is attached, and refuses an older one at once", () => {
    const { desired } = channels();
    const first = new FakeActorPort();
    const second = new FakeActorPort();
    const stale = new FakeActorPort();
    assert.equal(desired.attach("east", 1, first), true);
    assert.equal(desired.attach("east", 2, second), true);
    assert.equal(first.closed, true);
    assert.equal(desired.attach("east", 1, stale), false);
    assert.equal(stale.closed, true);
    assert.equal(second.closed, false);
    assert.deepEqual(desired.clusters(), ["east"]);
  });

  it("answers each batch once even when the same port is attached twice", () => {
    const { desired, absorbed } = channels();
    const port = new FakeActorPort();
    desired.attach("east", 1, port);
    desired.attach("east", 1, port);
    port.send(batch("east", 1, 1, {}));
    assert.equal(absorbed.length, 1);
    assert.deepEqual(port.acks, [{ type: "desired.ack", cluster: "east", epoch: 1, seq: 1 }]);
  });

  it("asks for a resend when the store cannot keep a batch, or the batch carries another epoch", () => {
    const { desired, rejected } = channels(() => false);
    const port = new FakeActorPort();
    desired.attach("east", 4, port);
    port.send(batch("east", 4, 1, {}));
    port.send(batch("east", 3, 2, {}));
    port.send("garbage");
    assert.deepEqual(port.acks, [
      { type: "desired.ack", cluster: "east", epoch: 4, seq: 1, resend: true },
      { type: "desired.ack", cluster: "east", epoch: 4, seq: 2, resend: true },
      { type: "desired.ack", cluster: "east", epoch: 4, seq: 2, resend: true },
    ]);
    assert.deepEqual(rejected, ["east", "east", "east"]);
  });
});
