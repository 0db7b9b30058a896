/**
 * The local writer's reconcile in-process, with in-memory local stores and a recording
 * API client: what the writer does with what a cluster says it does not know (SPEC
 * §12). A headless mirror whose hosts are unknown, and its per-host mirrors, are left
 * exactly as they are; a cluster whose MCS exports are unknown keeps its import parts,
 * and an import it is not part of is deleted all the same.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { FairTokenBucket } from "../../src/core/fair-bucket.ts";
import { FEDERATED_CLUSTERS } from "../../src/core/federated.ts";
import { HEADLESS_MIRROR_LABEL } from "../../src/core/headless.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE, SERVICE_IMPORT_LABEL } from "../../src/core/labels.ts";
import { derivedServiceName, INITIAL_MCS_AVAILABILITY, type McsExport } from "../../src/core/mcs.ts";
import type { EndpointSlice, Endpoints, KubeObject, Namespace, Service } from "../../src/core/objects.ts";
import { KubeApiError, type RequestOptions } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import type { ToWriterFromActor } from "../../src/protocol/messages.ts";
import { DesiredStore } from "../../workers/local-writer/desired-store.ts";
import { WriteFence } from "../../workers/local-writer/fence.ts";
import { MutationCache } from "../../workers/local-writer/mutation-cache.ts";
import { MirrorReconciler } from "../../workers/local-writer/reconcile.ts";
import { WriterStats } from "../../workers/local-writer/status.ts";
import { WriteExecutor } from "../../workers/local-writer/write-executor.ts";
import { testMirror } from "../helpers/desired-mirror.ts";
import { clusterSetSpec } from "../helpers/mcs-export.ts";

const ours = { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: "east" };

function service(name: string, clusterIP: string, labels: Record<string, string>, annotations = {}): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "shop", uid: `${name}-uid`, resourceVersion: "5", labels, annotations },
    spec: { clusterIP, ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] },
  } as Service;
}

function world(observed: Service[]) {
  const clock = new ManualClock();
  const log = silentLogger();
  const services = new Map(observed.map((s) => [`shop/${s.metadata.name}`, s]));
  const requests: string[] = [];
  const client = {
    request: async <T>(method: string, path: string, _options?: RequestOptions): Promise<T> => {
      requests.push(`${method} ${path}`);
      if (method === "GET")
        throw new KubeApiError({ method, path, server: "test", status: 404, reason: "NotFound", statusMessage: "" });
      return {} as T;
    },
  };
  const desired = new DesiredStore();
  desired.setKeep(["east", "west"]);
  const cache = new MutationCache(clock);
  const executor = new WriteExecutor({
    client,
    bucket: new FairTokenBucket(0, 1, clock),
    fence: new WriteFence(false, clock, log),
    cache,
    stats: new WriterStats(),
    log,
    block: () => {},
    blockedRecheckMs: 30_000,
  });
  const imports = new Map<string, KubeObject>();
  const reconciler = new MirrorReconciler({
    desired,
    services,
    endpoints: new Map<string, Endpoints>(),
    slices: Object.assign(new Map<string, EndpointSlice>(), {}),
    namespaces: new Map<string, Namespace>([["shop", { metadata: { name: "shop" } } as Namespace]]),
    serviceImports: {
      get: (key) => imports.get(key),
      values: () => imports.values(),
      availability: { ...INITIAL_MCS_AVAILABILITY, state: "active", settled: true, known: true, watching: true },
    },
    cache,
    executor,
    client,
    options: { createNamespaces: true, excludedNamespaces: [], blockedRecheckMs: 30_000, endpointsApi: "endpoints" },
    log,
    recordEvent: () => {},
  });
  let seq = 0;
  const apply = (cluster: string, epoch: number, fields: Partial<ToWriterFromActor>): void => {
    seq += 1;
    desired.applyBatch({
      type: "desired.batch",
      cluster,
      epoch,
      seq,
      complete: true,
      upserts: [],
      deletes: [],
      ...fields,
    });
  };
  return { reconciler, requests, imports, apply };
}

describe("hosts unknown: a headless mirror and its per-host mirrors stay as they are", () => {
  const observed = () => [
    service("web-east", "None", ours),
    service("web-0-east", "10.96.0.5", { ...ours, [HEADLESS_MIRROR_LABEL]: "web-east" }),
  ];
  const marked: DesiredMirror = { ...testMirror(), hostsUnknown: true };

  it("writes and deletes nothing while the cluster's complete set says the hosts are unknown", async () => {
    const w = world(observed());
    w.apply("east", 2, { upserts: [marked] });
    assert.deepEqual(await w.reconciler.reconcile("shop/web-east"), { kind: "done" });
    assert.deepEqual(await w.reconciler.reconcile("shop/web-0-east"), { kind: "done" });
    assert.deepEqual(w.requests, []);
  });

  it("the same set without the mark flips the headless mirror and collects its per-host mirror (what the mark prevents)", async () => {
    const w = world(observed());
    w.apply("east", 2, { upserts: [testMirror()] });
    await w.reconciler.reconcile("shop/web-east");
    await w.reconciler.reconcile("shop/web-0-east");
    assert.ok(w.requests.includes("DELETE /api/v1/namespaces/shop/services/web-east"), w.requests.join(", "));
    assert.ok(w.requests.includes("DELETE /api/v1/namespaces/shop/services/web-0-east"), w.requests.join(", "));
  });

  it("where no headless mirror exists, the marked mirror is an ordinary mirror like any other", async () => {
    const w = world([]);
    w.apply("east", 1, { upserts: [marked] });
    await w.reconciler.reconcile("shop/web-east");
    assert.ok(w.requests.includes("POST /api/v1/namespaces/shop/services"), w.requests.join(", "));
  });
});

describe("MCS exports unknown: the cluster's import parts are kept", () => {
  const derived = derivedServiceName("shop", "web");
  const key = `shop/${derived}`;
  const importLabels = { [MIRRORED_SERVICE]: "true", [SERVICE_IMPORT_LABEL]: "web" };
  const exported: McsExport = {
    cluster: "east",
    namespace: "shop",
    name: "web",
    remote: "shop/web",
    ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
    spec: clusterSetSpec([{ name: "http", protocol: "TCP", port: 80 }]),
    addresses: [],
    notReadyAddresses: [],
    endpointPorts: [],
    exportedAt: "2026-12-01T00:00:00Z",
  };
  const setup = () => {
    const w = world([service(derived, "10.96.0.9", importLabels, { [FEDERATED_CLUSTERS]: "east" })]);
    w.imports.set("shop/web", { metadata: { name: "web", namespace: "shop", uid: "si-uid", labels: importLabels } });
    w.apply("east", 1, { mcsExports: [exported] });
    w.apply("west", 1, {});
    return w;
  };

  it("an exporter restarted with its exports unknown: nothing of the import is deleted", async () => {
    const w = setup();
    w.apply("east", 2, { mcsExportsUnknown: true });
    await w.reconciler.reconcile(key);
    assert.deepEqual(
      w.requests.filter((r) => !r.startsWith("GET")),
      [],
    );
  });

  it("a writer that never held its exports (a writer restart) keeps the observed import too", async () => {
    const w = world([service(derived, "10.96.0.9", importLabels, { [FEDERATED_CLUSTERS]: "east" })]);
    w.imports.set("shop/web", { metadata: { name: "web", namespace: "shop", uid: "si-uid", labels: importLabels } });
    w.apply("east", 1, { mcsExportsUnknown: true });
    w.apply("west", 1, {});
    await w.reconciler.reconcile(key);
    assert.deepEqual(
      w.requests.filter((r) => !r.startsWith("GET")),
      [],
    );
  });

  it("known and without the export: the import goes; a cluster with exports unknown elsewhere holds nothing up", async () => {
    const w = setup();
    w.apply("west", 2, { mcsExportsUnknown: true }); // not part of web: no say in it
    w.apply("east", 2, {});
    await w.reconciler.reconcile(key);
    assert.ok(
      w.requests.includes("DELETE /apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceimports/web"),
      w.requests.join(", "),
    );
    assert.ok(w.requests.includes(`DELETE /api/v1/namespaces/shop/services/${derived}`), w.requests.join(", "));
  });
});
