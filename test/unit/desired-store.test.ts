/**
 * The local writer's DesiredStore: epochs, complete and delta batches, the keep set,
 * and when garbage collection is allowed (SPEC §4, §6).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { FederatedMember } from "../../src/core/federated.ts";
import { importKey, type McsExport } from "../../src/core/mcs.ts";
import type { ToWriterFromActor } from "../../src/protocol/messages.ts";
import { DesiredStore } from "../../workers/local-writer/desired-store.ts";
import { clusterSetSpec } from "../helpers/mcs-export.ts";

/** A desired mirror of remote Service `<ns>/<svc>` of `cluster`, named `<svc>-<cluster>` unless `name` is given. */
function mirror(
  cluster: string,
  namespace: string,
  svc: string,
  options: { name?: string; port?: number } = {},
): DesiredMirror {
  const labels = {
    "mirror.linkerd.io/mirrored-service": "true",
    "mirror.linkerd.io/cluster-name": cluster,
    "mirror.linkerd.io/remote-gateway-name": "gateway",
    "mirror.linkerd.io/remote-gateway-ns": "gateway",
  };
  return Object.freeze({
    cluster,
    namespace,
    name: options.name ?? `${svc}-${cluster}`,
    remote: `${namespace}/${svc}`,
    labels,
    serviceAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": `${svc}.${namespace}.svc.cluster.local` },
    ports: [{ name: "http", protocol: "TCP", port: options.port ?? 80, targetPort: 8080 }],
    endpointsAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": `${svc}.${namespace}.svc.cluster.local` },
    addresses: ["198.18.0.10"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  });
}

let seq = 0;

function batch(
  cluster: string,
  epoch: number,
  opts: {
    complete?: boolean;
    upserts?: DesiredMirror[];
    deletes?: string[];
    members?: FederatedMember[];
    memberDeletes?: string[];
    mcsExports?: McsExport[];
    mcsExportsUnknown?: true;
  } = {},
): ToWriterFromActor {
  seq += 1;
  return {
    type: "desired.batch",
    cluster,
    epoch,
    seq,
    complete: opts.complete ?? false,
    upserts: opts.upserts ?? [],
    deletes: opts.deletes ?? [],
    ...(opts.members ? { members: opts.members } : {}),
    ...(opts.memberDeletes ? { memberDeletes: opts.memberDeletes } : {}),
    ...(opts.mcsExports ? { mcsExports: opts.mcsExports } : {}),
    ...(opts.mcsExportsUnknown ? { mcsExportsUnknown: true } : {}),
  };
}

/** `cluster`'s MCS export of ServiceImport `shop/<svc>` (SPEC §12). */
function mcsExport(cluster: string, svc: string): McsExport {
  const part = member(cluster, svc);
  return Object.freeze({ ...part, name: svc, exportedAt: "2026-12-01T00:00:00Z", spec: clusterSetSpec(part.ports) });
}

function member(cluster: string, svc: string): FederatedMember {
  return Object.freeze({
    cluster,
    namespace: "shop",
    name: `${svc}-federated`,
    remote: `shop/${svc}`,
    ports: [{ name: "http", protocol: "TCP", port: 80 }],
    addresses: ["198.18.0.10"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  });
}

const sorted = (keys: Iterable<string>): string[] => [...new Set(keys)].sort();

describe("DesiredStore epochs", () => {
  it("refuses a batch from an epoch older than the newest seen for its cluster", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 2, { complete: true, upserts: [mirror("east", "shop", "web")] }));

    assert.equal(
      store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "cart")] })),
      undefined,
    );
    assert.equal(store.applyBatch(batch("east", 1, { deletes: ["shop/web-east"] })), undefined);
    assert.ok(store.get("east", "shop/web-east"));
    assert.equal(store.get("east", "shop/cart-east"), undefined);
    assert.deepEqual(sorted(store.keys()), ["shop/web-east"]);
  });

  it("accepts a batch of the same or a newer epoch, and then refuses the older epoch", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));
    store.applyBatch(batch("east", 1, { upserts: [mirror("east", "shop", "cart")] }));
    store.applyBatch(batch("east", 3, { complete: true, upserts: [mirror("east", "shop", "cart", { port: 81 })] }));

    assert.deepEqual(sorted(store.keys()), ["shop/cart-east"]);
    assert.equal(store.get("east", "shop/cart-east")?.ports[0]?.port, 81);
    assert.equal(store.applyBatch(batch("east", 1, { upserts: [mirror("east", "shop", "web")] })), undefined);
    assert.equal(store.get("east", "shop/web-east"), undefined);
  });

  it("keeps epochs per cluster: an old epoch of one cluster does not hide another cluster's batches", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 7, { complete: true, upserts: [mirror("east", "shop", "web")] }));
    store.applyBatch(batch("west", 2, { complete: true, upserts: [mirror("west", "shop", "web")] }));

    assert.ok(store.get("west", "shop/web-west"));
    assert.deepEqual(sorted(store.keys()), ["shop/web-east", "shop/web-west"]);
  });
});

