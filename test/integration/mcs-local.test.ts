/**
 * The MCS API where the LOCAL cluster lacks its CRDs (SPEC §12): nothing MCS is written,
 * each exporting cluster is told why (status, a Warning Event, the metric), the other
 * modes go on; once the CRDs are installed the writer picks them up at its next recheck
 * and the ServiceImport appears.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { createServiceExport, derivedName, installMcs, waitForServiceImport } from "../helpers/mcs.ts";
import { supervisorMetrics } from "../helpers/metrics.ts";

const NS = "mcs-local";

describe("the MCS API without the CRDs in the local cluster (SPEC §12)", () => {
  let fleet: Fleet;
  let controller: Supervisor;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await installMcs(fleet, ["east"]);
    await fleet.createGateway("east", {
      namespace: "linkerd-multicluster",
      name: "linkerd-gateway",
      ingress: [{ ip: "198.18.8.1" }],
    });
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.8.2" }] });
    await fleet.createService("east", NS, "web", { gateway: false });
    await createServiceExport(fleet, "east", NS, "web");
    await fleet.register("east");
    controller = fleet.startInProcess({ endpointsApi: "endpointslices" }, { mcsRecheckMs: 500 });
  });

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("writes nothing MCS and tells the exporting cluster why, while annotation export goes on", async () => {
    const problem = await eventually("east told: ServiceImports not served locally", () =>
      controller
        .status()
        .clusters.find((r) => r.cluster === "east")
        ?.problems.find((p) => p.reason === "mcs-not-served"),
    );
    assert.match(
      problem.message,
      /ServiceImport mcs-local\/web is not written: the cluster does not serve serviceimports/,
    );
    assert.equal(controller.status().writer?.mcs?.state, "not-installed");
    // Nothing has created the namespace yet, so no Event could be stored: the first
    // mirror in it (exported by annotation) creates it, and the next recheck records it.
    const namespace = await fleet.local.readNamespace({ name: NS }).catch((error: unknown) => {
      if (statusCode(error) === 404) return undefined;
      throw error;
    });
    assert.equal(namespace, undefined, "nothing has created the namespace yet");
    await fleet.createService("east", NS, "plain");
    await fleet.waitForMirror(NS, "plain-east");
    const event = await eventually("a Warning Event on the ServiceImport's name", async () => {
      const events = await fleet.local.listNamespacedEvent({ namespace: NS, fieldSelector: "involvedObject.name=web" });
      return events.items.find((e) => e.reason === "ServiceImportNotServed");
    });
    assert.equal(event.type, "Warning");
    const metrics = await supervisorMetrics(controller);
    assert.match(metrics, /fleet_mirror_cluster_export_mode\{cluster="",mode="mcs",state="not-installed"\} 1/);
    assert.equal(await fleet.localService(NS, derivedName(NS, "web")), undefined);
  });

  it("imports once the CRDs are installed locally, and the problem goes", async () => {
    await installMcs(fleet, ["local"]);
    await waitForServiceImport(fleet, NS, "web", (s) => (s.status?.clusters ?? []).length === 1);
    await eventually("the problem gone", () =>
      controller
        .status()
        .clusters.find((r) => r.cluster === "east")
        ?.problems.some((p) => p.reason === "mcs-not-served")
        ? undefined
        : true,
    );
    assert.equal(controller.status().writer?.mcs?.state, "active");
  });
});
