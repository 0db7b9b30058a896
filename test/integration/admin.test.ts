/**
 * End to end with `fleet-mirror run` as a separate process against real API servers:
 * its admin server (/healthz, /readyz, /status, /metrics), the metrics it computes from
 * the fleet, and the Warning Event on a mirror whose write needs a human.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import type { AdminStatus } from "../../src/admin/source.ts";
import { WRITE_DURATION_BUCKETS } from "../../src/protocol/messages.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { promtool, promtoolBuiltFirst } from "../helpers/promtool.ts";

const TIMEOUT_MS = 60_000;

/** The value of one sample of a Prometheus text exposition, undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = new Map<string, string>();
    for (const m of (match[2] ?? "").matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g)) found.set(m[1] ?? "", m[2] ?? "");
    if (Object.entries(labels).every(([k, v]) => found.get(k) === v)) return Number(match[3]);
  }
  return undefined;
}

describe("the admin server of fleet-mirror run", () => {
  promtoolBuiltFirst();
  let fleet: Fleet;
  let controller: ControllerProcess;
  let url: string;

  const get = async (path: string, init: RequestInit = {}): Promise<{ status: number; type: string; body: string }> => {
    const res = await fetch(`${url}${path}`, init);
    return { status: res.status, type: res.headers.get("content-type") ?? "", body: await res.text() };
  };
  const metrics = async (): Promise<string> => (await get("/metrics")).body;
  const status = async (): Promise<AdminStatus> => JSON.parse((await get("/status")).body) as AdminStatus;
  /** Waits until `check` holds for a scrape (values come from status snapshots sent every second). */
  const scrapeUntil = (what: string, check: (text: string) => boolean): Promise<string> =>
    eventually(
      what,
      async () => {
        const text = await metrics();
        return check(text) ? text : undefined;
      },
      TIMEOUT_MS,
    );

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.register("east");
    controller = await fleet.startProcess();
    url = await controller.adminUrl();
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("answers /healthz at once and /readyz with 200 once the local writer has listed the local mirrors", async () => {
    const health = await get("/healthz");
    assert.equal(health.status, 200, health.body);
    assert.equal(health.body, "ok\n");
    const ready = await eventually(
      "/readyz 200",
      async () => {
        const r = await get("/readyz");
        return r.status === 200 ? r : undefined;
      },
      TIMEOUT_MS,
    );
    assert.equal(ready.body, "ok\n");
    assert.equal(ready.type, "text/plain; charset=utf-8");
    assert.equal((await get("/readyz?verbose")).body, "[+]readyz ok\nreadyz check passed\n");
  });

  it("reports a mirrored cluster in /status and in /metrics: mirrored services, writes, write latency", async () => {
    await fleet.createService("east", "shop", "web");
    await fleet.waitForMirror("shop", "web-east", () => true, TIMEOUT_MS);

    // The mirror count comes from the actor's report and the write counts from the
    // writer's: two reports on their own intervals, so the scrape waits for both.
    const text = await scrapeUntil(
      'fleet_mirror_cluster_mirrored_services{cluster="east"} 1 and a counted Service create',
      (t) =>
        sample(t, "fleet_mirror_cluster_mirrored_services", { cluster: "east" }) === 1 &&
        (sample(t, "fleet_mirror_writes_total", { verb: "create", resource: "services", result: "ok" }) ?? 0) >= 1,
    );
    assert.equal((await get("/metrics")).type, "text/plain; version=0.0.4; charset=utf-8");
    assert.ok(
      (sample(text, "fleet_mirror_writes_total", { verb: "create", resource: "services", result: "ok" }) ?? 0) >= 1,
      text,
    );
    assert.ok(
      (sample(text, "fleet_mirror_writes_total", { verb: "create", resource: "namespaces", result: "ok" }) ?? 0) >= 1,
      text,
    );
    assert.equal(sample(text, "fleet_mirror_clusters", { state: "synced" }), 1);
    assert.equal(sample(text, "fleet_mirror_leader"), 1);
    assert.equal(sample(text, "fleet_mirror_writer_ready"), 1);
    assert.ok((sample(text, "fleet_mirror_cluster_lists_total", { cluster: "east" }) ?? 0) >= 1, text);
    const lastSync = sample(text, "fleet_mirror_cluster_last_sync_timestamp_seconds", { cluster: "east" });
    assert.ok(lastSync !== undefined && Math.abs(lastSync - Date.now() / 1000) < 600, `last sync ${lastSync}`);
    assert.equal(sample(text, "fleet_mirror_cluster_actor_restarts_total", { cluster: "east" }), 0);

    // Cumulative buckets: one per shared bound plus +Inf (= count), never decreasing.
    const count = sample(text, "fleet_mirror_write_duration_seconds_count") ?? 0;
    assert.ok(count >= 2, text);
    let previous = 0;
    for (const le of [...WRITE_DURATION_BUCKETS.map(String), "+Inf"]) {
      const bucket = sample(text, "fleet_mirror_write_duration_seconds_bucket", { le });
      assert.ok(bucket !== undefined && bucket >= previous, `bucket le=${le}: ${bucket}`);
      previous = bucket;
    }
    assert.equal(previous, count);
    assert.ok((sample(text, "fleet_mirror_write_duration_seconds_sum") ?? 0) > 0);

    assert.ok((sample(text, "process_resident_memory_bytes") ?? 0) > 0);
    for (const thread of ["main", "local-writer", "remote-cluster/east"]) {
      assert.ok((sample(text, "fleet_mirror_thread_heap_used_bytes", { thread }) ?? 0) > 0, `heap of ${thread}`);
      assert.ok((sample(text, "fleet_mirror_thread_heap_limit_bytes", { thread }) ?? 0) > 0, `limit of ${thread}`);
    }

    const doc = await status();
    assert.deepEqual(doc.leadership.enabled, false);
    assert.deepEqual(doc.leadership.leading, true);
    assert.ok(Math.abs(doc.time - Date.now()) < 60_000);
    const east = doc.clusters?.find((c) => c.cluster === "east");
    assert.equal(east?.state, "synced");
    assert.equal(east?.mirrors, 1);
    assert.equal(doc.writer?.ready, true);
  });

  it("stays ready while a remote cluster is unreachable, and drops that cluster's series once its Secret is gone", async () => {
    const local = fleet.plane.cluster("local");
    // Nothing listens on port 1: every list fails with ECONNREFUSED.
    const kubeconfig = renderKubeconfig({
      cluster: "dead",
      server: "https://127.0.0.1:1",
      caPem: local.caPem,
      user: "fleet-mirror",
      auth: { token: await fleet.remoteToken("east") },
    });
    await fleet.local.createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: fleet.secretBody({ secretName: "cluster-credentials-dead", clusterName: "dead", kubeconfig }),
    });
    const text = await scrapeUntil("list errors of cluster dead", (t) =>
      t.split("\n").some((l) => l.startsWith('fleet_mirror_cluster_watch_errors_total{cluster="dead"')),
    );
    assert.equal(sample(text, "fleet_mirror_cluster_mirrored_services", { cluster: "dead" }), 0);
    const ready = await get("/readyz");
    assert.equal(ready.status, 200, ready.body);
    assert.equal((await get("/healthz")).status, 200);
    const row = (await status()).clusters?.find((c) => c.cluster === "dead");
    assert.ok(row && row.state !== "synced", JSON.stringify(row));

    await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: "cluster-credentials-dead" });
    const after = await scrapeUntil("no series of cluster dead", (t) => !t.includes('cluster="dead"'));
    assert.equal(sample(after, "fleet_mirror_cluster_mirrored_services", { cluster: "east" }), 1);
  });

  it("records one MirrorWriteFailed Event on a mirror whose create the API server forbids, and counts the 403s", async () => {
    // A quota of zero Services: every create of a mirror in this namespace is 403 Forbidden.
    await fleet.ensureNamespace("local", "quota");
    const quota = await fleet.local.createNamespacedResourceQuota({
      namespace: "quota",
      body: { metadata: { name: "no-services" }, spec: { hard: { services: "0" } } },
    });
    // No quota controller runs here, and admission admits everything under a quota whose
    // status was never computed: write the status the controller would.
    quota.status = { hard: { services: "0" }, used: { services: "0" } };
    await fleet.local.replaceNamespacedResourceQuotaStatus({ namespace: "quota", name: "no-services", body: quota });
    await fleet.createService("east", "quota", "api");
    let seen: string | undefined;
    const events = await eventually(
      () =>
        `a MirrorWriteFailed Event on quota/api-east; mirror ${seen}; log:\n${controller.output
          .split("\n")
          .slice(-15)
          .join("\n")}`,
      async () => {
        seen = JSON.stringify((await fleet.localService("quota", "api-east"))?.metadata?.labels);
        const list = await fleet.local.listNamespacedEvent({ namespace: "quota" });
        const found = list.items.filter((e) => e.reason === "MirrorWriteFailed");
        return found.length > 0 ? found : undefined;
      },
      TIMEOUT_MS,
    );
    const event = events[0];
    assert.equal(event?.type, "Warning");
    assert.equal(event?.involvedObject.kind, "Service");
    assert.equal(event?.involvedObject.name, "api-east");
    assert.match(event?.message ?? "", /cannot write mirror quota\/api-east \(403 Forbidden\)/);
    assert.equal(await fleet.localService("quota", "api-east"), undefined);

    const text = await scrapeUntil(
      "several rejected creates",
      (t) =>
        (sample(t, "fleet_mirror_writes_total", { verb: "create", resource: "services", result: "403" }) ?? 0) >= 3,
    );
    assert.ok((sample(text, "fleet_mirror_write_retries_total") ?? 0) >= 3, text);
    // Retried with backoff, reported once (deduplicated).
    const again = await fleet.local.listNamespacedEvent({ namespace: "quota" });
    assert.equal(again.items.filter((e) => e.reason === "MirrorWriteFailed").length, 1);
  });

  it("serves /metrics that promtool check metrics passes after those failures", async () => {
    // Rejected writes, an unreachable cluster's watch errors, write latency and every
    // thread's heap are in this scrape; test/integration/metrics-lint.test.ts lints one in
    // which every family has series.
    const text = await metrics();
    assert.ok((sample(text, "fleet_mirror_write_retries_total") ?? 0) >= 3, text);
    const result = await promtool(["check", "metrics"], text);
    assert.equal(result.output, "");
    assert.equal(result.code, 0);
  });

  it("answers 404 for other paths, 405 for other methods, and HEAD without a body", async () => {
    assert.equal((await get("/nope")).status, 404);
    const post = await fetch(`${url}/metrics`, { method: "POST" });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get("allow"), "GET, HEAD");
    await post.text();
    const head = await get("/healthz", { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.body, "");
  });
});