describe("DesiredStore batches", () => {
  it("replaces the cluster's whole set on a complete batch and reports removed and upserted keys", () => {
    const store = new DesiredStore();
    store.applyBatch(
      batch("east", 1, {
        complete: true,
        upserts: [mirror("east", "shop", "web"), mirror("east", "shop", "cart")],
      }),
    );

    const touched = store.applyBatch(
      batch("east", 2, { complete: true, upserts: [mirror("east", "shop", "web"), mirror("east", "shop", "api")] }),
    );

    assert.deepEqual(sorted(touched ?? []), ["shop/api-east", "shop/cart-east", "shop/web-east"]);
    assert.deepEqual(sorted(store.keys()), ["shop/api-east", "shop/web-east"]);
    assert.equal(store.get("east", "shop/cart-east"), undefined);
    assert.deepEqual(store.clusterSummary().get("east"), { mirrors: 2, complete: true });
  });

  it("an empty complete batch forgets every mirror of the cluster (all exports removed)", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));

    assert.deepEqual(store.applyBatch(batch("east", 1, { complete: true })), ["shop/web-east"]);
    assert.deepEqual(sorted(store.keys()), []);
    assert.deepEqual(store.clusterSummary().get("east"), { mirrors: 0, complete: true });
    assert.equal(store.gcAllowed("east"), true);
  });

  it("applies deltas: upserts replace the mirror, deletes remove it, unknown deletes touch nothing", () => {
    const store = new DesiredStore();
    store.applyBatch(
      batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web"), mirror("east", "shop", "cart")] }),
    );

    const touched = store.applyBatch(
      batch("east", 1, {
        upserts: [mirror("east", "shop", "web", { port: 8081 }), mirror("east", "shop", "api")],
        deletes: ["shop/cart-east", "shop/never-east"],
      }),
    );

    assert.deepEqual(sorted(touched ?? []), ["shop/api-east", "shop/cart-east", "shop/web-east"]);
    assert.equal(store.get("east", "shop/web-east")?.ports[0]?.port, 8081);
    assert.equal(store.get("east", "shop/cart-east"), undefined);
    assert.deepEqual(sorted(store.keys()), ["shop/api-east", "shop/web-east"]);
    assert.deepEqual(store.clusterSummary().get("east"), { mirrors: 2, complete: true });
  });

  it("does not mark a cluster complete on deltas alone", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { upserts: [mirror("east", "shop", "web")] }));

    assert.deepEqual(store.clusterSummary().get("east"), { mirrors: 1, complete: false });
    assert.equal(store.gcAllowed("east"), false);
  });

  it("a delete and an upsert of the same key in one delta leave the upserted mirror", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));
    store.applyBatch(
      batch("east", 1, { upserts: [mirror("east", "shop", "web", { port: 9 })], deletes: ["shop/web-east"] }),
    );

    assert.equal(store.get("east", "shop/web-east")?.ports[0]?.port, 9);
    assert.deepEqual(store.claimants("shop/web-east"), ["east"]);
  });
});

