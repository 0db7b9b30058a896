/**
 * A ServiceAccount token as the kubelet mounts one into a Pod: bound to that Pod (TokenRequest
 * with a `boundObjectRef`). The sandbox has no scheduler or kubelet, so the Pod is a
 * placeholder that stays Pending; it exists so the API server records its name with every
 * request made with the token (`user.extra["authentication.kubernetes.io/pod-name"]`, read
 * by test/helpers/audit.ts), as it does for a real Pod's token.
 */
import type { CoreV1Api, V1PodSpec } from "@kubernetes/client-node";
import { CONTROLLER_SERVICE_ACCOUNT } from "../../sandbox/rbac.ts";
import { CONTROLLER_NAMESPACE } from "./fleet.ts";
import { statusCode } from "./kube.ts";

/**
 * Creates placeholder Pod `name` in the controller's namespace and returns a token of the
 * controller's ServiceAccount bound to it. `template`: the Pod's labels and spec (a
 * Deployment's Pod template, which a namespace's Pod Security admission judges as it
 * would the real Pod); default a bare Pod of the controller's ServiceAccount.
 */
export async function podBoundToken(
  core: CoreV1Api,
  name: string,
  template: { readonly labels: Readonly<Record<string, string>>; readonly spec: V1PodSpec } = {
    labels: { "app.kubernetes.io/name": "fleet-mirror" },
    spec: {
      serviceAccountName: CONTROLLER_SERVICE_ACCOUNT,
      containers: [{ name: "fleet-mirror", image: "fleet-mirror:sandbox" }],
    },
  },
  expirationSeconds = 86_400,
): Promise<string> {
  // Never scheduled: the sandbox has no nodes. The Pod exists only to bind the token.
  const pod = await core.createNamespacedPod({
    namespace: CONTROLLER_NAMESPACE,
    body: { metadata: { name, labels: { ...template.labels } }, spec: template.spec },
  });
  const uid = pod.metadata?.uid;
  if (!uid) throw new Error(`Pod ${name} was created without a uid`);
  const response = await core.createNamespacedServiceAccountToken({
    name: CONTROLLER_SERVICE_ACCOUNT,
    namespace: CONTROLLER_NAMESPACE,
    body: {
      spec: { audiences: [], expirationSeconds, boundObjectRef: { apiVersion: "v1", kind: "Pod", name, uid } },
    },
  });
  const token = response.status?.token;
  if (!token) throw new Error(`TokenRequest bound to Pod ${name} returned no token`);
  return token;
}

/** Deletes placeholder Pod `name` (gone already is fine). */
export async function deletePlaceholderPod(core: CoreV1Api, name: string): Promise<void> {
  try {
    await core.deleteNamespacedPod({ namespace: CONTROLLER_NAMESPACE, name, gracePeriodSeconds: 0 });
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
  }
}
