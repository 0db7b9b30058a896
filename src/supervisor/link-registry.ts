/**
 * Which Link registers which cluster (SPEC §15), as a pure function of the Links, the
 * Secrets they name and what each Link registered before.
 *
 * - A valid Link whose Secret holds a valid kubeconfig registers `targetClusterName`
 *   with the Link's settings. Its key (`sourceKey`) is `Link <namespace>/<name>`: never
 *   a Secret's key, so reports find their object by it.
 * - Its Secret missing or invalid: the Link keeps the credentials it registered with
 *   while its spec stays the same (`remembered`; reported as `credentialsKept`); without
 *   such credentials it registers nothing and is reported (`invalid`). Either way its
 *   cluster stays in `keep`: its mirrors are never collected for it.
 * - An invalid Link registers nothing, is reported, and keeps a cluster it names.
 * - Two Links naming one cluster: the one registered first keeps it (then the older,
 *   then by key); the other is a duplicate.
 * - `claimed`: every cluster a Link names (valid or not) and the key of the Link; a
 *   Secret of SPEC §1 naming one of them registers nothing (the Link wins, reported).
 *   `claimedSecrets`: the keys of the Secrets Links name: they are credentials, never
 *   registrations of their own.
 */
import { createHash } from "node:crypto";
import type { LinkProblem } from "../core/link.ts";
import { linkGatewayRef } from "../core/link-gateway.ts";
import { objectKey } from "../core/objects.ts";
import { DEFAULT_PRIORITY } from "../core/tiers.ts";
import type { StoredCredentials, StoredLink } from "./link-stored.ts";
import type { RegisteredCluster } from "./registration.ts";

/** The key reports and status rows name a Link by. */
export const linkSourceKey = (namespace: string, name: string): string => `Link ${namespace}/${name}`;
export const isLinkSourceKey = (key: string): boolean => key.startsWith("Link ");

export type LinkInvalidReason = LinkProblem | "credentials-missing" | "credentials-invalid";

/** The registration a Link made with valid credentials, kept while its spec is unchanged. */
export interface RememberedLink {
  readonly specDigest: string;
  readonly registration: RegisteredCluster;
}

export interface LinkRegistry {
  readonly registered: ReadonlyMap<string, RegisteredCluster>;
  readonly invalid: readonly {
    readonly secretKey: string;
    readonly cluster: string | undefined;
    readonly reason: LinkInvalidReason;
    readonly message: string;
  }[];
  readonly duplicates: readonly { readonly secretKey: string; readonly cluster: string; readonly winner: string }[];
  /** Registered with the credentials last valid: the Secret is missing or invalid now (reported). */
  readonly credentialsKept: readonly {
    readonly secretKey: string;
    readonly cluster: string;
    readonly message: string;
  }[];
  readonly keep: readonly string[];
  /** cluster → [the Link's creation time, its key]: the registration order's input (SPEC §11). */
  readonly since: ReadonlyMap<string, readonly [string, string]>;
  /** cluster → the key of the Link claiming it. */
  readonly claimed: ReadonlyMap<string, string>;
  /** Keys (`namespace/name`) of the Secrets Links name. */
  readonly claimedSecrets: ReadonlySet<string>;
  /** By Link uid: what to keep while a Secret is missing (the next `remembered` argument). */
  readonly remembered: ReadonlyMap<string, RememberedLink>;
}

export const NO_LINKS: LinkRegistry = {
  registered: new Map(),
  invalid: [],
  duplicates: [],
  credentialsKept: [],
  keep: [],
  since: new Map(),
  claimed: new Map(),
  claimedSecrets: new Set(),
  remembered: new Map(),
};

