/**
 * One writer per object across Lease layouts (pure). Within a layout each Lease is its
 * own arbiter; across layouts (lease-names.ts: a new shard count, sharding turned on or
 * off, or the names of an earlier version) the Leases differ, so nothing would stop an
 * old and a new ReplicaSet from writing the same mirrors at once. These rules do, judged
 * on the LISTs of the namespace's Leases each replica makes, with the local-observation
 * expiry of lease.ts (no wall clocks compared):
 *
 * - Refuse: a replica takes no Lease (a shard, or the single leader's) while its latest
 *   list shows a live Lease of another layout: held, and not expired by local
 *   observation. Membership Leases count, so a layout whose replicas are all alive but
 *   hold nothing still keeps the other from starting, and a layout that sees the other's
 *   replicas takes nothing more: during a rollout the old replicas keep what they hold
 *   (holding is not taking) and the new ones wait, writing nothing, until the old ones
 *   are gone; neither takes the shards the other releases.
 * - Quiet: after the last list that showed one, a further lease duration passes before a
 *   take. A single leader's standbys hold no Lease and are invisible to lists: one that
 *   takes the leader Lease at its next try after a release shows up within that time.
 * - Confirm: a Lease just taken opens no write until a list SENT AFTER the take's answer
 *   shows no live shard or leader Lease of another layout (`confirmation`). Two takes in
 *   two layouts, a_X before a_Y: Y's confirming list comes after a_Y, so after a_X, and
 *   shows X's Lease unless X released it (having stopped writing first): Y never writes.
 *   This holds whatever the lists showed before the takes (stale views, races), so a
 *   take decided on a list the other side's take had not yet reached is harmless: it is
 *   given up unused.
 *
 * What remains, as for every Lease without server-side fencing: a write the server has
 * read but not applied when its client aborts it (see the write fence), and earlier
 * versions, which follow none of these rules (their single-leader standbys are what the
 * quiet period is for).
 */
import type { LeaseRole } from "./lease-names.ts";

/** A live Lease of another layout, as one list showed it. */
export interface ForeignLease {
  readonly name: string;
  readonly layout: string;
  readonly role: LeaseRole;
  readonly holder: string;
}

export interface LayoutState {
  /** Monotonic ms at which the latest list counted was sent; undefined before the first. */
  readonly listedAt: number | undefined;
  /** The live Leases of other layouts in that list. */
  readonly foreign: readonly ForeignLease[];
  /** Monotonic ms at which the latest list showing one arrived; undefined: none seen yet. */
  readonly foreignSeenAt: number | undefined;
}

export const NO_LIST: LayoutState = { listedAt: undefined, foreign: [], foreignSeenAt: undefined };

/**
 * The state after a list sent at `sentAt` and answered at `now` showed `foreign`. A list
 * sent before the one counted last is ignored (an answer that overtook another).
 */
export function observeLayouts(
  state: LayoutState,
  sentAt: number,
  now: number,
  foreign: readonly ForeignLease[],
): LayoutState {
  if (state.listedAt !== undefined && sentAt < state.listedAt) return state;
  return { listedAt: sentAt, foreign, foreignSeenAt: foreign.length > 0 ? now : state.foreignSeenAt };
}

/** `foreign` in a log line: `name (holder)`, the first few. */
export function describeForeign(foreign: readonly ForeignLease[]): string {
  const shown = foreign.slice(0, 4).map((f) => `${f.name} (${f.holder})`);
  return `${shown.join(", ")}${foreign.length > 4 ? `, and ${foreign.length - 4} more` : ""}`;
}

/**
 * Why no Lease may be taken now, or undefined when one may: no list yet, a live Lease of
 * another layout in the latest list, or less than `leaseDurationMs` since the last list
 * that showed one. The reason names no time, so it stays the same while it holds.
 */
export function takeRefused(state: LayoutState, now: number, leaseDurationMs: number): string | undefined {
  if (state.listedAt === undefined) return "the namespace's Leases have not been listed yet";
  if (state.foreign.length > 0) return `Leases of another layout are live: ${describeForeign(state.foreign)}`;
  if (state.foreignSeenAt !== undefined && now - state.foreignSeenAt < leaseDurationMs)
    return "waiting a lease duration after the last live Lease of another layout";
  return undefined;
}

/**
 * Whether a Lease taken at `takenAt` (its answer's arrival) may open its writes: undefined
 * until a list sent at or after `takenAt` was counted; then true when that list shows no
 * live shard or leader Lease of another layout, else false (give the Lease up unused).
 * Membership Leases do not count here: a replica of another layout holding nothing
 * writes nothing.
 */
export function confirmation(state: LayoutState, takenAt: number): boolean | undefined {
  if (state.listedAt === undefined || state.listedAt < takenAt) return undefined;
  return !state.foreign.some((f) => f.role !== "member");
}
