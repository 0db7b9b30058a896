/**
 * Sets of keys grouped under a key (a multimap): the writer's indexes of objects by the
 * object they belong to. Invariant: no group is ever empty (an emptied group is
 * forgotten), so memory follows the keys held.
 */
export class KeySets {
  readonly #groups = new Map<string, Set<string>>();

  add(group: string, key: string): void {
    let keys = this.#groups.get(group);
    if (!keys) {
      keys = new Set();
      this.#groups.set(group, keys);
    }
    keys.add(key);
  }

  delete(group: string, key: string): void {
    const keys = this.#groups.get(group);
    keys?.delete(key);
    if (keys?.size === 0) this.#groups.delete(group);
  }

  /** The keys of `group`, in insertion order (none: empty). */
  of(group: string): ReadonlySet<string> {
    return this.#groups.get(group) ?? EMPTY;
  }
}

const EMPTY: ReadonlySet<string> = new Set();
