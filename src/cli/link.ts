/**
 * `fleet-mirror link`: gives fleet-mirror read-only access to a remote cluster and
 * produces the credentials Secret (SPEC §1) that registers it.
 *
 * On the remote cluster, every object of `deploy/rbac/remote.yaml` is created when
 * missing and reused when present (never replaced: an operator's edits stay); a custom
 * `--service-account` gets its own ClusterRoleBinding to the same ClusterRole. Then a
 * token is minted, and the Secret is printed (or applied to the local cluster). The
 * Secret is validated with the controller's own parser before it is shown, so what
 * `link` prints is exactly what the controller accepts.
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { CLUSTER_NAME, KUBECONFIG_KEY, REMOTE_CLUSTER_DOMAIN, SECRET_TYPE } from "../core/labels.ts";
import { validateDns1123Label } from "../core/naming.ts";
import type { Secret } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import type { ConnectionSpec } from "../kube/connection.ts";
import { parseRbacYaml } from "../kube/rbac-manifest.ts";
import { parseCredentialsSecret } from "../supervisor/registration.ts";
import {
  type CommandDefinition,
  CommandError,
  cliClient,
  commandHelp,
  connectionFromFile,
  credentialsNamespace,
  durationFlag,
  EXIT_FAILURE,
  EXIT_OK,
  type FlagValues,
  formatData,
  isAlreadyExists,
  isNotFound,
  listAll,
  localConnection,
  localFlags,
  readRbacManifest,
  requiredFlag,
  runCli,
  sleep,
  startProgress,
  stringFlag,
  UsageError,
  writeErr,
  writeOut,
} from "./common.ts";
import { DEFAULT_ADMIN_URL, fetchAdminStatus } from "./status.ts";

/** The token's default lifetime with `--token-source request`: one year. */
const DEFAULT_TOKEN_DURATION = "8760h";

const flags = {
  "cluster-name": {
    type: "string",
    description: "name of the remote cluster in fleet-mirror (a DNS-1123 label; required)",
  },
  "remote-kubeconfig": { type: "string", description: "kubeconfig of the remote cluster (required)" },
  "remote-context": { type: "string", description: "context in --remote-kubeconfig (default: its current context)" },
  "cluster-domain": { type: "string", default: "cluster.local", description: "the remote cluster's DNS domain" },
  "service-account": {
    type: "string",
    description: "remote ServiceAccount to create or reuse (default: the one of deploy/rbac/remote.yaml)",
  },
  "token-source": {
    type: "string",
    default: "request",
    description:
      "request: TokenRequest API, works everywhere, expires (see --token-duration); secret: a kubernetes.io/service-account-token Secret, never expires, needs the remote's token controller",
  },
  "token-duration": {
    type: "string",
    default: DEFAULT_TOKEN_DURATION,
    description: "lifetime asked for a TokenRequest token (the API server may cap it)",
  },
  "secret-name": {
    type: "string",
    description: "name of the credentials Secret (default cluster-credentials-<cluster-name>)",
  },
  apply: { type: "boolean", description: "create or update the Secret in the local cluster instead of printing it" },
  wait: { type: "boolean", description: "with --apply: wait until the controller has registered the cluster" },
  timeout: { type: "string", default: "60s", description: "limit of --wait and of a token Secret being filled in" },
  "admin-url": { type: "string", description: `controller admin endpoint for --wait (default ${DEFAULT_ADMIN_URL})` },
  ...localFlags,
  output: { type: "string", short: "o", description: "format of the printed Secret: yaml (default) | json" },
} as const;

const help = commandHelp(
  "link --cluster-name C --remote-kubeconfig PATH [flags]",
  `On the remote cluster, creates (or reuses) the read-only identity of
deploy/rbac/remote.yaml: namespace, ServiceAccount, ClusterRole (get/list/watch on
Services, nothing else) and a ClusterRoleBinding; mints a token for it and prints the
credentials Secret cluster-credentials-<C> for the local cluster, ready for
\`kubectl apply -f -\`. With --apply, writes it to the local cluster (--kubeconfig,
--context, -n) itself. Running link again reuses everything and refreshes the token.

Tokens (--token-source):
  request (default)  TokenRequest API. Works on every API server, including those that
                     no longer create token Secrets, but the token EXPIRES
                     (--token-duration, default one year; the API server may cap it):
                     run link again before then. link prints the expiry on stderr.
  secret             a kubernetes.io/service-account-token Secret: never expires, but it
                     is filled in by the remote's token controller (kube-controller-manager);
                     without one, link fails after --timeout.`,
  flags,
);

