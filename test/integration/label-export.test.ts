/**
 * End to end on real API servers: label export (SPEC §12) with each cluster's default
 * gateway, next to annotation export (SPEC §2), and its bad input (a look-alike label
 * value, an explicit "false", a Secret naming a default gateway that does not exist or
 * is not a name). Each bad case asserts its specific report and that the other clusters'
 * mirrors were not written.
 *
 * Remote `east` backs cluster `east` (no default-gateway annotations: linkerd's default
 * `linkerd-gateway` in `linkerd-multicluster`); remote `west` backs cluster `west` (its
 * Secret names `edge` in `mesh`) and cluster `ghost` (its Secret names a gateway that
 * does not exist).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EXPORTED_LABEL } from "../../src/core/export.ts";
import { GATEWAY_NAME, GATEWAY_NS, REMOTE_GATEWAY_RESOURCE_VERSION } from "../../src/core/labels.ts";
import type { ClusterRow } from "../../src/status/fleet-view.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { supervisorMetrics } from "../helpers/metrics.ts";

const EXPORTED = { [EXPORTED_LABEL]: "true" };
const addressesOf = (ep: { subsets?: { addresses?: { ip: string }[] }[] }): string[] =>
  (ep.subsets ?? []).flatMap((s) => (s.addresses ?? []).map((a) => a.ip)).sort();

describe("label export with each cluster's default gateway (SPEC §12)", () => {
  let fleet: Fleet;
  let controller: Supervisor;
  let eastIdentity: string;

  const row = (cluster: string): ClusterRow | undefined =>
    controller.status().clusters.find((r) => r.cluster === cluster);

  const metrics = (): Promise<string> => supervisorMetrics(controller);

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    await fleet.createGateway("east", {
      namespace: "linkerd-multicluster",
      name: "linkerd-gateway",
      ingress: [{ ip: "198.18.5.1" }],
    });
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.5.2" }] }); // gateway/gateway, for §2 exports
    await fleet.createGateway("west", { namespace: "mesh", name: "edge", ingress: [{ ip: "198.18.6.1" }] });
    await fleet.createService("east", "shop", "cart", { gateway: false, labels: EXPORTED });
    await fleet.createService("west", "shop", "pay", { gateway: false, labels: EXPORTED });
    await fleet.register("east");
    await fleet.register("west", {
      annotations: { [GATEWAY_NAME]: "edge", [GATEWAY_NS]: "mesh" },
    });
    controller = fleet.startInProcess();
  });

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("mirrors a labelled Service through linkerd's default gateway when the Secret names none", async () => {
    const mirror = await fleet.waitForMirror("shop", "cart-east");
    assert.equal(mirror.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"], "linkerd-gateway");
    assert.equal(mirror.metadata?.labels?.["mirror.linkerd.io/remote-gateway-ns"], "linkerd-multicluster");
    const endpoints = await fleet.waitForEndpoints("shop", "cart-east", (ep) => addressesOf(ep).length > 0);
    assert.deepEqual(addressesOf(endpoints), ["198.18.5.1"]);
    eastIdentity = await fleet.mirrorIdentity("shop", "cart-east");
  });

  it("mirrors a labelled Service through the gateway the cluster's Secret names", async () => {
    const mirror = await fleet.waitForMirror("shop", "pay-west");
    assert.equal(mirror.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"], "edge");
    assert.equal(mirror.metadata?.labels?.["mirror.linkerd.io/remote-gateway-ns"], "mesh");
    const endpoints = await fleet.waitForEndpoints("shop", "pay-west", (ep) => addressesOf(ep).length > 0);
    assert.deepEqual(addressesOf(endpoints), ["198.18.6.1"]);
  });

  it("lets the §2 annotations win over the label: the annotated gateway, not the default", async () => {
    await fleet.createService("east", "shop", "both", { labels: EXPORTED }); // gateway/gateway annotations
    const mirror = await fleet.waitForMirror("shop", "both-east");
    assert.equal(mirror.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"], "gateway");
    const endpoints = await fleet.waitForEndpoints("shop", "both-east", (ep) => addressesOf(ep).length > 0);
    assert.deepEqual(addressesOf(endpoints), ["198.18.5.2"]);
    // Taking the annotations away leaves the label: the mirror moves to the default gateway.
    await fleet.unexport("east", "shop", "both");
    await fleet.waitForEndpoints("shop", "both-east", (ep) => addressesOf(ep).join() === "198.18.5.1");
  });

  it("counts exports by mode in the status and the metric", async () => {
    const exports = await eventually("east's exports by mode", () => {
      const e = row("east")?.exports;
      return e && e.label === 2 && e.annotation === 0 ? e : undefined;
    });
    assert.deepEqual(exports, { annotation: 0, label: 2, declined: 0, mcs: 0 });
    const text = await metrics();
    assert.match(text, /^fleet_mirror_cluster_exports\{cluster="east",mode="label"\} 2$/m);
    assert.match(text, /^fleet_mirror_cluster_exports\{cluster="west",mode="label"\} 1$/m);
  });

  it('reports a look-alike value ("True") as MirrorSkipped, mirrors it once it is "true"', async () => {
    await fleet.createService("east", "shop", "caps", { gateway: false, labels: { [EXPORTED_LABEL]: "True" } });
    const problem = await eventually("the export-label-value problem in east's status", () =>
      row("east")?.problems.find((p) => p.remote === "shop/caps"),
    );
    assert.equal(problem.reason, "export-label-value");
    assert.match(problem.message, /label mirror\.linkerd\.io\/exported is "True"; only "true" exports/);
    const event = await fleet.waitForSecretEvent("cluster-credentials-east", "MirrorSkipped", (e) =>
      (e.message ?? "").includes("shop/caps"),
    );
    assert.equal(event.type, "Warning");
    assert.equal(await fleet.localService("shop", "caps-east"), undefined);
    await fleet.patchService("east", "shop", "caps", (svc) => {
      if (svc.metadata) svc.metadata.labels = { [EXPORTED_LABEL]: "true" };
    });
    await fleet.waitForMirror("shop", "caps-east");
    await eventually("the problem cleared", () =>
      row("east")?.problems.some((p) => p.remote === "shop/caps") ? undefined : true,
    );
  });

  it('counts "false" as declined: no mirror, no problem, no Event', async () => {
    await fleet.createService("east", "shop", "optout", { gateway: false, labels: { [EXPORTED_LABEL]: "false" } });
    await eventually("one declined Service in east's status", () =>
      row("east")?.exports?.declined === 1 ? true : undefined,
    );
    assert.equal(await fleet.localService("shop", "optout-east"), undefined);
    assert.equal(
      row("east")?.problems.some((p) => p.remote === "shop/optout"),
      false,
    );
    const events = await fleet.secretEvents("cluster-credentials-east", "MirrorSkipped");
    assert.equal(events.filter((e) => (e.message ?? "").includes("shop/optout")).length, 0);
    assert.match(await metrics(), /^fleet_mirror_cluster_exports\{cluster="east",mode="label-declined"\} 1$/m);
  });

  it("removing the label deletes the mirror", async () => {
    await fleet.createService("west", "shop", "gone", { gateway: false, labels: EXPORTED });
    await fleet.waitForMirror("shop", "gone-west");
    await fleet.patchService("west", "shop", "gone", (svc) => {
      if (svc.metadata) svc.metadata.labels = {};
    });
    await fleet.waitForNoMirror("shop", "gone-west");
  });

  it("a Secret naming a default gateway that does not exist: mirrors without endpoints, the gateway reported unusable", async () => {
    await fleet.register("west", {
      clusterName: "ghost",
      annotations: { [GATEWAY_NAME]: "nowhere", [GATEWAY_NS]: "mesh" },
    });
    await fleet.waitForMirror("shop", "pay-ghost");
    const gateway = await eventually("ghost's default gateway in its status", () =>
      row("ghost")?.gateways.find((g) => g.key === "mesh/nowhere"),
    );
    assert.equal(gateway.usable, false);
    assert.equal(gateway.reason, "gateway Service not found");
    const endpoints = await fleet.local.readNamespacedEndpoints({ namespace: "shop", name: "pay-ghost" });
    assert.deepEqual(addressesOf(endpoints), []);
    // The gateway appearing later fills the endpoints: the actor watches it like any gateway.
    const gw = await fleet.createGateway("west", {
      namespace: "mesh",
      name: "nowhere",
      ingress: [{ ip: "198.18.6.9" }],
    });
    await fleet.waitForEndpoints("shop", "pay-ghost", (ep) => addressesOf(ep).join() === "198.18.6.9");
    // The Service records the gateway's resourceVersion; it is a separate write from the
    // Endpoints and may land after them, so the next test's "before" waits for it here.
    await fleet.waitForMirror(
      "shop",
      "pay-ghost",
      (svc) => svc.metadata?.annotations?.[REMOTE_GATEWAY_RESOURCE_VERSION] === gw.metadata?.resourceVersion,
    );
  });

  it("a default gateway annotation that is not a name makes the Secret invalid and keeps its cluster's mirrors", async () => {
    const before = await fleet.currentMirrorIdentity("shop", "pay-ghost");
    const secret = await fleet.local.readNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      name: "cluster-credentials-ghost",
    });
    if (secret.metadata?.annotations) secret.metadata.annotations[GATEWAY_NAME] = "No_Such Gateway";
    await fleet.local.replaceNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      name: "cluster-credentials-ghost",
      body: secret,
    });
    const event = await fleet.waitForSecretEvent("cluster-credentials-ghost", "InvalidCredentials");
    assert.match(event.message ?? "", /annotation mirror\.linkerd\.io\/gateway-name "No_Such Gateway"/);
    await eventually("ghost invalid in the status", () => (row("ghost")?.state === "invalid" ? true : undefined));
    assert.equal(await fleet.currentMirrorIdentity("shop", "pay-ghost"), before, "the mirror was not written");
  });

  it("none of this wrote the first cluster's first mirror again", async () => {
    assert.equal(await fleet.currentMirrorIdentity("shop", "cart-east"), eastIdentity);
  });
});
