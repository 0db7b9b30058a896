/**
 * End to end on real API servers: fleet-mirror's own leftovers (SPEC §6 for every object
 * of ours, whatever its name). Objects carrying fleet-mirror's labels (slices: also its
 * `managed-by`) under names today's code would not give them, as an older naming, a
 * crash between writes or a renamed mirror leave them, of every kind fleet-mirror
 * writes: a mirror's slices (beside a live mirror, and of a mirror that no longer
 * exists, and one naming no Service), Endpoints and per-host Services, fleet-wide
 * parts, import slices, derived Services and ServiceImports. At start-up each is
 * deleted, the live mirrors stay as they are, and a clean restart writes nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CustomObjectsApi, DiscoveryV1Api } from "@kubernetes/client-node";
import { MCS_GROUP, MCS_VERSION } from "../../src/core/mcs.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { createServiceExport, derivedName, installMcs, waitForServiceImport } from "../helpers/mcs.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const NS = "leftovers";
const DEFAULT_GATEWAY = { namespace: "linkerd-multicluster", name: "linkerd-gateway" };
const MIRROR = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "gateway",
};
const MANAGED = { "endpointslice.kubernetes.io/managed-by": "fleet-mirror" };
const FLEET = { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/federated": "true" };
const importLabels = (svc: string) => ({
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/service-import": svc,
});
const WRITTEN_KINDS = ["Service", "Endpoints", "EndpointSlice", "Namespace", "ServiceImport"];

describe("fleet-mirror's own leftovers, whatever their names (SPEC §6)", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let objects: CustomObjectsApi;
  let controller: Supervisor | undefined;

  async function start(): Promise<Supervisor> {
    const started = fleet.startInProcess({ endpointsApi: "endpointslices" }, { mcsRecheckMs: 500 });
    controller = started;
    await eventually("the controller synced", () =>
      started.writerReady && started.status().writer?.clusters["east"]?.complete ? true : undefined,
    );
    return started;
  }

  async function stop(): Promise<void> {
    await controller?.stop();
    controller = undefined;
  }

  /** A slice carrying `labels`, one ready endpoint at `ip` on port 4143. */
  async function slice(name: string, labels: Record<string, string>, ip = "198.18.9.99"): Promise<void> {
    await discovery.createNamespacedEndpointSlice({
      namespace: NS,
      body: {
        metadata: { name, labels },
        addressType: "IPv4",
        endpoints: [{ addresses: [ip], conditions: { ready: true, serving: true, terminating: false } }],
        ports: [{ name: "http", port: 4143, protocol: "TCP" }],
      },
    });
  }

  async function exists(kind: string, name: string): Promise<boolean> {
    try {
      if (kind === "EndpointSlice") await discovery.readNamespacedEndpointSlice({ namespace: NS, name });
      else if (kind === "Endpoints") await fleet.local.readNamespacedEndpoints({ namespace: NS, name });
      else if (kind === "Service") await fleet.local.readNamespacedService({ namespace: NS, name });
      else
        await objects.getNamespacedCustomObject({
          group: MCS_GROUP,
          version: MCS_VERSION,
          namespace: NS,
          plural: "serviceimports",
          name,
        });
      return true;
    } catch (error) {
      if (statusCode(error) === 404) return false;
      throw error;
    }
  }

  /** uid@resourceVersion of every object in the namespace of the kinds fleet-mirror writes. */
  async function identities(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const add = (kind: string, items: { metadata?: { name?: string; uid?: string; resourceVersion?: string } }[]) => {
      for (const o of items)
        out.set(`${kind}/${o.metadata?.name}`, `${o.metadata?.uid}@${o.metadata?.resourceVersion}`);
    };
    add("Service", (await fleet.local.listNamespacedService({ namespace: NS })).items);
    add("Endpoints", (await fleet.local.listNamespacedEndpoints({ namespace: NS })).items);
    add("EndpointSlice", (await discovery.listNamespacedEndpointSlice({ namespace: NS })).items);
    return out;
  }

  before(async () => {
    fleet = await Fleet.start(["east"]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    objects = fleet.kubeConfig("local").makeApiClient(CustomObjectsApi);
    await installMcs(fleet, ["local", "east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.9.1" }] });
    await fleet.createGateway("east", { ...DEFAULT_GATEWAY, ingress: [{ ip: "198.18.9.2" }] });
    await fleet.createService("east", NS, "web"); // exported: mirror web-east
    await fleet.createService("east", NS, "api", {
      gateway: false,
      labels: { "mirror.linkerd.io/federated": "member" },
    }); // fleet-wide api-federated, east's part
    await fleet.createService("east", NS, "db", { gateway: false });
    await createServiceExport(fleet, "east", NS, "db"); // import db, derived Service
    await fleet.register("east");
    await start();
    await fleet.waitForMirror(NS, "web-east");
    await fleet.waitForMirror(NS, "api-federated");
    await waitForServiceImport(fleet, NS, "db", (si) => (si.status?.clusters ?? []).length === 1);
    await stop();
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("deletes at start-up every leftover of ours of every kind, keeps the live mirrors, and a clean restart writes nothing", async () => {
    const db = derivedName(NS, "db");
    const gone = derivedName(NS, "gone");
    const oldDb = derivedName(NS, "old-db");
    const leftovers: [kind: string, name: string][] = [
      // A mirror's slice under an older name, beside the live mirror: its stale address is ready.
      ["EndpointSlice", "web-east-x7k2p"],
      // A slice of a mirror that no longer exists, and one that names no Service at all.
      ["EndpointSlice", "gone-east-x7k2p"],
      ["EndpointSlice", "stray-east"],
      // Endpoints without their Service, and a per-host Service of a headless mirror long gone.
      ["Endpoints", "orphan-east"],
      ["Service", "ghost-0-east"],
      // A fleet-wide part under an older name (live fleet-wide Service), and a part of one gone.
      ["EndpointSlice", "api-federated-east-x7k2p"],
      ["EndpointSlice", "old-federated-east-ipv4"],
      // An import slice under an older name (live import), and one of an import gone.
      ["EndpointSlice", `${db}-east-x7k2p`],
      ["EndpointSlice", `${gone}-east-ipv4`],
      // A derived Service and a ServiceImport no cluster exports any more.
      ["Service", oldDb],
      ["ServiceImport", "lonely"],
    ];
    const live = await identities();
    await slice("web-east-x7k2p", { ...MIRROR, "kubernetes.io/service-name": "web-east", ...MANAGED });
    await slice("gone-east-x7k2p", { ...MIRROR, "kubernetes.io/service-name": "gone-east", ...MANAGED });
    await slice("stray-east", { ...MIRROR, ...MANAGED });
    await fleet.local.createNamespacedEndpoints({
      namespace: NS,
      body: {
        metadata: { name: "orphan-east", labels: MIRROR },
        subsets: [{ addresses: [{ ip: "198.18.9.99" }], ports: [{ name: "http", port: 4143, protocol: "TCP" }] }],
      },
    });
    await fleet.local.createNamespacedService({
      namespace: NS,
      body: {
        metadata: {
          name: "ghost-0-east",
          labels: { ...MIRROR, "mirror.linkerd.io/headless-mirror-svc-name": "ghost-east" },
        },
        spec: { type: "ClusterIP", ports: [{ name: "http", port: 80, protocol: "TCP" }] },
      },
    });
    const part = { ...FLEET, "mirror.linkerd.io/cluster-name": "east", ...MANAGED };
    await slice("api-federated-east-x7k2p", { ...part, "kubernetes.io/service-name": "api-federated" });
    await slice("old-federated-east-ipv4", { ...part, "kubernetes.io/service-name": "old-federated" });
    const importPart = (svc: string, derived: string) => ({
      ...importLabels(svc),
      "mirror.linkerd.io/cluster-name": "east",
      "multicluster.kubernetes.io/service-name": svc,
      "multicluster.kubernetes.io/source-cluster": "east",
      "kubernetes.io/service-name": derived,
      ...MANAGED,
    });
    await slice(`${db}-east-x7k2p`, importPart("db", db));
    await slice(`${gone}-east-ipv4`, importPart("gone", gone));
    await fleet.local.createNamespacedService({
      namespace: NS,
      body: {
        metadata: { name: oldDb, labels: importLabels("old-db") },
        spec: { type: "ClusterIP", ports: [{ name: "http", port: 80, protocol: "TCP" }] },
      },
    });
    await objects.createNamespacedCustomObject({
      group: MCS_GROUP,
      version: MCS_VERSION,
      namespace: NS,
      plural: "serviceimports",
      body: {
        apiVersion: `${MCS_GROUP}/${MCS_VERSION}`,
        kind: "ServiceImport",
        metadata: { name: "lonely", labels: importLabels("lonely") },
        spec: { type: "ClusterSetIP", ports: [{ name: "http", protocol: "TCP", port: 80 }] },
      },
    });

    await start();
    let left: string[] = [];
    await eventually(
      () => `every leftover deleted at start-up (still there: ${left.join(", ")})`,
      async () => {
        left = [];
        for (const [kind, name] of leftovers) if (await exists(kind, name)) left.push(`${kind}/${name}`);
        return left.length === 0 ? true : undefined;
      },
      30_000,
    );
    // The live mirrors were not rewritten: every object of before is there as it was.
    const now = await identities();
    for (const [key, identity] of live) assert.equal(now.get(key), identity, `${key} untouched`);
    assert.ok(await exists("ServiceImport", "db"));

    // A restart over the clean world writes nothing.
    await stop();
    const restarted = await start();
    const idle = await waitForWriterIdle(restarted, { reports: 2 });
    const writes = Object.entries(idle.writes).filter(([key]) => WRITTEN_KINDS.includes(key.split("/")[1] ?? ""));
    assert.deepEqual(writes, []);
    assert.deepEqual(await identities(), now);
  });
});
