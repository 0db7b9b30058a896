/**
 * Priority tiers of a fleet-wide Service (SPEC §14), the pure parts: a cluster's
 * priority from its credentials Secret, the serving tiers a set of ready counts calls
 * for, and the lifecycle that moves traffic away at once and back with patience, as a
 * `(state, event) → (state, effects)` function. No I/O, no clock (time comes in events).
 *
 * Serving tiers are always a prefix of the tiers in priority order, so one number says
 * which serve: the `cutoff`, the worst priority that serves (every member whose priority
 * is at most the cutoff serves; the others stand by).
 *
 * Invariants (unit tested):
 * - a prefix that falls short of the threshold is left at once, for the smallest prefix
 *   that reaches it (every tier when none does);
 * - a better prefix is returned to only once it has reached the threshold at every
 *   observation, without a break, for `failbackDelayMs`; any break starts it over;
 * - an observation that changes nothing yields no effect but, while a better prefix is
 *   waiting, the time at which it would be ripe (`wake`).
 */

/** The credentials Secret's annotation that sets its cluster's priority (SPEC §14). */
export const PRIORITY_ANNOTATION = "mirror.linkerd.io/priority";
/** The priority of a cluster whose Secret sets none, or an invalid one. */
export const DEFAULT_PRIORITY = 100;
export const MAX_PRIORITY = 1_000;
/** On a fleet-wide Service: the cutoff its endpoints were last written for (absent: every tier serves). */
export const SERVING_PRIORITY_ANNOTATION = "mirror.linkerd.io/federated-serving-priority";
/** On a part outside the serving tiers (`"true"`). */
export const STANDBY_ANNOTATION = "mirror.linkerd.io/federated-standby";

export type ParsedPriority =
  | { readonly priority: number; readonly problem?: undefined }
  | { readonly priority: number; readonly problem: string };

/** A whole number 0–1000 written in decimal digits; anything else is reported and counts as the default. */
export function parsePriority(value: string | undefined): ParsedPriority {
  if (value === undefined) return { priority: DEFAULT_PRIORITY };
  if (/^\d{1,4}$/.test(value) && Number(value) <= MAX_PRIORITY) return { priority: Number(value) };
  return {
    priority: DEFAULT_PRIORITY,
    problem: `annotation ${PRIORITY_ANNOTATION} ${JSON.stringify(value)} is not a whole number from 0 to ${MAX_PRIORITY}; the cluster counts as priority ${DEFAULT_PRIORITY}`,
  };
}

/** One tier: the members of one priority, and their ready endpoints together. */
export interface Tier {
  readonly priority: number;
  readonly ready: number;
}

/** Members (priority, ready endpoints) grouped into tiers, best first. */
export function tiersOf(members: Iterable<{ readonly priority: number; readonly ready: number }>): Tier[] {
  const byPriority = new Map<number, number>();
  for (const m of members) byPriority.set(m.priority, (byPriority.get(m.priority) ?? 0) + m.ready);
  return [...byPriority].sort(([a], [b]) => a - b).map(([priority, ready]) => ({ priority, ready }));
}

/** Whether the tiers at most `cutoff` hold `minReady` ready endpoints together. */
export function reaches(tiers: readonly Tier[], cutoff: number, minReady: number): boolean {
  let ready = 0;
  for (const t of tiers) if (t.priority <= cutoff) ready += t.ready;
  return ready >= minReady;
}

/** The smallest prefix that reaches `minReady`, as its cutoff; the worst tier's when none does. */
export function idealCutoff(tiers: readonly Tier[], minReady: number): number | undefined {
  let ready = 0;
  for (const t of tiers) {
    ready += t.ready;
    if (ready >= minReady) return t.priority;
  }
  return tiers.at(-1)?.priority;
}

export interface TierState {
  /** The worst priority that serves. */
  readonly cutoff: number;
  /** When the cutoff last changed (ms). */
  readonly since: number;
  /** Cutoffs better than `cutoff` that reach the threshold, each with the time since when without a break. */
  readonly ripening: readonly (readonly [cutoff: number, since: number])[];
}

export interface TierSettings {
  readonly minReady: number;
  readonly failbackDelayMs: number;
}

export interface TierObservation {
  readonly now: number;
  readonly tiers: readonly Tier[];
  /** For a Service without a state yet: the cutoff its observed objects were written for (a restart keeps it). */
  readonly written?: number;
}

export type TierEffect =
  | { readonly kind: "failover" | "failback"; readonly from: number; readonly to: number; readonly message: string }
  /** Observe again at this time: a better prefix will have waited long enough. */
  | { readonly kind: "wake"; readonly at: number };

export interface TierStep {
  /** Undefined: the Service has no member (no tier). */
  readonly state: TierState | undefined;
  readonly effects: readonly TierEffect[];
}

const describe = (tiers: readonly Tier[], cutoff: number): string =>
  tiers
    .filter((t) => t.priority <= cutoff)
    .map((t) => `${t.priority} (${t.ready} ready)`)
    .join(", ");

/** One observation of a fleet-wide Service's tiers (see the invariants). */
export function stepTiers(settings: TierSettings, previous: TierState | undefined, event: TierObservation): TierStep {
  const { tiers, now } = event;
  const ideal = idealCutoff(tiers, settings.minReady);
  if (ideal === undefined) return { state: undefined, effects: [] };
  const worst = tiers.at(-1)?.priority ?? ideal;
  // A cutoff past the worst tier serves the same set as the worst tier's.
  const start = previous?.cutoff ?? event.written ?? ideal;
  const current = Math.min(start, worst);
  const since = previous?.since ?? now;
  if (!reaches(tiers, current, settings.minReady) && ideal > current) {
    const message = `tiers up to priority ${current} fell short of ${settings.minReady} ready endpoint(s); now serving priorities ${describe(tiers, ideal)}`;
    return {
      state: { cutoff: ideal, since: now, ripening: [] },
      effects: [{ kind: "failover", from: current, to: ideal, message }],
    };
  }
  const held = new Map(previous?.ripening ?? []);
  const ripening: (readonly [number, number])[] = [];
  for (const t of tiers)
    if (t.priority < current && reaches(tiers, t.priority, settings.minReady))
      ripening.push([t.priority, held.get(t.priority) ?? now]);
  const ripe = ripening.find(([, at]) => now - at >= settings.failbackDelayMs);
  if (ripe) {
    const [to, at] = ripe;
    const message = `tiers up to priority ${to} held ${settings.minReady} ready endpoint(s) for ${Math.round((now - at) / 1000)}s; now serving priorities ${describe(tiers, to)}`;
    return {
      state: { cutoff: to, since: now, ripening: [] },
      effects: [{ kind: "failback", from: current, to, message }],
    };
  }
  const effects: TierEffect[] = [];
  const due = Math.min(...ripening.map(([, at]) => at + settings.failbackDelayMs));
  if (Number.isFinite(due)) effects.push({ kind: "wake", at: due });
  return { state: { cutoff: current, since: start === current ? since : now, ripening }, effects };
}

/** The cutoff a fleet-wide Service's annotation states, if it is one. */
export function writtenCutoff(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,4}$/.test(value)) return undefined;
  return Number(value);
}
