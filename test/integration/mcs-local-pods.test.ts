/**
 * SPEC §16's local exporter end to end, with real Pods: a clusterset of two real API
 * servers, each running fleet-mirror against the other, kube-controller-manager and
 * KWOK's fake Node (test/helpers/clusterset.ts `{ pods: true }`). A Deployment's Pods on
 * c1 become Running and Ready with an IP, the EndpointSlice controller writes their
 * slices, and a ServiceExport on c1 must give c1 its own ServiceImport whose slice,
 * labelled `multicluster.kubernetes.io/source-cluster: c1`, carries those Pods as the
 * controller wrote them (addresses, readiness, nodeName, zone, the Pods' port), following
 * them as they scale and turn not ready; c2 gets the same ServiceImport, its c1 part at c1's
 * gateway. Nothing here hand-writes an EndpointSlice.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api, type V1EndpointSlice, type V1Pod } from "@kubernetes/client-node";
import { inKwokPodCidr, kwokNode, kwokPodCidr, kwokZone } from "../../sandbox/kwok.ts";
import { MANAGED_BY_FLEET_MIRROR, MANAGED_BY_LABEL } from "../../src/core/labels.ts";
import { MCS_GROUP, MCS_SERVICE_NAME_LABEL, MCS_SOURCE_CLUSTER_LABEL } from "../../src/core/mcs.ts";
import { Clusterset } from "../helpers/clusterset.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { createKwokDeployment, scaleKwokDeployment, waitForKwokPods } from "../helpers/kwok-pods.ts";
import { derivedName } from "../helpers/mcs.ts";

const NS = "shop";
const NAME = "orders";
const LABELS = { app: NAME };
const at = { group: MCS_GROUP, version: "v1beta1", namespace: NS };

type Obj = { spec?: Record<string, unknown>; status?: Record<string, unknown> };

describe("the local exporter with KWOK's Pods, on a clusterset of two (SPEC §16)", () => {
  let set: Clusterset;

  before(async () => {
    set = await Clusterset.start(["c1", "c2"], { pods: true });
    await Promise.all(set.names.map((c) => set.ensureNamespace(c, NS)));
  });

  after(async () => {
    await set?.stop();
  });

  const mcs = (c: string) => set.kubeConfig(c).makeApiClient(CustomObjectsApi);
  const getImport = async (c: string): Promise<Obj | undefined> => {
    try {
      return (await mcs(c).getNamespacedCustomObject({ ...at, plural: "serviceimports", name: NAME })) as Obj;
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  };
  const importClusters = (si: Obj | undefined): string[] =>
    ((si?.status?.["clusters"] as { cluster: string }[] | undefined) ?? []).map((c) => c.cluster);
  /** The slices of `c`'s derived Service that carry `source`'s part. */
  const partSlices = async (c: string, source: string): Promise<V1EndpointSlice[]> =>
    (
      await set
        .kubeConfig(c)
        .makeApiClient(DiscoveryV1Api)
        .listNamespacedEndpointSlice({
          namespace: NS,
          labelSelector: `kubernetes.io/service-name=${derivedName(NS, NAME)},${MCS_SOURCE_CLUSTER_LABEL}=${source}`,
        })
    ).items;
  /** c1's own part, once its endpoints are exactly `pods` (by address) with readiness `ready`. */
  const awaitLocalPart = (pods: readonly V1Pod[], ready: (ip: string) => boolean = () => true) => {
    const want = pods.map((p) => `${p.status?.podIP}:${ready(p.status?.podIP ?? "")}`).sort();
    let seen: string[] = [];
    return eventually(
      () => `c1's part to carry ${want.join(", ")} (last: ${seen.join(", ")})`,
      async () => {
        const slices = await partSlices("c1", "c1");
        seen = slices.flatMap((s) => (s.endpoints ?? []).map((e) => `${e.addresses.join("+")}:${e.conditions?.ready}`));
        seen.sort();
        return slices.length === 1 && JSON.stringify(seen) === JSON.stringify(want) ? slices[0] : undefined;
      },
      30_000,
    );
  };

  it("gives Pods of a Deployment on a KWOK Node an IP from the cluster's Pod range, and their Service its slices", async () => {
    const kc = set.kubeConfig("c1");
    await createKwokDeployment(kc, "c1", {
      namespace: NS,
      name: NAME,
      labels: LABELS,
      replicas: 2,
      ports: [{ name: "http", containerPort: 8080 }],
    });
    await set.api("c1").createNamespacedService({
      namespace: NS,
      body: {
        metadata: { name: NAME },
        spec: { selector: LABELS, ports: [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }] },
      },
    });
    const pods = await waitForKwokPods(kc, NS, LABELS, 2);
    for (const pod of pods) {
      assert.ok(inKwokPodCidr(0, pod.status?.podIP ?? ""), `${pod.status?.podIP} in ${kwokPodCidr(0)}`);
      assert.equal(pod.spec?.nodeName, kwokNode("c1"));
    }
    await eventually("the EndpointSlice controller's slice with both Pods", async () => {
      const slices = await kc
        .makeApiClient(DiscoveryV1Api)
        .listNamespacedEndpointSlice({ namespace: NS, labelSelector: `kubernetes.io/service-name=${NAME}` });
      const addresses = slices.items.flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses)).sort();
      return JSON.stringify(addresses) === JSON.stringify(pods.map((p) => p.status?.podIP)) ? true : undefined;
    });
  });

  it("imports c1's export into c1 itself, its slice carrying the Pods as the EndpointSlice controller wrote them", async () => {
    await mcs("c1").createNamespacedCustomObject({
      ...at,
      plural: "serviceexports",
      body: { apiVersion: `${MCS_GROUP}/v1beta1`, kind: "ServiceExport", metadata: { name: NAME } },
    });
    const si = await eventually("c1's own ServiceImport, exported by c1", async () => {
      const found = await getImport("c1");
      return JSON.stringify(importClusters(found)) === JSON.stringify(["c1"]) ? found : undefined;
    });
    assert.equal(si.spec?.["type"], "ClusterSetIP");
    assert.deepEqual(si.spec?.["ports"], [{ name: "http", port: 80, protocol: "TCP" }]);

    const pods = await waitForKwokPods(set.kubeConfig("c1"), NS, LABELS, 2);
    const slice = await awaitLocalPart(pods);
    assert.equal(slice.metadata?.labels?.[MCS_SERVICE_NAME_LABEL], NAME);
    assert.equal(slice.metadata?.labels?.[MANAGED_BY_LABEL], MANAGED_BY_FLEET_MIRROR);
    assert.equal(slice.addressType, "IPv4");
    assert.deepEqual(
      slice.ports?.map((p) => `${p.name}/${p.protocol}/${p.port}`),
      ["http/TCP/8080"],
      "the Pods' port, as the local slice has it",
    );
    for (const e of slice.endpoints ?? []) {
      assert.equal(e.nodeName, kwokNode("c1"));
      assert.equal(e.zone, kwokZone("c1"));
      assert.deepEqual({ ...e.conditions }, { ready: true, serving: true, terminating: false });
    }
  });

  it("gives c2 the same ServiceImport, with c1's part at c1's gateway and none of c1's Pod addresses", async () => {
    await eventually("c2's ServiceImport, exported by c1", async () =>
      JSON.stringify(importClusters(await getImport("c2"))) === JSON.stringify(["c1"]) ? true : undefined,
    );
    const addresses = await eventually("c2's slice of c1's part, with c1's gateway", async () => {
      const found = (await partSlices("c2", "c1")).flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses));
      return found.length > 0 ? found : undefined;
    });
    assert.deepEqual(addresses, ["198.18.9.1"]);
    assert.deepEqual(await partSlices("c2", "c2"), [], "c2 exports nothing");
  });

  it("follows the Pods: scaled up and down, and a Pod turned not ready", async () => {
    const kc = set.kubeConfig("c1");
    await scaleKwokDeployment(kc, NS, NAME, 3);
    await awaitLocalPart(await waitForKwokPods(kc, NS, LABELS, 3));
    await scaleKwokDeployment(kc, NS, NAME, 1);
    const [pod] = await waitForKwokPods(kc, NS, LABELS, 1);
    assert.ok(pod?.metadata?.name);
    await awaitLocalPart([pod]);

    // KWOK's Stages only act on Pending Pods: a Ready condition set False stays False.
    const core = kc.makeApiClient(CoreV1Api);
    const current = await core.readNamespacedPodStatus({ namespace: NS, name: pod.metadata.name });
    current.status = {
      ...current.status,
      conditions: (current.status?.conditions ?? []).map((c) => (c.type === "Ready" ? { ...c, status: "False" } : c)),
    };
    await core.replaceNamespacedPodStatus({ namespace: NS, name: pod.metadata.name, body: current });
    await awaitLocalPart([pod], () => false);
  });

  it("removes the ServiceImport from both clusters once c1 no longer exports", async () => {
    await mcs("c1").deleteNamespacedCustomObject({ ...at, plural: "serviceexports", name: NAME });
    for (const c of set.names)
      await eventually(`no ServiceImport on ${c}`, async () => ((await getImport(c)) ? undefined : true));
    assert.deepEqual(await partSlices("c1", "c1"), []);
  });
});
