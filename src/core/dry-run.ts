/**
 * The plan of a dry run (`run --dry-run`), pure: the writes the local writer would make
 * now, kept per reconciled key and replaced by each reconcile of that key
 * (level-triggered: a write no longer needed leaves the plan when its key is planned
 * again, e.g. once the object matches), and the report made of it: totals by
 * `verb/Kind`, and the planned writes in key order, at most a bounded number of them
 * (the report travels to the supervisor every second).
 */
import type { WriteAction } from "./mirror-kinds.ts";

export type PlannedVerb = WriteAction["verb"];

/** One write the writer would make (and, in a dry run, does not). */
export interface PlannedWrite {
  readonly verb: PlannedVerb;
  /** The resource, with `/status` for a status subresource: `ServiceImport/status`. */
  readonly kind: string;
  /** `namespace/name`, or `name` for a Namespace. */
  readonly object: string;
  /** The reconciled key the write belongs to (a mirror's, a fleet-wide Service's, an import's). */
  readonly key: string;
  /** The cluster that wants the write ("" when unknown: a create of a Namespace). */
  readonly cluster: string;
}

/** What a dry run reports: totals by `verb/Kind`, the writes (sorted), and how many were left out. */
export interface DryRunReport {
  readonly totals: Readonly<Record<string, number>>;
  readonly planned: readonly PlannedWrite[];
  readonly omitted: number;
}

/** The planned writes carried in one report at most; the totals count them all. */
export const DRY_RUN_REPORT_LIMIT = 1_000;

/** The planned write of `action`, made while reconciling `key` for `cluster`. */
export function plannedWrite(key: string, action: WriteAction, cluster: string): PlannedWrite {
  const status = action.verb === "update" && action.subresource === "status" ? "/status" : "";
  const object = action.kind === "Namespace" ? action.name : `${action.namespace}/${action.name}`;
  return { verb: action.verb, kind: `${action.kind}${status}`, object, key, cluster };
}

const identity = (w: PlannedWrite): string => `${w.verb} ${w.kind} ${w.object}`;

/** The log line of a planned write. */
export function describePlanned(w: PlannedWrite): string {
  return `dry run: would ${w.verb} ${w.kind} ${w.object}${w.cluster ? ` (cluster ${w.cluster})` : ""}`;
}

/** What changed between a key's previous and current writes: the added and the gone, by identity. */
export function planChanges(
  previous: readonly PlannedWrite[],
  current: readonly PlannedWrite[],
): { readonly added: PlannedWrite[]; readonly gone: PlannedWrite[] } {
  const before = new Set(previous.map(identity));
  const now = new Set(current.map(identity));
  return {
    added: current.filter((w) => !before.has(identity(w))),
    gone: previous.filter((w) => !now.has(identity(w))),
  };
}

/**
 * The writes planned per key. A reconcile starts its key's plan afresh (`begin`), adds
 * each write it would send (`add`: the same write planned twice in one reconcile, as a
 * second pass does, counts once), and closes it (`end`: the key's changes, to log).
 */
export class DryRunPlan {
  readonly #byKey = new Map<string, PlannedWrite[]>();
  readonly #open = new Map<string, PlannedWrite[]>();

  begin(key: string): void {
    this.#open.set(key, []);
  }

  add(write: PlannedWrite): void {
    const open = this.#open.get(write.key);
    // A write outside a reconcile of its key (none today) still counts, as its own plan.
    const list = open ?? this.#byKey.get(write.key) ?? [];
    if (!list.some((w) => identity(w) === identity(write))) list.push(write);
    if (!open) this.#byKey.set(write.key, list);
  }

  end(key: string): ReturnType<typeof planChanges> {
    const current = this.#open.get(key) ?? [];
    this.#open.delete(key);
    const previous = this.#byKey.get(key) ?? [];
    if (current.length > 0) this.#byKey.set(key, current);
    else this.#byKey.delete(key);
    return planChanges(previous, current);
  }

  report(limit = DRY_RUN_REPORT_LIMIT): DryRunReport {
    return dryRunReport([...this.#byKey.values()].flat(), limit);
  }
}

/** The report of `writes`: totals by `verb/Kind`, then the first `limit` by key, kind, object; each write once. */
export function dryRunReport(writes: readonly PlannedWrite[], limit = DRY_RUN_REPORT_LIMIT): DryRunReport {
  const sorted = [...writes].sort(
    (a, b) =>
      compare(a.key, b.key) || compare(a.kind, b.kind) || compare(a.object, b.object) || compare(a.verb, b.verb),
  );
  // One write planned by several keys (the Namespace of their new namespace) is made once.
  const seen = new Set<string>();
  const unique = sorted.filter((w) => !seen.has(identity(w)) && seen.add(identity(w)));
  const totals: Record<string, number> = {};
  for (const w of unique) totals[`${w.verb}/${w.kind}`] = (totals[`${w.verb}/${w.kind}`] ?? 0) + 1;
  return { totals, planned: unique.slice(0, limit), omitted: Math.max(0, unique.length - limit) };
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
