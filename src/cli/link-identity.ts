/**
 * `link` on the remote cluster: the read-only identity fleet-mirror uses there (from
 * deploy/rbac/remote.yaml: namespace, ServiceAccount, ClusterRole, binding; created
 * when missing, reused when present, never replaced) and the token it authenticates with.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { KubernetesObject } from "@kubernetes/client-node";
import type { Secret } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { parseRbacYaml } from "../kube/rbac-manifest.ts";
import { CommandError, isAlreadyExists, isNotFound, readRbacManifest, startProgress, writeErr } from "./common.ts";

export interface RemoteIdentity {
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

export async function createIfMissing(
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

async function deleteIfPresent(client: KubeClient, path: string): Promise<void> {
  try {
    await client.request("DELETE", path);
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
}

interface ClusterRoleBinding {
  metadata: { name: string; resourceVersion?: string };
  roleRef: { apiGroup: string; kind: string; name: string };
  subjects?: { kind: string; name: string; namespace?: string }[];
}

/** Creates (or reuses) the namespace, ServiceAccount, ClusterRole and binding; logs each step to stderr. */
export async function ensureRemoteIdentity(client: KubeClient, id: RemoteIdentity): Promise<void> {
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
export async function requestToken(client: KubeClient, id: RemoteIdentity, expirationSeconds: number): Promise<string> {
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
 * after `timeoutMs` with what to do instead, and delete the Secret if this run made it.
 */
export async function secretToken(client: KubeClient, id: RemoteIdentity, timeoutMs: number): Promise<string> {
  const path = `/api/v1/namespaces/${encodeURIComponent(id.namespace)}/secrets`;
  const name = `${id.serviceAccount}-token`;
  const outcome = await createIfMissing(client, path, name, {
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
        // Left behind, the Secret would become a token that never expires the day a
        // token controller runs, handed to no one: delete the one this run made.
        let cleanup = "";
        if (outcome === "created")
          cleanup = await deleteIfPresent(client, `${path}/${encodeURIComponent(name)}`).then(
            () => " (the Secret is deleted again)",
            (error: unknown) => ` (the Secret could not be deleted again, delete it: ${(error as Error).message})`,
          );
        throw new CommandError(
          `secret/${name} in ${id.namespace} on the remote cluster got no token within ${Math.round(timeoutMs / 1000)}s: the remote cluster's token controller (kube-controller-manager) does not fill it in${cleanup}. Use --token-source request (the default), or a longer --timeout`,
        );
      }
      await sleep(500);
    }
  } finally {
    progress.done();
  }
}
