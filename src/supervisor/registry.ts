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
import type { LinkInvalidReason, LinkRegistry } from "./link-registry.ts";
import type { InvalidReason, ParsedSecret, RegisteredCluster, Registration } from "./registration.ts";

export interface SecretEntry {
  /** The Secret (its metadata is all the registry reads) and the parse of its data. */
  readonly secret: KubeObject;
  readonly parsed: ParsedSecret;
}

export type { RegisteredCluster } from "./registration.ts";

export interface RegistryState {
  readonly registered: ReadonlyMap<string, RegisteredCluster>;
  /** `winner`: the key of what registers the cluster (a Secret's, or a Link's `Link <ns>/<name>`). */
  readonly duplicates: readonly { readonly secretKey: string; readonly cluster: string; readonly winner: string }[];
  readonly invalid: readonly {
    readonly secretKey: string;
    readonly cluster: string | undefined;
    readonly reason: InvalidReason | LinkInvalidReason;
    readonly message: string;
  }[];
  /** Links registered with the credentials they had: their Secret is missing or invalid now (SPEC §15). */
  readonly credentialsKept?: LinkRegistry["credentialsKept"];
  readonly keep: readonly string[];
  readonly order: readonly string[];
  /** Each registered cluster's registration time: its winning Secret's creation time (SPEC §12). */
  readonly registeredAt: Readonly<Record<string, string>>;
  /** Each registered cluster's priority (SPEC §14). */
  readonly priorities: Readonly<Record<string, number>>;
}

/** What Links claim (SPEC §15): the clusters they name (→ the Link's key) and the Secrets they name. */
export interface LinkClaims {
  readonly clusters: ReadonlyMap<string, string>;
  readonly secrets: ReadonlySet<string>;
}

const NO_CLAIMS: LinkClaims = { clusters: new Map(), secrets: new Set() };

/**
 * `claims`: a Secret a Link names is the Link's credentials, never a registration of its
 * own; a Secret naming a cluster a Link names registers nothing (the Link wins, SPEC
 * §15) and is a duplicate of the Link.
 */
export function computeRegistry(
  entries: Iterable<SecretEntry>,
  previousWinners: ReadonlyMap<string, string>,
  claims: LinkClaims = NO_CLAIMS,
): RegistryState {
  const candidates = new Map<string, { entry: SecretEntry; registration: Registration }[]>();
  const invalid: RegistryState["invalid"][number][] = [];
  const keep = new Set<string>();
  const duplicates: RegistryState["duplicates"][number][] = [];
  for (const entry of entries) {
    const { parsed, secret } = entry;
    if (parsed.kind === "ignored" || claims.secrets.has(objectKey(secret.metadata))) continue;
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
    const link = claims.clusters.get(parsed.registration.cluster);
    if (link !== undefined) {
      duplicates.push({ secretKey: objectKey(secret.metadata), cluster: parsed.registration.cluster, winner: link });
      continue;
    }
    const list = candidates.get(parsed.registration.cluster) ?? [];
    list.push({ entry, registration: parsed.registration });
    candidates.set(parsed.registration.cluster, list);
  }
  const registered = new Map<string, RegisteredCluster>();
  const since = new Map<string, readonly [string, string]>();
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
  const { order, registeredAt } = registrationOrder(since);
  return {
    registered,
    duplicates,
    invalid,
    keep: [...keep].sort(),
    order,
    registeredAt,
    priorities: prioritiesOf(registered),
  };
}

/** The registration order (creation time, then key) and each cluster's registration time. */
function registrationOrder(since: ReadonlyMap<string, readonly [string, string]>): {
  order: string[];
  registeredAt: Record<string, string>;
} {
  const order = [...since]
    .sort(([, [at, ak]], [, [bt, bk]]) => (at !== bt ? (at < bt ? -1 : 1) : ak < bk ? -1 : ak > bk ? 1 : 0))
    .map(([cluster]) => cluster);
  const registeredAt: Record<string, string> = {};
  for (const [cluster, [at]] of since) if (at) registeredAt[cluster] = at;
  return { order, registeredAt };
}

/** Each registered cluster's priority (SPEC §14), whichever source registered it. */
function prioritiesOf(registered: ReadonlyMap<string, RegisteredCluster>): Record<string, number> {
  const priorities: Record<string, number> = {};
  for (const [cluster, r] of registered) priorities[cluster] = r.priority;
  return priorities;
}

/**
 * The fleet's registry: the Secrets' (computed with the Links' claims, so no cluster is
 * in both) and the Links' (SPEC §15), one registration order over both.
 */
export function withLinks(secrets: RegistryState, links: LinkRegistry): RegistryState {
  if (links.registered.size + links.invalid.length + links.keep.length === 0) return secrets;
  const registered = new Map([...secrets.registered, ...links.registered]);
  const since = new Map<string, readonly [string, string]>(links.since);
  for (const [cluster, r] of secrets.registered) since.set(cluster, [secrets.registeredAt[cluster] ?? "", r.secretKey]);
  return {
    registered,
    duplicates: [...secrets.duplicates, ...links.duplicates],
    invalid: [...secrets.invalid, ...links.invalid],
    credentialsKept: links.credentialsKept,
    keep: [...new Set([...secrets.keep, ...links.keep])].sort(),
    ...registrationOrder(since),
    priorities: prioritiesOf(registered),
  };
}
