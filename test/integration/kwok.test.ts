/**
 * The sandbox's fake kubelet (sandbox/kwok.ts) on a real control plane: a cluster named in
 * `kwok` gets one Ready Node, and a Pod bound to it becomes Running and Ready with an IP
 * from that cluster's Pod range, without a container runtime; a cluster not named gets
 * neither; the process ends with the plane.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import {
  inKwokPodCidr,
  KWOK_NODE_ANNOTATION,
  kwokNode,
  kwokNodeIp,
  kwokPodCidr,
  kwokZone,
} from "../../sandbox/kwok.ts";
import { adminKubeConfig, coreApi, eventually, statusCode } from "../helpers/kube.ts";

describe("KWOK in the sandbox control plane", () => {
  let plane: ControlPlane;

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["plain", "faked"], kwok: ["faked"] });
  });
  after(async () => {
    await plane?.stop();
  });

  it("gives the cluster named in `kwok` one Ready Node, with its zone and an address of its own, and the other none", async () => {
    const core = coreApi(adminKubeConfig(plane.cluster("faked")));
    const node = await core.readNode({ name: kwokNode("faked") });
    assert.equal(node.metadata?.labels?.["topology.kubernetes.io/zone"], kwokZone("faked"));
    assert.equal(node.metadata?.annotations?.[KWOK_NODE_ANNOTATION], "fake");
    assert.equal(node.spec?.podCIDR, kwokPodCidr(1));
    assert.ok(node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True"));
    assert.ok(node.status?.addresses?.some((a) => a.type === "InternalIP" && a.address === kwokNodeIp(1)));
    assert.deepEqual(
      (await core.listNode()).items.map((n) => n.metadata?.name),
      [kwokNode("faked")],
    );

    assert.deepEqual((await coreApi(adminKubeConfig(plane.cluster("plain"))).listNode()).items, []);
    assert.equal(plane.kwok("plain"), undefined);
  });

  it("makes a Pod bound to the Node Running and Ready with an IP from the cluster's range, and removes it once deleted", async () => {
    const core = coreApi(adminKubeConfig(plane.cluster("faked")));
    await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "p" },
        spec: { nodeName: kwokNode("faked"), containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }] },
      },
    });
    const pod = await eventually("the Pod Running and Ready with an IP", async () => {
      const p = await core.readNamespacedPod({ namespace: "default", name: "p" });
      const ready = p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
      return p.status?.phase === "Running" && ready && p.status.podIP ? p : undefined;
    });
    assert.ok(inKwokPodCidr(1, pod.status?.podIP ?? ""), `${pod.status?.podIP} in ${kwokPodCidr(1)}`);
    assert.equal(pod.status?.hostIP, kwokNodeIp(1));

    await core.deleteNamespacedPod({ namespace: "default", name: "p" });
    await eventually("the Pod gone", async () => {
      try {
        await core.readNamespacedPod({ namespace: "default", name: "p" });
        return undefined;
      } catch (error) {
        return statusCode(error) === 404 ? true : undefined;
      }
    });
  });

  it("stops KWOK with the plane", async () => {
    const kwok = plane.kwok("faked");
    assert.equal(kwok?.process.running, true);
    await plane.stop();
    assert.equal(kwok?.process.running, false);
  });
});
