/**
 * Kubeconfig text → ConnectionSpec, with the auth-method policy of SPEC §7: a kubeconfig
 * may authenticate only with a bearer token or inline client certificate data; `exec`,
 * `auth-provider` and every file path are refused unless the caller allows file paths
 * explicitly. Nothing here ever runs a program, and files are read only under that flag.
 * The transport must be verified TLS: an `http://` server (the credentials would go out
 * in clear text) and `insecure-skip-tls-verify` (anyone on the path could take them) are
 * refused unless the caller allows insecure servers explicitly.
 *
 * The kubeconfig model is @kubernetes/client-node's own (`newClusters`, `newContexts`,
 * `newUsers`: the entries `KubeConfig.loadFromString` builds, invalid ones filtered the
 * same way), imported from its module alone: the package's index (and `KubeConfig`)
 * loads its whole generated API, ≈ 75 MB of RSS in the main thread of every Pod
 * (bench/HISTORY.md, cheaper threads). YAML is js-yaml's, as client-node's is. Call it
 * from the main thread only, never from an actor thread.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  type Cluster,
  type Context,
  newClusters,
  newContexts,
  newUsers,
  type User,
} from "@kubernetes/client-node/dist/config_types.js";
import { load as loadYaml } from "js-yaml";
import type { ConnectionAuth, ConnectionSpec } from "../core/connection.ts";

/** The entry named `name` (client-node's `findObject` for model entries), or null. */
function named<T extends { readonly name: string }>(entries: readonly T[], name: unknown): T | null {
  return entries.find((entry) => entry.name === name) ?? null;
}

/** Why a kubeconfig cannot be used. */
export type KubeconfigProblem =
  | "kubeconfig-unparsable"
  | "kubeconfig-no-context"
  | "kubeconfig-no-server"
  | "kubeconfig-forbidden-auth"
  | "kubeconfig-no-credentials"
  | "kubeconfig-bad-ca"
  | "kubeconfig-bad-client-certificate"
  | "kubeconfig-client-certificate-expired"
  | "kubeconfig-insecure";

export interface ParseOptions {
  /** Allow `tokenFile`, `client-certificate`, `client-key`, `certificate-authority` file paths. */
  readonly allowFilePaths: boolean;
  /** Allow an `http://` server and `insecure-skip-tls-verify` (credentials not protected by verified TLS). Default false. */
  readonly allowInsecure?: boolean;
}

type Raw = Record<string, unknown>;
const isRecord = (v: unknown): v is Raw => typeof v === "object" && v !== null && !Array.isArray(v);

function namedEntry(list: unknown, name: string, field: string): Raw | undefined {
  if (!Array.isArray(list)) return undefined;
  for (const item of list) {
    if (isRecord(item) && item["name"] === name && isRecord(item[field])) return item[field];
  }
  return undefined;
}

function readFileField(path: string, what: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    throw new Error(`cannot read ${what} file ${path}: ${(error as Error).message}`);
  }
}

export function b64decode(value: string): string {
  return Buffer.from(value, "base64").toString("utf8");
}

export class InvalidKubeconfig extends Error {
  readonly reason: KubeconfigProblem;
  constructor(reason: KubeconfigProblem, message: string) {
    super(message);
    this.reason = reason;
  }
}

/**
 * Builds a ConnectionSpec from kubeconfig text, applying the auth-method policy.
 * Used for remote kubeconfigs from Secrets (strict) and, with `allowFilePaths`, for
 * the operator's own local kubeconfig.
 * @throws InvalidKubeconfig with a specific reason.
 */
