/**
 * The addresses the sandbox's KWOK gives its fake Nodes and Pods (sandbox/kwok.ts): inside
 * the documentation ranges that never leave the machine (never 192.0.2.0/24), one range
 * per cluster, none overlapping another or the Nodes' addresses.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inKwokPodCidr, KWOK_MAX_CLUSTERS, kwokNodeIp, kwokPodCidr } from "../../sandbox/kwok.ts";
import { isDocumentationPrefix } from "../../sandbox/local-addresses.ts";

const indexes = Array.from({ length: KWOK_MAX_CLUSTERS }, (_, i) => i);
describe("KWOK's Node and Pod addresses", () => {
  it("puts every cluster's Pod range and Node address in a documentation range, never 192.0.2.0/24", () => {
    for (const i of indexes) {
      assert.ok(isDocumentationPrefix(kwokPodCidr(i)), kwokPodCidr(i));
      assert.ok(isDocumentationPrefix(`${kwokNodeIp(i)}/32`), kwokNodeIp(i));
      assert.ok(!kwokPodCidr(i).startsWith("192.0.2."));
    }
  });

  it("gives no two clusters' Pods, and no Pod and Node, the same address", () => {
    for (const i of indexes)
      for (const j of indexes) {
        const [net = ""] = kwokPodCidr(j).split("/");
        assert.equal(inKwokPodCidr(i, net), i === j, `${kwokPodCidr(i)} and ${kwokPodCidr(j)}`);
        assert.ok(!inKwokPodCidr(i, kwokNodeIp(j)), `${kwokNodeIp(j)} in ${kwokPodCidr(i)}`);
      }
  });

  it("refuses a cluster index past the ranges", () => {
    assert.throws(() => kwokPodCidr(KWOK_MAX_CLUSTERS), /outside 0\.\.6/);
    assert.throws(() => kwokNodeIp(-1), /outside 0\.\.6/);
    assert.throws(() => kwokPodCidr(1.5), /outside/);
  });
});