describe("DesiredStore garbage-collection gate", () => {
  it("before the keep set is known, allows GC only for clusters that sent a complete batch", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));
    store.applyBatch(batch("west", 1, { upserts: [mirror("west", "shop", "web")] }));

    assert.equal(store.gcAllowed("east"), true);
    assert.equal(store.gcAllowed("west"), false);
    assert.equal(store.gcAllowed("gone"), false, "a cluster never heard of is not assumed unregistered");
  });

  it("once the keep set is known, allows GC for unregistered clusters and for complete registered ones only", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));
    store.applyBatch(batch("west", 1, { upserts: [mirror("west", "shop", "web")] }));
    store.setKeep(["east", "west", "north"]);

    assert.equal(store.gcAllowed("east"), true);
    assert.equal(store.gcAllowed("west"), false, "registered, no complete list yet");
    assert.equal(store.gcAllowed("north"), false, "registered, nothing received yet");
    assert.equal(store.gcAllowed("gone"), true, "no Secret registers it any more");
  });

  it("a newer epoch's complete batch keeps GC allowed; the old set stays authoritative until it arrives", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));
    store.applyBatch(batch("east", 2, { upserts: [mirror("east", "shop", "cart")] }));

    assert.deepEqual(sorted(store.keys()), ["shop/cart-east", "shop/web-east"]);
    store.applyBatch(batch("east", 2, { complete: true, upserts: [mirror("east", "shop", "cart")] }));
    assert.deepEqual(sorted(store.keys()), ["shop/cart-east"]);
    assert.equal(store.gcAllowed("east"), true);
  });
});

describe("DesiredStore keep set", () => {
  it("setKeep drops the clusters it does not name, with the keys they claimed", () => {
    const store = new DesiredStore();
    store.applyBatch(
      batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web"), mirror("east", "shop", "cart")] }),
    );
    store.applyBatch(batch("west", 1, { complete: true, upserts: [mirror("west", "shop", "web")] }));

    const { dropped, keys } = store.setKeep(["west"]);

    assert.deepEqual(dropped, ["east"]);
    assert.deepEqual(sorted(keys), ["shop/cart-east", "shop/web-east"]);
    assert.deepEqual(sorted(store.keys()), ["shop/web-west"]);
    assert.equal(store.get("east", "shop/web-east"), undefined);
    assert.equal(store.clusterSummary().has("east"), false);
    assert.equal(store.gcAllowed("east"), true);
  });

  it("refuses batches of an unregistered cluster (never absorbs them silently), and accepts them once it is registered again", () => {
    const store = new DesiredStore();
    store.setKeep(["west"]);

    assert.equal(
      store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] })),
      undefined,
    );
    assert.deepEqual(sorted(store.keys()), []);

    store.setKeep(["west", "east"]);
    assert.deepEqual(store.applyBatch(batch("east", 2, { complete: true, upserts: [mirror("east", "shop", "web")] })), [
      "shop/web-east",
    ]);
    assert.ok(store.get("east", "shop/web-east"));
    assert.equal(store.gcAllowed("east"), true);
  });

  it("a registered cluster's batches are absorbed before a keep set names it, and its mirrors are not garbage until a keep set leaves it out", () => {
    const store = new DesiredStore();
    store.setKeep(["west"]);
    store.register("fresh");

    assert.deepEqual(store.applyBatch(batch("fresh", 1, { upserts: [mirror("fresh", "shop", "web")] })), [
      "shop/web-fresh",
    ]);
    assert.equal(store.gcAllowed("fresh"), false, "registered, no complete set yet: nothing of it is collected");

    const { dropped, keys } = store.setKeep(["west"]);
    assert.deepEqual(dropped, ["fresh"]);
    assert.deepEqual(keys, ["shop/web-fresh"]);
    assert.equal(store.gcAllowed("fresh"), true);
  });

  it("setKeep with every cluster named drops nothing", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));

    assert.deepEqual(store.setKeep(["east"]), { dropped: [], keys: [] });
    assert.ok(store.get("east", "shop/web-east"));
  });
});

