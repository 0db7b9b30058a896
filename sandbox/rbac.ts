/**
 * Applies the RBAC manifests of `deploy/rbac/` to a (sandbox) cluster and mints tokens
 * for their ServiceAccounts, so tests, benchmarks and the demo run the controller with
 * exactly the permissions a real installation grants — nothing more.
 *
 * Guarantees:
 * - `applyRbacYaml` is idempotent: every object is created, or replaced when it exists
 *   (carrying the current resourceVersion), so applying twice changes nothing and an
 *   edited manifest replaces the old rules;
 * - minting a token creates nothing but the token: no Role, no binding.
 */
import { readFileSync } from "node:fs";
import { CoreV1Api, type KubeConfig, type KubernetesObject, KubernetesObjectApi } from "@kubernetes/client-node";
import { parseRbacYaml } from "../src/kube/rbac-manifest.ts";

export { parseRbacYaml, rbacManifestPath } from "../src/kube/rbac-manifest.ts";

/** The ServiceAccount (and namespace) the controller runs as, per `deploy/rbac/local.yaml`. */
export const CONTROLLER_SERVICE_ACCOUNT = "fleet-mirror";

function statusCode(error: unknown): number | undefined {
  if (typeof error === "object" && error !== null && "code" in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === "number" ? code : undefined;
  }
  return undefined;
}

/**
 * Creates or replaces every object of the manifest at `path`, in file order (so a
 * Namespace listed first exists before the objects inside it). Throws on the first
 * failure other than "already exists".
 */
export async function applyRbacYaml(kc: KubeConfig, path: string): Promise<KubernetesObject[]> {
  const objects = parseRbacYaml(readFileSync(path, "utf8"), path);
  const api = KubernetesObjectApi.makeApiClient(kc);
  const applied: KubernetesObject[] = [];
  for (const object of objects) {
    try {
      applied.push(await api.create(object));
    } catch (error) {
      if (statusCode(error) !== 409) throw error;
      const header = {
        apiVersion: object.apiVersion as string,
        kind: object.kind as string,
        metadata: {
          name: object.metadata?.name as string,
          ...(object.metadata?.namespace ? { namespace: object.metadata.namespace } : {}),
        },
      };
      const current = await api.read(header);
      const body = {
        ...object,
        metadata: { ...object.metadata, resourceVersion: current.metadata?.resourceVersion },
      } as KubernetesObject;
      applied.push(await api.replace(body));
    }
  }
  return applied;
}

/**
 * A fresh bearer token for an existing ServiceAccount, through TokenRequest. Every call
 * returns a new token (handy for rotation tests); the ServiceAccount's permissions are
 * whatever is bound to it already — nothing is bound here.
 */
export async function serviceAccountToken(
  kc: KubeConfig,
  namespace: string,
  serviceAccount: string,
  expirationSeconds = 86_400,
): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const response = await core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: { spec: { audiences: [], expirationSeconds } },
  });
  const token = response.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
  return token;
}

/** A token of the controller's ServiceAccount (`fleet-mirror` in `namespace`), bound only by local.yaml. */
export async function controllerToken(kc: KubeConfig, namespace: string): Promise<string> {
  return serviceAccountToken(kc, namespace, CONTROLLER_SERVICE_ACCOUNT);
}
