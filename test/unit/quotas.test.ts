/**
 * The per-cluster quotas as pure functions and in the desired sender: local Services a
 * cluster's exports may ask for (`--max-mirrors-per-cluster`, core/cluster-quota.ts) and
 * Namespaces created for it (`--max-namespaces-per-cluster`, core/namespace-quota.ts).
 * Both choose in name order, so the choice depends only on the keys, never on timing.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { refusedByQuota, weightOf } from "../../src/core/cluster-quota.ts";
import type { ClusterSettings } from "../../src/core/desired.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../../src/core/labels.ts";
import { namespaceQuotaRefusal } from "../../src/core/namespace-quota.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import { eventually } from "../helpers/kube.ts";
import { type Batch, FakeDesiredPort, fakeSender, summary } from "../helpers/remote-actor.ts";

describe("the quota of local Services per cluster", () => {
  it("admits keys in name order while they fit; a heavier key that does not fit is refused whole, a lighter one after it may fit", () => {
    const weights = new Map([
      ["shop/d", 1],
      ["shop/a", 1],
      ["shop/b-headless", 3],
      ["shop/c", 1],
      ["shop/gone", 0],
    ]);
    const refused = refusedByQuota("east", weights, 3);
    assert.deepEqual([...refused.keys()], ["shop/b-headless"]);
    assert.equal(refused.get("shop/b-headless")?.reason, "cluster-quota");
    assert.match(
      refused.get("shop/b-headless")?.message ?? "",
      /asks for 3 local Services .* 6 in all, over its quota of 3/,
    );
    assert.deepEqual([...refusedByQuota("east", weights, 2).keys()], ["shop/b-headless", "shop/d"]);
    assert.equal(refusedByQuota("east", weights, 0).size, 0, "0: no quota");
    assert.equal(refusedByQuota("east", weights, 6).size, 0, "everything fits");
  });

  it("weighs a key by its mirrors, its member and its MCS export", () => {
    assert.equal(weightOf({ mirrors: [1, 2, 3], member: undefined, mcs: undefined }), 3);
    assert.equal(weightOf({ mirrors: [], member: {}, mcs: {} }), 2);
  });
});

describe("the quota of created Namespaces per cluster", () => {
  const missing = ["ns-a", "ns-b", "ns-c"];
  it("allows the missing namespaces in name order while the created ones and they stay within the quota", () => {
    assert.equal(namespaceQuotaRefusal("ns-a", "east", 0, missing, 2), undefined);
    assert.equal(namespaceQuotaRefusal("ns-b", "east", 0, missing, 2), undefined);
    assert.match(namespaceQuotaRefusal("ns-c", "east", 0, missing, 2) ?? "", /quota of 2/);
    assert.match(namespaceQuotaRefusal("ns-b", "east", 1, missing, 2) ?? "", /has 1 Namespaces created for it/);
    assert.equal(namespaceQuotaRefusal("ns-c", "east", 5, missing, 0), undefined, "0: no quota");
  });

  it("places a namespace not among the listed ones by its name too", () => {
    assert.equal(namespaceQuotaRefusal("ns-0", "east", 1, missing, 2), undefined);
    assert.ok(namespaceQuotaRefusal("ns-bb", "east", 0, missing, 2));
  });
});

describe("the desired sender under --max-mirrors-per-cluster", () => {
  const SETTINGS: ClusterSettings = {
    name: "east",
    domain: "cluster.local",
    excludedNamespaces: [],
    defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
    maxMirrors: 3,
  };
  const gateway: Service = {
    metadata: { name: "gateway", namespace: "gw", resourceVersion: "1" },
    spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143 }] },
    status: { loadBalancer: { ingress: [{ ip: "198.18.0.1" }] } },
  };
  const service = (name: string): Service => ({
    metadata: {
      name,
      namespace: "shop",
      resourceVersion: "1",
      annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gw" },
    },
    spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
  });

  it("sends the first three exports; one going frees its place for the next; one that sorts first takes the last place", async () => {
    const store = new Map([gateway, ...["b", "c", "d", "e"].map(service)].map((s) => [objectKey(s.metadata), s]));
    const port = new FakeDesiredPort();
    const sender = fakeSender({
      cluster: SETTINGS,
      services: { get: (k) => store.get(k), values: () => store.values(), hasSynced: true },
    });
    let seen = 0;
    const next = (what: string): Promise<Batch> =>
      eventually(
        () => `${what} (batches: ${port.batches.map(summary).join(" ")})`,
        () => port.batches[seen],
        5_000,
        5,
      ).then((b) => {
        seen += 1;
        return b;
      });
    const refused = () =>
      sender
        .problems()
        .filter((p) => p.reason === "cluster-quota")
        .map((p) => p.remote);
    sender.attach(port);
    sender.requestSnapshot();
    const complete = await next("the complete set");
    assert.deepEqual(complete.upserts.map((m) => m.name).sort(), ["b-east", "c-east", "d-east"]);
    assert.deepEqual(refused(), ["shop/e"]);

    store.delete("shop/c");
    sender.changed("shop/c");
    const freed = await next("c gone");
    assert.deepEqual([freed.upserts.map((m) => m.name), freed.deletes], [["e-east"], ["shop/c-east"]]);
    assert.deepEqual(refused(), []);

    store.set("shop/a", service("a"));
    sender.changed("shop/a");
    const first = await next("a added");
    assert.deepEqual([first.upserts.map((m) => m.name), first.deletes], [["a-east"], ["shop/e-east"]]);
    assert.deepEqual(refused(), ["shop/e"]);
  });
});
