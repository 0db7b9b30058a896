/**
 * The per-cluster quota on created Namespaces (`--max-namespaces-per-cluster`): how many
 * Namespaces fleet-mirror may create for one remote cluster's mirrors. They are never
 * deleted (SPEC §3), so without it a remote exporting into thousands of namespace names
 * decides how many the local cluster keeps. Pure.
 *
 * The Namespaces already created for the cluster (labelled with it) count first; of the
 * missing ones its mirrors need, the first in name order are created while the count
 * stays within the quota, and a mirror whose namespace is past it is blocked and
 * reported. The choice depends only on what exists and what the cluster wants, so two
 * mirrors planned at once never both pass the last place, and a restart chooses the
 * same namespaces. A mirror into a namespace that exists is never refused by it.
 */

/** The index of the first entry of sorted `list` that is not before `value`. */
function lowerBound(list: readonly string[], value: string): number {
  let low = 0;
  let high = list.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((list[mid] as string) < value) low = mid + 1;
    else high = mid;
  }
  return low;
}

/**
 * Why Namespace `namespace` may not be created for `cluster` now; undefined when it may.
 * `created`: Namespaces created for the cluster that exist; `missing`: the namespaces
 * its mirrors need that do not exist, sorted (with or without `namespace`); `limit` 0: no quota.
 */
export function namespaceQuotaRefusal(
  namespace: string,
  cluster: string,
  created: number,
  missing: readonly string[],
  limit: number,
): string | undefined {
  if (limit <= 0) return undefined;
  const before = lowerBound(missing, namespace);
  // Its place among the missing ones, counting itself once whether listed or not.
  if (created + before + 1 <= limit) return undefined;
  return `namespace ${namespace} does not exist and is not created: cluster ${cluster} has ${created} Namespaces created for it and its mirrors need ${missing.length} more, over its quota of ${limit} (--max-namespaces-per-cluster; created in name order)`;
}
