/**
 * Installing CustomResourceDefinitions into a sandbox cluster the way a user does (a
 * server-side apply through the API), and waiting until they can be used: shared by
 * the MCS API's CRDs (mcs-crds.ts) and linkerd's Link CRD (link-crd.ts).
 *
 * Guarantees: idempotent (applying the same CRD again changes nothing); when
 * `applyCrds` resolves, every CRD applied is Established and its resource is listed by
 * discovery at every version it serves, so a client that asks right after sees it.
 * Nothing but the CRDs is created.
 */
import { type RequestOptions, request } from "node:https";
import {
  ApiextensionsV1Api,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  type V1CustomResourceDefinition,
} from "@kubernetes/client-node";

const FIELD_MANAGER = "fleet-mirror-sandbox";
export const ESTABLISHED_TIMEOUT_MS = 30_000;

/** Whether the discovery document of `group`/`version` lists `resource` (false: the group-version is not served). */
export async function servedByDiscovery(
  kc: KubeConfig,
  group: string,
  version: string,
  resource: string,
): Promise<boolean> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error("kubeconfig has no current cluster");
  const options: RequestOptions = { headers: {} };
  await kc.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    const req = request(`${cluster.server}/apis/${group}/${version}`, { ...options, method: "GET" }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        if (res.statusCode === 404) return resolve(false);
        if (res.statusCode !== 200) return reject(new Error(`discovery of ${group}/${version}: ${res.statusCode}`));
        const list = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { resources?: { name: string }[] };
        resolve((list.resources ?? []).some((r) => r.name === resource));
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** Applies `crds` to the cluster of `kc`, then waits until each is Established and served at every served version. */
export async function applyCrds(kc: KubeConfig, crds: readonly V1CustomResourceDefinition[]): Promise<void> {
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const extensions = kc.makeApiClient(ApiextensionsV1Api);
  for (const crd of crds)
    await objects.patch(
      crd as KubernetesObject,
      undefined,
      undefined,
      FIELD_MANAGER,
      true,
      PatchStrategy.ServerSideApply,
    );
  const deadline = Date.now() + ESTABLISHED_TIMEOUT_MS;
  for (const crd of crds) {
    const name = crd.metadata?.name ?? "";
    const { group, names } = crd.spec;
    const versions = crd.spec.versions.filter((v) => v.served).map((v) => v.name);
    for (;;) {
      const current = await extensions.readCustomResourceDefinition({ name });
      const established = current.status?.conditions?.some((c) => c.type === "Established" && c.status === "True");
      const everywhere =
        established &&
        (await Promise.all(versions.map((v) => servedByDiscovery(kc, group, v, names.plural)))).every(Boolean);
      if (everywhere) break;
      if (Date.now() > deadline)
        throw new Error(`CRD ${name} not established and served within ${ESTABLISHED_TIMEOUT_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, 100)); // polls an observable state
    }
  }
}
