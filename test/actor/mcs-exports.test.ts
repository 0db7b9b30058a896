/**
 * MCS export on the remote side (SPEC §12), the actor in-process against a real remote
 * API server: it discovers at run time whether ServiceExports are served, re-checks
 * while they are not (CRDs installed later are picked up), exports each ServiceExport's
 * Service through the cluster's default gateway, reports what cannot export, and a
 * refused read (403) turns MCS export off for that cluster alone: reported once, the
 * other modes unaffected.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { type FaultProxy, startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { installMcsCrds, removeMcsCrds } from "../../sandbox/mcs-crds.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import { MCS_API_VERSION, type McsExport } from "../../src/core/mcs.ts";
import type { Service } from "../../src/core/objects.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import type { ClusterStatus } from "../../src/protocol/messages.ts";
import { adminConnection } from "../helpers/connection.ts";
import { adminKubeConfig, eventually } from "../helpers/kube.ts";
import {
  type Batch,
  createExported,
  createGateway,
  ensureNamespace,
  type RunningActor,
  startActor,
  summary,
  upsertsIn,
} from "../helpers/remote-actor.ts";

const RECHECK_MS = 200;
const SERVICES_RULE = { apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] };
const EXPORTS_RULE = {
  apiGroups: ["multicluster.x-k8s.io"],
  resources: ["serviceexports"],
  verbs: ["get", "list", "watch"],
};
const DISCOVERY_PATH = `/apis/${MCS_API_VERSION}`;
const EXPORTS_PATH = `/apis/${MCS_API_VERSION}/serviceexports`;

/** The export of `key` in `batch`, if it carries one. */
const exportIn = (batch: Batch, key: string): McsExport | undefined =>
  batch.mcsExports?.find((e) => `${e.namespace}/${e.name}` === key);

/** A logger that keeps its warn lines (and drops the rest). */
function recordingLogger(warnings: string[]): LineLogger {
  const logger: LineLogger = {
    trace: () => {},
    debug: () => {},
    info: () => {},
    warn: (_fields, message) => {
      warnings.push(message ?? "");
    },
    error: () => {},
    fatal: () => {},
    child: () => logger,
  };
  return logger;
}

