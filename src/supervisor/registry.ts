/**
 * Which Secret registers which cluster: a pure function of the credentials Secrets
 * and of who won before (SPEC §1).
 *
 * - Two Secrets naming the same cluster: the one registered first wins (the previous
 *   winner while it stays valid; otherwise the oldest Secret, then by name); the other
 *   is a duplicate. Deleting the duplicate changes nothing for the winner.
 * - `keep` is every cluster name whose mirrors must stay: the registered clusters plus
 *   names still claimed by a Secret that is currently invalid (a typo in an edit must
 *   not delete a cluster's mirrors; fixing the Secret registers it again).
 * - `order` is the registration order: the registered clusters by their Secret's
 *   creation time, then its namespace/name. It is stable across restarts, and decides
 *   which member sets a fleet-wide Service's ports (SPEC §11); `registeredAt` is that
 *   creation time, before which no MCS export of the cluster ranks (SPEC §12).
 */
import { type KubeObject, objectKey } from "../core/objects.ts";
import type { InvalidReason, ParsedSecret, Registration } from "./registration.ts";

export interface SecretEntry {
  /** The Secret (its metadata is all the registry reads) and the parse of its data. */
  readonly secret: KubeObject;
  readonly parsed: ParsedSecret;
}

export interface RegisteredCluster extends Registration {
  readonly secretKey: string;
  readonly secretUid: string;
}

export interface RegistryState {
  readonly registered: ReadonlyMap<string, RegisteredCluster>;
  readonly duplicates: readonly { readonly secretKey: string; readonly cluster: string; readonly winner: string }[];
  readonly invalid: readonly {
    readonly secretKey: string;
    readonly cluster: string | undefined;
    readonly reason: InvalidReason;
    readonly message: string;
  }[];
  readonly keep: readonly string[];
  readonly order: readonly string[];
  /** Each registered cluster's registration time: its winning Secret's creation time (SPEC §12). */
  readonly registeredAt: Readonly<Record<string, string>>;
  /** Each registered cluster's priority (SPEC §14). */
  readonly priorities: Readonly<Record<string, number>>;
}

export function computeRegistry(
  entries: Iterable<SecretEntry>,
  previousWinners: ReadonlyMap<string, string>,
): RegistryState {
  const candidates = new Map<string, { entry: SecretEntry; registration: Registration }[]>();
  const invalid: RegistryState["invalid"][number][] = [];
  const keep = new Set<string>();
  for (const entry of entries) {
    const { parsed, secret } = entry;
    if (parsed.kind === "ignored") continue;
    if (parsed.kind === "invalid") {
      invalid.push({
        secretKey: objectKey(secret.metadata),
        cluster: parsed.cluster,
        reason: parsed.reason,
        message: parsed.message,
      });
      if (parsed.cluster) keep.add(parsed.cluster);
      continue;
    }
    const list = candidates.get(parsed.registration.cluster) ?? [];
    list.push({ entry, registration: parsed.registration });
    candidates.set(parsed.registration.cluster, list);
  }
  const registered = new Map<string, RegisteredCluster>();
  const since = new Map<string, readonly [string, string]>();
  const duplicates: RegistryState["duplicates"][number][] = [];
  for (const [cluster, list] of candidates) {
    const previous = previousWinners.get(cluster);
    list.sort((a, b) => {
      const au = a.entry.secret.metadata.uid === previous ? 0 : 1;
      const bu = b.entry.secret.metadata.uid === previous ? 0 : 1;
      if (au !== bu) return au - bu;
      const at = a.entry.secret.metadata.creationTimestamp ?? "";
      const bt = b.entry.secret.metadata.creationTimestamp ?? "";
      if (at !== bt) return at < bt ? -1 : 1;
      return objectKey(a.entry.secret.metadata) < objectKey(b.entry.secret.metadata) ? -1 : 1;
    });
    const [winner, ...losers] = list;
    if (!winner) continue;
    const secretKey = objectKey(winner.entry.secret.metadata);
    registered.set(cluster, {
      ...winner.registration,
      secretKey,
      secretUid: winner.entry.secret.metadata.uid ?? secretKey,
    });
    keep.add(cluster);
    since.set(cluster, [winner.entry.secret.metadata.creationTimestamp ?? "", secretKey]);
    for (const loser of losers)
      duplicates.push({ secretKey: objectKey(loser.entry.secret.metadata), cluster, winner: secretKey });
  }
  const order = [...since]
    .sort(([, [at, ak]], [, [bt, bk]]) => (at !== bt ? (at < bt ? -1 : 1) : ak < bk ? -1 : ak > bk ? 1 : 0))
    .map(([cluster]) => cluster);
  const registeredAt: Record<string, string> = {};
  for (const [cluster, [at]] of since) if (at) registeredAt[cluster] = at;
  const priorities: Record<string, number> = {};
  for (const [cluster, r] of registered) priorities[cluster] = r.priority;
  return { registered, duplicates, invalid, keep: [...keep].sort(), order, registeredAt, priorities };
}
