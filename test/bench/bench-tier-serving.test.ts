import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TierServing } from "../../bench/tier-serving.ts";
import { CLUSTER_NAME, SERVICE_NAME_LABEL } from "../../src/core/labels.ts";
import type { EndpointSlice } from "../../src/core/objects.ts";
import { STANDBY_ANNOTATION } from "../../src/core/tiers.ts";

/** A part of `web-federated` from `cluster`: one endpoint, ready or not, annotated standby or not. */
const part = (cluster: string, ready: boolean, standby = false): EndpointSlice => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: {
    name: `web-federated-${cluster}-ipv4`,
    namespace: "bench",
    labels: { [SERVICE_NAME_LABEL]: "web-federated", [CLUSTER_NAME]: cluster },
    ...(standby ? { annotations: { [STANDBY_ANNOTATION]: "true" } } : {}),
  },
  addressType: "IPv4",
  endpoints: [{ addresses: ["203.0.113.201"], conditions: { ready, serving: ready, terminating: false } }],
});

describe("TierServing", () => {
  it("says a tier serves once its parts are all ready and every other named part is not ready", () => {
    const t = new TierServing();
    assert.equal(t.update("bench/a", part("near-0", true)), "web-federated");
    t.update("bench/b", part("mid-0", false, true));
    assert.equal(t.serves("web-federated", ["near-0"], ["mid-0"]), true);
    assert.equal(t.serves("web-federated", ["mid-0"], ["near-0"]), false);
    t.update("bench/a", part("near-0", false, true));
    t.update("bench/b", part("mid-0", true));
    assert.equal(t.serves("web-federated", ["mid-0"], ["near-0"]), true);
    assert.equal(t.standbyParts(["near-0", "mid-0"]), 1);
  });

  it("never says a tier serves while a named part is missing, and forgets a deleted slice", () => {
    const t = new TierServing();
    t.update("bench/a", part("near-0", true));
    assert.equal(t.serves("web-federated", ["near-0"], ["mid-0"]), false, "mid-0's part not seen yet");
    assert.equal(t.update("bench/a", undefined), "web-federated");
    assert.equal(t.serves("web-federated", ["near-0"], []), false);
    assert.equal(t.serves("other-federated", [], []), false, "a Service never seen");
  });
});
