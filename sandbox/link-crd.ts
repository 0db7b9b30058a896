/**
 * Installs linkerd's Link CRD (`links.multicluster.linkerd.io`, SPEC §15) into a sandbox
 * cluster the way a user's `linkerd multicluster install` does: linkerd's own CRD
 * template (test/fixtures/linkerd/chart: linkerd's files verbatim at the pinned release,
 * its NOTICE names them) rendered by the pinned helm, then a server-side apply through
 * the API. Nothing is fetched: the chart is in the repository, helm is the sandbox's.
 *
 * Guarantees (crd-apply.ts): idempotent; when it resolves the CRD is Established and
 * every version it serves (v1alpha3, its storage version, among them) is listed by
 * discovery, so a client that asks right after sees Links. Nothing but the CRD is created.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type KubeConfig, loadAllYaml, type V1CustomResourceDefinition } from "@kubernetes/client-node";
import { ensureHelm } from "./binaries.ts";
import { applyCrds } from "./crd-apply.ts";

/** The chart holding linkerd's Link CRD template, and the release it renders as. */
export const LINK_CRD_CHART = fileURLToPath(new URL("../test/fixtures/linkerd/chart", import.meta.url));
export const LINKERD_RELEASE = "version-2.20";

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

/** Applies the Link CRD to the cluster of `kc` and waits until Links of v1alpha3 are served. */
export async function installLinkCrd(kc: KubeConfig): Promise<void> {
  await applyCrds(kc, [await linkCrd()]);
}
