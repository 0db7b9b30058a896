/**
 * End to end on real API servers: the Kubernetes MCS API (SPEC §12). A ServiceExport in
 * a remote cluster becomes, in the local cluster, a ServiceImport (type ClusterSetIP,
 * ports, `spec.ips` = its derived Service's cluster IP, `status.clusters`), a derived
 * ClusterIP Service, and EndpointSlices per exporting cluster labelled with the MCS
 * labels; CoreDNS resolves the derived Service. Bad input: two clusters exporting one
 * name with different ports (the oldest export's ports win, the other is reported), a
 * user's ServiceImport of the name (never touched, reported). Remote `north` has no MCS
 * CRDs and keeps exporting by annotation.
 */
import assert from "node:assert/strict";
import type { Resolver } from "node:dns/promises";
import { after, before, describe, it } from "node:test";
import type { V1Secret } from "@kubernetes/client-node";
import type { CoreDns } from "../../sandbox/coredns.ts";
import { startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { MCS_API_VERSION, MCS_SERVICE_NAME_LABEL, MCS_SOURCE_CLUSTER_LABEL } from "../../src/core/mcs.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import type { ClusterRow } from "../../src/status/fleet-view.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { cli, show } from "../helpers/cli.ts";
import { resolverFor, startLocalCoreDns, waitForA } from "../helpers/dns.ts";
import { Fleet, REMOTE_READER_RULES } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import {
  createServiceExport,
  createUserServiceImport,
  deleteServiceExport,
  derivedName,
  importSlices,
  installMcs,
  serviceImport,
  waitForServiceImport,
} from "../helpers/mcs.ts";
import { supervisorMetrics } from "../helpers/metrics.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const DEFAULT_GATEWAY = { namespace: "linkerd-multicluster", name: "linkerd-gateway" };
const NS = "mcs";
const endpointIps = (slices: { endpoints?: { addresses: string[] }[] | null }[]): string[] =>
  slices.flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses)).sort();

