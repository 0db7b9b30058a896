/**
 * Installs the Kubernetes MCS API (ServiceExport, ServiceImport) into a sandbox cluster
 * from the pinned `sigs.k8s.io/mcs-api` module's own CRD manifests (sandbox/binaries.ts
 * caches them), the way a user installs them: a server-side apply through the API.
 *
 * Guarantees:
 * - idempotent: applying again with the same manifests changes nothing;
 * - when `installMcsCrds` resolves, every CRD applied is Established and its resources
 *   are served at every served version (discovery lists them), so a client that asks
 *   right after sees them;
 * - nothing but the CRDs is created: no RBAC (tests grant reads themselves, as a user
 *   extends `deploy/rbac/remote.yaml`).
 */
import { readFileSync } from "node:fs";
import {
  ApiextensionsV1Api,
  type KubeConfig,
  loadAllYaml,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";
import { ensureMcsCrds } from "./binaries.ts";
import { applyCrds, ESTABLISHED_TIMEOUT_MS, servedByDiscovery } from "./crd-apply.ts";

/** The MCS API's group. */
export const MCS_GROUP = "multicluster.x-k8s.io";
export const MCS_RESOURCES = ["serviceexports", "serviceimports"] as const;
export type McsResource = (typeof MCS_RESOURCES)[number];

/** The CRD objects of the pinned manifests, by resource. */
async function manifests(): Promise<Map<McsResource, V1CustomResourceDefinition>> {
  const paths = await ensureMcsCrds();
  const byResource = new Map<McsResource, V1CustomResourceDefinition>();
  for (const path of [paths.serviceExports, paths.serviceImports]) {
    for (const doc of loadAllYaml(readFileSync(path, "utf8")) as unknown[]) {
      const crd = doc as V1CustomResourceDefinition | null;
      if (crd?.kind !== "CustomResourceDefinition") continue;
      const plural = crd.spec.names.plural;
      if (crd.spec.group !== MCS_GROUP || !(MCS_RESOURCES as readonly string[]).includes(plural))
        throw new Error(`${path}: unexpected CRD ${crd.metadata?.name ?? "?"}`);
      byResource.set(plural as McsResource, crd);
    }
  }
  for (const resource of MCS_RESOURCES)
    if (!byResource.has(resource)) throw new Error(`the pinned MCS CRDs lack ${resource}`);
  return byResource;
}

/**
 * Applies the pinned CRDs of `resources` (default: both) to the cluster of `kc` and
 * waits until each is Established and served at every version it declares served.
 */
export async function installMcsCrds(kc: KubeConfig, resources: readonly McsResource[] = MCS_RESOURCES): Promise<void> {
  const crds = await manifests();
  await applyCrds(
    kc,
    resources.map((r) => crds.get(r) as V1CustomResourceDefinition),
  );
}

/** Deletes the MCS CRDs of `resources` (and so every object of them) and waits until they are gone. */
export async function removeMcsCrds(kc: KubeConfig, resources: readonly McsResource[] = MCS_RESOURCES): Promise<void> {
  const extensions = kc.makeApiClient(ApiextensionsV1Api);
  const deadline = Date.now() + ESTABLISHED_TIMEOUT_MS;
  for (const resource of resources) {
    const name = `${resource}.${MCS_GROUP}`;
    try {
      await extensions.deleteCustomResourceDefinition({ name });
    } catch (error) {
      if ((error as { code?: number }).code !== 404) throw error;
    }
    while (await servedByDiscovery(kc, MCS_GROUP, "v1alpha1", resource)) {
      if (Date.now() > deadline)
        throw new Error(`CRD ${name} still served ${ESTABLISHED_TIMEOUT_MS} ms after its deletion`);
      await new Promise((resolve) => setTimeout(resolve, 100)); // polls an observable state
    }
  }
}
