/**
 * The local writer's reconcile and write executor in-process, with in-memory local
 * stores and a recording API client: what one key's reconcile sends, in milliseconds.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { FairTokenBucket } from "../../src/core/fair-bucket.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE } from "../../src/core/labels.ts";
import type { EndpointSlice, Endpoints, Namespace, Service } from "../../src/core/objects.ts";
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
  // fleet-mirror's slice of the same mirror (SPEC §9): labelled, with our managed-by.
  const slices = new Map<string, EndpointSlice>([
    [
      "shop/web-gone-ipv4",
      {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: {
          name: "web-gone-ipv4",
          namespace: "shop",
          uid: "slice-uid",
          resourceVersion: "7",
          labels: {
            ...labels,
            "kubernetes.io/service-name": "web-gone",
            "endpointslice.kubernetes.io/managed-by": "fleet-mirror",
          },
        },
        addressType: "IPv4",
      } as EndpointSlice,
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
    bucket: new FairTokenBucket(0, 1, clock),
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
    slices,
    namespaces,
    cache,
    executor,
    client,
    options: { createNamespaces: true, excludedNamespaces: [], blockedRecheckMs: 30_000, endpointsApi: "endpoints" },
    log,
    recordEvent: () => {},
  });
  return { reconciler, cache, services, endpoints, slices, requests, stats };
}

describe("reconcile of a mirror that is no longer wanted", () => {
  it("sends one DELETE per object, the Service last, even when the key is reconciled again before the watch shows the deletion", async () => {
    const { reconciler, requests } = world();
    assert.deepEqual(await reconciler.reconcile("shop/web-gone"), { kind: "done" });
    assert.deepEqual(await reconciler.reconcile("shop/web-gone"), { kind: "done" });
    assert.deepEqual(requests, [
      "DELETE /api/v1/namespaces/shop/endpoints/web-gone",
      "DELETE /apis/discovery.k8s.io/v1/namespaces/shop/endpointslices/web-gone-ipv4",
      "DELETE /api/v1/namespaces/shop/services/web-gone",
    ]);
  });

  it("sends nothing once the watch has shown the deletion", async () => {
    const { reconciler, cache, services, endpoints, slices, requests } = world();
    await reconciler.reconcile("shop/web-gone");
    services.delete("shop/web-gone");
    endpoints.delete("shop/web-gone");
    slices.delete("shop/web-gone-ipv4");
    cache.watched("Service", "shop/web-gone", undefined);
    cache.watched("Endpoints", "shop/web-gone", undefined);
    cache.watched("EndpointSlice", "shop/web-gone-ipv4", undefined);
    await reconciler.reconcile("shop/web-gone");
    assert.equal(requests.length, 3);
    assert.equal(cache.size, 0);
  });
});
