/** Leader election's pure decisions (src/leader/lease.ts): client-go semantics, expiry by local observation. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  decide,
  expiresAt,
  formatMicroTime,
  type LeaseRecord,
  leaseDurationSeconds,
  type Observation,
  observe,
  recordFromSpec,
  recordKey,
  releaseRecord,
} from "../../src/leader/lease.ts";

/** Local monotonic time of the tests (unrelated to any wall clock on purpose). */
const T0 = 5_000;
/** Wall clock: 2026-12-02T15:00:00.250Z. */
const WALL = Date.UTC(2026, 11, 2, 15, 0, 0, 250);
const WALL_MICRO = "2026-12-02T15:00:00.250000Z";

const held: LeaseRecord = Object.freeze({
  holderIdentity: "other",
  leaseDurationSeconds: 10,
  acquireTime: "2026-12-01T00:00:00.000000Z",
  renewTime: "2026-12-02T14:59:59.000000Z",
  leaseTransitions: 3,
});

function input(observation: Observation | undefined, now = T0, identity = "me") {
  return { observation, identity, leaseDurationMs: 10_000, now, wallNow: WALL };
}

describe("formatMicroTime", () => {
  it("writes RFC 3339 in UTC with exactly six fractional digits (Kubernetes MicroTime)", () => {
    assert.equal(formatMicroTime(WALL), WALL_MICRO);
    assert.equal(formatMicroTime(Date.UTC(2026, 0, 1)), "2026-01-01T00:00:00.000000Z");
    assert.match(formatMicroTime(Date.now()), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  });
});

describe("leaseDurationSeconds", () => {
  it("rounds up to whole seconds, at least one, never shorter than configured", () => {
    assert.equal(leaseDurationSeconds(10_000), 10);
    assert.equal(leaseDurationSeconds(2_500), 3);
    assert.equal(leaseDurationSeconds(100), 1);
  });
});

describe("recordFromSpec", () => {
  it("keeps the five leader-election fields", () => {
    assert.deepEqual(recordFromSpec({ ...held, preferredHolder: "x" }), held);
  });

  it("treats fields of the wrong type as absent, and a non-object as an empty record", () => {
    assert.deepEqual(
      recordFromSpec({ holderIdentity: 7, leaseDurationSeconds: "10", leaseTransitions: 1.5, renewTime: null }),
      {},
    );
    assert.deepEqual(recordFromSpec(undefined), {});
    assert.deepEqual(recordFromSpec([held]), {});
  });
});

describe("observe", () => {
  it("keeps the first observation time while the record is unchanged, whatever its key order", () => {
    const first = observe(undefined, held, T0);
    const reordered: LeaseRecord = {
      leaseTransitions: 3,
      renewTime: held.renewTime ?? "",
      holderIdentity: "other",
      acquireTime: held.acquireTime ?? "",
      leaseDurationSeconds: 10,
    };
    assert.equal(recordKey(reordered), recordKey(held));
    assert.equal(observe(first, reordered, T0 + 9_000).observedAt, T0);
  });

  it("restarts the clock on any change: a renewal, a new holder, a release", () => {
    const first = observe(undefined, held, T0);
    assert.equal(
      observe(first, { ...held, renewTime: "2026-12-02T15:00:01.000000Z" }, T0 + 1_000).observedAt,
      T0 + 1_000,
    );
    assert.equal(observe(first, { ...held, holderIdentity: "third" }, T0 + 2_000).observedAt, T0 + 2_000);
    assert.equal(observe(first, { ...held, holderIdentity: "" }, T0 + 3_000).observedAt, T0 + 3_000);
  });

  it("an expired Lease is one seen unchanged for its own leaseDurationSeconds, on the local clock", () => {
    assert.equal(expiresAt(observe(undefined, held, T0)), T0 + 10_000);
    assert.equal(expiresAt(observe(undefined, { ...held, leaseDurationSeconds: 1 }, T0)), T0 + 1_000);
    assert.equal(expiresAt(observe(undefined, { holderIdentity: "x" }, T0)), T0, "no duration: expired at once");
  });
});

describe("decide", () => {
  it("creates a missing Lease, holding it, with zero transitions", () => {
    assert.deepEqual(decide(input(undefined)), {
      action: "create",
      record: {
        holderIdentity: "me",
        leaseDurationSeconds: 10,
        acquireTime: WALL_MICRO,
        renewTime: WALL_MICRO,
        leaseTransitions: 0,
      },
    });
  });

  it("waits while another holder's Lease has not expired by local observation", () => {
    const seen = observe(undefined, held, T0);
    assert.deepEqual(decide(input(seen, T0 + 9_999)), { action: "wait", holder: "other", expiresAt: T0 + 10_000 });
  });

  it("ignores the record's own timestamps: a renewTime far in the past (clock skew) does not make it expired", () => {
    const skewed = observe(undefined, { ...held, renewTime: "2001-01-01T00:00:00.000000Z" }, T0);
    assert.equal(decide(input(skewed, T0 + 1)).action, "wait");
    const future = observe(undefined, { ...held, renewTime: "2099-01-01T00:00:00.000000Z" }, T0);
    assert.equal(decide(input(future, T0 + 10_000)).action, "update", "nor does one in the future keep it alive");
  });

  it("acquires an expired Lease: one more transition, acquire and renew time now", () => {
    const seen = observe(undefined, held, T0);
    assert.deepEqual(decide(input(seen, T0 + 10_000)), {
      action: "update",
      acquire: true,
      record: {
        holderIdentity: "me",
        leaseDurationSeconds: 10,
        acquireTime: WALL_MICRO,
        renewTime: WALL_MICRO,
        leaseTransitions: 4,
      },
    });
  });

  it("acquires a released Lease (empty holder) at once, without waiting for it to expire", () => {
    const released = observe(undefined, { ...held, holderIdentity: "", leaseDurationSeconds: 1 }, T0);
    const decision = decide(input(released, T0));
    assert.equal(decision.action, "update");
    assert.equal(decision.action === "update" && decision.acquire, true);
  });

  it("renews its own Lease at any time, keeping acquireTime and the transition count", () => {
    const mine = observe(undefined, { ...held, holderIdentity: "me" }, T0);
    assert.deepEqual(decide(input(mine, T0 + 60_000)), {
      action: "update",
      acquire: false,
      record: {
        holderIdentity: "me",
        leaseDurationSeconds: 10,
        acquireTime: held.acquireTime,
        renewTime: WALL_MICRO,
        leaseTransitions: 3,
      },
    });
  });

  it("counts transitions from zero when the record has none", () => {
    const bare = observe(undefined, { holderIdentity: "" }, T0);
    const decision = decide(input(bare));
    assert.equal(decision.action === "update" ? decision.record.leaseTransitions : -1, 1);
  });
});

describe("releaseRecord", () => {
  it("gives up our own Lease: no holder, one second, same transition count", () => {
    const mine = observe(undefined, { ...held, holderIdentity: "me" }, T0);
    assert.deepEqual(releaseRecord(mine, "me", WALL), {
      holderIdentity: "",
      leaseDurationSeconds: 1,
      acquireTime: WALL_MICRO,
      renewTime: WALL_MICRO,
      leaseTransitions: 3,
    });
  });

  it("never releases a Lease somebody else holds, nor one it has not seen", () => {
    assert.equal(releaseRecord(observe(undefined, held, T0), "me", WALL), undefined);
    assert.equal(releaseRecord(undefined, "me", WALL), undefined);
  });
});
