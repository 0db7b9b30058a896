/**
 * `link` on the local cluster: the credentials Secret (SPEC §1) holding a kubeconfig
 * with inline credentials only, and applying it.
 */

import type { ConnectionSpec } from "../core/connection.ts";
import type { GatewayRef } from "../core/export.ts";
import {
  CLUSTER_NAME,
  GATEWAY_NAME,
  GATEWAY_NS,
  KUBECONFIG_KEY,
  REMOTE_CLUSTER_DOMAIN,
  SECRET_TYPE,
} from "../core/labels.ts";
import type { Secret } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { formatData, isNotFound } from "./common.ts";

/** A kubeconfig with inline credentials only (what a Secret may use, SPEC §7). */
export function remoteKubeconfigText(cluster: string, connection: ConnectionSpec, token: string): string {
  const user = `fleet-mirror-${cluster}`;
  return formatData(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: cluster,
          cluster: {
            server: connection.server,
            ...(connection.caPem
              ? { "certificate-authority-data": Buffer.from(connection.caPem).toString("base64") }
              : {}),
            ...(connection.insecureSkipTlsVerify ? { "insecure-skip-tls-verify": true } : {}),
            ...(connection.tlsServerName ? { "tls-server-name": connection.tlsServerName } : {}),
          },
        },
      ],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: cluster, context: { cluster, user } }],
      "current-context": cluster,
    },
    "yaml",
  );
}

/** The credentials Secret of SPEC §1; `defaultGateway` parts given become its annotations (SPEC §12). */
export function credentialsSecret(opts: {
  readonly secretName: string;
  readonly namespace: string;
  readonly cluster: string;
  readonly domain: string;
  readonly kubeconfig: string;
  readonly defaultGateway?: Partial<GatewayRef>;
}): Secret & { type: string; data: Record<string, string> } {
  const gateway = opts.defaultGateway ?? {};
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: opts.secretName,
      namespace: opts.namespace,
      annotations: {
        [CLUSTER_NAME]: opts.cluster,
        [REMOTE_CLUSTER_DOMAIN]: opts.domain,
        ...(gateway.name !== undefined ? { [GATEWAY_NAME]: gateway.name } : {}),
        ...(gateway.namespace !== undefined ? { [GATEWAY_NS]: gateway.namespace } : {}),
      },
    },
    type: SECRET_TYPE,
    data: { [KUBECONFIG_KEY]: Buffer.from(opts.kubeconfig).toString("base64") },
  };
}

/** Creates the Secret, or replaces an existing one of that name (carrying its resourceVersion). */
export async function applySecret(client: KubeClient, secret: Secret): Promise<"created" | "updated"> {
  const namespace = encodeURIComponent(secret.metadata.namespace ?? "");
  const path = `/api/v1/namespaces/${namespace}/secrets`;
  try {
    const current = await client.request<Secret>("GET", `${path}/${encodeURIComponent(secret.metadata.name)}`);
    await client.request("PUT", `${path}/${encodeURIComponent(secret.metadata.name)}`, {
      body: { ...secret, metadata: { ...secret.metadata, resourceVersion: current.metadata.resourceVersion } },
    });
    return "updated";
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  await client.request("POST", path, { body: secret });
  return "created";
}