describe("DesiredStore claimants", () => {
  it("lists, in name order, every cluster that wants a mirror under the same local name", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("west", 1, { complete: true, upserts: [mirror("west", "shop", "web", { name: "web-x" })] }));
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web", { name: "web-x" })] }));

    assert.deepEqual(store.claimants("shop/web-x"), ["east", "west"]);
    assert.equal(store.get("east", "shop/web-x")?.cluster, "east");
    assert.equal(store.get("west", "shop/web-x")?.cluster, "west");
    assert.deepEqual(sorted(store.keys()), ["shop/web-x"]);
  });

  it("removes only the claim of the cluster that stops wanting the name", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web", { name: "web-x" })] }));
    store.applyBatch(batch("west", 1, { complete: true, upserts: [mirror("west", "shop", "web", { name: "web-x" })] }));

    store.applyBatch(batch("east", 1, { deletes: ["shop/web-x"] }));
    assert.deepEqual(store.claimants("shop/web-x"), ["west"]);
    assert.ok(store.get("west", "shop/web-x"));

    store.setKeep(["east"]);
    assert.deepEqual(store.claimants("shop/web-x"), []);
    assert.deepEqual(sorted(store.keys()), []);
  });

  it("claims of a key nobody wants are empty", () => {
    assert.deepEqual(new DesiredStore().claimants("shop/nothing"), []);
  });
});

describe("DesiredStore fleet-wide members (SPEC §11)", () => {
  it("holds members per cluster next to the mirrors; a complete batch replaces them, a delta adds or deletes", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, members: [member("east", "web"), member("east", "db")] }));
    store.applyBatch(batch("west", 1, { complete: true, members: [member("west", "web")] }));
    assert.deepEqual([...store.members("shop/web-federated").keys()].sort(), ["east", "west"]);
    assert.deepEqual(sorted(store.federatedKeys()), ["shop/db-federated", "shop/web-federated"]);
    assert.deepEqual(sorted(store.keys()), [], "members are not mirror claimants");

    const touched = store.applyBatch(batch("east", 1, { memberDeletes: ["shop/web-federated"] }));
    assert.deepEqual(touched, ["shop/web-federated"]);
    assert.deepEqual([...store.members("shop/web-federated").keys()], ["west"]);

    store.applyBatch(batch("west", 1, { complete: true }));
    assert.deepEqual(sorted(store.federatedKeys()), ["shop/db-federated"]);
  });

  it("a cluster is unknown until its first complete set; that set touches the keys of its own parts, not every fleet-wide key", () => {
    const store = new DesiredStore();
    store.setKeep(["east", "west"], ["west", "east"]);
    assert.deepEqual(store.order(), ["west", "east"]);
    assert.deepEqual(sorted(store.unknownClusters()), ["east", "west"]);
    store.applyBatch(batch("east", 1, { complete: true, members: [member("east", "web")] }));
    store.applyBatch(batch("west", 1, { members: [member("west", "db")] }));
    assert.deepEqual(sorted(store.unknownClusters()), ["west"], "a delta does not make a cluster known");
    const touched = store.applyBatch(batch("west", 1, { complete: true, members: [member("west", "db")] }));
    // west's part, held before as an unknown cluster's, counts now; east's key does not
    // depend on west (the writer enqueues what west's knowledge may change, shared-triggers.ts).
    assert.deepEqual(sorted(touched ?? []), ["shop/db-federated"]);
    assert.deepEqual(sorted(store.unknownClusters()), []);
  });

  it("a complete set that repeats a part unchanged touches no shared key; a changed part touches its key", () => {
    const store = new DesiredStore();
    store.setKeep(["east"]);
    store.applyBatch(batch("east", 1, { complete: true, members: [member("east", "web"), member("east", "db")] }));
    const again = store.applyBatch(
      batch("east", 1, { complete: true, members: [member("east", "web"), member("east", "db")] }),
    );
    assert.deepEqual(again, []);
    const moved = { ...member("east", "db"), addresses: ["198.18.0.99"] };
    const changed = store.applyBatch(batch("east", 1, { complete: true, members: [member("east", "web"), moved] }));
    assert.deepEqual(changed, ["shop/db-federated"]);
  });

  it("setKeep drops an unregistered cluster's members, with their keys", () => {
    const store = new DesiredStore();
    store.applyBatch(batch("east", 1, { complete: true, members: [member("east", "web")] }));
    assert.equal(store.registrationKnown, false);
    const { keys } = store.setKeep(["west"]);
    assert.deepEqual(keys, ["shop/web-federated"]);
    assert.equal(store.members("shop/web-federated").size, 0);
    assert.equal(store.registrationKnown, true);
  });
});

