/**
 * The pure part of `fleet-mirror check`: what the controller needs (from
 * deploy/rbac/local.yaml), what counts as a name conflict or an orphaned mirror, and
 * the ✓/✗ report. No I/O: check.ts reads the clusters and calls these.
 */
import { sliceNames, sliceOwner } from "../core/endpoint-slices.ts";
import { FEDERATED_LABEL, federatedName } from "../core/federated.ts";
import { isFederatedObject } from "../core/federated-objects.ts";
import { MIRRORED_SERVICE, ownerCluster } from "../core/labels.ts";
import { mirrorName } from "../core/naming.ts";
import { type KubeObject, objectKey, type Service } from "../core/objects.ts";
import { parseRbacYaml } from "../kube/rbac-manifest.ts";
import type { RegistryState } from "../supervisor/registry.ts";

export interface CheckResult {
  readonly section: string;
  readonly ok: boolean;
  readonly message: string;
}

/**
 * The credentials section: each registered cluster (✗ when its priority annotation is
 * invalid, SPEC §14: it runs at the default priority), each invalid and duplicate Secret.
 */
export function credentialChecks(registry: RegistryState): CheckResult[] {
  const results: CheckResult[] = [];
  for (const [cluster, reg] of [...registry.registered].sort(([a], [b]) => a.localeCompare(b))) {
    results.push({
      section: "credentials",
      ok: true,
      message: `secret ${reg.secretKey} registers cluster ${cluster} (${reg.domain})`,
    });
    if (reg.priorityProblem)
      results.push({ section: "credentials", ok: false, message: `secret ${reg.secretKey}: ${reg.priorityProblem}` });
  }
  for (const i of registry.invalid)
    results.push({
      section: "credentials",
      ok: false,
      message: `secret ${i.secretKey} is invalid: ${i.reason}: ${i.message}`,
    });
  for (const d of registry.duplicates)
    results.push({
      section: "credentials",
      ok: false,
      message: `secret ${d.secretKey} names cluster ${d.cluster}, already registered by ${d.winner} (duplicate)`,
    });
  return results;
}

/** The ✓/✗ report, grouped by section in first-seen order (pure). */
export function formatChecks(results: readonly CheckResult[]): string {
  const sections = new Map<string, CheckResult[]>();
  for (const r of results) sections.set(r.section, [...(sections.get(r.section) ?? []), r]);
  const lines: string[] = [];
  for (const [section, list] of sections) {
    lines.push(section, "-".repeat(section.length));
    for (const r of list) lines.push(`${r.ok ? "✓" : "✗"} ${r.message}`);
    lines.push("");
  }
  const failed = results.filter((r) => !r.ok).length;
  lines.push(
    failed === 0
      ? `Status check results are ✓ (${results.length} checks)`
      : `Status check results are ✗ (${failed} of ${results.length} checks failed)`,
  );
  return `${lines.join("\n")}\n`;
}

interface PolicyRule {
  readonly apiGroups?: readonly string[];
  readonly resources?: readonly string[];
  readonly resourceNames?: readonly string[];
  readonly verbs?: readonly string[];
}

export interface PermissionNeed {
  readonly group: string;
  readonly resource: string;
  readonly verb: string;
  /** Undefined: cluster-wide (a ClusterRole); else the credentials namespace (a Role). */
  readonly namespace?: string;
  /** The one object the rule names (`resourceNames`, e.g. the Lease); undefined: any. */
  readonly name?: string;
}

/** Every (group, resource, verb, and name when the rule names objects) the controller is granted by local.yaml (pure). */
export function permissionNeeds(manifest: string, credentialsNs: string): PermissionNeed[] {
  const needs: PermissionNeed[] = [];
  for (const object of parseRbacYaml(manifest, "deploy/rbac/local.yaml")) {
    if (object.kind !== "ClusterRole" && object.kind !== "Role") continue;
    const rules = (object as { rules?: readonly PolicyRule[] }).rules ?? [];
    for (const rule of rules) {
      for (const group of rule.apiGroups ?? [""]) {
        for (const resource of rule.resources ?? []) {
          for (const verb of rule.verbs ?? []) {
            const where = object.kind === "Role" ? { namespace: credentialsNs } : {};
            for (const name of rule.resourceNames ?? [undefined])
              needs.push({ group, resource, verb, ...where, ...(name !== undefined ? { name } : {}) });
          }
        }
      }
    }
  }
  return needs;
}

/** The local objects `check` lists: every Service, Endpoints and EndpointSlice. */
export interface LocalMirrorObjects {
  readonly services: readonly KubeObject[];
  readonly endpoints: readonly KubeObject[];
  readonly slices: readonly KubeObject[];
}

/** The owning cluster of a listed object, by its kind's ownership rule (SPEC §5, §9). */
function ownerOf(kind: "service" | "endpoints" | "endpointslice", object: KubeObject): string | undefined {
  return kind === "endpointslice" ? sliceOwner(object.metadata.labels) : ownerCluster(object.metadata.labels);
}

/**
 * Local objects holding a name a mirror needs (its Service and Endpoints name, and the
 * names of its slices of either family) without being that cluster's mirror (pure).
 */
