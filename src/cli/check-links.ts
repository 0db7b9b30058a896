/**
 * `check --links NS` (SPEC §15): each Link of NS judged as `run --links NS` judges it —
 * ✓ when it registers its cluster, ✗ with the reason when it does not (InvalidLink,
 * InvalidCredentials: its Secret missing or invalid, DuplicateCluster) or only with
 * credentials it no longer has (CredentialsKept) — and, for each registered cluster, its
 * remote reachable with the Link's Secret. The Link CRD not installed is a ✗. A Secret of
 * NS that no Link names is not judged: the controller never reads it.
 *
 * The Link registry it returns is what the rest of `check` needs: the clusters Links
 * claim (a Secret naming one is a duplicate, SPEC §15) and those they keep (not orphans).
 */
import type { KubeClient } from "../kube/client.ts";
import type { ParseOptions } from "../kube/kubeconfig.ts";
import type { LinkRegistry } from "../supervisor/link-registry.ts";
import type { CheckResult } from "./check-rules.ts";
import { cliClient } from "./common.ts";
import { linkStateCell, readLinkView } from "./link-view.ts";

const SECTION = "links";

export async function checkLinks(
  client: KubeClient,
  namespace: string,
  options: ParseOptions,
  timeoutMs: number,
): Promise<{ readonly results: CheckResult[]; readonly registry?: LinkRegistry }> {
  const view = await readLinkView(client, namespace, options);
  if ("problem" in view)
    return { results: [{ section: SECTION, ok: false, message: `${view.problem} (namespace ${namespace})` }] };
  const results: CheckResult[] = [];
  if (view.rows.length === 0)
    results.push({ section: SECTION, ok: true, message: `no Link in ${namespace} (no cluster linked by a Link yet)` });
  for (const row of view.rows)
    results.push({
      section: SECTION,
      ok: row.state === "registered",
      message:
        row.state === "registered"
          ? `link ${row.link} registers cluster ${row.cluster ?? "?"} with secret ${row.secret ?? "?"}`
          : `link ${row.link}${row.cluster ? ` (cluster ${row.cluster})` : ""}: ${linkStateCell(row)}`,
    });
  const reachable = await Promise.all(
    [...view.registry.registered.values()].map(async (reg): Promise<CheckResult> => {
      const section = `remote cluster ${reg.cluster}`;
      const remote = cliClient(reg.connection, timeoutMs);
      try {
        await remote.request("GET", "/api/v1/services", { query: { limit: 1 } });
        return {
          section,
          ok: true,
          message: `${reg.connection.server} reachable with ${reg.secretKey}'s Secret; Services readable`,
        };
      } catch (error) {
        return { section, ok: false, message: `${reg.connection.server}: ${(error as Error).message}` };
      } finally {
        remote.close();
      }
    }),
  );
  reachable.sort((a, b) => a.section.localeCompare(b.section));
  return { results: [...results, ...reachable], registry: view.registry };
}
