import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EndpointReadiness, latencySummary } from "../../bench/endpoint-readiness.ts";
import type { SliceEndpoint } from "../../src/core/objects.ts";

const ep = (address: string, ready: boolean | undefined): SliceEndpoint => ({
  addresses: [address],
  conditions: ready === undefined ? {} : { ready, serving: ready, terminating: false },
});

describe("EndpointReadiness", () => {
  it("counts an address not ready everywhere only once every slice holding it says so", () => {
    const r = new EndpointReadiness();
    r.update("bench/web-east-ipv4", [ep("203.0.113.1", true)]);
    r.update("bench/web-federated-east-ipv4", [ep("203.0.113.1", true), ep("203.0.113.2", true)]);
    assert.equal(r.holders("203.0.113.1"), 2);
    assert.equal(r.everywhere("203.0.113.1", true, 2), true);
    r.update("bench/web-east-ipv4", [ep("203.0.113.1", false)]);
    assert.equal(r.everywhere("203.0.113.1", false), false, "the fleet-wide slice still says ready");
    r.update("bench/web-federated-east-ipv4", [ep("203.0.113.1", false), ep("203.0.113.2", true)]);
    assert.equal(r.everywhere("203.0.113.1", false, 2), true);
    assert.equal(r.everywhere("203.0.113.2", true), true);
  });

  it("needs the expected number of holders: a slice not seen yet does not count as not ready", () => {
    const r = new EndpointReadiness();
    r.update("bench/web-east-ipv4", [ep("203.0.113.1", false)]);
    assert.equal(r.everywhere("203.0.113.1", false, 2), false);
    assert.equal(r.everywhere("203.0.113.9", false), false, "an address no slice holds is nowhere");
  });

  it("reads an absent ready condition as ready, and forgets a deleted slice", () => {
    const r = new EndpointReadiness();
    r.update("bench/a-ipv4", [ep("203.0.113.1", undefined)]);
    assert.equal(r.everywhere("203.0.113.1", true), true);
    r.update("bench/a-ipv4", undefined);
    assert.equal(r.holders("203.0.113.1"), 0);
    r.update("bench/b-ipv4", null);
    assert.equal(r.holders("203.0.113.1"), 0);
  });

  it("reports the addresses a slice turned from ready to not ready, and only those", () => {
    const r = new EndpointReadiness();
    assert.deepEqual(r.update("bench/a-ipv4", [ep("203.0.113.1", false), ep("203.0.113.2", true)]), []);
    assert.deepEqual(r.update("bench/a-ipv4", [ep("203.0.113.1", false), ep("203.0.113.2", false)]), ["203.0.113.2"]);
    assert.deepEqual(r.update("bench/a-ipv4", [ep("203.0.113.1", true), ep("203.0.113.2", false)]), []);
  });
});

describe("latencySummary", () => {
  it("gives p50 and max in seconds from the start, and counts the addresses never done apart", () => {
    const done = new Map<string, number | undefined>([
      ["a", 1_000 + 4_000],
      ["b", 1_000 + 9_500],
      ["c", 1_000 + 6_000],
      ["d", undefined],
    ]);
    assert.deepEqual(latencySummary(1_000, done), { gateways: 4, missing: 1, p50S: 6, maxS: 9.5 });
    assert.deepEqual(latencySummary(0, new Map()), { gateways: 0, missing: 0, p50S: null, maxS: null });
  });
});