interface RemoteIdentity {
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly clusterRole: KubernetesObject & { rules?: unknown };
  readonly bindingName: string;
}

function byKind(objects: readonly KubernetesObject[], kind: string): KubernetesObject {
  const found = objects.find((o) => o.kind === kind);
  if (!found) throw new CommandError(`deploy/rbac/remote.yaml has no ${kind}`);
  return found;
}

/** The identity to create, from deploy/rbac/remote.yaml (one source of truth for the remote role). */
export function remoteIdentity(serviceAccount: string | undefined): RemoteIdentity {
  const { path, text } = readRbacManifest("remote");
  const objects = parseRbacYaml(text, path);
  const sa = byKind(objects, "ServiceAccount");
  const binding = byKind(objects, "ClusterRoleBinding");
  const fileAccount = sa.metadata?.name ?? "";
  const account = serviceAccount ?? fileAccount;
  const bindingName = binding.metadata?.name ?? "";
  return {
    namespace: sa.metadata?.namespace ?? byKind(objects, "Namespace").metadata?.name ?? "",
    serviceAccount: account,
    clusterRole: byKind(objects, "ClusterRole"),
    // The file's binding names the file's ServiceAccount; another account gets its own.
    bindingName: account === fileAccount ? bindingName : `${bindingName}-${account}`,
  };
}

async function createIfMissing(
  client: KubeClient,
  path: string,
  name: string,
  body: object,
): Promise<"created" | "reused"> {
  try {
    await client.request("GET", `${path}/${encodeURIComponent(name)}`);
    return "reused";
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  try {
    await client.request("POST", path, { body });
    return "created";
  } catch (error) {
    if (isAlreadyExists(error)) return "reused";
    throw error;
  }
}

interface ClusterRoleBinding {
  metadata: { name: string; resourceVersion?: string };
  roleRef: { apiGroup: string; kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

/** Creates (or reuses) the namespace, ServiceAccount, ClusterRole and binding; logs each step to stderr. */
async function ensureRemoteIdentity(client: KubeClient, id: RemoteIdentity): Promise<void> {
  const ns = encodeURIComponent(id.namespace);
  const step = (what: string, outcome: string): void => writeErr(`${what} ${outcome} on the remote cluster\n`);
  step(
    `namespace/${id.namespace}`,
    await createIfMissing(client, "/api/v1/namespaces", id.namespace, {
      metadata: { name: id.namespace },
    }),
  );
  step(
    `serviceaccount/${id.serviceAccount}`,
    await createIfMissing(client, `/api/v1/namespaces/${ns}/serviceaccounts`, id.serviceAccount, {
      metadata: { name: id.serviceAccount, namespace: id.namespace },
    }),
  );
  const roleName = id.clusterRole.metadata?.name ?? "";
  const rbac = "/apis/rbac.authorization.k8s.io/v1";
  step(
    `clusterrole/${roleName}`,
    await createIfMissing(client, `${rbac}/clusterroles`, roleName, {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: roleName },
      rules: id.clusterRole.rules,
    }),
  );
  const subject = { kind: "ServiceAccount", name: id.serviceAccount, namespace: id.namespace };
  const bindingPath = `${rbac}/clusterrolebindings/${encodeURIComponent(id.bindingName)}`;
  let existing: ClusterRoleBinding | undefined;
  try {
    existing = await client.request<ClusterRoleBinding>("GET", bindingPath);
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  if (!existing) {
    await client.request("POST", `${rbac}/clusterrolebindings`, {
      body: {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRoleBinding",
        metadata: { name: id.bindingName },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: roleName },
        subjects: [subject],
      },
    });
    step(`clusterrolebinding/${id.bindingName}`, "created");
    return;
  }
  if (existing.roleRef.kind !== "ClusterRole" || existing.roleRef.name !== roleName) {
    throw new CommandError(
      `clusterrolebinding/${id.bindingName} on the remote cluster binds ${existing.roleRef.kind} ${existing.roleRef.name}, not ClusterRole ${roleName}: delete it or choose another --service-account`,
    );
  }
  const subjects = existing.subjects ?? [];
  if (subjects.some((s) => s.kind === subject.kind && s.name === subject.name && s.namespace === subject.namespace)) {
    step(`clusterrolebinding/${id.bindingName}`, "reused");
    return;
  }
  // The PUT carries the resourceVersion read above: a concurrent edit fails with 409 instead of being lost.
  await client.request("PUT", bindingPath, { body: { ...existing, subjects: [...subjects, subject] } });
  step(`clusterrolebinding/${id.bindingName}`, "updated (subject added)");
}

/** A TokenRequest token; warns on stderr when it expires. */
async function requestToken(client: KubeClient, id: RemoteIdentity, expirationSeconds: number): Promise<string> {
  const response = await client.request<{ status?: { token?: string; expirationTimestamp?: string } }>(
    "POST",
    `/api/v1/namespaces/${encodeURIComponent(id.namespace)}/serviceaccounts/${encodeURIComponent(id.serviceAccount)}/token`,
    { body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds } } },
  );
  const token = response?.status?.token;
  if (!token) throw new CommandError(`TokenRequest for ${id.namespace}/${id.serviceAccount} returned no token`);
  writeErr(
    `warning: the token expires at ${response.status?.expirationTimestamp ?? "an unknown time"}; run link again before then (or use --token-source secret for a token that does not expire)\n`,
  );
  return token;
}

