/**
 * The repository's RBAC manifests (`deploy/rbac/<side>.yaml`): where they are and how
 * they are read. `link` and `check` create and review exactly these rules, and the
 * sandbox applies them, so every controller in a test runs with the permissions a real
 * installation grants — nothing more.
 *
 * Guarantee: only the kinds in `APPLICABLE_KINDS` are accepted; anything else in the file
 * is refused before anything is written.
 */
import { type KubernetesObject, loadAllYaml } from "@kubernetes/client-node";

const APPLICABLE_KINDS: ReadonlySet<string> = new Set([
  "Namespace",
  "ServiceAccount",
  "ClusterRole",
  "Role",
  "ClusterRoleBinding",
  "RoleBinding",
]);

/** Where the repository's manifests are (`deploy/rbac/<side>.yaml`). */
export function rbacManifestPath(side: "local" | "remote"): string {
  return new URL(`../../deploy/rbac/${side}.yaml`, import.meta.url).pathname;
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
