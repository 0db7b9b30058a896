/**
 * Which Events (on the Link) and log lines the Link registry deserves (SPEC §15), as a
 * pure function of what was reported before and the registry now; changes of state
 * only, as registry-reports.ts does for Secrets:
 * - `ClusterRegistered` once per (Link uid, registration fingerprint);
 * - `InvalidLink` (the Link itself), `InvalidCredentials` (its Secret missing or
 *   invalid: nothing registered), `CredentialsKept` (its Secret missing or invalid,
 *   the credentials it had kept), `DuplicateCluster` (another Link has the cluster):
 *   when a Link comes into that state or its message changes.
 */
import type { LinkRegistry } from "./link-registry.ts";
import { freshRegistrations, NOTHING_REPORTED, type ReportedRegistry } from "./registry-reports.ts";

/** What was reported of the Links: the same record as of the Secrets, keyed by Link. */
export type ReportedLinks = ReportedRegistry;

export interface LinkReport {
  /** The Link's key, `Link <namespace>/<name>`. */
  readonly sourceKey: string;
  readonly cluster: string | undefined;
  readonly eventType: "Normal" | "Warning";
  readonly reason: "ClusterRegistered" | "InvalidLink" | "InvalidCredentials" | "CredentialsKept" | "DuplicateCluster";
  readonly message: string;
  readonly level: "info" | "warn" | "error";
}

export const NOTHING_REPORTED_OF_LINKS: ReportedLinks = NOTHING_REPORTED;

/** `presentUids`: the uids of every Link listed now. */
export function linkReports(
  previous: ReportedLinks,
  registry: LinkRegistry,
  presentUids: ReadonlySet<string>,
): { readonly reported: ReportedLinks; readonly reports: readonly LinkReport[] } {
  const reports: LinkReport[] = [];
  const problems = new Map<string, string>();
  const problem = (sourceKey: string, cluster: string | undefined, reason: LinkReport["reason"], message: string) => {
    const now = `${reason}:${message}`;
    problems.set(sourceKey, now);
    if (previous.problems.get(sourceKey) === now) return;
    const level = reason === "CredentialsKept" ? "warn" : "error";
    reports.push({ sourceKey, cluster, eventType: "Warning", reason, message, level });
  };
  for (const i of registry.invalid) {
    const credentials = i.reason === "credentials-missing" || i.reason === "credentials-invalid";
    problem(i.secretKey, i.cluster, credentials ? "InvalidCredentials" : "InvalidLink", i.message);
  }
  for (const d of registry.duplicates)
    problem(
      d.secretKey,
      d.cluster,
      "DuplicateCluster",
      `cluster ${d.cluster} is already registered by ${d.winner}; this Link is ignored`,
    );
  for (const k of registry.credentialsKept) problem(k.secretKey, k.cluster, "CredentialsKept", k.message);
  const { registered, fresh } = freshRegistrations(previous.registered, presentUids, registry.registered);
  for (const [cluster, r] of fresh) {
    reports.push({
      sourceKey: r.secretKey,
      cluster,
      eventType: "Normal",
      reason: "ClusterRegistered",
      message: `cluster ${cluster} registered (${r.connection.server})`,
      level: "info",
    });
  }
  return { reported: { problems, registered }, reports };
}
