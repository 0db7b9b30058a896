/**
 * Checks of sharded writes against the API server's own record (pure: over the writes of
 * test/helpers/audit.ts). The audit log keeps the body of every Lease write, so it holds
 * the history of each shard's holder as the server saw it; a mirror write is checked
 * against the holder of its cluster's shard at the instant the server received it.
 *
 * Invariant checked: a replica writes a cluster's mirror only while the latest successful
 * write of that cluster's shard Lease, received before the mirror write, names it as the
 * holder. A takeover is that new holder's acquiring write, so a replica that kept writing
 * after losing its shard shows up as a write received after the other's acquisition.
 */
import { type AuditedWrite, describeWrites, MIRROR_RESOURCES, succeeded } from "./audit.ts";

/** One successful write of a Lease, and the holder it left. */
export interface LeaseRecord {
  readonly at: number;
  readonly by: string;
  readonly holder: string;
}

/** The successful writes of Lease `name`, oldest first: the holders as the server recorded them. */
export function leaseHistory(writes: readonly AuditedWrite[], name: string): LeaseRecord[] {
  return writes
    .filter((w) => w.resource === "leases" && w.name === name && succeeded(w) && w.leaseHolder !== undefined)
    .map((w) => ({ at: w.receivedAt, by: w.identity, holder: w.leaseHolder ?? "" }))
    .sort((a, b) => a.at - b.at);
}

/** The holder `history` names at time `at` ("" before the first write or after a release). */
export function holderAt(history: readonly LeaseRecord[], at: number): string {
  let holder = "";
  for (const record of history) {
    if (record.at >= at) break;
    holder = record.holder;
  }
  return holder;
}

/** The distinct holders of `history` in order of tenure, with the time each took over (adjacent repeats merged). */
export function tenures(history: readonly LeaseRecord[]): { readonly holder: string; readonly from: number }[] {
  const result: { holder: string; from: number }[] = [];
  for (const record of history) {
    if (result.at(-1)?.holder === record.holder) continue;
    result.push({ holder: record.holder, from: record.at });
  }
  return result;
}

/**
 * The cluster whose mirror `write` is, by name: a mirror of Service `svc` from cluster
 * `c` is `svc-c` (Service, Endpoints) and its slices `svc-c-<suffix>`. `clusters` must be
 * names that occur in no Service name, e.g. `c00`…`c59`.
 */
export function clusterOfMirror(write: AuditedWrite, clusters: readonly string[]): string | undefined {
  if (!MIRROR_RESOURCES.includes(write.resource)) return undefined;
  return clusters.find((c) => write.name.endsWith(`-${c}`) || write.name.includes(`-${c}-`));
}

/** A mirror write by a replica that did not hold the shard of the mirror's cluster at that time. */
export interface ForeignWrite {
  readonly write: AuditedWrite;
  readonly cluster: string;
  readonly shard: number;
  /** Who held the shard when the write was received ("" for nobody). */
  readonly holder: string;
}

export interface ShardCheck {
  /** The replicas' identities: writes by anyone else (the admin, built-in controllers) are not checked. */
  readonly replicas: readonly string[];
  readonly clusters: readonly string[];
  /** The shard of a cluster (`shardOf(cluster, S)`). */
  readonly shardOf: (cluster: string) => number;
  /** The name of a shard's Lease. */
  readonly leaseName: (shard: number) => string;
}

/**
 * Every mirror write (successful or not: an attempt that reached the server is a write
 * the fence let through) by a replica that did not hold its cluster's shard when the
 * server received it. Empty when sharding is fenced right.
 */
export function foreignMirrorWrites(writes: readonly AuditedWrite[], check: ShardCheck): ForeignWrite[] {
  const histories = new Map<number, LeaseRecord[]>();
  const history = (shard: number): LeaseRecord[] => {
    let h = histories.get(shard);
    if (!h) {
      h = leaseHistory(writes, check.leaseName(shard));
      histories.set(shard, h);
    }
    return h;
  };
  const foreign: ForeignWrite[] = [];
  for (const write of writes) {
    if (!check.replicas.includes(write.identity) || write.dryRun) continue;
    const cluster = clusterOfMirror(write, check.clusters);
    if (cluster === undefined) continue;
    const shard = check.shardOf(cluster);
    const holder = holderAt(history(shard), write.receivedAt);
    if (holder !== write.identity) foreign.push({ write, cluster, shard, holder });
  }
  return foreign;
}

/** Successful writes per object (`resource namespace/name`) → the identities that made them. */
export function writersByObject(writes: readonly AuditedWrite[]): Map<string, Set<string>> {
  const writers = new Map<string, Set<string>>();
  for (const w of writes) {
    if (!succeeded(w)) continue;
    const key = `${w.resource} ${w.namespace}/${w.name}`;
    let set = writers.get(key);
    if (!set) {
      set = new Set();
      writers.set(key, set);
    }
    set.add(w.identity);
  }
  return writers;
}

/** The first 20 foreign writes, one line each with the shard's holder at that instant (for an assertion message). */
export function describeForeignWrites(foreign: readonly ForeignWrite[]): string {
  return foreign
    .slice(0, 20)
    .map((f) => `${describeWrites([f.write])} (cluster ${f.cluster}, shard ${f.shard} held by "${f.holder}")`)
    .join("\n");
}
