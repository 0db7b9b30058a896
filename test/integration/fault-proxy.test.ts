/**
 * The fault-injecting proxy in front of a real kube-apiserver, driven through the lean
 * client and the watcher with a ServiceAccount bearer token (client certificates cannot
 * pass a TLS-terminating proxy). Every fault is checked from the client's side: the
 * error it sees, and that the watcher recovers to a store equal to a fresh list.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { type FaultProxy, startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import type { Service } from "../../src/core/objects.ts";
import { KubeApiError, KubeClient, KubeTransportError, type WatchEvent } from "../../src/kube/client.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import { adminConnection } from "../helpers/connection.ts";
import { adminKubeConfig, eventually } from "../helpers/kube.ts";
import { createExported, createGateway, startActor, upsertsIn } from "../helpers/remote-actor.ts";

interface Recorded {
  readonly watcher: Watcher<Service>;
  readonly failures: WatchFailure[];
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail("expected the request to fail");
}

describe("FaultProxy in front of a real API server", () => {
  let plane: ControlPlane;
  let proxy: FaultProxy;
  /** Straight to the API server (admin client certificate), to shape and read state. */
  let direct: KubeClient;
  /** Through the proxy, with a cluster-admin ServiceAccount token. */
  let client: KubeClient;
  let token: string;
  const clients: KubeClient[] = [];
  const watchers: Watcher<Service>[] = [];

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    const remote = plane.cluster("remote");
    direct = new KubeClient(adminConnection(remote), { requestTimeoutMs: 5_000 });
    token = await mintServiceAccountToken(adminKubeConfig(remote), {
      namespace: "fault-proxy",
      serviceAccount: "tester",
      role: { kind: "ClusterRole", name: "cluster-admin" },
    });
    proxy = await startFaultProxyFor(plane, "remote");
    client = proxiedClient();
  });
  after(async () => {
    await Promise.all(watchers.map((w) => w.stop()));
    for (const c of [direct, ...clients]) c?.close();
    await proxy?.stop();
    await plane?.stop();
  });

  function proxiedClient(): KubeClient {
    const c = new KubeClient(
      { server: proxy.url, caPem: plane.cluster("remote").caPem, auth: { kind: "token", token } },
      { requestTimeoutMs: 5_000 },
    );
    clients.push(c);
    return c;
  }

  function startWatcher(path: string, extra: { inactivityTimeoutMs?: number } = {}): Recorded {
    const watcher = new Watcher<Service>({ client, path, backoff: { initialMs: 100, maxMs: 500 }, ...extra });
    const recorded: Recorded = { watcher, failures: [] };
    watcher.on("failure", (f) => recorded.failures.push(f));
    watchers.push(watcher);
    watcher.start();
    return recorded;
  }

  const createNamespace = (name: string) =>
    direct.request("POST", "/api/v1/namespaces", { body: { metadata: { name } } });
  const createService = (on: KubeClient, namespace: string, name: string) =>
    on.request<Service>("POST", `/api/v1/namespaces/${namespace}/services`, {
      body: { metadata: { name }, spec: { ports: [{ name: "http", port: 80 }] } },
    });

  /** key → resourceVersion, sorted, from a list straight to the API server. */
  async function freshList(namespace: string): Promise<string> {
    const list = await direct.request<{ items: Service[] }>("GET", `/api/v1/namespaces/${namespace}/services`);
    const names = list.items.map((s) => `${namespace}/${s.metadata.name}=${s.metadata.resourceVersion}`);
    return names.sort().join(",");
  }

  function storeOf(watcher: Watcher<Service>): string {
    const names = [...watcher.values()].map(
      (s) => `${s.metadata.namespace}/${s.metadata.name}=${s.metadata.resourceVersion}`,
    );
    return names.sort().join(",");
  }

  async function converged(recorded: Recorded, namespace: string, what: string): Promise<void> {
    await eventually(
      () => `${what} (failures ${JSON.stringify(recorded.failures.slice(-3))}, proxy ${JSON.stringify(proxy.stats)})`,
      async () => ((await freshList(namespace)) === storeOf(recorded.watcher) ? true : undefined),
      20_000,
    );
  }

  it("is transparent without rules: lists, creates and a watcher follow changes with token auth", async () => {
    proxy.setRules({});
    const namespaces = await client.request<{ items: unknown[] }>("GET", "/api/v1/namespaces");
    assert.ok(namespaces.items.length > 0);
    await client.request("POST", "/api/v1/namespaces", { body: { metadata: { name: "transparent" } } });
    const created = await createService(client, "transparent", "a");
    assert.equal(created.metadata.name, "a");

    const recorded = startWatcher("/api/v1/namespaces/transparent/services");
    await eventually("the first list", () => (recorded.watcher.hasSynced ? true : undefined));
    await createService(direct, "transparent", "b");
    await direct.request("DELETE", "/api/v1/namespaces/transparent/services/a");
    await converged(recorded, "transparent", "the store to follow the changes");
    assert.deepEqual(recorded.failures, []);
    assert.ok(proxy.stats.watches >= 1);
    assert.ok(proxy.stats.openConnections >= 1);
  });

  it("cutWatches cuts every open watch; the watcher reports it and recovers", async () => {
    proxy.setRules({});
    await createNamespace("cut");
    await createService(direct, "cut", "before");
    const recorded = startWatcher("/api/v1/namespaces/cut/services");
    await eventually("the first list", () => (recorded.watcher.hasSynced ? true : undefined));
    await eventually("a watch to cut", () => (proxy.cutWatches() > 0 ? true : undefined));
    await createService(direct, "cut", "after");
    await eventually("a watch failure", () => (recorded.failures.some((f) => f.phase === "watch") ? true : undefined));
    await converged(recorded, "cut", "the store to equal a fresh list after the cut");
    assert.ok(proxy.stats.watchesCut >= 1);
  });

  for (const [status, reason] of [
    [429, "TooManyRequests"],
    [500, "InternalError"],
    [503, "ServiceUnavailable"],
    [409, "Conflict"],
  ] as const) {
    it(`answers ${status} ${reason} with a Status body when errorRate is 1`, async () => {
      proxy.setRules({ errorRate: 1, errorStatus: status, retryAfterSeconds: 3 });
      try {
        const before = proxy.stats.injectedErrors;
        const error = await rejection(client.request("GET", "/api/v1/namespaces"));
        assert.ok(error instanceof KubeApiError, String(error));
        assert.equal(error.status, status);
        assert.equal(error.reason, reason);
        assert.match(error.statusMessage, /fault-proxy: injected/);
        assert.equal(error.retryable, true);
        if (status === 429 || status === 503) assert.equal(error.retryAfterSeconds, 3);
        else assert.equal(error.retryAfterSeconds, undefined);
        assert.equal(proxy.stats.injectedErrors, before + 1);
      } finally {
        proxy.setRules({});
      }
      await client.request("GET", "/api/v1/namespaces");
    });
  }

  it("injects errors only into requests that match, and never into watches", async () => {
    proxy.setRules({ errorRate: 1, errorStatus: 500, match: (method) => method === "POST" });
    try {
      await client.request("GET", "/api/v1/namespaces");
      const error = await rejection(
        client.request("POST", "/api/v1/namespaces", { body: { metadata: { name: "never" } } }),
      );
      assert.ok(error instanceof KubeApiError && error.status === 500, String(error));

      proxy.setRules({ errorRate: 1, errorStatus: 503 });
      const abort = new AbortController();
      let opened = false;
      const watching = client.watch(
        "/api/v1/namespaces",
        {},
        {
          onEvent: () => abort.abort(),
          onOpen: () => {
            opened = true;
          },
        },
        abort.signal,
      );
      const ended = await rejection(watching);
      assert.ok(ended instanceof KubeTransportError && ended.code === "ABORTED", String(ended));
      assert.equal(opened, true);
    } finally {
      proxy.setRules({});
    }
  });

  it("adds at least latencyMs to each request", async () => {
    proxy.setRules({ latencyMs: 400 });
    try {
      const started = performance.now();
      await client.request("GET", "/api/v1/namespaces");
      assert.ok(performance.now() - started >= 400, "the answer came after the latency");
    } finally {
      proxy.setRules({});
    }
  });

  it("refuse destroys new connections at once: a transport error, then normal service once lifted", async () => {
    proxy.setRules({ refuse: true });
    const fresh = proxiedClient();
    try {
      const error = await rejection(fresh.request("GET", "/api/v1/namespaces"));
      assert.ok(error instanceof KubeTransportError, String(error));
      assert.ok(["ECONNRESET", "EPIPE"].includes(error.code), error.code);
      assert.equal(error.retryable, true);
      assert.ok(proxy.stats.refused >= 1);
    } finally {
      proxy.setRules({});
    }
    await fresh.request("GET", "/api/v1/namespaces");
  });

  it("stall: a request times out, a watcher reports watch-inactive, and both recover once lifted", async () => {
    await createNamespace("stall");
    await createService(direct, "stall", "before");
    const recorded = startWatcher("/api/v1/namespaces/stall/services", { inactivityTimeoutMs: 1_000 });
    await eventually("the first list", () => (recorded.watcher.hasSynced ? true : undefined));

    proxy.setRules({ stall: true });
    try {
      const error = await rejection(client.request("GET", "/api/v1/namespaces", { timeoutMs: 500 }));
      assert.ok(error instanceof KubeTransportError && error.code === "ETIMEDOUT", String(error));
      await createService(direct, "stall", "during");
      await eventually("a watch-inactive failure", () =>
        recorded.failures.some((f) => f.reason === "watch-inactive") ? true : undefined,
      );
      assert.equal(recorded.watcher.get("stall/during"), undefined, "nothing got through the stall");
    } finally {
      proxy.setRules({});
    }
    await converged(recorded, "stall", "the store to equal a fresh list after the stall");
    await client.request("GET", "/api/v1/namespaces");
  });

  it('corruptWatch "invalid-json": the watcher reports decode failures and recovers once lifted', async () => {
    await createNamespace("corrupt");
    await createService(direct, "corrupt", "before");
    const recorded = startWatcher("/api/v1/namespaces/corrupt/services");
    await eventually("the first list", () => (recorded.watcher.hasSynced ? true : undefined));

    proxy.setRules({ corruptWatch: "invalid-json" });
    try {
      proxy.cutWatches();
      await eventually("a decode failure", () =>
        recorded.failures.some((f) => f.reason === "decode") ? true : undefined,
      );
    } finally {
      proxy.setRules({});
    }
    await createService(direct, "corrupt", "after");
    await converged(recorded, "corrupt", "the store to equal a fresh list after the corruption");
  });

  it('corruptWatch "wrong-kind": a new watch stream starts with an ADDED event of kind Pod', async () => {
    proxy.setRules({ corruptWatch: "wrong-kind" });
    const abort = new AbortController();
    const events: WatchEvent[] = [];
    try {
      const error = await rejection(
        client.watch(
          "/api/v1/namespaces/corrupt/services",
          {},
          {
            onEvent: (event) => {
              events.push(event);
              abort.abort();
            },
          },
          abort.signal,
        ),
      );
      assert.ok(error instanceof KubeTransportError && error.code === "ABORTED", String(error));
    } finally {
      proxy.setRules({});
    }
    const first = events[0];
    assert.equal(first?.type, "ADDED");
    assert.equal(first?.object["kind"], "Pod");
    const metadata = first?.object["metadata"] as { name?: unknown; namespace?: unknown } | undefined;
    assert.equal(typeof metadata?.name, "string");
    assert.equal(metadata?.namespace, "corrupt");
  });

  it("endlessWatchLine: the remote actor ends each endless line at its cap (line-too-long), stays up, and recovers once lifted", async () => {
    const cap = 4 * 1024 * 1024; // the client's default maxWatchLineBytes
    await createGateway(direct, "endless-gw", "198.18.0.31");
    proxy.setRules({});
    const r = startActor({ server: proxy.url, caPem: plane.cluster("remote").caPem, auth: { kind: "token", token } });
    try {
      await r.waitForBatch("the first complete batch", (b) => b.complete);
      r.ack(1);
      const before = proxy.stats.endlessLinesEnded;
      proxy.setRules({ endlessWatchLine: true });
      proxy.cutWatches();
      const status = await eventually(
        () =>
          `two line-too-long failures in the actor's status (last ${JSON.stringify(r.statuses.at(-1))}, proxy ${JSON.stringify(proxy.stats)})`,
        () => {
          const last = r.statuses.at(-1);
          return (last?.failuresByReason["line-too-long"] ?? 0) >= 2 ? last : undefined;
        },
        60_000,
      );
      assert.equal(status.lastFailure?.reason, "line-too-long");
      assert.match(status.lastFailure?.message ?? "", /longer than 4194304 bytes/);
      assert.equal(status.state, "stale");
      assert.deepEqual(r.faults, [], "the actor did not fail");
      // The client ended every endless line itself, each after about one cap of bytes.
      const ended = proxy.stats.endlessLinesEnded - before;
      assert.ok(ended >= 2, `lines ended by the client: ${ended}`);
      assert.ok(proxy.stats.endlessLineBytes > 2 * cap, `streamed ${proxy.stats.endlessLineBytes} bytes`);

      proxy.setRules({});
      await createExported(direct, "endless", "after", "endless-gw");
      await r.waitForBatch("the Service created after the rule was lifted", (b) =>
        upsertsIn(b, "endless").includes("after-east"),
      );
      await eventually("synced again", () => (r.statuses.at(-1)?.state === "synced" ? true : undefined));
    } finally {
      proxy.setRules({});
      await r.actor.stop();
    }
  });

  it("survives the API server being killed: 503 Status while it is down, a watcher that recovers after", async () => {
    proxy.setRules({});
    await createNamespace("upstream");
    await createService(direct, "upstream", "before");
    const recorded = startWatcher("/api/v1/namespaces/upstream/services");
    await eventually("the first list", () => (recorded.watcher.hasSynced ? true : undefined));

    await plane.stopApiServer("remote", { kill: true });
    const error = await rejection(client.request("GET", "/api/v1/namespaces"));
    assert.ok(error instanceof KubeApiError, String(error));
    assert.equal(error.status, 503);
    assert.equal(error.reason, "ServiceUnavailable");
    assert.match(error.statusMessage, /upstream .* unreachable/);
    await eventually("a watch failure", () => (recorded.failures.some((f) => f.phase === "watch") ? true : undefined));

    await plane.startApiServer("remote");
    await createService(direct, "upstream", "after");
    await converged(recorded, "upstream", "the store to equal a fresh list after the restart");
  });

  it("stop() closes every connection; the port then refuses", async () => {
    const extra = await startFaultProxyFor(plane, "remote");
    const c = new KubeClient(
      { server: extra.url, caPem: plane.cluster("remote").caPem, auth: { kind: "token", token } },
      { requestTimeoutMs: 5_000 },
    );
    clients.push(c);
    const abort = new AbortController();
    const watching = rejection(c.watch("/api/v1/namespaces", {}, { onEvent: () => {} }, abort.signal));
    await eventually("an open watch", () => (extra.stats.watches > 0 ? true : undefined));
    await extra.stop();
    const ended = await watching;
    assert.ok(ended instanceof KubeTransportError, String(ended));
    assert.equal(extra.stats.openConnections, 0);
    const refused = await rejection(c.request("GET", "/api/v1/namespaces"));
    assert.ok(refused instanceof KubeTransportError && refused.code === "ECONNREFUSED", String(refused));
  });
});
