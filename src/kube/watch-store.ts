/**
 * The watcher's store: objects by `objectKey(metadata)`, shallow-frozen, one writer (the
 * watcher). A complete list replaces it atomically, and the replacement says which keys
 * changed, so deletions missed while disconnected surface.
 */
import { type KubeObject, objectKey } from "../core/objects.ts";

/** One key's change: `previous`/`current` undefined when it did not / no longer exists. */
export type StoreChange<T> = readonly [key: string, previous: T | undefined, current: T | undefined];

export class WatchStore<T extends KubeObject> {
  #objects = new Map<string, T>();

  get(key: string): T | undefined {
    return this.#objects.get(key);
  }

  values(): IterableIterator<T> {
    return this.#objects.values();
  }

  keys(): IterableIterator<string> {
    return this.#objects.keys();
  }

  get size(): number {
    return this.#objects.size;
  }

  /** Stores `object` (frozen by the caller); returns what the key held before. */
  set(object: T): StoreChange<T> {
    const key = objectKey(object.metadata);
    const previous = this.#objects.get(key);
    this.#objects.set(key, object);
    return [key, previous, object];
  }

  /** Removes `key`; undefined when there was nothing to remove. */
  delete(key: string): StoreChange<T> | undefined {
    const previous = this.#objects.get(key);
    if (previous === undefined) return undefined;
    this.#objects.delete(key);
    return [key, previous, undefined];
  }

  /**
   * Swaps in `fresh` (a complete list) and returns every key added, changed (different
   * resourceVersion) or removed compared with the previous contents: additions and
   * changes in `fresh`'s order, then removals.
   */
  replace(fresh: Map<string, T>): StoreChange<T>[] {
    const previous = this.#objects;
    this.#objects = fresh;
    const changes: StoreChange<T>[] = [];
    for (const [key, current] of fresh) {
      const before = previous.get(key);
      if (before === undefined || before.metadata.resourceVersion !== current.metadata.resourceVersion) {
        changes.push([key, before, current]);
      }
    }
    for (const [key, before] of previous) {
      if (!fresh.has(key)) changes.push([key, before, undefined]);
    }
    return changes;
  }
}
