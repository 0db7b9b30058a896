/**
 * Which Events and log lines the registry deserves, as a pure function of what was
 * reported before and the registry now. Reported on changes of state only, so a pass
 * that changes nothing (a resync, another Secret's edit) reports nothing:
 * - `ClusterRegistered` once per (Secret uid, registration fingerprint): a new Secret,
 *   or new credentials in it; not again when it was a duplicate or invalid meanwhile;
 * - `InvalidCredentials` / `DuplicateCluster` when a Secret becomes so, or the reason
 *   changes; `InvalidPriority` when a registered cluster's priority annotation becomes
 *   invalid or its value changes (SPEC §14: it counts as the default meanwhile).
 * Across controller restarts the writer's Event recorder skips an Event identical to
 * one that already exists, so a restart with nothing changed writes no Event.
 */
import type { RegistryState } from "./registry.ts";

export interface ReportedRegistry {
  /** `secretKey` → the problem last reported for it (invalid or duplicate), for Secrets that have one now. */
  readonly problems: ReadonlyMap<string, string>;
  /** `uid/fingerprint` of registrations reported, for Secrets still present. */
  readonly registered: ReadonlySet<string>;
}

export interface SecretReport {
  readonly secretKey: string;
  readonly cluster: string | undefined;
  readonly eventType: "Normal" | "Warning";
  readonly reason: "ClusterRegistered" | "InvalidCredentials" | "DuplicateCluster" | "InvalidPriority";
  readonly message: string;
  /** The log line that goes with it (with `secret`, `cluster` and these fields). */
  readonly log: {
    readonly level: "info" | "error";
    readonly message: string;
    readonly fields?: Readonly<Record<string, unknown>>;
  };
}

export const NOTHING_REPORTED: ReportedRegistry = { problems: new Map(), registered: new Set() };

/** `presentUids`: uids of every credentials Secret listed now (registered, duplicate or invalid). */
export function registryReports(
  previous: ReportedRegistry,
  registry: RegistryState,
  presentUids: ReadonlySet<string>,
): { readonly reported: ReportedRegistry; readonly reports: readonly SecretReport[] } {
  const reports: SecretReport[] = [];
  const problems = new Map<string, string>();
  for (const i of registry.invalid) {
    const now = `invalid:${i.reason}:${i.message}`;
    problems.set(i.secretKey, now);
    if (previous.problems.get(i.secretKey) === now) continue;
    const log = `credentials Secret ${i.secretKey} registers nothing: ${i.message}`;
    reports.push({
      secretKey: i.secretKey,
      cluster: i.cluster,
      eventType: "Warning",
      reason: "InvalidCredentials",
      message: i.message,
      log: { level: "error", message: log, fields: { reason: i.reason } },
    });
  }
  for (const d of registry.duplicates) {
    const now = `duplicate:${d.cluster}:${d.winner}`;
    problems.set(d.secretKey, now);
    if (previous.problems.get(d.secretKey) === now) continue;
    const message = `cluster ${d.cluster} is already registered by Secret ${d.winner}; this Secret is ignored`;
    reports.push({
      secretKey: d.secretKey,
      cluster: d.cluster,
      eventType: "Warning",
      reason: "DuplicateCluster",
      message,
      log: { level: "error", message },
    });
  }
  const registered = new Set<string>();
  for (const key of previous.registered) if (presentUids.has(key.slice(0, key.lastIndexOf("/")))) registered.add(key);
  for (const [cluster, r] of registry.registered) {
    if (r.priorityProblem) {
      const now = `priority:${r.priorityProblem}`;
      problems.set(r.secretKey, now);
      if (previous.problems.get(r.secretKey) !== now)
        reports.push({
          secretKey: r.secretKey,
          cluster,
          eventType: "Warning",
          reason: "InvalidPriority",
          message: r.priorityProblem,
          log: { level: "error", message: `credentials Secret ${r.secretKey}: ${r.priorityProblem}` },
        });
    }
    const key = `${r.secretUid}/${r.fingerprint}`;
    if (registered.has(key)) continue;
    registered.add(key);
    reports.push({
      secretKey: r.secretKey,
      cluster,
      eventType: "Normal",
      reason: "ClusterRegistered",
      message: `cluster ${cluster} registered (${r.connection.server})`,
      log: { level: "info", message: `cluster ${cluster} registered by Secret ${r.secretKey}` },
    });
  }
  return { reported: { problems, registered }, reports };
}