export function connectionFromKubeconfig(text: string, options: ParseOptions, context?: string): ConnectionSpec {
  if (text.trim().length === 0) throw new InvalidKubeconfig("kubeconfig-unparsable", "kubeconfig is empty");
  let raw: unknown;
  try {
    raw = loadYaml(text);
    // client-node's loadYaml refused an empty document with this message; kept.
    if (!raw) throw new Error("Failed to load YAML");
  } catch (error) {
    throw new InvalidKubeconfig(
      "kubeconfig-unparsable",
      `kubeconfig is not valid YAML: ${(error as Error).message.split("\n")[0]}`,
    );
  }
  if (!isRecord(raw)) throw new InvalidKubeconfig("kubeconfig-unparsable", "kubeconfig is not a YAML mapping");
  let clusters: Cluster[];
  let contexts: Context[];
  let users: User[];
  try {
    const filter = { onInvalidEntry: "filter" } as const;
    clusters = newClusters(raw["clusters"], filter);
    contexts = newContexts(raw["contexts"], filter);
    users = newUsers(raw["users"], filter);
  } catch (error) {
    throw new InvalidKubeconfig(
      "kubeconfig-unparsable",
      `kubeconfig is not a valid kubeconfig: ${(error as Error).message}`,
    );
  }
  const contextName: unknown = context ?? raw["current-context"];
  if (!contextName) {
    const names = contexts.map((c) => c.name);
    throw new InvalidKubeconfig(
      "kubeconfig-no-context",
      names.length > 1
        ? `kubeconfig has several contexts (${names.join(", ")}) and no current-context: set current-context to the one to use`
        : names.length === 1
          ? `kubeconfig has no current-context: set current-context to ${names[0] ?? ""}`
          : "kubeconfig has no current-context and no contexts",
    );
  }
  const ctx = named(contexts, contextName);
  if (!ctx)
    throw new InvalidKubeconfig("kubeconfig-no-context", `kubeconfig's context ${String(contextName)} does not exist`);
  const cluster = named(clusters, ctx.cluster);
  if (!cluster)
    throw new InvalidKubeconfig(
      "kubeconfig-no-server",
      `kubeconfig's context ${contextName} names cluster ${ctx.cluster}, which is not defined`,
    );
  let server: URL;
  try {
    server = new URL(cluster.server);
  } catch {
    throw new InvalidKubeconfig(
      "kubeconfig-no-server",
      `kubeconfig cluster ${ctx.cluster} has no valid server URL (got ${JSON.stringify(cluster.server ?? "")})`,
    );
  }
  if (server.protocol !== "https:" && server.protocol !== "http:") {
    throw new InvalidKubeconfig("kubeconfig-no-server", `kubeconfig server ${cluster.server} must be an https:// URL`);
  }
  if (options.allowInsecure !== true) checkSecureTransport(cluster, server);

  // Inspect the raw entries: client-node silently drops fields it does not know (tokenFile).
  const rawCluster = namedEntry(raw["clusters"], ctx.cluster, "cluster") ?? {};
  const rawUser = namedEntry(raw["users"], ctx.user, "user") ?? {};
  const forbidden: string[] = [];
  for (const key of ["exec", "auth-provider"]) if (key in rawUser) forbidden.push(key);
  if ("proxy-url" in rawCluster) forbidden.push("proxy-url");
  if ("username" in rawUser || "password" in rawUser) forbidden.push("username/password (basic auth)");
  const filePaths = [
    ...["tokenFile", "client-certificate", "client-key"].filter((k) => k in rawUser),
    ...("certificate-authority" in rawCluster ? ["certificate-authority"] : []),
  ];
  if (!options.allowFilePaths) forbidden.push(...filePaths);
  if (forbidden.length > 0) {
    throw new InvalidKubeconfig(
      "kubeconfig-forbidden-auth",
      `kubeconfig uses ${forbidden.join(", ")}; a Secret may only use a bearer token or inline client certificate data (a Secret must never run a program or read a file in the controller's Pod)`,
    );
  }

  let caPem: string | undefined;
  if (cluster.caData) caPem = b64decode(cluster.caData);
  else if (typeof rawCluster["certificate-authority"] === "string")
    caPem = readFileField(rawCluster["certificate-authority"], "certificate-authority");

  const user = ctx.user ? named(users, ctx.user) : null;
  let auth: ConnectionAuth;
  const tokenFile = rawUser["tokenFile"];
  if (user?.token) auth = { kind: "token", token: user.token };
  else if (typeof tokenFile === "string") auth = { kind: "token", token: readFileField(tokenFile, "tokenFile").trim() };
  else if (user?.certData && user.keyData)
    auth = { kind: "client-certificate", certPem: b64decode(user.certData), keyPem: b64decode(user.keyData) };
  else if (user?.certFile && user.keyFile) {
    auth = {
      kind: "client-certificate",
      certPem: readFileField(user.certFile, "client-certificate"),
      keyPem: readFileField(user.keyFile, "client-key"),
    };
  } else if (user?.certData || user?.keyData) {
    throw new InvalidKubeconfig(
      "kubeconfig-no-credentials",
      "kubeconfig has client-certificate-data without client-key-data (or the reverse)",
    );
  } else {
    throw new InvalidKubeconfig(
      "kubeconfig-no-credentials",
      `kubeconfig user ${ctx.user || "(none)"} has no token and no client certificate`,
    );
  }
  if (caPem !== undefined) checkCa(caPem);
  if (auth.kind === "client-certificate") checkClientCertificate(auth.certPem, auth.keyPem);
  return {
    server: cluster.server.replace(/\/+$/, ""),
    ...(caPem ? { caPem } : {}),
    ...(cluster.skipTLSVerify ? { insecureSkipTlsVerify: true } : {}),
    ...(cluster.tlsServerName ? { tlsServerName: cluster.tlsServerName } : {}),
    auth,
  };
}

