/**
 * End to end on real API servers: the local cluster's own Service as the best tier of
 * a fleet-wide Service (SPEC §14, "local first"). A selector-less local Service `web`
 * labelled as a member, with a user's EndpointSlice, joins `web-federated` at
 * `--local-priority` 0; the remote member east (priority 100) stands by until the local
 * endpoints are not ready, and again once they have been ready for `--failback-delay`.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1Endpoint, type V1EndpointSlice } from "@kubernetes/client-node";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";

const GATEWAY = { namespace: "linkerd-multicluster", name: "linkerd-gateway" };
const MEMBER = { "mirror.linkerd.io/federated": "member" };
const SERVING = "mirror.linkerd.io/federated-serving-priority";
const STANDBY = "mirror.linkerd.io/federated-standby";

const podEndpoint = (ready: boolean): V1Endpoint => ({
  addresses: ["10.244.0.5"],
  conditions: { ready, serving: ready, terminating: false },
  hostname: "web-0",
  nodeName: "node-a",
  zone: "zone-a",
});

describe("the local member of a fleet-wide Service (SPEC §14)", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let controller: Supervisor | undefined;

  async function setLocalEndpoint(ready: boolean): Promise<void> {
    const slice = await discovery.readNamespacedEndpointSlice({ namespace: "tiers", name: "web-own" });
    slice.endpoints = [podEndpoint(ready)];
    await discovery.replaceNamespacedEndpointSlice({ namespace: "tiers", name: "web-own", body: slice });
  }

  /** Waits until the Service states `serving` and `check` holds for the slices by name. */
  async function waitForServing(
    serving: string,
    check: (slices: Map<string, V1EndpointSlice>) => boolean,
  ): Promise<Map<string, V1EndpointSlice>> {
    return eventually(`priority ${serving} serving`, async () => {
      const service = await fleet.localService("tiers", "web-federated");
      if (service?.metadata?.annotations?.[SERVING] !== serving) return undefined;
      const list = await discovery.listNamespacedEndpointSlice({ namespace: "tiers" });
      const slices = new Map(list.items.map((s) => [s.metadata?.name ?? "", s]));
      return check(slices) ? slices : undefined;
    });
  }

  const standby = (slice: V1EndpointSlice | undefined) => slice?.metadata?.annotations?.[STANDBY] === "true";
  const readiness = (slice: V1EndpointSlice | undefined) =>
    (slice?.endpoints ?? []).map((e) => `${e.addresses.join()}:${e.conditions?.ready}`).join();

  before(async () => {
    fleet = await Fleet.start(["east"]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    await fleet.createGateway("east", { ...GATEWAY, ingress: [{ ip: "198.18.1.1" }] });
    await fleet.ensureNamespace("east", "tiers");
    const service = {
      metadata: { name: "web", labels: MEMBER },
      spec: { ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }] },
    };
    await fleet.api("east").createNamespacedService({ namespace: "tiers", body: service });
    await fleet.ensureNamespace("local", "tiers");
    await fleet.local.createNamespacedService({ namespace: "tiers", body: service });
    await discovery.createNamespacedEndpointSlice({
      namespace: "tiers",
      body: {
        metadata: { name: "web-own", labels: { "kubernetes.io/service-name": "web" } },
        addressType: "IPv4",
        endpoints: [podEndpoint(true)],
        ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      },
    });
    await fleet.register("east");
    controller = fleet.startInProcess({ endpointsApi: "endpointslices", failbackDelayMs: 2_000 });
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("copies the local Service's own endpoints as the best tier, and the remote member stands by", async () => {
    const slices = await waitForServing("0", (s) => standby(s.get("web-federated-east-ipv4")));
    const local = slices.get("web-federated-local-ipv4");
    assert.equal(standby(local), false);
    assert.deepEqual(JSON.parse(JSON.stringify(local?.endpoints)), [podEndpoint(true)]);
    assert.deepEqual(
      local?.ports?.map((p) => [p.name, p.port]),
      [["http", 8080]],
    );
    assert.equal(readiness(slices.get("web-federated-east-ipv4")), "198.18.1.1:false");
    const service = await fleet.localService("tiers", "web-federated");
    assert.equal(service?.metadata?.annotations?.["mirror.linkerd.io/federated-clusters"], "east,local");
  });

  it("fails over to the remote member at once when the local endpoints are not ready", async () => {
    await setLocalEndpoint(false);
    const slices = await waitForServing("100", (s) => !standby(s.get("web-federated-east-ipv4")));
    assert.equal(readiness(slices.get("web-federated-east-ipv4")), "198.18.1.1:true");
    assert.equal(readiness(slices.get("web-federated-local-ipv4")), "10.244.0.5:false");
  });

  it("fails back to the local member once its endpoints have been ready for the failback delay", async () => {
    const revived = Date.now();
    await setLocalEndpoint(true);
    await waitForServing("0", (s) => standby(s.get("web-federated-east-ipv4")));
    assert.ok(Date.now() - revived >= 2_000, "failed back before the delay");
  });

  it("in Endpoints mode, the one Endpoints object holds the serving tier's addresses ready and the standby's not ready", async () => {
    await controller?.stop();
    controller = fleet.startInProcess({ endpointsApi: "endpoints", failbackDelayMs: 2_000 });
    const endpoints = await eventually("the fleet-wide Endpoints with both tiers", async () => {
      const found = await fleet.local
        .readNamespacedEndpoints({ namespace: "tiers", name: "web-federated" })
        .catch(() => undefined);
      const ready = (found?.subsets ?? []).flatMap((s) => (s.addresses ?? []).map((a) => a.ip));
      const notReady = (found?.subsets ?? []).flatMap((s) => (s.notReadyAddresses ?? []).map((a) => a.ip));
      return ready.join() === "10.244.0.5" && notReady.join() === "198.18.1.1" ? found : undefined;
    });
    const local = endpoints.subsets?.flatMap((s) => s.addresses ?? []).find((a) => a.ip === "10.244.0.5");
    assert.deepEqual([local?.hostname, local?.nodeName], ["web-0", "node-a"]);
    const service = await fleet.localService("tiers", "web-federated");
    assert.equal(service?.metadata?.annotations?.[SERVING], "0");
  });
});
