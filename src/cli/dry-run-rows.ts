/**
 * The dry-run part of `fleet-mirror status` (pure): what a controller started with
 * `run --dry-run` would write now and does not, and the mirrors it would leave alone
 * (SPEC §5: a name held by an object it does not own is a conflict, never written over).
 */
import type { AdminStatus } from "../admin/source.ts";
import type { DryRunReport } from "../core/dry-run.ts";
import { formatTable } from "./common.ts";

/** A mirror a dry run would not write, and why (the writer's blocked list). */
export interface SkippedMirror {
  readonly key: string;
  readonly cluster: string;
  readonly reason: string;
  readonly message: string;
}

/** What `status` shows of a dry run, as printed and as emitted with `-o json|yaml`. */
export interface DryRunView extends DryRunReport {
  readonly skipped: readonly SkippedMirror[];
}

/** The dry-run view of a controller's status; undefined when it is not a dry run. */
export function dryRunViewFromAdmin(status: AdminStatus): DryRunView | undefined {
  const dryRun = status.writer?.dryRun;
  if (!dryRun) return undefined;
  const skipped = Object.entries(status.writer?.clusters ?? {})
    .flatMap(([cluster, c]) => c.blocked.map((b) => ({ key: b.key, cluster, reason: b.reason, message: b.message })))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { totals: dryRun.totals, planned: dryRun.planned, omitted: dryRun.omitted, skipped };
}

/** The dry-run section of the status table. */
export function formatDryRun(view: DryRunView): string {
  const total = Object.values(view.totals).reduce((a, b) => a + b, 0);
  const byKind = Object.entries(view.totals)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, n]) => `${k.replace("/", " ")} ${n}`)
    .join(", ");
  const head = `DRY RUN: nothing is written. ${total === 0 ? "No write planned: the local cluster matches." : `${total} write${total === 1 ? "" : "s"} planned (${byKind}).`}\n`;
  const planned =
    view.planned.length > 0
      ? formatTable(
          ["would", "resource", "object", "cluster"],
          view.planned.map((w) => [w.verb, w.kind, w.object, w.cluster || "-"]),
        ) + (view.omitted > 0 ? `... and ${view.omitted} more\n` : "")
      : "";
  const skipped =
    view.skipped.length > 0
      ? `\nLeft alone (not written):\n${formatTable(
          ["mirror", "cluster", "reason", "why"],
          view.skipped.map((s) => [s.key, s.cluster, s.reason, s.message]),
        )}`
      : "";
  return head + planned + skipped;
}
