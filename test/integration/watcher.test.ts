/**
 * The lean client and the watcher against a real kube-apiserver (the sandbox control
 * plane): pagination with real continue tokens, live watch events, RBAC denials, and
 * recovery after the API server is killed while Services change. Nothing is stubbed.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import type { Service } from "../../src/core/objects.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import { Watcher, type WatcherOptions, type WatchFailure } from "../../src/kube/watcher.ts";
import { adminConnection } from "../helpers/connection.ts";
import { adminKubeConfig, coreApi, eventually } from "../helpers/kube.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Recorded {
  readonly watcher: Watcher<Service>;
  readonly failures: WatchFailure[];
  listed: number;
}

describe("Watcher against a real API server", () => {
  let plane: ControlPlane;
  let client: KubeClient;
  const watchers: Watcher<Service>[] = [];

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    client = new KubeClient(adminConnection(plane.cluster("remote")), { requestTimeoutMs: 5_000 });
  });
  after(async () => {
    await Promise.all(watchers.map((w) => w.stop()));
    client?.close();
    await plane?.stop();
  });

  function startWatcher(options: Partial<WatcherOptions> & { path: string }, on: KubeClient = client): Recorded {
    const watcher = new Watcher<Service>({ client: on, backoff: { initialMs: 100, maxMs: 1_000 }, ...options });
    const recorded: Recorded = { watcher, failures: [], listed: 0 };
    watcher.on("failure", (f) => recorded.failures.push(f));
    watcher.on("listed", () => recorded.listed++);
    watchers.push(watcher);
    watcher.start();
    return recorded;
  }

  const createNamespace = (name: string) =>
    client.request("POST", "/api/v1/namespaces", { body: { metadata: { name } } });
  const createService = (namespace: string, name: string) =>
    client.request<Service>("POST", `/api/v1/namespaces/${namespace}/services`, {
      body: { metadata: { name }, spec: { ports: [{ name: "http", port: 80 }] } },
    });

  /** key → resourceVersion of a fresh list through client-node, independent of the code under test. */
  async function freshList(namespace: string): Promise<Record<string, string | undefined>> {
    const list = await coreApi(adminKubeConfig(plane.cluster("remote"))).listNamespacedService({ namespace });
    const out: Record<string, string | undefined> = {};
    const items = [...list.items].sort((a, b) => ((a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1));
    for (const s of items) out[`${namespace}/${s.metadata?.name}`] = s.metadata?.resourceVersion;
    return out;
  }

  /** Sorted by key, so two views compare equal whatever order their maps were filled in. */
  function storeOf(watcher: Watcher<Service>): Record<string, string | undefined> {
    const out: Record<string, string | undefined> = {};
    const items = [...watcher.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
    for (const s of items) out[`${s.metadata.namespace}/${s.metadata.name}`] = s.metadata.resourceVersion;
    return out;
  }

  it("lists page by page and follows creates, updates and deletes of Services", async () => {
    await createNamespace("follow");
    for (const name of ["a", "b", "c", "d", "e"]) await createService("follow", name);
    const { watcher, failures } = startWatcher({ path: "/api/v1/namespaces/follow/services", pageSize: 2 });
    await eventually("the first list", () => (watcher.hasSynced ? true : undefined));
    assert.equal(watcher.size, 5);
    assert.equal(watcher.get("follow/a")?.kind, "Service");
    assert.equal(watcher.stats.lists, 1);

    await createService("follow", "f");
    await client.request("PATCH", "/api/v1/namespaces/follow/services/a", {
      body: { metadata: { labels: { changed: "yes" } } },
      contentType: "application/merge-patch+json",
    });
    await client.request("DELETE", "/api/v1/namespaces/follow/services/b");
    await eventually("the store to follow the changes", async () => {
      const fresh = await freshList("follow");
      return JSON.stringify(storeOf(watcher)) === JSON.stringify(fresh) ? true : undefined;
    });
    assert.equal(watcher.get("follow/a")?.metadata.labels?.["changed"], "yes");
    assert.equal(watcher.get("follow/b"), undefined);
    assert.deepEqual(failures, []);
    assert.equal(watcher.stats.lists, 1, "no relist was needed");
  });

  it("switches to a new label selector: the request in flight ends without a failure, a relist replaces the store and reports what left and came", async () => {
    await createNamespace("reselect");
    const labelled = (name: string, shard: string) =>
      client.request<Service>("POST", "/api/v1/namespaces/reselect/services", {
        body: { metadata: { name, labels: { shard } }, spec: { ports: [{ name: "http", port: 80 }] } },
      });
    for (const [name, shard] of [
      ["a0", "0"],
      ["a1", "1"],
      ["b2", "2"],
      ["b3", "3"],
    ] as const)
      await labelled(name, shard);
    const recorded = startWatcher({ path: "/api/v1/namespaces/reselect/services", labelSelector: "shard in (0,1)" });
    const { watcher, failures } = recorded;
    const changes: string[] = [];
    watcher.on("change", (key, _previous, current) => changes.push(`${key}:${current ? "in" : "out"}`));
    await eventually("the first list", () => (watcher.listedWithSelector ? true : undefined));
    assert.deepEqual([...watcher.keys()].sort(), ["reselect/a0", "reselect/a1"]);
    // The watch runs: the selector changes under it.
    await eventually("the watch to start", () => (watcher.stats.watchesStarted > 0 ? true : undefined));
    changes.length = 0;
    watcher.setLabelSelector("shard notin (0,1)");
    assert.equal(watcher.listedWithSelector, false, "not listed with the new selector yet");
    await eventually("the relist", () => (watcher.listedWithSelector ? true : undefined));
    assert.deepEqual([...watcher.keys()].sort(), ["reselect/b2", "reselect/b3"]);
    assert.deepEqual(changes.sort(), ["reselect/a0:out", "reselect/a1:out", "reselect/b2:in", "reselect/b3:in"]);
    // The new watch follows the new selector: an object it matches comes, one it does not stays out.
    await labelled("b4", "4");
    await labelled("a5", "0");
    await eventually("b4 to come", () => (watcher.get("reselect/b4") ? true : undefined));
    assert.equal(watcher.get("reselect/a5"), undefined);
    // Twice in a row (the second before the first relist): the last one wins.
    watcher.setLabelSelector("shard=2");
    watcher.setLabelSelector("shard in (0)");
    await eventually("the last selector's list", () => (watcher.listedWithSelector ? true : undefined));
    assert.deepEqual([...watcher.keys()].sort(), ["reselect/a0", "reselect/a5"]);
    assert.deepEqual(failures, [], "a new selector is not a failure");
  });

  it("recovers by itself when the API server is killed while Services change, and ends equal to a fresh list", async () => {
    await createNamespace("chaos");
    for (let i = 0; i < 5; i++) await createService("chaos", `s${i}`);
    const { watcher, failures } = startWatcher({ path: "/api/v1/namespaces/chaos/services" });
    await eventually("the first list", () => (watcher.hasSynced ? true : undefined));

    // A writer that keeps creating, patching and deleting Services, ignoring errors while the API is down.
    let changes = 0;
    watcher.on("change", () => changes++);
    let writing = true;
    let next = 5;
    const writer = (async () => {
      while (writing) {
        const victim = `s${Math.floor(Math.random() * next)}`;
        await Promise.allSettled([
          createService("chaos", `s${next++}`),
          client.request("PATCH", `/api/v1/namespaces/chaos/services/${victim}`, {
            body: { metadata: { labels: { tick: String(next) } } },
            contentType: "application/merge-patch+json",
          }),
          client.request("DELETE", `/api/v1/namespaces/chaos/services/s${Math.floor(Math.random() * next)}`),
        ]);
        await sleep(20);
      }
    })();
    try {
      // Changes flow through the watch before the kill …
      await eventually("10 changes delivered by the watch", () => (changes >= 10 ? true : undefined));
      const watchesBefore = watcher.stats.watchesStarted;
      await plane.restartApiServer("remote", { kill: true });
      // … and go on while the watcher recovers: it watches again and delivers 10 more.
      await eventually("the watch started again", () =>
        watcher.stats.watchesStarted > watchesBefore ? true : undefined,
      );
      const changesAfter = changes;
      await eventually("10 changes delivered after the restart", () =>
        changes >= changesAfter + 10 ? true : undefined,
      );
    } finally {
      writing = false;
      await writer;
    }

    await eventually(
      () =>
        `the store to equal a fresh list (stats ${JSON.stringify(watcher.stats)}, failures ${JSON.stringify(failures.slice(-5))})`,
      async () => {
        const fresh = await freshList("chaos");
        return JSON.stringify(storeOf(watcher)) === JSON.stringify(fresh) ? true : undefined;
      },
      30_000,
    );
    assert.ok(
      failures.some((f) => f.phase === "watch"),
      `the killed API server cut the watch (failures: ${JSON.stringify(failures)})`,
    );
    assert.ok(watcher.hasSynced);

    // The watch is live again, not merely relisted.
    const listsBefore = watcher.stats.lists;
    await createService("chaos", "after-recovery");
    await eventually("the new Service in the store", () => watcher.get("chaos/after-recovery"));
    assert.equal(watcher.stats.lists, listsBefore);
  });

  it("reports a Forbidden list as http-403 and keeps retrying, while a namespace it may read syncs (token auth)", async () => {
    const remote = plane.cluster("remote");
    const token = await mintServiceAccountToken(adminKubeConfig(remote), {
      namespace: "limited",
      serviceAccount: "reader",
      role: {
        kind: "Role",
        name: "service-reader",
        rules: [{ apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] }],
      },
    });
    await createService("limited", "visible");
    const reader = new KubeClient({ server: remote.server, caPem: remote.caPem, auth: { kind: "token", token } });
    try {
      const denied = startWatcher({ path: "/api/v1/services", backoff: { initialMs: 20, maxMs: 50 } }, reader);
      const allowed = startWatcher({ path: "/api/v1/namespaces/limited/services" }, reader);
      await eventually("repeated 403 failures", () => (denied.failures.length >= 3 ? true : undefined));
      assert.ok(denied.failures.every((f) => f.phase === "list" && f.reason === "http-403"));
      assert.match(
        denied.failures[0]?.message ?? "",
        /GET \/api\/v1\/services on https:\/\/127\.0\.0\.1:\d+: HTTP 403 Forbidden/,
      );
      assert.equal(denied.watcher.hasSynced, false);
      await eventually("the allowed namespace to sync", () => (allowed.watcher.hasSynced ? true : undefined));
      assert.deepEqual([...allowed.watcher.keys()], ["limited/visible"]);
      await denied.watcher.stop();
      await allowed.watcher.stop();
    } finally {
      reader.close();
    }
  });
});
