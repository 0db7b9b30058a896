/**
 * The Links of a namespace as the controller judges them (SPEC §15), read from the
 * cluster objects by `status` (when no controller answers) and `check`: the Links and
 * the credentials Secrets there, stored, parsed and registered by the controller's own
 * functions, so a row here says what `run --links` would say.
 */
import { SECRET_TYPE } from "../core/labels.ts";
import { linksPath } from "../core/link.ts";
import type { KubeObject } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import type { ParseOptions } from "../kube/kubeconfig.ts";
import type { LinkRow } from "../status/link-row.ts";
import { LINK_CRD } from "../supervisor/link-controller.ts";
import { computeLinkRegistry, type LinkRegistry } from "../supervisor/link-registry.ts";
import { linkRows } from "../supervisor/link-rows.ts";
import { type StoredCredentials, storedCredentials, storedLink } from "../supervisor/link-stored.ts";
import { formatTable, isNotFound, listAll } from "./common.ts";

export type LinkView = { readonly rows: LinkRow[]; readonly registry: LinkRegistry } | { readonly problem: string };

export async function readLinkView(client: KubeClient, namespace: string, options: ParseOptions): Promise<LinkView> {
  let links: KubeObject[];
  try {
    links = await listAll<KubeObject>(client, linksPath(namespace));
  } catch (error) {
    if (isNotFound(error))
      return { problem: `the Link CRD ${LINK_CRD} (v1alpha3) is not installed in the local cluster` };
    return { problem: `cannot list the Links of ${namespace}: ${(error as Error).message}` };
  }
  let secrets: KubeObject[];
  try {
    secrets = await listAll<KubeObject>(client, `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
      fieldSelector: `type=${SECRET_TYPE}`,
    });
  } catch (error) {
    return { problem: `cannot list the Secrets of ${namespace}: ${(error as Error).message}` };
  }
  const stored = links.map((l) => storedLink({ ...l, metadata: { ...l.metadata, namespace } }, undefined));
  const byKey = new Map<string, StoredCredentials>(
    secrets.map((s) => [`${namespace}/${s.metadata.name}`, storedCredentials(s, undefined, options)]),
  );
  const registry = computeLinkRegistry(stored, (key) => byKey.get(key), new Map(), new Map());
  return { rows: linkRows(stored, registry), registry };
}

/** The STATE cell of a Link: `registered`, or the reason and its message. */
export function linkStateCell(row: LinkRow): string {
  return row.state === "registered" ? "registered" : `${row.state}${row.message ? `: ${row.message}` : ""}`;
}

/** The Links table of `status`. */
export function formatLinksTable(rows: readonly LinkRow[]): string {
  return formatTable(
    ["link", "cluster", "secret", "state"],
    rows.map((r) => [r.link, r.cluster ?? "-", r.secret ?? "-", linkStateCell(r)]),
  );
}
