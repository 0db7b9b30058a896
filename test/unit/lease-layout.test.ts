/** Lease names carry their layout, and the rules that keep two layouts from writing at once (pure). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { confirmation, type ForeignLease, NO_LIST, observeLayouts, takeRefused } from "../../src/core/layout-guard.ts";
import {
  LEGACY_LAYOUT,
  leaseLayout,
  memberLeaseName,
  parseLeaseName,
  shardLeaseName,
} from "../../src/core/lease-names.ts";

const ID = "fleet-mirror";
const LEASE_MS = 10_000;

describe("Lease names", () => {
  it("name the layout: the single leader's is the id, a shard's and a member's carry S", () => {
    assert.equal(leaseLayout(1), "leader");
    assert.equal(leaseLayout(6), "s6");
    assert.equal(shardLeaseName(ID, 6, 5), "fleet-mirror-s6-shard-5");
    assert.match(
      memberLeaseName(ID, 6, "fleet-mirror-7d9f-abc"),
      /^fleet-mirror-s6-member-fleet-mirror-7d9f-abc-[0-9a-f]{8}$/,
    );
  });

  it("a membership Lease name is a valid Lease name for any identity, and distinct for distinct identities", () => {
    const names = ["fleet-mirror-7d9f-abc", "Host_123", "host-123", "..", "x".repeat(300)].map((id) =>
      memberLeaseName(ID, 12, id),
    );
    for (const name of names) assert.match(name, /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    for (const name of names) assert.ok(name.length <= 253);
    assert.equal(new Set(names).size, names.length);
  });

  it("parse back to what made them", () => {
    assert.deepEqual(parseLeaseName(ID, ID), { layout: "leader", role: "leader" });
    assert.deepEqual(parseLeaseName(ID, shardLeaseName(ID, 12, 11)), { layout: "s12", role: "shard", shard: 11 });
    assert.deepEqual(parseLeaseName(ID, memberLeaseName(ID, 3, "a")), { layout: "s3", role: "member" });
  });

  it("read an earlier version's names (no S) as the legacy layout", () => {
    assert.deepEqual(parseLeaseName(ID, "fleet-mirror-shard-4"), { layout: LEGACY_LAYOUT, role: "shard", shard: 4 });
    assert.deepEqual(parseLeaseName(ID, "fleet-mirror-member-pod-a-0badcafe"), {
      layout: LEGACY_LAYOUT,
      role: "member",
    });
  });

  it("read nothing else: other ids, a shard past S, S = 1 sharded, leading zeros", () => {
    for (const name of [
      "other",
      "fleet-mirror-blue",
      "fleet-mirror-blue-s6-shard-0",
      "fleet-mirror-s6-shard-6",
      "fleet-mirror-s1-shard-0",
      "fleet-mirror-s1-member-a",
      "fleet-mirror-s06-shard-1",
      "fleet-mirror-shard-01",
      "fleet-mirror-member-",
      "fleet-mirrors6-shard-0",
    ])
      assert.equal(parseLeaseName(ID, name), undefined, name);
  });
});

const shard = (name: string, holder = "old-0"): ForeignLease => ({ name, layout: "s2", role: "shard", holder });
const member = (name: string, holder = "old-0"): ForeignLease => ({ name, layout: "s2", role: "member", holder });

describe("the layout guard", () => {
  it("refuses a take before the first list", () => {
    assert.match(takeRefused(NO_LIST, 0, LEASE_MS) ?? "", /not been listed/);
  });

  it("allows a take at once when no other layout was ever seen live", () => {
    const state = observeLayouts(NO_LIST, 100, 120, []);
    assert.equal(takeRefused(state, 130, LEASE_MS), undefined);
  });

  it("refuses while another layout's shard, leader or member Lease is live, naming it", () => {
    for (const foreign of [shard("fleet-mirror-s2-shard-0"), member("fleet-mirror-s2-member-x")]) {
      const state = observeLayouts(NO_LIST, 100, 120, [foreign]);
      assert.match(takeRefused(state, 130, LEASE_MS) ?? "", new RegExp(`live: ${foreign.name} \\(old-0\\)`));
    }
  });

  it("after the last live sighting, refuses for a further lease duration, then allows", () => {
    let state = observeLayouts(NO_LIST, 0, 50, [shard("fleet-mirror")]);
    state = observeLayouts(state, 1_000, 1_050, []);
    assert.match(takeRefused(state, 1_100, LEASE_MS) ?? "", /lease duration after/);
    assert.match(takeRefused(state, 50 + LEASE_MS - 1, LEASE_MS) ?? "", /lease duration after/);
    assert.equal(takeRefused(state, 50 + LEASE_MS, LEASE_MS), undefined);
  });

  it("ignores a list sent before the one counted last (an answer that overtook another)", () => {
    const state = observeLayouts(NO_LIST, 2_000, 2_010, []);
    assert.equal(observeLayouts(state, 1_000, 2_020, [shard("fleet-mirror")]), state);
  });

  it("confirms a take only on a list sent after it, and only when no shard or leader Lease of another layout is live", () => {
    const listed = observeLayouts(NO_LIST, 1_000, 1_010, []);
    assert.equal(confirmation(listed, 1_005), undefined, "the list was sent before the take");
    assert.equal(confirmation(observeLayouts(listed, 1_006, 1_020, []), 1_005), true);
    const held = observeLayouts(listed, 1_006, 1_020, [shard("fleet-mirror-s2-shard-1")]);
    assert.equal(confirmation(held, 1_005), false);
    const leader = observeLayouts(listed, 1_006, 1_020, [{ name: ID, layout: "leader", role: "leader", holder: "x" }]);
    assert.equal(confirmation(leader, 1_005), false);
    const members = observeLayouts(listed, 1_006, 1_020, [member("fleet-mirror-s2-member-x")]);
    assert.equal(confirmation(members, 1_005), true, "a replica of another layout holding nothing writes nothing");
  });
});
