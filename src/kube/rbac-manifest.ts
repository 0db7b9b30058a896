/**
 * The repository's RBAC manifests (`deploy/rbac/<side>.yaml`): where they are and how
 * they are read. `link` and `check` create and review exactly these rules, and the
 * sandbox applies them, so every controller in a test runs with the permissions a real
 * installation grants — nothing more.
 *
 * Guarantee: only the kinds in `APPLICABLE_KINDS` are accepted; anything else in the file
 * is refused before anything is written.
 */
import { existsSync } from "node:fs";
import { type KubernetesObject, loadAllYaml } from "@kubernetes/client-node";

const APPLICABLE_KINDS: ReadonlySet<string> = new Set([
  "Namespace",
  "ServiceAccount",
  "ClusterRole",
  "Role",
  "ClusterRoleBinding",
  "RoleBinding",
]);

/**
 * Where the manifests may be, nearest first: this module is `src/kube/` in the repository
 * (`deploy/` two levels up) and `dist/src/kube/` once built, in a checkout and in the
 * image (`deploy/` three levels up, beside `dist/`).
 */
export function rbacManifestCandidates(side: "local" | "remote", moduleUrl: string = import.meta.url): string[] {
  return ["../../", "../../../"].map((up) => new URL(`${up}deploy/rbac/${side}.yaml`, moduleUrl).pathname);
}

/** Where the repository's manifests are (`deploy/rbac/<side>.yaml`); the nearest candidate when none exists. */
export function rbacManifestPath(side: "local" | "remote"): string {
  const candidates = rbacManifestCandidates(side);
  return candidates.find((path) => existsSync(path)) ?? (candidates[0] as string);
}

/** The objects of a multi-document manifest, validated; empty documents are skipped. */
export function parseRbacYaml(text: string, source = "manifest"): KubernetesObject[] {
  const objects: KubernetesObject[] = [];
  for (const doc of loadAllYaml(text) as unknown[]) {
    if (doc === null || doc === undefined) continue;
    if (typeof doc !== "object") throw new Error(`${source}: a document is not an object`);
    const object = doc as KubernetesObject;
    if (!object.apiVersion || !object.kind || !object.metadata?.name) {
      throw new Error(`${source}: every object needs apiVersion, kind and metadata.name`);
    }
    if (!APPLICABLE_KINDS.has(object.kind)) {
      throw new Error(`${source}: kind ${object.kind} (${object.metadata.name}) is not an RBAC object`);
    }
    objects.push(object);
  }
  return objects;
}
