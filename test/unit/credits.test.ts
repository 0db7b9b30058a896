import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { acked, inFlight, initialCredits, maySend, sent, settled } from "../../workers/remote-cluster/credits.ts";

const sendN = (n: number) => {
  let c = initialCredits(3);
  for (let i = 0; i < n; i++) c = sent(c);
  return c;
};

describe("desired channel credits (actor side)", () => {
  it("counts batches in flight as lastSent − lastAcked and refuses to send beyond maxInFlight", () => {
    const c = sendN(2);
    assert.equal(inFlight(c), 2);
    assert.equal(maySend(c, 2), false);
    assert.equal(maySend(c, 3), true);
  });

  it("restores every credit up to a later ack when an earlier one was lost", () => {
    const { credits, resend } = acked(sendN(3), { epoch: 3, seq: 3 });
    assert.deepEqual(credits, { epoch: 3, lastSent: 3, lastAcked: 3 });
    assert.equal(resend, false);
  });

  it("ignores a duplicated or reordered ack and an ack beyond what was sent", () => {
    let c = acked(sendN(4), { epoch: 3, seq: 3 }).credits;
    c = acked(c, { epoch: 3, seq: 1 }).credits;
    c = acked(c, { epoch: 3, seq: 3 }).credits;
    assert.equal(c.lastAcked, 3);
    assert.equal(acked(c, { epoch: 3, seq: 99 }).credits.lastAcked, 4);
  });

  it("settles every credit and asks for a complete set on resend", () => {
    const { credits, resend } = acked(sendN(5), { epoch: 3, seq: 0, resend: true });
    assert.equal(inFlight(credits), 0);
    assert.equal(resend, true);
  });

  it("ignores acks of another epoch, resend included", () => {
    const c = sendN(2);
    assert.deepEqual(acked(c, { epoch: 2, seq: 2 }), { credits: c, resend: false });
    assert.deepEqual(acked(c, { epoch: 4, seq: 2, resend: true }), { credits: c, resend: false });
  });

  it("settles everything sent on a new port while seqs keep growing", () => {
    const c = settled(sendN(3));
    assert.equal(inFlight(c), 0);
    assert.equal(sent(c).lastSent, 4);
  });
});
