/**
 * The Leases of one Deployment (its `--leader-election-id`, the "lease id") and the layout
 * each belongs to (pure). The layout is how the Deployment divides the work between its
 * replicas, and every Lease name carries it, so that replicas of two layouts (an old
 * ReplicaSet and a new one during a rollout) always tell each other's Leases apart:
 * - the single leader (`--leader-elect` without `--shards`), layout `leader`: one Lease,
 *   named the lease id itself (`fleet-mirror`), as it always was;
 * - sharded (`--shards S`, S > 1), layout `s<S>`: shard i's Lease `<id>-s<S>-shard-<i>`
 *   and each replica's membership Lease `<id>-s<S>-member-<identity>…`;
 * - `legacy`: the sharded names of earlier versions, which did not carry S
 *   (`<id>-shard-<i>`, `<id>-member-…`). Such a Lease is always of another layout: an
 *   installation upgraded from them changes layout once.
 *
 * Invariants: a name parses to at most one layout, role and shard; the names this module
 * makes parse back to what made them; names of other lease ids (another Deployment in the
 * namespace) parse to nothing, unless one id is another's prefix followed by a part that
 * reads as a layout (`<id>-s<digits>-…`, `<id>-shard-…`, `<id>-member-…`): two
 * Deployments in one namespace need ids where neither is such a prefix of the other.
 */
import { fnv1a32 } from "./shards.ts";

/** What a Lease is for. */
export type LeaseRole = "leader" | "shard" | "member";

/** The layout, role (and shard) a Lease name stands for. */
export interface ParsedLease {
  /** `leader`, `s<S>` or `legacy`. */
  readonly layout: string;
  readonly role: LeaseRole;
  /** The shard of a shard Lease. */
  readonly shard?: number;
}

/** The layout of earlier versions' sharded Lease names (they did not carry the shard count). */
export const LEGACY_LAYOUT = "legacy";

/** The layout of a replica run with `shards` shards: `leader` for 1 (the single leader), else `s<S>`. */
export function leaseLayout(shards: number): string {
  return shards > 1 ? `s${shards}` : "leader";
}

/** The name of shard `shard`'s Lease in layout `s<shards>`: `<lease id>-s<shards>-shard-<shard>`. */
export function shardLeaseName(leaseId: string, shards: number, shard: number): string {
  return `${leaseId}-s${shards}-shard-${shard}`;
}

/**
 * The name of `identity`'s membership Lease in layout `s<shards>`:
 * `<lease id>-s<shards>-member-<identity>`, the identity made a valid Lease name (lower
 * case, `[a-z0-9.-]`, at most 40 characters of it) and followed by its FNV-1a hash in
 * hex, so two identities that read alike once made valid still get two Leases.
 */
export function memberLeaseName(leaseId: string, shards: number, identity: string): string {
  const readable = identity
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/g, "-")
    .replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, "")
    .slice(0, 40)
    .replace(/[^a-z0-9]+$/, "");
  const hash = fnv1a32(identity).toString(16).padStart(8, "0");
  return `${leaseId}-s${shards}-member-${readable === "" ? "" : `${readable}-`}${hash}`;
}

const NUMBER = "(0|[1-9][0-9]*)";
const SHARD = new RegExp(`^s${NUMBER}-shard-${NUMBER}$`);
const MEMBER = new RegExp(`^s${NUMBER}-member-.+$`);
const LEGACY_SHARD = new RegExp(`^shard-${NUMBER}$`);

/** The layout, role and shard of Lease `name` of lease id `leaseId`; undefined for any other name. */
export function parseLeaseName(leaseId: string, name: string): ParsedLease | undefined {
  if (name === leaseId) return { layout: "leader", role: "leader" };
  if (!name.startsWith(`${leaseId}-`)) return undefined;
  const rest = name.slice(leaseId.length + 1);
  const shard = SHARD.exec(rest);
  if (shard) {
    const shards = Number(shard[1]);
    const i = Number(shard[2]);
    return shards > 1 && i < shards ? { layout: leaseLayout(shards), role: "shard", shard: i } : undefined;
  }
  const member = MEMBER.exec(rest);
  if (member) return Number(member[1]) > 1 ? { layout: leaseLayout(Number(member[1])), role: "member" } : undefined;
  const legacy = LEGACY_SHARD.exec(rest);
  if (legacy) return { layout: LEGACY_LAYOUT, role: "shard", shard: Number(legacy[1]) };
  if (rest.startsWith("member-") && rest.length > "member-".length) return { layout: LEGACY_LAYOUT, role: "member" };
  return undefined;
}
