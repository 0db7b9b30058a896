/**
 * The local writer's reconcile and write executor in-process, with in-memory local
 * stores and a recording API client: what one key's reconcile sends, in milliseconds.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE } from "../../src/core/labels.ts";
import type { Endpoints, Namespace, Service } from "../../src/core/objects.ts";
import { TokenBucket } from "../../src/core/rate-limit.ts";
import type { RequestOptions } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import { DesiredStore } from "../../workers/local-writer/desired-store.ts";
import { WriteFence } from "../../workers/local-writer/fence.ts";
import { MutationCache } from "../../workers/local-writer/mutation-cache.ts";
import { MirrorReconciler } from "../../workers/local-writer/reconcile.ts";
import { WriterStats } from "../../workers/local-writer/status.ts";
import { WriteExecutor } from "../../workers/local-writer/write-executor.ts";

const labels = { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: "gone" };

function world() {
  const clock = new ManualClock();
  const log = silentLogger();
  const services = new Map<string, Service>([
    [
      "shop/web-gone",
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web-gone", namespace: "shop", uid: "svc-uid", resourceVersion: "5", labels },
      } as Service,
    ],
  ]);
  const endpoints = new Map<string, Endpoints>([
    [
      "shop/web-gone",
      {
        apiVersion: "v1",
        kind: "Endpoints",
        metadata: { name: "web-gone", namespace: "shop", uid: "ep-uid", resourceVersion: "6", labels },
      } as Endpoints,
    ],
  ]);
  const namespaces = new Map<string, Namespace>([
    ["shop", { apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } } as Namespace],
  ]);
  const requests: string[] = [];
  const client = {
    request: async <T>(method: string, path: string, _options?: RequestOptions): Promise<T> => {
      requests.push(`${method} ${path}`);
      return {} as T;
    },
  };
  const desired = new DesiredStore();
  desired.setKeep(["east"]); // cluster "gone" is unregistered: its mirrors are garbage
  const cache = new MutationCache(clock);
  const stats = new WriterStats();
  const executor = new WriteExecutor({
    client,
    bucket: new TokenBucket(0, 1, clock),
    fence: new WriteFence(false, clock, log),
    cache,
    stats,
    log,
    block: () => {},
    blockedRecheckMs: 30_000,
  });
  const reconciler = new MirrorReconciler({
    desired,
    services,
    endpoints,
    slices: new Map(),
    namespaces,
    cache,
    executor,
    client,
    options: { createNamespaces: true, excludedNamespaces: [], blockedRecheckMs: 30_000, endpointsApi: "endpoints" },
    log,
    recordEvent: () => {},
  });
  return { reconciler, cache, services, endpoints, requests, stats };
}

describe("reconcile of a mirror that is no longer wanted", () => {
  it("sends one DELETE per object, Endpoints first, even when the key is reconciled again before the watch shows the deletion", async () => {
    const { reconciler, requests } = world();
    assert.deepEqual(await reconciler.reconcile("shop/web-gone"), { kind: "done" });
    assert.deepEqual(await reconciler.reconcile("shop/web-gone"), { kind: "done" });
    assert.deepEqual(requests, [
      "DELETE /api/v1/namespaces/shop/endpoints/web-gone",
      "DELETE /api/v1/namespaces/shop/services/web-gone",
    ]);
  });

  it("sends nothing once the watch has shown the deletion", async () => {
    const { reconciler, cache, services, endpoints, requests } = world();
    await reconciler.reconcile("shop/web-gone");
    services.delete("shop/web-gone");
    endpoints.delete("shop/web-gone");
    cache.watched("Service", "shop/web-gone", undefined);
    cache.watched("Endpoints", "shop/web-gone", undefined);
    await reconciler.reconcile("shop/web-gone");
    assert.equal(requests.length, 2);
    assert.equal(cache.size, 0);
  });
});
