/**
 * A fleet-wide Service's members seen as priority tiers (SPEC §14): how many ready
 * endpoints each member holds, and its parts as written for a serving cutoff (members
 * outside the serving tiers stand by: every endpoint not ready, the part annotated).
 * Pure: no I/O, no mutation of inputs.
 *
 * Invariants (unit tested):
 * - a remote member's ready endpoints are its alive gateway addresses, a local part's
 *   its endpoints whose `ready` condition holds;
 * - a member inside the serving tiers is returned as it is (its endpoints follow their
 *   own health); one outside keeps its addresses, all of them not ready;
 * - tiers exist only with two priorities or more: with one, nothing stands by and no
 *   cutoff is written (a fleet of one priority behaves as before §14).
 */
import type { FederatedMember } from "./federated.ts";
import { type Tier, tiersOf } from "./tiers.ts";

/** Ready endpoints of one member's part. */
export function memberReady(member: FederatedMember): number {
  if (member.endpoints) return member.endpoints.filter((e) => e.conditions.ready).length;
  return member.addresses.length - member.notReadyAddresses.length;
}

/**
 * The tiers of a fleet-wide Service's members (`parts`, written from their cluster's
 * state) and of its kept clusters (not heard from since a restart: counted as their
 * observed part holds them, `keptReady`). Fewer than two: no tiers (undefined).
 */
export function federatedTiers(
  parts: readonly FederatedMember[],
  kept: readonly string[],
  priorityOf: (cluster: string) => number,
  keptReady: (cluster: string) => number,
  readyOf: (member: FederatedMember) => number = memberReady,
): Tier[] | undefined {
  const tiers = tiersOf([
    ...parts.map((m) => ({ priority: priorityOf(m.cluster), ready: readyOf(m) })),
    ...kept.map((cluster) => ({ priority: priorityOf(cluster), ready: keptReady(cluster) })),
  ]);
  return tiers.length >= 2 ? tiers : undefined;
}

/** A member outside the serving tiers: its endpoints all not ready, and marked standby with its true count. */
function standby(member: FederatedMember): FederatedMember {
  const standbyReady = memberReady(member);
  if (member.endpoints)
    return {
      ...member,
      standby: true,
      standbyReady,
      endpoints: member.endpoints.map((e) => ({ ...e, conditions: { ...e.conditions, ready: false, serving: false } })),
    };
  return { ...member, standby: true, standbyReady, notReadyAddresses: member.addresses };
}

/** The parts as written while the members of priority at most `cutoff` serve. */
export function servingParts(
  parts: readonly FederatedMember[],
  cutoff: number,
  priorityOf: (cluster: string) => number,
): FederatedMember[] {
  return parts.map((m) => (priorityOf(m.cluster) <= cutoff ? m : standby(m)));
}
