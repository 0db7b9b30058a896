import { writeFile } from "node:fs/promises";
import { KubeConfig } from "@kubernetes/client-node";

/**
 * Renders a single-context kubeconfig as YAML text. Credentials are always inline
 * (`*-data` fields, or a token): a kubeconfig rendered here never points at a file.
 */
export type KubeconfigAuth =
  | { readonly token: string }
  | { readonly clientCertPem: string; readonly clientKeyPem: string };

export interface KubeconfigOptions {
  readonly cluster: string;
  readonly server: string;
  readonly caPem: string;
  readonly user: string;
  readonly auth: KubeconfigAuth;
  /** Default namespace of the context. */
  readonly namespace?: string;
}

const b64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");
/** JSON strings are valid YAML scalars, and quote everything that needs it. */
const q = (text: string): string => JSON.stringify(text);

export function renderKubeconfig(options: KubeconfigOptions): string {
  const userLines =
    "token" in options.auth
      ? [`    token: ${q(options.auth.token)}`]
      : [
          `    client-certificate-data: ${b64(options.auth.clientCertPem)}`,
          `    client-key-data: ${b64(options.auth.clientKeyPem)}`,
        ];
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `- name: ${q(options.cluster)}`,
    "  cluster:",
    `    server: ${q(options.server)}`,
    `    certificate-authority-data: ${b64(options.caPem)}`,
    "users:",
    `- name: ${q(options.user)}`,
    "  user:",
    ...userLines,
    "contexts:",
    `- name: ${q(options.cluster)}`,
    "  context:",
    `    cluster: ${q(options.cluster)}`,
    `    user: ${q(options.user)}`,
    ...(options.namespace ? [`    namespace: ${q(options.namespace)}`] : []),
    `current-context: ${q(options.cluster)}`,
    "",
  ].join("\n");
}

/**
 * Writes (mode 0600) the kubeconfig of `user`, a client certificate of the sandbox CA, for
 * a sandbox cluster (`name`, `server`, `caPem`); returns `path`.
 */
export async function writeClientKubeconfig(
  path: string,
  cluster: { readonly name: string; readonly server: string; readonly caPem: string },
  user: string,
  certificate: { readonly certPem: string; readonly keyPem: string },
): Promise<string> {
  const auth = { clientCertPem: certificate.certPem, clientKeyPem: certificate.keyPem };
  const { name, server, caPem } = cluster;
  await writeFile(path, renderKubeconfig({ cluster: name, server, caPem, user, auth }), { mode: 0o600 });
  return path;
}

/** A client-node KubeConfig loaded from kubeconfig text. */
export function kubeConfig(text: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(text);
  return kc;
}