describe("the Kubernetes MCS API (SPEC §12)", () => {
  let fleet: Fleet;
  let controller: Supervisor;
  let dns: CoreDns;
  let resolver: Resolver;

  const row = (cluster: string): ClusterRow | undefined =>
    controller.status().clusters.find((r) => r.cluster === cluster);

  before(async () => {
    fleet = await Fleet.start(["east", "west", "north"]);
    await installMcs(fleet, ["local", "east", "west"]);
    await fleet.createGateway("east", { ...DEFAULT_GATEWAY, ingress: [{ ip: "198.18.7.1" }] });
    await fleet.createGateway("west", { ...DEFAULT_GATEWAY, ingress: [{ ip: "198.18.7.2" }] });
    await fleet.createGateway("north", { ingress: [{ ip: "198.18.7.3" }] });
    await fleet.createService("north", NS, "legacy"); // exported by annotation
    await fleet.register("east");
    await fleet.register("west");
    await fleet.register("north");
    dns = await startLocalCoreDns(fleet);
    resolver = resolverFor(dns);
    controller = fleet.startInProcess({ endpointsApi: "endpointslices" }, { mcsRecheckMs: 500 });
  });

  after(async () => {
    await controller?.stop();
    await dns?.stop();
    await fleet?.stop();
  });

  it("imports a remote ServiceExport: ServiceImport, derived Service and its IP, MCS-labelled slices", async () => {
    await fleet.createService("east", NS, "web", { gateway: false });
    await createServiceExport(fleet, "east", NS, "web");
    const derived = derivedName(NS, "web");
    const service = await fleet.waitForMirror(NS, derived);
    assert.equal(service.spec?.type, "ClusterIP");
    const si = await waitForServiceImport(fleet, NS, "web", (s) => (s.status?.clusters ?? []).length === 1);
    assert.equal(si.spec.type, "ClusterSetIP");
    assert.deepEqual(si.spec.ports, [{ name: "http", protocol: "TCP", port: 80 }]);
    assert.deepEqual(si.spec.ips, [service.spec?.clusterIP]);
    assert.deepEqual(si.status?.clusters, [{ cluster: "east" }]);
    const slices = await eventually("east's slice with the gateway address", async () => {
      const found = await importSlices(fleet, NS, "web");
      return endpointIps(found).length === 1 ? found : undefined;
    });
    assert.deepEqual(endpointIps(slices), ["198.18.7.1"]);
    const labels = slices[0]?.metadata?.labels ?? {};
    assert.equal(labels[MCS_SERVICE_NAME_LABEL], "web");
    assert.equal(labels[MCS_SOURCE_CLUSTER_LABEL], "east");
    assert.equal(labels["kubernetes.io/service-name"], derived);
    assert.deepEqual(
      slices[0]?.ports?.map((p) => ({ ...p })),
      [{ name: "http", protocol: "TCP", port: 4143 }],
    );
    await eventually("status: east has one MCS export, active", () =>
      row("east")?.mcs?.state === "active" && row("east")?.exports?.mcs === 1 ? true : undefined,
    );
  });

  it("adds a second exporting cluster with the same ports: both in status.clusters, a slice each", async () => {
    await fleet.createService("west", NS, "web", { gateway: false });
    await createServiceExport(fleet, "west", NS, "web");
    await waitForServiceImport(fleet, NS, "web", (s) => (s.status?.clusters ?? []).length === 2);
    assert.deepEqual((await serviceImport(fleet, NS, "web"))?.status?.clusters, [
      { cluster: "east" },
      { cluster: "west" },
    ]);
    const slices = await eventually("a slice per cluster", async () => {
      const found = await importSlices(fleet, NS, "web");
      return endpointIps(found).length === 2 ? found : undefined;
    });
    assert.deepEqual(endpointIps(slices), ["198.18.7.1", "198.18.7.2"]);
    assert.deepEqual(slices.map((s) => s.metadata?.labels?.[MCS_SOURCE_CLUSTER_LABEL]).sort(), ["east", "west"]);
  });

  it("resolves the derived Service through CoreDNS (cluster.local) to its cluster IP", async () => {
    const service = await fleet.waitForMirror(NS, derivedName(NS, "web"));
    await waitForA(resolver, `${derivedName(NS, "web")}.${NS}.svc.cluster.local`, [service.spec?.clusterIP ?? ""]);
  });

  it("merges the ports of exports by name (SPEC §16): the union, each served by its clusters; the later cluster is reported", async () => {
    await fleet.createService("east", NS, "api", { gateway: false });
    await createServiceExport(fleet, "east", NS, "api");
    await waitForServiceImport(fleet, NS, "api", (s) => (s.status?.clusters ?? []).length === 1);
    await fleet.createService("west", NS, "api", {
      gateway: false,
      ports: [{ name: "grpc", port: 9090, protocol: "TCP" }],
    });
    await createServiceExport(fleet, "west", NS, "api");
    const problem = await eventually("west reported as a port conflict", () =>
      row("west")?.problems.find((p) => p.reason === "port-conflict" && p.key === `${NS}/${derivedName(NS, "api")}`),
    );
    assert.match(problem.message, /differ from those of cluster east, the oldest export/);
    const si = await waitForServiceImport(fleet, NS, "api", (s) => (s.status?.clusters ?? []).length === 2);
    assert.deepEqual(si.spec.ports, [
      { name: "grpc", protocol: "TCP", port: 9090 },
      { name: "http", protocol: "TCP", port: 80 },
    ]);
    const slices = await eventually("a slice per cluster, each with its own port", async () => {
      const found = await importSlices(fleet, NS, "api");
      return found.length === 2 ? found : undefined;
    });
    assert.deepEqual(
      slices.map((s) => [s.metadata?.labels?.[MCS_SOURCE_CLUSTER_LABEL], s.ports?.map((p) => p.name)]),
      [
        ["east", ["http"]],
        ["west", ["grpc"]],
      ],
    );
    const event = await eventually("a Warning Event on the ServiceImport", async () => {
      const events = await fleet.local.listNamespacedEvent({ namespace: NS, fieldSelector: "involvedObject.name=api" });
      return events.items.find(
        (e) => e.reason === "ServiceImportPortConflict" && e.involvedObject.kind === "ServiceImport",
      );
    });
    assert.equal(event.type, "Warning");
  });

  it("never touches a user's ServiceImport of the name, and reports it", async () => {
    const mine = await createUserServiceImport(fleet, NS, "mine");
    await fleet.createService("east", NS, "mine", { gateway: false });
    await createServiceExport(fleet, "east", NS, "mine");
    const problem = await eventually("east reported: user-owned", () =>
      row("east")?.problems.find((p) => p.reason === "user-owned" && p.key === `${NS}/${derivedName(NS, "mine")}`),
    );
    assert.match(problem.message, /ServiceImport mcs\/mine exists and is not fleet-mirror's/);
    const after = await serviceImport(fleet, NS, "mine");
    assert.equal(after?.metadata.resourceVersion, mine.metadata.resourceVersion);
    assert.equal(await fleet.localService(NS, derivedName(NS, "mine")), undefined);
  });

  it("keeps a cluster without the CRDs exporting by annotation, with MCS not installed in its status", async () => {
    await fleet.waitForMirror(NS, "legacy-north");
    await eventually("north: MCS not installed", () =>
      row("north")?.mcs?.state === "not-installed" ? true : undefined,
    );
    assert.ok(!row("north")?.problems.some((p) => p.reason === "export-mode-forbidden"));
  });

  it("restarts over intact imports without a write to them", async () => {
    const before = await serviceImport(fleet, NS, "web");
    const beforeSlices = (await importSlices(fleet, NS, "web")).map((s) => s.metadata?.resourceVersion);
    await controller.stop();
    controller = fleet.startInProcess({ endpointsApi: "endpointslices" }, { mcsRecheckMs: 500 });
    await eventually("every cluster's complete set and web's import reduced", () => {
      const writer = controller.status().writer;
      const complete = ["east", "west", "north"].every((c) => writer?.clusters[c]?.complete === true);
      const web = writer?.imports?.find((i) => i.key === `${NS}/web`);
      return complete && web?.clusters.length === 2 ? true : undefined;
    });
    const idle = await waitForWriterIdle(controller, { reports: 2 });
    const writes = Object.keys(idle.writes).filter((k) =>
      /\/(Service|EndpointSlice|ServiceImport|Endpoints)\//.test(k),
    );
    assert.deepEqual(writes, []);
    assert.equal((await serviceImport(fleet, NS, "web"))?.metadata.resourceVersion, before?.metadata.resourceVersion);
    assert.deepEqual(
      (await importSlices(fleet, NS, "web")).map((s) => s.metadata?.resourceVersion),
      beforeSlices,
    );
  });

  it("keeps every import through a credentials rotation whose ServiceExport discovery fails: unknown is not none", async () => {
    // West is the only exporter of `solo` and one of web's two.
    await fleet.createService("west", NS, "solo", { gateway: false });
    await createServiceExport(fleet, "west", NS, "solo");
    const solo = await waitForServiceImport(fleet, NS, "solo", (s) => (s.status?.clusters ?? []).length === 1);
    const derived = await fleet.waitForMirror(NS, derivedName(NS, "solo"));
    const web = await serviceImport(fleet, NS, "web");
    const westSlices = async (): Promise<string[]> =>
      (await importSlices(fleet, NS, "web"))
        .filter((s) => s.metadata?.labels?.[MCS_SOURCE_CLUSTER_LABEL] === "west")
        .map((s) => `${s.metadata?.name}@${s.metadata?.uid}`);
    const slicesBefore = await westSlices();
    assert.equal(slicesBefore.length, 1);
    const unchanged = async (when: string): Promise<void> => {
      const now = await serviceImport(fleet, NS, "solo");
      assert.equal(now?.metadata.uid, solo.metadata.uid, `${when}: solo's ServiceImport kept`);
      assert.deepEqual(now?.spec.ips, solo.spec.ips, `${when}: solo's ServiceImport IP`);
      const service = await fleet.localService(NS, derivedName(NS, "solo"));
      assert.equal(service?.metadata?.uid, derived.metadata?.uid, `${when}: solo's derived Service kept`);
      assert.equal(service?.spec?.clusterIP, derived.spec?.clusterIP, `${when}: solo's cluster IP kept`);
      assert.equal((await serviceImport(fleet, NS, "web"))?.metadata.uid, web?.metadata.uid, `${when}: web kept`);
      assert.deepEqual(await westSlices(), slicesBefore, `${when}: west's part of web kept`);
    };

    const proxy = await startFaultProxyFor(fleet.plane, "west");
    let failing = true;
    proxy.setRules({
      errorRate: 1,
      errorStatus: 503,
      match: (method, path) => failing && method === "GET" && path === `/apis/${MCS_API_VERSION}`,
    });
    const rotate = async (server: string): Promise<void> => {
      const remote = fleet.plane.cluster("west");
      const kubeconfig = renderKubeconfig({
        cluster: "west",
        server,
        caPem: remote.caPem,
        user: "fleet-mirror",
        auth: { token: await fleet.mintRemoteToken("west") },
      });
      await fleet.editSecret("cluster-credentials-west", (secret) => {
        secret.data = { ...secret.data, kubeconfig: Buffer.from(kubeconfig).toString("base64") };
      });
    };
    try {
      await rotate(proxy.url);
      await eventually("west's new incarnation, its ServiceExport discovery failed", () =>
        row("west")?.mcs?.state === "unavailable" ? true : undefined,
      );
      // Its complete set went out once its Services listed; two idle reports: absorbed and planned.
      await eventually("west synced", () => (row("west")?.state === "synced" ? true : undefined));
      await waitForWriterIdle(controller, { reports: 2 });
      await unchanged("discovery failing");
      failing = false;
      await eventually("west's exports known again", () => (row("west")?.mcs?.state === "active" ? true : undefined));
      await waitForWriterIdle(controller, { reports: 2 });
      await unchanged("discovery answered");
      await rotate(fleet.plane.cluster("west").server);
      await eventually("the proxied incarnation gone", () => (proxy.stats.openConnections === 0 ? true : undefined));
      await eventually("west active, direct", () => (row("west")?.mcs?.state === "active" ? true : undefined));
    } finally {
      await proxy.stop();
    }
  });

  it("turns MCS off for a remote whose role lacks the ServiceExport read: one Event, a metric, other modes go on", async () => {
    // The least-privilege remote role (deploy/rbac/remote.yaml) minus its ServiceExport rule.
    const token = await mintServiceAccountToken(fleet.kubeConfig("west"), {
      namespace: "mcs-reader",
      serviceAccount: "reader",
      role: {
        kind: "ClusterRole",
        name: "mcs-reader",
        rules: REMOTE_READER_RULES.filter((r) => !r.resources.includes("serviceexports")),
      },
    });
    await fleet.createGateway("west", { ingress: [{ ip: "198.18.7.4" }] });
    await fleet.createService("west", NS, "ro");
    const secretName = "cluster-credentials-west-ro";
    await fleet.createSecret(
      fleet.secretBody({
        secretName,
        clusterName: "west-ro",
        kubeconfig: await fleet.remoteKubeconfig("west", token),
      }) as V1Secret,
    );
    await fleet.waitForMirror(NS, "ro-west-ro");
    const event = await fleet.waitForSecretEvent(secretName, "ExportModeForbidden");
    assert.equal(event.type, "Warning");
    assert.match(
      event.message ?? "",
      /cluster west-ro: MCS export is off: reading serviceexports\.multicluster\.x-k8s\.io is forbidden \(403\)/,
    );
    assert.equal(row("west-ro")?.mcs?.state, "forbidden");
    const text = await supervisorMetrics(controller);
    assert.match(text, /fleet_mirror_cluster_export_mode\{cluster="west-ro",mode="mcs",state="forbidden"\} 1/);
    assert.match(text, /fleet_mirror_cluster_export_mode\{cluster="",mode="mcs",state="active"\} 1/);
    // West's own exports (its full role) are unaffected.
    assert.deepEqual(
      (await serviceImport(fleet, NS, "web"))?.status?.clusters?.map((c) => c.cluster),
      ["east", "west"],
    );
    await fleet.local.deleteNamespacedSecret({ namespace: "fleet-mirror", name: secretName });
    await fleet.waitForNoMirror(NS, "ro-west-ro");
  });

  it("export --mode mcs creates the ServiceExport, unexport deletes it; a cluster without the CRDs is told so", async () => {
    const east = fleet.plane.cluster("east").adminKubeconfigPath;
    await fleet.createService("east", NS, "cli", { gateway: false });
    const exp = await cli(["export", "cli", "-n", NS, "--mode", "mcs", "--remote-kubeconfig", east]);
    assert.equal(exp.code, 0, show(exp));
    assert.match(exp.stdout, /exported by ServiceExport mcs\/cli, through the cluster's default gateway/);
    await waitForServiceImport(fleet, NS, "cli", (s) => (s.status?.clusters ?? []).length === 1);
    const again = await cli(["export", "cli", "-n", NS, "--mode", "mcs", "--remote-kubeconfig", east]);
    assert.equal(again.code, 0, show(again));
    const unexp = await cli(["unexport", "cli", "-n", NS, "--remote-kubeconfig", east]);
    assert.equal(unexp.code, 0, show(unexp));
    await eventually("the ServiceImport gone", async () =>
      (await serviceImport(fleet, NS, "cli")) ? undefined : true,
    );
    await fleet.createService("north", NS, "cli", { gateway: false });
    const north = fleet.plane.cluster("north").adminKubeconfigPath;
    const none = await cli(["export", "cli", "-n", NS, "--mode", "mcs", "--remote-kubeconfig", north]);
    assert.equal(none.code, 1, show(none));
    assert.match(none.stderr, /does not serve serviceexports\.multicluster\.x-k8s\.io: install the MCS API's CRDs/);
  });

  it("deletes the ServiceImport and its derived objects once no cluster exports the name", async () => {
    await deleteServiceExport(fleet, "east", NS, "web");
    await waitForServiceImport(fleet, NS, "web", (s) => JSON.stringify(s.status?.clusters) === '[{"cluster":"west"}]');
    await deleteServiceExport(fleet, "west", NS, "web");
    await eventually("the ServiceImport gone", async () =>
      (await serviceImport(fleet, NS, "web")) ? undefined : true,
    );
    await fleet.waitForNoMirror(NS, derivedName(NS, "web"));
    await eventually("its slices gone", async () =>
      (await importSlices(fleet, NS, "web")).length === 0 ? true : undefined,
    );
  });
});
