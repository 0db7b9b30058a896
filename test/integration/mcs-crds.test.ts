/**
 * The sandbox installs the Kubernetes MCS API from the pinned sigs.k8s.io/mcs-api
 * module's own CRD manifests, on the clusters a test names and no others.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ApiextensionsV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { installMcsCrds, MCS_GROUP } from "../../sandbox/mcs-crds.ts";
import { adminKubeConfig, coreApi, statusCode } from "../helpers/kube.ts";

describe("the MCS API in the sandbox", () => {
  let plane: ControlPlane;

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["east", "west"] });
  });
  after(async () => {
    await plane?.stop();
  });

  it("installs ServiceExport and ServiceImport on the named cluster only, served as v1alpha1 and v1beta1", async () => {
    const east = adminKubeConfig(plane.cluster("east"));
    await installMcsCrds(east);
    const extensions = east.makeApiClient(ApiextensionsV1Api);
    for (const plural of ["serviceexports", "serviceimports"]) {
      const crd = await extensions.readCustomResourceDefinition({ name: `${plural}.${MCS_GROUP}` });
      assert.deepEqual(
        crd.spec.versions.map((v) => [v.name, v.served, v.storage]),
        [
          ["v1alpha1", true, false],
          ["v1beta1", true, true],
        ],
      );
      assert.equal(crd.metadata?.labels?.["multicluster.x-k8s.io/release-version"], "v0.5.2");
    }
    // An object written at v1alpha1 (the version fleet-mirror uses) reads back at v1beta1.
    await coreApi(east).createNamespace({ body: { metadata: { name: "mcs" } } });
    const objects = east.makeApiClient(CustomObjectsApi);
    await objects.createNamespacedCustomObject({
      group: MCS_GROUP,
      version: "v1alpha1",
      namespace: "mcs",
      plural: "serviceexports",
      body: { apiVersion: `${MCS_GROUP}/v1alpha1`, kind: "ServiceExport", metadata: { name: "web" } },
    });
    const read = (await objects.getNamespacedCustomObject({
      group: MCS_GROUP,
      version: "v1beta1",
      namespace: "mcs",
      plural: "serviceexports",
      name: "web",
    })) as { apiVersion: string; metadata: { name: string } };
    assert.equal(read.apiVersion, `${MCS_GROUP}/v1beta1`);
    assert.equal(read.metadata.name, "web");

    const west = adminKubeConfig(plane.cluster("west"));
    await assert.rejects(
      west.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: `serviceexports.${MCS_GROUP}` }),
      (error: unknown) => statusCode(error) === 404,
    );
  });

  it("applies again without changing anything (server-side apply of the same manifests)", async () => {
    const east = adminKubeConfig(plane.cluster("east"));
    const extensions = east.makeApiClient(ApiextensionsV1Api);
    const before = await extensions.readCustomResourceDefinition({ name: `serviceimports.${MCS_GROUP}` });
    await installMcsCrds(east);
    const after = await extensions.readCustomResourceDefinition({ name: `serviceimports.${MCS_GROUP}` });
    assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
  });

  it("installs one of the two CRDs when a test asks for it alone", async () => {
    const west = adminKubeConfig(plane.cluster("west"));
    await installMcsCrds(west, ["serviceimports"]);
    const extensions = west.makeApiClient(ApiextensionsV1Api);
    await extensions.readCustomResourceDefinition({ name: `serviceimports.${MCS_GROUP}` });
    await assert.rejects(
      extensions.readCustomResourceDefinition({ name: `serviceexports.${MCS_GROUP}` }),
      (error: unknown) => statusCode(error) === 404,
    );
  });
});
