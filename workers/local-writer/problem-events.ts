/**
 * How the writer reports why an exporting cluster's part of a fleet-wide Service or an
 * MCS import is not (wholly) written: a message not reported before for that cluster is
 * logged once; its Warning Event is asked for on every pass while the object's namespace
 * exists locally (an Event can only be stored there).
 *
 * Why every pass and not only on a new message: an Event asked for while its namespace
 * did not exist yet (an import blocked before any mirror created the namespace) failed
 * and was lost for good. The EventRecorder posts an Event identical to one recorded in
 * its window once only, and forgets one whose POST failed, so asking again costs nothing
 * and the next pass (a blocked key is rechecked) posts what failed. A problem lasting
 * longer than the window is posted once per window, which keeps it visible in
 * `kubectl get events` past the API server's Event TTL.
 */
import type { Namespace } from "../../src/core/objects.ts";
import type { Logger } from "../../src/log.ts";
import type { EventRequest } from "../../src/protocol/messages.ts";

/** What the reports need of a reconciler's deps (a subset of ReconcilerDeps). */
export interface ProblemReportDeps {
  readonly log: Pick<Logger, "warn">;
  readonly recordEvent: (event: EventRequest) => void;
  /** The local namespaces: an Event is stored only in one that exists. */
  readonly namespaces: { get(name: string): Namespace | undefined };
}

/** Why one exporting cluster's part is not (wholly) written. */
export interface FleetProblem {
  readonly reason: string;
  readonly message: string;
}

/** Reasons reported in status and the log but with no Event (there is no namespace to hold one). */
export const NO_EVENT: ReadonlySet<string> = new Set(["namespace-missing", "excluded-namespace", "namespace-quota"]);

/**
 * Replaces the problems of `key` in `book` (key → exporting cluster → problem; none:
 * the key leaves the book) and reports them against the ones they replace.
 */
export function reportProblems(
  deps: ProblemReportDeps,
  book: Map<string, ReadonlyMap<string, FleetProblem>>,
  report: {
    readonly key: string;
    readonly problems: ReadonlyMap<string, FleetProblem>;
    /** The object the Events are about; its namespace must exist for them to be stored. */
    readonly involved: EventRequest["involved"];
    /** The Event reason of each problem reason, and the one for any other. */
    readonly eventReasons: Readonly<Record<string, string>>;
    readonly otherReason: string;
  },
): void {
  const { key, problems, involved } = report;
  const previous = book.get(key);
  if (problems.size === 0) book.delete(key);
  else book.set(key, problems);
  const namespaceExists = involved.namespace !== "" && deps.namespaces.get(involved.namespace) !== undefined;
  for (const [cluster, p] of problems) {
    if (previous?.get(cluster)?.message !== p.message) deps.log.warn({ key, cluster, reason: p.reason }, p.message);
    if (namespaceExists && !NO_EVENT.has(p.reason))
      deps.recordEvent({
        involved,
        type: "Warning",
        reason: report.eventReasons[p.reason] ?? report.otherReason,
        message: p.message,
      });
  }
}
