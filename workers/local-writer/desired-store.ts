/**
 * The writer's view of what every remote cluster wants: the latest desired mirror per
 * (cluster, local key), fed by `desired.batch` assertions. Pure data structure, no I/O.
 *
 * Invariants:
 * - a batch from an epoch older than the newest seen for its cluster is ignored;
 * - a `complete` batch replaces the cluster's whole set and marks it complete, which is
 *   the only thing (besides the cluster leaving the keep set) that allows garbage
 *   collection of that cluster's mirrors;
 * - `keep === undefined` until the supervisor has listed the credentials Secrets: until
 *   then no cluster is considered unregistered, so nothing is collected for that reason;
 * - a cluster is registered by `register` (the writer calls it when the supervisor
 *   attaches the cluster's desired channel: the supervisor attaches only registered
 *   clusters) or by being named in `setKeep`; only `setKeep` unregisters. A batch of a
 *   registered cluster is always absorbed, even before a `setKeep` names the cluster;
 *   a batch of an unregistered one is refused (`applyBatch` returns undefined), never
 *   silently dropped, so the caller can ask for it again;
 * - members of fleet-wide Services (SPEC §11) and MCS exports (SPEC §12) are held per
 *   cluster next to its mirrors, under the same rules (a complete batch replaces them
 *   all), keyed by the fleet-wide key and by the derived Service's key (`importKey`);
 *   a cluster is *known* once it sent a complete set (`known`);
 * - a cluster's MCS exports are known only once a complete set said which they are: a
 *   complete set that says they are unknown (`mcsExportsUnknown`: its ServiceExport read
 *   failed or was refused) keeps the exports held for the cluster, from any earlier
 *   incarnation, and puts the cluster in `exportsUnknown` (its import parts are kept as
 *   written, never deleted) until a complete set says which they are.
 */
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { FederatedMember } from "../../src/core/federated.ts";
import { importKey, type McsExport } from "../../src/core/mcs.ts";
import { objectKey, splitKey } from "../../src/core/objects.ts";
import { DEFAULT_PRIORITY } from "../../src/core/tiers.ts";
import type { ToWriterFromActor } from "../../src/protocol/messages.ts";
import { PartIndex } from "./part-index.ts";
import type { SharedStrings } from "./shared-strings.ts";

interface ClusterDesired {
  epoch: number;
  complete: boolean;
  /** The last complete set said which MCS exports the cluster has (see the invariants). */
  exportsKnown: boolean;
  readonly mirrors: Map<string, DesiredMirror>;
}

export class DesiredStore {
  /**
   * The writer's table of repeated strings: each mirror and member is kept with its
   * strings shared (a batch arrives by structured clone, which shares none). Equal
   * values: what is planned from them is unchanged. Undefined: kept as they arrive.
   */
  readonly #shared: SharedStrings | undefined;
  readonly #clusters = new Map<string, ClusterDesired>();
  /** local key → clusters that want a mirror under that name */
  readonly #claimants = new Map<string, Set<string>>();
  /** Fleet-wide key → cluster → its member. */
  readonly #members = new PartIndex<FederatedMember>();
  /** Derived Service key (`importKey`) → cluster → its MCS export. */
  readonly #exports = new PartIndex<McsExport>();
  #keep: Set<string> | undefined;
  #order: readonly string[] = [];
  #registeredAt: Readonly<Record<string, string>> = {};
  #priorities: Readonly<Record<string, number>> = {};

  /** Counts every change of any cluster's mirrors (for a view computed from them to know it is stale). */
  #version = 0;

  constructor(shared?: SharedStrings) {
    this.#shared = shared;
  }

  /** Registers a cluster: its batches are absorbed and its mirrors kept until a `setKeep` leaves it out. */
  register(cluster: string): void {
    this.#keep?.add(cluster);
  }