describe("MCS export, remote side (SPEC §12)", () => {
  let plane: ControlPlane;
  let admin: ConnectionSpec;
  let client: KubeClient;
  const running: RunningActor[] = [];
  const proxies: FaultProxy[] = [];

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["remote"] });
    admin = adminConnection(plane.cluster("remote"));
    client = new KubeClient(admin, { requestTimeoutMs: 10_000 });
    // The cluster's default gateway (the actor's settings name linkerd-gateway in linkerd-multicluster).
    await ensureNamespace(client, "linkerd-multicluster");
    const gateway = await client.request<Service>("POST", "/api/v1/namespaces/linkerd-multicluster/services", {
      body: {
        metadata: { name: "linkerd-gateway" },
        spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143, protocol: "TCP" }] },
      },
    });
    await setIngress(gateway, "198.51.100.31");
    await createGateway(client, "mcs-gw", "198.51.100.32");
  });
  after(async () => {
    await Promise.all(running.map((r) => r.actor.stop()));
    await Promise.all(proxies.map((p) => p.stop()));
    client?.close();
    await plane?.stop();
  });

  async function setIngress(gateway: Service, ip: string): Promise<void> {
    await client.request("PATCH", "/api/v1/namespaces/linkerd-multicluster/services/linkerd-gateway/status", {
      contentType: "application/merge-patch+json",
      body: {
        metadata: { resourceVersion: gateway.metadata.resourceVersion },
        status: { loadBalancer: { ingress: [{ ip }] } },
      },
    });
  }

  /** An actor whose batches are acked as the writer acks them (each, once taken). */
  function start(
    connection: ConnectionSpec,
    cluster: string,
    logger?: LineLogger,
    recheckMs = RECHECK_MS,
  ): RunningActor {
    const r = startActor(connection, { cluster, mcsRecheckMs: recheckMs, ...(logger ? { logger } : {}) });
    const post = r.port.postMessage.bind(r.port);
    r.port.postMessage = (batch) => {
      post(batch);
      setImmediate(() => r.ack(batch.seq));
    };
    running.push(r);
    return r;
  }

  async function createService(namespace: string, name: string): Promise<void> {
    await ensureNamespace(client, namespace);
    await client.request("POST", `/api/v1/namespaces/${namespace}/services`, {
      body: { metadata: { name }, spec: { ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }] } },
    });
  }

  async function createServiceExport(namespace: string, name: string): Promise<void> {
    await ensureNamespace(client, namespace);
    await client.request("POST", `/apis/${MCS_API_VERSION}/namespaces/${namespace}/serviceexports`, {
      body: { apiVersion: MCS_API_VERSION, kind: "ServiceExport", metadata: { name } },
    });
  }

  const latest = (r: RunningActor): ClusterStatus | undefined => r.statuses.at(-1);

  it("exports by annotation without the CRDs, reports MCS not installed, and picks the CRDs up when installed later", async () => {
    await createExported(client, "mcs-late", "annotated", "mcs-gw");
    await createService("mcs-late", "web");
    const r = start(admin, "east");
    const first = await r.waitForBatch("the complete set", (b) => b.complete);
    assert.deepEqual(upsertsIn(first, "mcs-late"), ["annotated-east"]);
    assert.equal(first.mcsExports, undefined);
    assert.equal(first.mcsExportsUnknown, undefined, "not served: known to be none");
    await eventually("status: MCS not installed", () => (latest(r)?.mcs?.state === "not-installed" ? true : undefined));
    assert.match(latest(r)?.mcs?.message ?? "", /not installed/);

    await installMcsCrds(adminKubeConfig(plane.cluster("remote")));
    await createServiceExport("mcs-late", "web");
    const exported = await r.waitForBatch("web's export", (b) => exportIn(b, "mcs-late/web") !== undefined);
    assert.deepEqual(exportIn(exported, "mcs-late/web"), {
      cluster: "east",
      namespace: "mcs-late",
      name: "web",
      remote: "mcs-late/web",
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
      addresses: ["198.51.100.31"],
      notReadyAddresses: [],
      endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
      exportedAt: exportIn(exported, "mcs-late/web")?.exportedAt ?? "",
      spec: {
        type: "ClusterSetIP",
        ports: [{ name: "http", protocol: "TCP", port: 80 }],
        sessionAffinity: "None",
        internalTrafficPolicy: "Cluster",
      },
    });
    assert.match(exportIn(exported, "mcs-late/web")?.exportedAt ?? "", /^\d{4}-\d\d-\d\dT/);
    await eventually("status: MCS active, one export", () =>
      latest(r)?.mcs?.state === "active" && latest(r)?.exports?.mcs === 1 ? true : undefined,
    );
    assert.deepEqual(r.faults, []);
  });

  it("follows the default gateway, the Service and the ServiceExport: addresses, a missing Service, a deletion", async () => {
    await createService("mcs-follow", "api");
    await createServiceExport("mcs-follow", "api");
    await createServiceExport("mcs-follow", "ghost");
    const r = start(admin, "west");
    const first = await r.waitForBatch(
      "the complete set with api",
      (b) => b.complete && !!exportIn(b, "mcs-follow/api"),
    );
    assert.equal(exportIn(first, "mcs-follow/ghost"), undefined);
    // A ServiceExport without its Service: reported, nothing exported.
    await eventually("ghost reported", () =>
      latest(r)?.problems.find((p) => p.remote === "mcs-follow/ghost" && p.reason === "service-export-without-service"),
    );
    await createService("mcs-follow", "ghost");
    const ghost = await r.waitForBatch(
      "ghost exports once its Service exists",
      (b) => !!exportIn(b, "mcs-follow/ghost"),
    );
    await eventually("ghost's problem gone", () =>
      latest(r)?.problems.some((p) => p.remote === "mcs-follow/ghost") === false ? true : undefined,
    );
    // The default gateway's new address reaches every export that uses it.
    const gateway = await client.request<Service>(
      "GET",
      "/api/v1/namespaces/linkerd-multicluster/services/linkerd-gateway",
    );
    await setIngress(gateway, "198.51.100.33");
    const moved = await r.waitForBatch(
      "the exports on the gateway's new address",
      (b) => exportIn(b, "mcs-follow/api")?.addresses[0] === "198.51.100.33",
      ghost.seq,
    );
    // Deleting the ServiceExport withdraws the export (the Service stays).
    await client.request("DELETE", `/apis/${MCS_API_VERSION}/namespaces/mcs-follow/serviceexports/api`);
    await r.waitForBatch(
      "api's export withdrawn",
      (b) => b.mcsExportDeletes?.includes("mcs-follow/api") === true,
      moved.seq,
    );
    await setIngress(
      await client.request<Service>("GET", "/api/v1/namespaces/linkerd-multicluster/services/linkerd-gateway"),
      "198.51.100.31",
    );
    assert.deepEqual(r.faults, []);
  });

  it("reports a ServiceExport in an excluded namespace and exports nothing for it", async () => {
    await createService("kube-system", "sys");
    await createServiceExport("kube-system", "sys");
    const r = start(admin, "north");
    const first = await r.waitForBatch("the complete set", (b) => b.complete);
    assert.equal(exportIn(first, "kube-system/sys"), undefined);
    const problem = await eventually("the excluded namespace reported", () =>
      latest(r)?.problems.find((p) => p.remote === "kube-system/sys"),
    );
    assert.equal(problem.reason, "excluded-namespace");
    assert.match(problem.message, /^ServiceExport: namespace kube-system is excluded/);
  });

  it("forgets the exports when the CRDs are deleted under a running watch, and exports again once reinstalled", async () => {
    const r = start(admin, "central");
    const first = await r.waitForBatch("ghost's export", (b) => b.complete && !!exportIn(b, "mcs-follow/ghost"));
    const kc = adminKubeConfig(plane.cluster("remote"));
    await removeMcsCrds(kc);
    await r.waitForBatch(
      "the exports withdrawn",
      (b) => b.mcsExportDeletes?.includes("mcs-follow/ghost") === true,
      first.seq,
    );
    await eventually("status: not installed", () => (latest(r)?.mcs?.state === "not-installed" ? true : undefined));
    await installMcsCrds(kc);
    await createServiceExport("mcs-follow", "ghost");
    await r.waitForBatch("ghost exported again", (b) => !!exportIn(b, "mcs-follow/ghost"), first.seq);
    await eventually("status: active", () => (latest(r)?.mcs?.state === "active" ? true : undefined));
    assert.deepEqual(r.faults, []);
  });

  it("turns MCS export off for a cluster whose role lacks the read: reported once, annotation exports unaffected, on when granted", async () => {
    await createExported(client, "mcs-denied", "annotated", "mcs-gw");
    await createService("mcs-denied", "web");
    await createServiceExport("mcs-denied", "web");
    const kc = adminKubeConfig(plane.cluster("remote"));
    const request = {
      namespace: "mcs-reader",
      serviceAccount: "reader",
      role: { kind: "ClusterRole" as const, name: "mcs-reader", rules: [SERVICES_RULE] },
    };
    const token = await mintServiceAccountToken(kc, request);
    const warnings: string[] = [];
    const r = start({ ...admin, auth: { kind: "token", token } }, "south", recordingLogger(warnings));
    const first = await r.waitForBatch("the complete set", (b) => b.complete);
    assert.deepEqual(upsertsIn(first, "mcs-denied"), ["annotated-south"]);
    // Refused before any list: the exports are unknown, which is not "none" (the writer keeps its imports).
    assert.equal(first.mcsExports, undefined);
    assert.equal(first.mcsExportsUnknown, true);
    const forbidden = await eventually("status: forbidden", () =>
      latest(r)?.mcs?.state === "forbidden" ? latest(r) : undefined,
    );
    const problem = forbidden.problems.find((p) => p.reason === "export-mode-forbidden");
    assert.equal(problem?.remote, "multicluster.x-k8s.io/serviceexports");
    assert.match(problem?.message ?? "", /forbidden \(403\)/);
    // Several rechecks later: still one problem with the same text (so the supervisor
    // reports it once), and annotation exports go on.
    const checks = r.actor.status().mcs?.discoveries ?? 0;
    await createExported(client, "mcs-denied", "second", "mcs-gw");
    await r.waitForBatch(
      "the second annotated mirror",
      (b) => upsertsIn(b, "mcs-denied").includes("second-south"),
      first.seq,
    );
    await eventually("three more rechecks", () =>
      (r.actor.status().mcs?.discoveries ?? 0) >= checks + 3 ? true : undefined,
    );
    const now = r.actor.status();
    assert.equal(now.mcs?.state, "forbidden");
    assert.deepEqual(
      now.problems.filter((p) => p.reason === "export-mode-forbidden").map((p) => p.message),
      [problem?.message],
    );
    const since = r.statuses.indexOf(forbidden);
    assert.ok(
      r.statuses.slice(since).every((s) => s.mcs?.state === "forbidden"),
      "forbidden all along",
    );
    // Logged once, not per recheck.
    assert.equal(
      warnings.filter((w) => /serviceexports\.multicluster\.x-k8s\.io: forbidden/.test(w)).length,
      1,
      warnings.join("\n"),
    );
    // Granted: the next recheck watches, lists and exports.
    await mintServiceAccountToken(kc, { ...request, role: { ...request.role, rules: [SERVICES_RULE, EXPORTS_RULE] } });
    const exported = await r.waitForBatch("web's export once granted", (b) => !!exportIn(b, "mcs-denied/web"));
    assert.deepEqual(exportIn(exported, "mcs-denied/web")?.addresses, ["198.51.100.31"]);
    await eventually("status: active, no problem", () =>
      latest(r)?.mcs?.state === "active" && !latest(r)?.problems.some((p) => p.reason === "export-mode-forbidden")
        ? true
        : undefined,
    );
    assert.deepEqual(r.faults, []);
  });

  /**
   * The remote reached through a fault proxy, with a token of a role that reads
   * Services and ServiceExports (the proxy ends TLS, so a client certificate does not
   * pass it).
   */
  async function proxied(): Promise<{ proxy: FaultProxy; connection: ConnectionSpec }> {
    await installMcsCrds(adminKubeConfig(plane.cluster("remote"))); // idempotent
    const proxy = await startFaultProxyFor(plane, "remote");
    proxies.push(proxy);
    const token = await mintServiceAccountToken(adminKubeConfig(plane.cluster("remote")), {
      namespace: "mcs-proxied",
      serviceAccount: "reader",
      role: { kind: "ClusterRole", name: "mcs-proxied-reader", rules: [SERVICES_RULE, EXPORTS_RULE] },
    });
    return { proxy, connection: { ...admin, server: proxy.url, auth: { kind: "token", token } } };
  }

  /** The complete batches of `r` that drop export `key`: neither carry it nor say the exports are unknown. */
  const dropping = (r: RunningActor, key: string): Batch[] =>
    r.port.batches.filter((b) => b.complete && !exportIn(b, key) && b.mcsExportsUnknown !== true);

  it("never sends a complete set without an export it cannot see: a first discovery answered 503 makes the exports unknown, not none", async () => {
    const { proxy, connection } = await proxied();
    await createService("mcs-flaky", "web");
    await createServiceExport("mcs-flaky", "web");
    await createExported(client, "mcs-flaky", "annotated", "mcs-gw");
    let discoveries = 0;
    proxy.setRules({
      errorRate: 1,
      errorStatus: 503,
      match: (method, path) => method === "GET" && path === DISCOVERY_PATH && ++discoveries === 1,
    });
    const r = start(connection, "flaky");
    // Discovery is asked again after the recheck period, and then web exports.
    await r.waitForBatch("web's export", (b) => !!exportIn(b, "mcs-flaky/web"));
    assert.equal(proxy.stats.injectedErrors, 1, "the first discovery was answered 503");
    const first = r.port.batches.find((b) => b.complete);
    assert.deepEqual(first ? upsertsIn(first, "mcs-flaky") : [], ["annotated-flaky"], "annotation export not held up");
    assert.deepEqual(dropping(r, "mcs-flaky/web").map(summary), [], "no complete set says web is not exported");
    assert.deepEqual(r.faults, []);
  });

  it("retries a discovery that failed with nothing known within seconds, not after the recheck period (a remote API server restarting)", async () => {
    const { proxy, connection } = await proxied();
    await createService("mcs-blip", "web");
    await createServiceExport("mcs-blip", "web");
    let discoveries = 0;
    proxy.setRules({
      errorRate: 1,
      errorStatus: 503,
      match: (method, path) => method === "GET" && path === DISCOVERY_PATH && ++discoveries <= 2,
    });
    // A recheck period far longer than the wait below: only the retry's backoff (≈ 1 s, 2 s) can make it.
    const r = start(connection, "blip", undefined, 10 * 60_000);
    await r.waitForBatch("web's export", (b) => !!exportIn(b, "mcs-blip/web"));
    assert.equal(proxy.stats.injectedErrors, 2, "the first two discoveries were answered 503");
    await eventually("blip's MCS export active", () => (latest(r)?.mcs?.state === "active" ? true : undefined));
  });

  it("a ServiceExport list that keeps failing (500) holds back no other mode: annotation exports go on, the exports stay unknown", async () => {
    const { proxy, connection } = await proxied();
    proxy.setRules({
      errorRate: 1,
      errorStatus: 500,
      match: (method, path) => method === "GET" && path === EXPORTS_PATH,
    });
    const r = start(connection, "broken");
    const first = await r.waitForBatch("the complete set", (b) => b.complete);
    assert.deepEqual(upsertsIn(first, "mcs-flaky"), ["annotated-broken"]);
    assert.equal(first.mcsExportsUnknown, true, "the exports are unknown, not none");
    await eventually("status: the list's failure said", () =>
      /listing serviceexports\.multicluster\.x-k8s\.io failed .*unknown, not none/.test(latest(r)?.mcs?.message ?? "")
        ? true
        : undefined,
    );
    await createExported(client, "mcs-flaky", "later", "mcs-gw");
    await r.waitForBatch("later's mirror", (b) => upsertsIn(b, "mcs-flaky").includes("later-broken"), first.seq);
    assert.ok(proxy.stats.injectedErrors >= 1);
    assert.deepEqual(dropping(r, "mcs-flaky/web").map(summary), []);
    assert.deepEqual(r.faults, []);
  });
});