/**
 * A long-lived token from a `kubernetes.io/service-account-token` Secret, which the
 * remote's token controller fills in. Without a controller-manager it never is: fail
 * after `timeoutMs` with what to do instead.
 */
async function secretToken(client: KubeClient, id: RemoteIdentity, timeoutMs: number): Promise<string> {
  const path = `/api/v1/namespaces/${encodeURIComponent(id.namespace)}/secrets`;
  const name = `${id.serviceAccount}-token`;
  await createIfMissing(client, path, name, {
    metadata: {
      name,
      namespace: id.namespace,
      annotations: { "kubernetes.io/service-account.name": id.serviceAccount },
    },
    type: "kubernetes.io/service-account-token",
  });
  const progress = startProgress(`waiting for the token controller to fill in secret/${name}`);
  const deadline = Date.now() + timeoutMs;
  try {
    for (;;) {
      const secret = await client.request<Secret>("GET", `${path}/${encodeURIComponent(name)}`);
      const token = secret.data?.["token"];
      if (token) return Buffer.from(token, "base64").toString("utf8");
      if (Date.now() > deadline) {
        throw new CommandError(
          `secret/${name} in ${id.namespace} on the remote cluster got no token within ${Math.round(timeoutMs / 1000)}s: the remote cluster's token controller (kube-controller-manager) does not fill it in. Use --token-source request (the default), or a longer --timeout`,
        );
      }
      await sleep(500);
    }
  } finally {
    progress.done();
  }
}

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

/** The credentials Secret of SPEC §1. */
export function credentialsSecret(opts: {
  readonly secretName: string;
  readonly namespace: string;
  readonly cluster: string;
  readonly domain: string;
  readonly kubeconfig: string;
}): Secret & { type: string; data: Record<string, string> } {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      name: opts.secretName,
      namespace: opts.namespace,
      annotations: { [CLUSTER_NAME]: opts.cluster, [REMOTE_CLUSTER_DOMAIN]: opts.domain },
    },
    type: SECRET_TYPE,
    data: { [KUBECONFIG_KEY]: Buffer.from(opts.kubeconfig).toString("base64") },
  };
}