/** The server must be reached over TLS, and TLS must verify it (unless `allowInsecure`). */
function checkSecureTransport(cluster: Cluster, server: URL): void {
  const insecure =
    server.protocol === "http:"
      ? `kubeconfig server ${cluster.server} is plain http://: its credentials would travel in clear text`
      : cluster.skipTLSVerify
        ? `kubeconfig cluster ${cluster.name} sets insecure-skip-tls-verify: its credentials would go to whoever answers`
        : undefined;
  if (insecure !== undefined)
    throw new InvalidKubeconfig(
      "kubeconfig-insecure",
      `${insecure}; use an https:// server with its certificate-authority-data (an operator may allow this with --allow-insecure-remotes)`,
    );
}

const PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----";

/** The CA bundle must hold at least one PEM certificate (a typo here only shows as a TLS error later). */
function checkCa(caPem: string): void {
  if (!caPem.includes(PEM_CERTIFICATE)) {
    throw new InvalidKubeconfig(
      "kubeconfig-bad-ca",
      "kubeconfig's certificate-authority-data holds no PEM certificate (expected base64 of -----BEGIN CERTIFICATE-----)",
    );
  }
}

/**
 * The client certificate must parse, match its key and be valid now: an expired
 * certificate only shows as an opaque 401 from the remote API server otherwise.
 */
function checkClientCertificate(certPem: string, keyPem: string, now: number = Date.now()): void {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(certPem);
  } catch (error) {
    throw new InvalidKubeconfig(
      "kubeconfig-bad-client-certificate",
      `kubeconfig's client-certificate-data is not a PEM certificate: ${(error as Error).message}`,
    );
  }
  let matches: boolean;
  try {
    matches = cert.checkPrivateKey(createPrivateKey(keyPem));
  } catch (error) {
    throw new InvalidKubeconfig(
      "kubeconfig-bad-client-certificate",
      `kubeconfig's client-key-data is not a usable private key: ${(error as Error).message}`,
    );
  }
  if (!matches) {
    throw new InvalidKubeconfig(
      "kubeconfig-bad-client-certificate",
      `kubeconfig's client-key-data does not belong to its client certificate (${cert.subject.replace(/\n/g, ", ")})`,
    );
  }
  const notAfter = Date.parse(cert.validTo);
  const notBefore = Date.parse(cert.validFrom);
  if (Number.isFinite(notAfter) && notAfter < now) {
    throw new InvalidKubeconfig(
      "kubeconfig-client-certificate-expired",
      `kubeconfig's client certificate (${cert.subject.replace(/\n/g, ", ")}) expired on ${new Date(notAfter).toISOString()}: issue a new one`,
    );
  }
  if (Number.isFinite(notBefore) && notBefore > now) {
    throw new InvalidKubeconfig(
      "kubeconfig-client-certificate-expired",
      `kubeconfig's client certificate (${cert.subject.replace(/\n/g, ", ")}) is not valid before ${new Date(notBefore).toISOString()}`,
    );
  }
}
