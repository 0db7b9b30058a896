import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { GatewayView } from "../../src/core/desired.ts";
import { partitionedView, partitionState } from "../../src/core/partition.ts";

const view: GatewayView = { exists: true, addresses: ["198.18.0.1", "198.18.0.2"], incomingPort: 4143 };

describe("the partition policy (--stale-after)", () => {
  it("never partitions when it is off or the API server is reachable", () => {
    assert.deepEqual(partitionState(0, 1_000, 1_000_000), { partitioned: false });
    assert.deepEqual(partitionState(30_000, undefined, 1_000_000), { partitioned: false });
  });

  it("partitions once unreachable for the whole delay, and says when before then", () => {
    assert.deepEqual(partitionState(30_000, 1_000, 30_999), { partitioned: false, at: 31_000 });
    assert.deepEqual(partitionState(30_000, 1_000, 31_000), { partitioned: true });
    assert.deepEqual(partitionState(30_000, 1_000, 90_000), { partitioned: true });
  });

  it("turns every address of an unprobed gateway not ready and removes none", () => {
    const out = partitionedView(view, false);
    assert.deepEqual(out.addresses, view.addresses);
    assert.deepEqual(out.notReadyAddresses, view.addresses);
  });

  it("leaves a probed gateway to its probe: alive addresses stay ready", () => {
    const probed: GatewayView = { ...view, notReadyAddresses: ["198.18.0.2"] };
    assert.equal(partitionedView(probed, true), probed);
    assert.equal(partitionedView(view, true), view);
  });

  it("leaves a gateway without addresses as it is", () => {
    const none: GatewayView = { exists: true, addresses: [], unusable: "gateway has no ingress yet" };
    assert.equal(partitionedView(none, false), none);
  });
});