/** Creates the Secret, or replaces an existing one of that name (carrying its resourceVersion). */
async function applySecret(client: KubeClient, secret: Secret): Promise<"created" | "updated"> {
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

/** Waits until the controller reports the cluster synced (or says why it cannot be). */
async function waitRegistered(values: FlagValues, cluster: string, timeoutMs: number): Promise<number> {
  const adminUrl = stringFlag(values, "admin-url") ?? DEFAULT_ADMIN_URL;
  const progress = startProgress(`waiting for the controller to sync cluster ${cluster}`);
  const deadline = Date.now() + timeoutMs;
  let last = "";
  try {
    while (Date.now() < deadline) {
      const admin = await fetchAdminStatus(adminUrl);
      if ("unreachable" in admin) last = `controller not reachable (${admin.unreachable})`;
      else {
        const row = admin.status.clusters?.find((r) => r.cluster === cluster);
        last = row ? `${row.state}${row.reason ? `: ${row.reason}` : ""}` : "not registered yet";
        if (row?.state === "synced") {
          progress.done();
          writeErr(
            `cluster ${cluster} synced: ${row.exportedServices} exported Service(s), ${row.mirrors} mirrored so far\n`,
          );
          return EXIT_OK;
        }
        if (row?.state === "invalid" || row?.state === "duplicate") break;
      }
      progress.update(`waiting for the controller to sync cluster ${cluster}: ${last}`);
      await sleep(500);
    }
  } finally {
    progress.done();
  }
  writeErr(`fleet-mirror link: cluster ${cluster} not synced within ${Math.round(timeoutMs / 1000)}s: ${last}\n`);
  return EXIT_FAILURE;
}

export const linkDefinition: CommandDefinition = {
  name: "link",
  help,
  flags,
  async run({ values }) {
    const cluster = requiredFlag(values, "cluster-name");
    const nameProblem = validateDns1123Label(cluster);
    if (nameProblem) throw new UsageError(`--cluster-name ${JSON.stringify(cluster)} ${nameProblem}`);
    const remotePath = requiredFlag(values, "remote-kubeconfig");
    const tokenSource = stringFlag(values, "token-source") ?? "request";
    if (tokenSource !== "request" && tokenSource !== "secret")
      throw new UsageError(`--token-source: ${JSON.stringify(tokenSource)} must be request or secret`);
    const format = stringFlag(values, "output") ?? "yaml";
    if (format !== "yaml" && format !== "json") throw new UsageError(`-o/--output: must be yaml or json`);
    const apply = values["apply"] === true;
    if (values["wait"] === true && !apply) throw new UsageError("--wait goes with --apply");
    const tokenSeconds = Math.round(durationFlag(values, "token-duration", DEFAULT_TOKEN_DURATION) / 1000);
    if (tokenSeconds < 600) throw new UsageError("--token-duration: must be at least 10m (the API server's minimum)");
    const timeoutMs = durationFlag(values, "timeout", "60s");
    const namespace = credentialsNamespace(values);
    const identity = remoteIdentity(stringFlag(values, "service-account"));
    const remoteConnection = connectionFromFile(
      remotePath,
      stringFlag(values, "remote-context"),
      "--remote-kubeconfig",
    );

    const remote = cliClient(remoteConnection);
    let token: string;
    try {
      await ensureRemoteIdentity(remote, identity);
      token =
        tokenSource === "request"
          ? await requestToken(remote, identity, tokenSeconds)
          : await secretToken(remote, identity, timeoutMs);
    } finally {
      remote.close();
    }
    const secret = credentialsSecret({
      secretName: stringFlag(values, "secret-name") ?? `cluster-credentials-${cluster}`,
      namespace,
      cluster,
      domain: stringFlag(values, "cluster-domain") ?? "cluster.local",
      kubeconfig: remoteKubeconfigText(cluster, remoteConnection, token),
    });
    // The controller's own parser: never hand out a Secret the controller would refuse.
    const parsed = parseCredentialsSecret(secret, { allowFilePaths: false });
    if (parsed.kind !== "valid")
      throw new CommandError(
        `the credentials Secret would be refused by the controller: ${parsed.kind === "invalid" ? parsed.message : "ignored"}`,
      );

    if (!apply) {
      writeOut(formatData(secret, format));
      return EXIT_OK;
    }
    const local = cliClient(localConnection(values));
    try {
      // Another Secret naming the same cluster wins over this one (SPEC §1): say so now.
      const others = (
        await listAll<Secret>(local, `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
          fieldSelector: `type=${SECRET_TYPE}`,
        })
      ).filter((s) => s.metadata.annotations?.[CLUSTER_NAME] === cluster && s.metadata.name !== secret.metadata.name);
      for (const other of others)
        writeErr(
          `warning: secret/${other.metadata.name} already registers cluster ${cluster}; the controller reports this one as a duplicate until that one is deleted (fleet-mirror unlink)\n`,
        );
      const outcome = await applySecret(local, secret);
      writeOut(`secret/${secret.metadata.name} ${outcome} in namespace ${namespace}\n`);
    } finally {
      local.close();
    }
    return values["wait"] === true ? waitRegistered(values, cluster, timeoutMs) : EXIT_OK;
  },
};

export function linkCommand(argv: readonly string[]): Promise<number> {
  return runCli(linkDefinition, argv);
}
