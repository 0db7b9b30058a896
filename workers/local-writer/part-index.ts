/**
 * The parts that clusters contribute to objects they share (members of fleet-wide
 * Services, SPEC §11; MCS exports, SPEC §12), by cluster and by the shared object's key.
 * Pure data structure, no I/O; one writer, the desired store.
 *
 * Invariant: `clustersOf(key)` names exactly the clusters holding a part of `key`.
 */
export class PartIndex<T> {
  /** cluster → key → its part */
  readonly #byCluster = new Map<string, Map<string, T>>();
  /** key → clusters holding a part of it */
  readonly #byKey = new Map<string, Set<string>>();

  set(cluster: string, key: string, part: T): void {
    let parts = this.#byCluster.get(cluster);
    if (!parts) {
      parts = new Map();
      this.#byCluster.set(cluster, parts);
    }
    parts.set(key, part);
    let clusters = this.#byKey.get(key);
    if (!clusters) {
      clusters = new Set();
      this.#byKey.set(key, clusters);
    }
    clusters.add(cluster);
  }

  /** Removes `cluster`'s part of `key`; whether there was one. */
  delete(cluster: string, key: string): boolean {
    const parts = this.#byCluster.get(cluster);
    if (!parts?.delete(key)) return false;
    if (parts.size === 0) this.#byCluster.delete(cluster);
    const clusters = this.#byKey.get(key);
    clusters?.delete(cluster);
    if (clusters?.size === 0) this.#byKey.delete(key);
    return true;
  }

  /** Removes every part of `cluster` whose key `keep` does not hold; returns their keys. */
  retain(cluster: string, keep: (key: string) => boolean): string[] {
    const removed = [...(this.#byCluster.get(cluster)?.keys() ?? [])].filter((key) => !keep(key));
    for (const key of removed) this.delete(cluster, key);
    return removed;
  }

  /** `cluster`'s part of `key`, if any. */
  get(cluster: string, key: string): T | undefined {
    return this.#byCluster.get(cluster)?.get(key);
  }

  /** The keys `cluster` holds a part of. */
  keysOf(cluster: string): IterableIterator<string> {
    return this.#byCluster.get(cluster)?.keys() ?? new Map<string, T>().keys();
  }

  /** The parts of `key`, by cluster. */
  of(key: string): Map<string, T> {
    const out = new Map<string, T>();
    for (const cluster of this.#byKey.get(key) ?? []) {
      const part = this.#byCluster.get(cluster)?.get(key);
      if (part !== undefined) out.set(cluster, part);
    }
    return out;
  }

  /** Keys some cluster holds a part of. */
  keys(): IterableIterator<string> {
    return this.#byKey.keys();
  }
}
