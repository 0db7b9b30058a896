import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FLEET_WIDE_KEY, tierLine } from "../../sandbox/demo-tiers.ts";
import type { FederatedServiceStatus } from "../../src/protocol/status.ts";

const SINCE = new Date(2026, 11, 6, 13, 45, 1).toISOString();

/** The fleet-wide Service's status entry with the demo's three tiers (local 0, west 10, east 20). */
const entry = (ready: readonly [number, number, number], servingPriority: number): FederatedServiceStatus => ({
  key: FLEET_WIDE_KEY,
  clusters: ["east", "local", "west"],
  kept: [],
  ready: 0,
  notReady: 0,
  tiers: [0, 10, 20].map((priority, i) => ({ priority, ready: ready[i] ?? 0, serving: priority <= servingPriority })),
  servingPriority,
  servingSince: SINCE,
});

describe("the demo's tier line under the fleet-wide row", () => {
  it("names each tier's clusters, whether it serves and its ready endpoints, and since when", () => {
    assert.equal(
      tierLine(entry([1, 1, 1], 10)),
      "  tiers: 0 local serving (1 ready), 10 west serving (1 ready), 20 east standby (1 ready) since 13:45:01",
    );
  });

  it("after a failover, shows the next tier serving and the dead one with no ready endpoint", () => {
    assert.equal(
      tierLine(entry([1, 0, 1], 20)),
      "  tiers: 0 local serving (1 ready), 10 west serving (0 ready), 20 east serving (1 ready) since 13:45:01",
    );
  });

  it("says a failback is pending while a better prefix holds --failover-min-ready ready endpoints again", () => {
    assert.equal(
      tierLine(entry([1, 1, 1], 20)),
      "  tiers: 0 local serving (1 ready), 10 west serving (1 ready), 20 east serving (1 ready) since 13:45:01; failback to 10 pending (--failback-delay 10s)",
    );
  });

  it("is absent while the Service has no tiers", () => {
    const { tiers: _t, servingPriority: _p, servingSince: _s, ...untiered } = entry([1, 1, 1], 10);
    assert.equal(tierLine(untiered), undefined);
    assert.equal(tierLine(undefined), undefined);
  });
});
