/**
 * ConnectionSpecs for sandbox clusters, for tests of the lean client (which takes a
 * ConnectionSpec, never a kubeconfig).
 */
import type { ConnectionSpec } from "../../src/kube/connection.ts";
import type { SandboxCluster } from "../../src/sandbox/control-plane.ts";

/** The value of the first `key: value` line of a kubeconfig rendered by src/sandbox/kubeconfig.ts. */
function field(yaml: string, key: string): string | undefined {
  const match = new RegExp(`^\\s*${key}:\\s*(.+?)\\s*$`, "m").exec(yaml);
  const raw = match?.[1];
  if (raw === undefined) return undefined;
  return raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
}

const fromBase64 = (text: string): string => Buffer.from(text, "base64").toString("utf8");

/**
 * The cluster's admin connection (client certificate in `system:masters`), read from its
 * admin kubeconfig. Throws when the kubeconfig holds neither a client certificate nor a token.
 */
export function adminConnection(cluster: SandboxCluster): ConnectionSpec {
  return connectionFromKubeconfig(cluster.adminKubeconfig, cluster.caPem);
}

/** A ConnectionSpec from kubeconfig text with inline credentials (the sandbox's own format). */
export function connectionFromKubeconfig(yaml: string, caPem?: string): ConnectionSpec {
  const server = field(yaml, "server");
  if (server === undefined) throw new Error("kubeconfig has no server");
  const caData = field(yaml, "certificate-authority-data");
  const ca = caPem ?? (caData === undefined ? undefined : fromBase64(caData));
  const certData = field(yaml, "client-certificate-data");
  const keyData = field(yaml, "client-key-data");
  const token = field(yaml, "token");
  let auth: ConnectionSpec["auth"];
  if (certData !== undefined && keyData !== undefined) {
    auth = { kind: "client-certificate", certPem: fromBase64(certData), keyPem: fromBase64(keyData) };
  } else if (token !== undefined) {
    auth = { kind: "token", token };
  } else {
    throw new Error("kubeconfig has neither client-certificate-data/client-key-data nor a token");
  }
  return { server, ...(ca !== undefined ? { caPem: ca } : {}), auth };
}