export function computeLinkRegistry(
  links: Iterable<StoredLink>,
  secret: (key: string) => StoredCredentials | undefined,
  remembered: ReadonlyMap<string, RememberedLink>,
  previousWinners: ReadonlyMap<string, string>,
): LinkRegistry {
  const invalid: LinkRegistry["invalid"][number][] = [];
  const credentialsKept: LinkRegistry["credentialsKept"][number][] = [];
  const keep = new Set<string>();
  const claimed = new Map<string, string>();
  const claimedSecrets = new Set<string>();
  const nextRemembered = new Map<string, RememberedLink>();
  const candidates = new Map<string, { link: StoredLink; registration: RegisteredCluster }[]>();
  for (const link of links) {
    const { namespace = "", name, uid = "" } = link.metadata;
    const sourceKey = linkSourceKey(namespace, name);
    const parsed = link.parsed;
    if (parsed.kind === "invalid") {
      invalid.push({ secretKey: sourceKey, cluster: parsed.cluster, reason: parsed.reason, message: parsed.message });
      if (parsed.cluster) {
        keep.add(parsed.cluster);
        if (!claimed.has(parsed.cluster)) claimed.set(parsed.cluster, sourceKey);
      }
      continue;
    }
    const { cluster, domain, secretName, settings } = parsed.spec;
    keep.add(cluster);
    if (!claimed.has(cluster)) claimed.set(cluster, sourceKey);
    const secretKey = objectKey({ namespace, name: secretName });
    claimedSecrets.add(secretKey);
    const credentials = secret(secretKey)?.parsed;
    const before = remembered.get(uid);
    const kept = before?.specDigest === link.specDigest ? before.registration : undefined;
    let registration: RegisteredCluster | undefined;
    if (credentials?.kind === "valid") {
      const defaultGateway = linkGatewayRef(settings);
      const fingerprint = createHash("sha256")
        .update(JSON.stringify({ domain, connection: credentials.connection, settings }))
        .digest("hex")
        .slice(0, 16);
      registration = {
        cluster,
        domain,
        connection: credentials.connection,
        defaultGateway,
        link: settings,
        // A Link carries no priority (SPEC §15): its cluster is in the default tier.
        priority: DEFAULT_PRIORITY,
        fingerprint,
        secretKey: sourceKey,
        secretUid: uid || sourceKey,
      };
    } else {
      const why =
        credentials === undefined
          ? `Secret ${secretKey} (type mirror.linkerd.io/remote-kubeconfig) is not found`
          : `Secret ${secretKey} is invalid: ${credentials.message}`;
      if (kept) {
        registration = kept;
        credentialsKept.push({
          secretKey: sourceKey,
          cluster,
          message: `${why}; cluster ${cluster} stays registered with the credentials it had until the Link changes`,
        });
      } else
        invalid.push({
          secretKey: sourceKey,
          cluster,
          reason: credentials === undefined ? "credentials-missing" : "credentials-invalid",
          message: `${why}; the Link registers nothing`,
        });
    }
    if (!registration) continue;
    nextRemembered.set(uid, { specDigest: link.specDigest, registration });
    const list = candidates.get(cluster) ?? [];
    list.push({ link, registration });
    candidates.set(cluster, list);
  }
  const registered = new Map<string, RegisteredCluster>();
  const duplicates: LinkRegistry["duplicates"][number][] = [];
  const since = new Map<string, readonly [string, string]>();
  for (const [cluster, list] of candidates) {
    const previous = previousWinners.get(cluster);
    list.sort((a, b) => {
      const au = a.registration.secretUid === previous ? 0 : 1;
      const bu = b.registration.secretUid === previous ? 0 : 1;
      if (au !== bu) return au - bu;
      const at = a.link.metadata.creationTimestamp ?? "";
      const bt = b.link.metadata.creationTimestamp ?? "";
      if (at !== bt) return at < bt ? -1 : 1;
      return a.registration.secretKey < b.registration.secretKey ? -1 : 1;
    });
    const [winner, ...losers] = list;
    if (!winner) continue;
    registered.set(cluster, winner.registration);
    claimed.set(cluster, winner.registration.secretKey);
    since.set(cluster, [winner.link.metadata.creationTimestamp ?? "", winner.registration.secretKey]);
    for (const loser of losers)
      duplicates.push({ secretKey: loser.registration.secretKey, cluster, winner: winner.registration.secretKey });
  }
  return {
    registered,
    invalid,
    duplicates,
    credentialsKept: credentialsKept.filter((k) => registered.get(k.cluster)?.secretKey === k.secretKey),
    keep: [...keep].sort(),
    since,
    claimed,
    claimedSecrets,
    remembered: nextRemembered,
  };
}