describe("DesiredStore and MCS exports that are not known (SPEC §12)", () => {
  const web = importKey({ namespace: "shop", name: "web" });

  it("a complete set whose exports are unknown keeps what is held of them, from an earlier incarnation too, and the cluster's exports unknown", () => {
    const store = new DesiredStore();
    store.setKeep(["east", "west"]);
    store.applyBatch(batch("east", 1, { complete: true, mcsExports: [mcsExport("east", "web")] }));
    store.applyBatch(batch("west", 1, { complete: true }));
    assert.deepEqual(sorted(store.exportsUnknown()), []);
    // East restarts; its new incarnation's ServiceExport read fails.
    const touched = store.applyBatch(batch("east", 2, { complete: true, mcsExportsUnknown: true }));
    assert.deepEqual([...store.exports(web).keys()], ["east"], "east's export of web is kept");
    assert.deepEqual(touched, [web], "web is reduced again: east's exports are unknown now");
    assert.deepEqual(sorted(store.exportsUnknown()), ["east"]);
    assert.equal(store.exportsKnown("east"), false);
    assert.equal(store.known("east"), true, "its mirrors and members are known all the same");
    assert.equal(store.gcAllowed("east"), true);
    // Known again, and without web: now it goes.
    assert.deepEqual(store.applyBatch(batch("east", 2, { complete: true })), [web]);
    assert.equal(store.exports(web).size, 0);
    assert.deepEqual(sorted(store.exportsUnknown()), []);
  });

  it("a first complete set with exports unknown (a writer restart) leaves the cluster's exports unknown, not an exporter of nothing", () => {
    const store = new DesiredStore();
    store.setKeep(["east"]);
    store.applyBatch(
      batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "api")], mcsExportsUnknown: true }),
    );
    assert.deepEqual(sorted(store.exportsUnknown()), ["east"]);
    assert.deepEqual(sorted(store.unknownClusters()), [], "known for mirrors and fleet-wide members");
    store.applyBatch(batch("east", 1, { complete: true, mcsExports: [mcsExport("east", "web")] }));
    assert.deepEqual(sorted(store.exportsUnknown()), []);
    assert.deepEqual([...store.exports(web).keys()], ["east"]);
  });
});

describe("DesiredStore.forget (a shard given up)", () => {
  it("drops the cluster's desired set without unregistering it: nothing is collected until a new complete set", () => {
    const store = new DesiredStore();
    store.setKeep(["east"]);
    store.applyBatch(batch("east", 1, { complete: true, upserts: [mirror("east", "shop", "web")] }));
    assert.equal(store.gcAllowed("east"), true);
    assert.deepEqual(store.forget(["east", "never-seen"]), ["shop/web-east"]);
    assert.deepEqual(store.claimants("shop/web-east"), []);
    assert.equal(store.gcAllowed("east"), false, "a regained cluster must send its complete set before any GC");
    assert.deepEqual([...store.clusters()], []);
    store.applyBatch(batch("east", 2, { complete: true, upserts: [mirror("east", "shop", "cart")] }));
    assert.equal(store.gcAllowed("east"), true);
  });
});
