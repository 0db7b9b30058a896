/**
 * The Link rows of `/status` (SPEC §15) as a pure function of the Links listed and the
 * Link registry computed from them: every Link listed has exactly one row. `status`
 * builds the same rows from the cluster objects when no controller answers.
 */
import type { LinkRow } from "../status/link-row.ts";
import { type LinkRegistry, linkSourceKey } from "./link-registry.ts";
import type { StoredLink } from "./link-stored.ts";

export function linkRows(links: Iterable<StoredLink>, registry: LinkRegistry): LinkRow[] {
  const invalid = new Map(registry.invalid.map((i) => [i.secretKey, i]));
  const duplicate = new Map(registry.duplicates.map((d) => [d.secretKey, d]));
  const kept = new Map(registry.credentialsKept.map((k) => [k.secretKey, k]));
  const rows: LinkRow[] = [];
  for (const link of links) {
    const namespace = link.metadata.namespace ?? "";
    const key = linkSourceKey(namespace, link.metadata.name);
    const parsed = link.parsed;
    const cluster = parsed.kind === "valid" ? parsed.spec.cluster : parsed.cluster;
    const base = {
      link: `${namespace}/${link.metadata.name}`,
      ...(cluster ? { cluster } : {}),
      ...(parsed.kind === "valid" ? { secret: `${namespace}/${parsed.spec.secretName}` } : {}),
    };
    const i = invalid.get(key);
    const d = duplicate.get(key);
    const k = kept.get(key);
    if (i) {
      const credentials = i.reason === "credentials-missing" || i.reason === "credentials-invalid";
      rows.push({
        ...base,
        state: credentials ? "InvalidCredentials" : "InvalidLink",
        reason: i.reason,
        message: i.message,
      });
    } else if (d)
      rows.push({
        ...base,
        state: "DuplicateCluster",
        message: `cluster ${d.cluster} is already registered by ${d.winner}`,
      });
    else if (k) rows.push({ ...base, state: "CredentialsKept", message: k.message });
    else if (cluster && registry.registered.get(cluster)?.secretKey === key)
      rows.push({ ...base, state: "registered" });
  }
  rows.sort((a, b) => (a.link < b.link ? -1 : a.link > b.link ? 1 : 0));
  return rows;
}
