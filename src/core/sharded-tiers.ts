/**
 * Priority tiers of a fleet-wide Service across shards (SPEC §14 "Sharded", DESIGN §3
 * "Across shards"), the pure parts. The replica owning the Service decides which tiers
 * serve (tiers.ts's lifecycle, fed by `shardedTiers`) and states it on the Service
 * (`mirror.linkerd.io/federated-serving-priority`); every replica writing a part stands
 * its member by or lets it serve by that statement (`followedCutoff`), so no two
 * replicas make the decision. No I/O, no clock.
 *
 * Invariants (unit tested):
 * - a part states its member's ready endpoints whenever its endpoints do not show them
 *   (standing by, or announced empty before the Service exists): `READY_ANNOTATION`;
 *   so a member read from its part counts as many ready endpoints as its host counts;
 * - a host's standing never depends on a decision that is missing or stale in a way
 *   that empties the Service: without a stated cutoff every member serves; with one
 *   whose tiers, as observed, hold fewer than `minReady` ready endpoints, the host
 *   serves from the smallest prefix that reaches it (the owner's failover, taken at
 *   once), and returns to the stated cutoff only with the owner's patience; it never
 *   serves fewer tiers than stated.
 */
import type { FederatedMember } from "./federated.ts";
import { federatedTiers, memberReady, servingParts } from "./federated-tiers.ts";
import { CLUSTER_NAME } from "./labels.ts";
import type { EndpointSlice } from "./objects.ts";
import { STANDBY_ANNOTATION, stepTiers, type Tier, type TierSettings, type TierState } from "./tiers.ts";

/** On a sharded part whose endpoints do not show its member's ready endpoints: their number. */
export const READY_ANNOTATION = "mirror.linkerd.io/federated-ready";

/**
 * The ready endpoints a sharded part states: one `announced` (empty, before the Service
 * exists) or standing by its member's count; undefined when its endpoints show them, or
 * when it is `empty` for a port conflict (no member of the Service).
 */
export function statedReady(member: FederatedMember, empty: boolean, announced: boolean): number | undefined {
  if (announced) return memberReady(member);
  if (empty) return undefined;
  return member.standby ? (member.standbyReady ?? 0) : undefined;
}

/**
 * Ready endpoints the observed part slices of `cluster` stand for: the number the part
 * states (standing by, or announced), else none for a part standing by (written by an
 * unsharded writer), else its endpoints whose `ready` condition holds.
 */
export function partReady(slices: readonly EndpointSlice[], cluster: string): number {
  let ready = 0;
  let standby = false;
  for (const slice of slices) {
    if (slice.metadata.labels?.[CLUSTER_NAME] !== cluster) continue;
    const stated = slice.metadata.annotations?.[READY_ANNOTATION];
    if (stated !== undefined && /^\d{1,9}$/.test(stated)) return Number(stated);
    if (slice.metadata.annotations?.[STANDBY_ANNOTATION] === "true") standby = true;
    for (const e of slice.endpoints ?? []) if (e.conditions?.ready !== false) ready += 1;
  }
  return standby ? 0 : ready;
}

export interface ShardedTiersInput {
  /** The reduction's parts: hosted members and those read from other hosts' parts. */
  readonly parts: readonly FederatedMember[];
  /** Hosted clusters not heard from since the start: counted as their observed part states. */
  readonly kept: readonly string[];
  /** The Service's observed fleet-wide slices (every cluster's). */
  readonly slices: readonly EndpointSlice[];
  /** Whether this replica writes `cluster`'s part (then its own state counts, not the part). */
  readonly hosts: (cluster: string) => boolean;
  readonly priorityOf: (cluster: string) => number;
}

/** The tiers as a sharded replica sees them; fewer than two priorities: none (see federatedTiers). */
export function shardedTiers(input: ShardedTiersInput): Tier[] | undefined {
  const fromPart = (cluster: string): number => partReady(input.slices, cluster);
  return federatedTiers(input.parts, input.kept, input.priorityOf, fromPart, (m) =>
    input.hosts(m.cluster) ? memberReady(m) : fromPart(m.cluster),
  );
}

/** What a host that does not own the Service remembers of one: the cutoff stated, and its own lifecycle from it. */
export interface FollowedTiers {
  readonly stated: number;
  readonly state: TierState;
}

export interface Following {
  /** Undefined: nothing to remember (no stated cutoff, or no tiers). */
  readonly followed: FollowedTiers | undefined;
  /** The cutoff to write the hosted parts for; undefined: every member serves. */
  readonly cutoff: number | undefined;
  /** Observe again at this time (ms): the stated tiers will have held long enough. */
  readonly wake?: number;
}

/**
 * The cutoff a replica that does not own the Service writes its parts for, given the
 * cutoff the Service states (`stated`) and the tiers it observes: the stated one while
 * its tiers hold `minReady` ready endpoints; when they do not, at once the smallest
 * prefix that does (the owner's failover, which the owner is expected to state), and
 * back to the stated one only once it has held for the failback delay (tiers.ts's
 * lifecycle, started at the stated cutoff; a new stated cutoff starts it over). Never
 * fewer tiers than stated; every member serves without a stated cutoff or tiers.
 */
export function followTiers(
  settings: TierSettings,
  previous: FollowedTiers | undefined,
  event: { readonly now: number; readonly tiers: readonly Tier[] | undefined; readonly stated: number | undefined },
): Following {
  const { now, tiers, stated } = event;
  if (stated === undefined || !tiers) return { followed: undefined, cutoff: undefined };
  const held = previous?.stated === stated ? previous.state : undefined;
  const step = stepTiers(settings, held, { now, tiers, written: stated });
  if (!step.state) return { followed: undefined, cutoff: undefined };
  const cutoff = Math.max(step.state.cutoff, stated);
  const wake = step.effects.find((e) => e.kind === "wake");
  return {
    followed: { stated, state: { ...step.state, cutoff } },
    cutoff,
    ...(wake?.kind === "wake" ? { wake: wake.at } : {}),
  };
}

/** The hosted parts as written while the members of priority at most `cutoff` serve (undefined: all serve). */
export function hostedStanding(
  hosted: readonly FederatedMember[],
  cutoff: number | undefined,
  priorityOf: (cluster: string) => number,
): readonly FederatedMember[] {
  return cutoff === undefined ? hosted : servingParts(hosted, cutoff, priorityOf);
}