  /**
   * Applies a batch; returns the local keys (mirror and fleet-wide) whose desired state may have changed, or
   * undefined when the batch is refused: its cluster is not registered, or its epoch is
   * older than the newest seen for the cluster.
   */
  applyBatch(batch: ToWriterFromActor): string[] | undefined {
    let cd = this.#clusters.get(batch.cluster);
    if (cd && batch.epoch < cd.epoch) return undefined;
    if (this.#keep && !this.#keep.has(batch.cluster)) return undefined;
    if (!cd) {
      cd = { epoch: batch.epoch, complete: false, exportsKnown: false, mirrors: new Map() };
      this.#clusters.set(batch.cluster, cd);
    }
    cd.epoch = batch.epoch;
    this.#version += 1;
    const touched: string[] = [];
    if (batch.complete) {
      const next = new Set(batch.upserts.map((m) => objectKey(m)));
      for (const key of [...cd.mirrors.keys()]) {
        if (!next.has(key)) {
          this.#remove(batch.cluster, cd, key);
          touched.push(key);
        }
      }
      const nextMembers = new Set((batch.members ?? []).map((m) => objectKey(m)));
      touched.push(...this.#members.retain(batch.cluster, (key) => nextMembers.has(key)));
      // Exports not known are not "none": what is held of them stays.
      const exportsKnown = batch.mcsExportsUnknown !== true;
      if (exportsKnown) {
        const nextExports = new Set((batch.mcsExports ?? []).map(importKey));
        touched.push(...this.#exports.retain(batch.cluster, (key) => nextExports.has(key)));
      }
      // The first complete set makes the cluster known: its parts, held before as an
      // unknown cluster's (not trusted), count now. Its exports turning known or unknown
      // change how its held import parts count (kept or not).
      if (!cd.complete) touched.push(...this.sharedKeysOf(batch.cluster));
      else if (cd.exportsKnown !== exportsKnown) touched.push(...this.#exports.keysOf(batch.cluster));
      cd.complete = true;
      cd.exportsKnown = exportsKnown;
    }
    for (const key of batch.memberDeletes ?? []) if (this.#members.delete(batch.cluster, key)) touched.push(key);
    // A part that is unchanged changes no reduction: its key is not touched (a complete
    // batch carries every part again, and each shared key costs a reduction).
    for (const member of batch.members ?? []) {
      const key = objectKey(member);
      if (samePart(this.#members.get(batch.cluster, key), member)) continue;
      this.#members.set(batch.cluster, key, this.#shared ? this.#shared.compact(member) : member);
      touched.push(key);
    }
    // MCS exports travel keyed by their ServiceImport; the writer keys them by the derived Service.
    for (const key of batch.mcsExportDeletes ?? []) {
      const { namespace = "", name } = splitKey(key);
      const derived = importKey({ namespace, name });
      if (this.#exports.delete(batch.cluster, derived)) touched.push(derived);
    }
    for (const exported of batch.mcsExports ?? []) {
      const key = importKey(exported);
      if (samePart(this.#exports.get(batch.cluster, key), exported)) continue;
      this.#exports.set(batch.cluster, key, this.#shared ? this.#shared.compact(exported) : exported);
      touched.push(key);
    }
    for (const key of batch.deletes) {
      if (cd.mirrors.has(key)) {
        this.#remove(batch.cluster, cd, key);
        touched.push(key);
      }
    }
    for (const mirror of batch.upserts) {
      const key = objectKey(mirror);
      cd.mirrors.set(key, this.#shared ? this.#shared.compact(mirror) : mirror);
      const claimants = this.#claimants.get(key) ?? new Set<string>();
      this.#claimants.set(key, claimants);
      claimants.add(batch.cluster);
      touched.push(key);
    }
    return touched;
  }

  /**
   * Sets the clusters whose mirrors are kept; forgets the desired state of every other
   * cluster. `order` is the registration order (SPEC §11; default: `keep`'s) and
   * `registeredAt` each cluster's registration time (SPEC §12), `priorities` each
   * cluster's priority (SPEC §14). Returns the clusters dropped and the keys they claimed.
   */
  setKeep(
    keep: Iterable<string>,
    order?: readonly string[],
    registeredAt: Readonly<Record<string, string>> = {},
    priorities: Readonly<Record<string, number>> = {},
  ): { dropped: string[]; keys: string[] } {
    this.#keep = new Set(keep);
    this.#order = [...(order ?? this.#keep)];
    this.#registeredAt = { ...registeredAt };
    this.#priorities = { ...priorities };
    const dropped: string[] = [];
    const keys: string[] = [];
    for (const [cluster, cd] of this.#clusters) {
      if (this.#keep.has(cluster)) continue;
      dropped.push(cluster);
      for (const key of [...cd.mirrors.keys()]) {
        this.#remove(cluster, cd, key);
        keys.push(key);
      }
      keys.push(...this.#dropParts(cluster));
      this.#clusters.delete(cluster);
    }
    return { dropped, keys };
  }

  /**
   * Forgets the desired state of `clusters` (their shard is no longer held here) without
   * unregistering them: nothing of theirs is collected for it, and their complete sets
   * are needed again before any of their mirrors may be collected here (`gcAllowed`).
   * Returns the keys they claimed or held members of.
   */
  forget(clusters: Iterable<string>): string[] {
    const keys: string[] = [];
    for (const cluster of clusters) {
      const cd = this.#clusters.get(cluster);
      if (!cd) continue;
      for (const key of [...cd.mirrors.keys()]) {
        this.#remove(cluster, cd, key);
        keys.push(key);
      }
      keys.push(...this.#dropParts(cluster));
      this.#clusters.delete(cluster);
    }
    return keys;
  }

  /** The clusters whose desired state is held. */
  clusters(): IterableIterator<string> {
    return this.#clusters.keys();
  }

  /**
   * May no-longer-desired mirrors of `cluster` be deleted? Only with complete knowledge:
   * the cluster sent a complete set, or it is known to be unregistered.
   */
  gcAllowed(cluster: string): boolean {
    if (!this.#keep) return this.#clusters.get(cluster)?.complete === true;
    return !this.#keep.has(cluster) || this.#clusters.get(cluster)?.complete === true;
  }

  /** The members of fleet-wide key `key`, by cluster (any cluster whose set is held). */
  members(key: string): Map<string, FederatedMember> {
    return this.#members.of(key);
  }

  /** Fleet-wide keys some cluster holds a member of. */
  federatedKeys(): IterableIterator<string> {
    return this.#members.keys();
  }

  /** The MCS exports of derived Service key `key` (SPEC §12), by cluster. */
  exports(key: string): Map<string, McsExport> {
    return this.#exports.of(key);
  }

  /** Derived Service keys some cluster exports to. */
  importKeys(): IterableIterator<string> {
    return this.#exports.keys();
  }

  /** The shared keys (fleet-wide, import) `cluster` holds a part of. */
  *sharedKeysOf(cluster: string): Generator<string> {
    yield* this.#members.keysOf(cluster);
    yield* this.#exports.keysOf(cluster);
  }

  /** Keys of objects clusters share: fleet-wide keys and import keys. */
  *sharedKeys(): Generator<string> {
    yield* this.#members.keys();
    yield* this.#exports.keys();
  }

  /**
   * Registered clusters whose complete set has not arrived (SPEC §11: their membership
   * is unknown, not empty). Before the first `setKeep`, the clusters attached so far.
   */
  unknownClusters(): Set<string> {
    const registered = this.#keep ?? new Set(this.#clusters.keys());
    return new Set([...registered].filter((c) => this.#clusters.get(c)?.complete !== true));
  }

  /** Whether `cluster` sent a complete set: its membership is known (SPEC §11). */
  known(cluster: string): boolean {
    return this.#clusters.get(cluster)?.complete === true;
  }
  /** Whether `cluster`'s last complete set said which MCS exports it has (false before any). */
  exportsKnownOf(cluster: string): boolean {
    return this.#clusters.get(cluster)?.exportsKnown === true;
  }

  /**
   * Clusters that sent a complete set saying their MCS exports are unknown (SPEC §12):
   * for an import they are seen in, or were known to export to, they are unknown
   * clusters (their parts kept, never deleted). Clusters without a complete set at all
   * are in `unknownClusters`.
   */
  exportsUnknown(): Set<string> {
    const out = new Set<string>();
    for (const [cluster, cd] of this.#clusters) if (cd.complete && !cd.exportsKnown) out.add(cluster);
    return out;
  }

  /** Whether `cluster`'s last complete set said which MCS exports it has. */
  exportsKnown(cluster: string): boolean {
    const cd = this.#clusters.get(cluster);
    return cd?.complete === true && cd.exportsKnown;
  }

  /** Whether a `setKeep` arrived: the registered clusters are known. */
  get registrationKnown(): boolean {
    return this.#keep !== undefined;
  }

  /** The registration order of the last `setKeep` (empty before it). */
  order(): readonly string[] {
    return this.#order;
  }

  /** When `cluster` was registered (its credentials Secret's creation time), per the last `setKeep`. */
  registeredAt(cluster: string): string | undefined {
    return this.#registeredAt[cluster];
  }

  /** `cluster`'s priority per the last `setKeep` (SPEC §14); the default when it named none. */
  priority(cluster: string): number {
    return this.#priorities[cluster] ?? DEFAULT_PRIORITY;
  }

  /** Changes with every batch absorbed and every cluster forgotten. */
  get version(): number {
    return this.#version;
  }

  /** The namespaces of `cluster`'s desired mirrors, each once. */
  namespacesOf(cluster: string): Set<string> {
    const namespaces = new Set<string>();
    for (const mirror of this.#clusters.get(cluster)?.mirrors.values() ?? []) namespaces.add(mirror.namespace);
    return namespaces;
  }

  claimants(key: string): readonly string[] {
    return [...(this.#claimants.get(key) ?? [])].sort();
  }

  get(cluster: string, key: string): DesiredMirror | undefined {
    return this.#clusters.get(cluster)?.mirrors.get(key);
  }

  keys(): IterableIterator<string> {
    return this.#claimants.keys();
  }

  clusterSummary(): Map<string, { mirrors: number; complete: boolean }> {
    const out = new Map<string, { mirrors: number; complete: boolean }>();
    for (const [cluster, cd] of this.#clusters) out.set(cluster, { mirrors: cd.mirrors.size, complete: cd.complete });
    return out;
  }

  /** Drops every member and export of `cluster`; returns their keys. */
  #dropParts(cluster: string): string[] {
    return [...this.#members.retain(cluster, () => false), ...this.#exports.retain(cluster, () => false)];
  }

  #remove(cluster: string, cd: ClusterDesired, key: string): void {
    this.#version += 1;
    cd.mirrors.delete(key);
    const claimants = this.#claimants.get(key);
    claimants?.delete(cluster);
    if (claimants?.size === 0) this.#claimants.delete(key);
  }
}

/** Whether a held part equals a newly sent one (both plain data, built by the same code). */
function samePart(held: object | undefined, next: object): boolean {
  return held !== undefined && JSON.stringify(held) === JSON.stringify(next);
}
