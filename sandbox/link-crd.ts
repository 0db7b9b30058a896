/**
 * Installs linkerd's Link CRD (`links.multicluster.linkerd.io`, SPEC §15) into a sandbox
 * cluster from test/fixtures/linkerd/link-crd.yaml (linkerd's own, rendered from its
 * chart at the pinned release by test/fixtures/linkerd/generate.ts), the way a user's
 * `linkerd multicluster install` does: a server-side apply through the API.
 *
 * Guarantees: idempotent; when it resolves the CRD is Established and its storage
 * version (v1alpha3) is served, so a client that asks right after sees Links. Nothing
 * but the CRD is created.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
  PatchStrategy,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";

export const LINK_CRD_FILE = fileURLToPath(new URL("../test/fixtures/linkerd/link-crd.yaml", import.meta.url));
const ESTABLISHED_TIMEOUT_MS = 30_000;

/** The CRD object of the fixture. */
export function linkCrd(): V1CustomResourceDefinition {
  for (const doc of loadAllYaml(readFileSync(LINK_CRD_FILE, "utf8")) as unknown[]) {
    const crd = doc as V1CustomResourceDefinition | null;
    if (crd?.kind === "CustomResourceDefinition" && crd.metadata?.name === "links.multicluster.linkerd.io") return crd;
  }
  throw new Error(`${LINK_CRD_FILE} holds no Link CRD`);
}

/** Applies the Link CRD to the cluster of `kc` and waits until Links of v1alpha3 can be listed. */
export async function installLinkCrd(kc: KubeConfig): Promise<void> {
  const crd = linkCrd();
  await KubernetesObjectApi.makeApiClient(kc).patch(
    crd as KubernetesObject,
    undefined,
    undefined,
    "fleet-mirror-sandbox",
    true,
    PatchStrategy.ServerSideApply,
  );
  const extensions = kc.makeApiClient(ApiextensionsV1Api);
  const objects = kc.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + ESTABLISHED_TIMEOUT_MS;
  for (;;) {
    const current = await extensions.readCustomResourceDefinition({ name: "links.multicluster.linkerd.io" });
    const established = current.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
    if (established) {
      try {
        await objects.listClusterCustomObject({
          group: "multicluster.linkerd.io",
          version: "v1alpha3",
          plural: "links",
        });
        return;
      } catch {
        // not served yet
      }
    }
    if (Date.now() > deadline) throw new Error(`the Link CRD is not served within ${ESTABLISHED_TIMEOUT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100)); // polls an observable state
  }
}
