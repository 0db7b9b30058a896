/**
 * Installs linkerd's Link CRD (`links.multicluster.linkerd.io`, SPEC §15) into a sandbox
 * cluster the way a user's `linkerd multicluster install` does: linkerd's own CRD
 * template (test/fixtures/linkerd/chart: linkerd's files verbatim at the pinned release,
 * its NOTICE names them) rendered by the pinned helm, then a server-side apply through
 * the API. Nothing is fetched: the chart is in the repository, helm is the sandbox's.
 *
 * Guarantees: idempotent; when it resolves the CRD is Established and its storage
 * version (v1alpha3) is served, so a client that asks right after sees Links. Nothing
 * but the CRD is created.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
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
import { ensureHelm } from "./binaries.ts";

/** The chart holding linkerd's Link CRD template, and the release it renders as. */
export const LINK_CRD_CHART = fileURLToPath(new URL("../test/fixtures/linkerd/chart", import.meta.url));
export const LINKERD_RELEASE = "version-2.20";
const ESTABLISHED_TIMEOUT_MS = 30_000;

let rendered: Promise<V1CustomResourceDefinition> | undefined;

/** The CRD object, as helm renders linkerd's template (once per process). */
export function linkCrd(): Promise<V1CustomResourceDefinition> {
  rendered ??= renderLinkCrd();
  return rendered;
}

async function renderLinkCrd(): Promise<V1CustomResourceDefinition> {
  const { stdout } = await promisify(execFile)(
    await ensureHelm(),
    [
      "template",
      "linkerd-multicluster",
      LINK_CRD_CHART,
      "--namespace",
      "linkerd-multicluster",
      "--show-only",
      "templates/link-crd.yaml",
      "--set",
      `linkerdVersion=${LINKERD_RELEASE}`,
    ],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  for (const doc of loadAllYaml(stdout) as unknown[]) {
    const crd = doc as V1CustomResourceDefinition | null;
    if (crd?.kind === "CustomResourceDefinition" && crd.metadata?.name === "links.multicluster.linkerd.io") return crd;
  }
  throw new Error(`helm rendered no Link CRD from ${LINK_CRD_CHART}`);
}

/** Applies the Link CRD to the cluster of `kc` and waits until Links of v1alpha3 can be listed. */
export async function installLinkCrd(kc: KubeConfig): Promise<void> {
  const crd = await linkCrd();
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
