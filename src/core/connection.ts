/**
 * A plain, serializable description of how to reach one API server. The supervisor
 * builds it from a kubeconfig (with @kubernetes/client-node, on the main thread) and
 * hands it to a worker thread, which then needs nothing heavier than node:https.
 *
 * Invariant: remote connections (from Secrets) hold inline credentials only; nothing in
 * them names a file or a program. Only the operator's local connection may use `token-file`.
 */
export type ConnectionAuth =
  | { readonly kind: "token"; readonly token: string }
  | { readonly kind: "client-certificate"; readonly certPem: string; readonly keyPem: string }
  /**
   * Re-read every minute: a projected ServiceAccount token is rotated by the kubelet.
   * Only for the controller's own (local, in-cluster) connection, never from a Secret.
   */
  | { readonly kind: "token-file"; readonly path: string }
  | { readonly kind: "anonymous" };

export interface ConnectionSpec {
  /** `https://host:port[/prefix]`, no trailing slash. */
  readonly server: string;
  /** PEM bundle of the CAs to trust; the system CAs when omitted. */
  readonly caPem?: string;
  readonly insecureSkipTlsVerify?: boolean;
  /** TLS SNI / certificate name to verify, when it differs from the server's host. */
  readonly tlsServerName?: string;
  readonly auth: ConnectionAuth;
}
