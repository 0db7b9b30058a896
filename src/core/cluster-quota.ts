/**
 * The per-cluster quota on local Services (`--max-mirrors-per-cluster`): how many local
 * Services one remote cluster's exports may ask for, so that no remote decides how many
 * of the local cluster's ClusterIPs it takes. Pure.
 *
 * A remote key (a Service, its ServiceExport) weighs the local objects it asks for: its
 * mirrors (a headless Service's headless mirror and per-host mirrors), its fleet-wide
 * member and its MCS export (each may be the one that creates a shared Service). Keys
 * are admitted in name order, each while it fits in what is left of the quota; a key
 * that does not fit is refused whole (none of its roles is sent) and reported, and a
 * lighter key after it may still fit. The choice depends only on the keys and their
 * weights, so an actor restart chooses the same keys (nothing flaps); a key that comes
 * and sorts first may take the place of the last admitted one: the remote decides which
 * of its own exports are mirrored, never how many.
 */
import type { MirrorProblem } from "./desired.ts";

/** The local objects a remote key asks for: its mirrors, member and export. */
export function weightOf(desired: {
  readonly mirrors: readonly unknown[];
  readonly member: unknown;
  readonly mcs: unknown;
}): number {
  return desired.mirrors.length + (desired.member === undefined ? 0 : 1) + (desired.mcs === undefined ? 0 : 1);
}

/**
 * The keys refused under a quota of `limit` (0: no quota) given each key's weight, with
 * the problem each is reported with. Keys of weight 0 are never refused.
 */
export function refusedByQuota(
  cluster: string,
  weights: ReadonlyMap<string, number>,
  limit: number,
): Map<string, MirrorProblem> {
  const refused = new Map<string, MirrorProblem>();
  if (limit <= 0) return refused;
  let total = 0;
  for (const weight of weights.values()) total += weight;
  if (total <= limit) return refused;
  let left = limit;
  const keys = [...weights.keys()].filter((key) => (weights.get(key) ?? 0) > 0).sort();
  for (const key of keys) {
    const weight = weights.get(key) ?? 0;
    if (weight <= left) {
      left -= weight;
      continue;
    }
    refused.set(key, {
      cluster,
      remote: key,
      reason: "cluster-quota",
      message: `it asks for ${weight} local Service${weight === 1 ? "" : "s"} and cluster ${cluster}'s exports ask for ${total} in all, over its quota of ${limit} (--max-mirrors-per-cluster; exports are admitted in name order while they fit)`,
    });
  }
  return refused;
}