export function nameConflicts(
  clusters: readonly { readonly cluster: string; readonly exported: readonly Service[] }[],
  local: LocalMirrorObjects,
): CheckResult[] {
  const index = indexLocal(local);
  const results: CheckResult[] = [];
  for (const { cluster, exported } of clusters) {
    for (const remote of exported) {
      const namespace = remote.metadata.namespace ?? "";
      const name = mirrorName(remote.metadata.name, cluster);
      const needed = [
        ...(["service", "endpoints"] as const).map((kind) => ({ kind, key: `${namespace}/${name}` })),
        ...sliceNames(name).map((slice) => ({ kind: "endpointslice" as const, key: `${namespace}/${slice}` })),
      ];
      for (const { kind, key } of needed) {
        const found = index.get(`${kind}/${key}`);
        if (!found) continue;
        const owner = ownerOf(kind, found);
        if (owner === cluster) continue;
        results.push({
          section: "name conflicts",
          ok: false,
          message: `${kind}/${key} is needed for the mirror of ${remote.metadata.namespace ?? ""}/${remote.metadata.name} from ${cluster} but ${owner ? `is a mirror of cluster ${owner}` : `is not a mirror (no ${MIRRORED_SERVICE} label): a user's object`}`,
        });
      }
    }
  }
  return results;
}

/** Every listed local object by `kind/namespace/name`. */
function indexLocal(local: LocalMirrorObjects): Map<string, KubeObject> {
  const index = new Map<string, KubeObject>();
  for (const [kind, list] of [
    ["service", local.services],
    ["endpoints", local.endpoints],
    ["endpointslice", local.slices],
  ] as const) {
    for (const o of list) index.set(`${kind}/${objectKey(o.metadata)}`, o);
  }
  return index;
}

const KIND_NAMES = { service: "Service", endpoints: "Endpoints", endpointslice: "EndpointSlice" } as const;

/**
 * Local objects holding a name a fleet-wide Service needs (SPEC §11) without being
 * fleet-mirror's fleet-wide object (pure): the Service and Endpoints `<svc>-federated`
 * and the slices `<svc>-federated-<cluster>-ipv4|ipv6` of each member cluster, for
 * every member the remote clusters show. One result per object, naming the members
 * that want it; the controller leaves such a name alone and reports it the same way.
 */
export function federatedNameConflicts(
  clusters: readonly { readonly cluster: string; readonly members: readonly Service[] }[],
  local: LocalMirrorObjects,
): CheckResult[] {
  const index = indexLocal(local);
  // Fleet-wide key → member clusters → their remote Services, so each object is reported once.
  const wanted = new Map<string, Map<string, string>>();
  for (const { cluster, members } of clusters) {
    for (const remote of members) {
      const namespace = remote.metadata.namespace ?? "default";
      const key = objectKey({ namespace, name: federatedName(remote.metadata.name) });
      const byCluster = wanted.get(key) ?? new Map<string, string>();
      byCluster.set(cluster, objectKey({ namespace, name: remote.metadata.name }));
      wanted.set(key, byCluster);
    }
  }
  const results: CheckResult[] = [];
  for (const [key, byCluster] of [...wanted].sort(([a], [b]) => a.localeCompare(b))) {
    const namespace = key.slice(0, key.indexOf("/"));
    const name = key.slice(key.indexOf("/") + 1);
    const memberClusters = [...byCluster.keys()].sort();
    const needed = [
      ...(["service", "endpoints"] as const).map((kind) => ({ kind, key, by: memberClusters })),
      ...memberClusters.flatMap((cluster) =>
        sliceNames(`${name}-${cluster}`).map((slice) => ({
          kind: "endpointslice" as const,
          key: `${namespace}/${slice}`,
          by: [cluster],
        })),
      ),
    ];
    for (const need of needed) {
      const found = index.get(`${need.kind}/${need.key}`);
      if (!found || isFederatedObject(KIND_NAMES[need.kind], found)) continue;
      const owner = ownerOf(need.kind, found);
      const members = need.by.map((c) => `${byCluster.get(c)} from ${c}`).join(", ");
      results.push({
        section: "fleet-wide names",
        ok: false,
        message: `${need.kind}/${need.key} is needed for the fleet-wide Service ${key} (member ${members}) but ${owner ? `is a mirror of cluster ${owner}` : `is not fleet-mirror's (no ${MIRRORED_SERVICE} and ${FEDERATED_LABEL} labels): a user's object`}`,
      });
    }
  }
  return results;
}

/** Mirrors whose cluster label no Secret names (pure). */
export function unknownClusterMirrors(known: ReadonlySet<string>, local: LocalMirrorObjects): CheckResult[] {
  const byCluster = new Map<string, string[]>();
  for (const [kind, list] of [
    ["service", local.services],
    ["endpoints", local.endpoints],
    ["endpointslice", local.slices],
  ] as const) {
    for (const o of list) {
      const owner = ownerOf(kind, o);
      if (owner === undefined || known.has(owner)) continue;
      byCluster.set(owner, [...(byCluster.get(owner) ?? []), `${kind}/${objectKey(o.metadata)}`]);
    }
  }
  return [...byCluster].map(([cluster, objects]) => ({
    section: "orphans",
    ok: false,
    message: `${objects.length} mirror object(s) of unknown cluster ${cluster} (no credentials Secret names it; a running controller deletes them): ${objects.slice(0, 5).join(", ")}${objects.length > 5 ? ", ..." : ""}`,
  }));
}
