/**
 * The watcher's store: objects by `objectKey(metadata)`, shallow-frozen, one writer (the
 * watcher). A complete list replaces it atomically, and the replacement says which keys
 * changed, so deletions missed while disconnected surface.
 */
import { type KubeObject, type ObjectMeta, objectKey } from "../core/objects.ts";

/** kubectl's copy of the whole object as last applied (client-side apply), in an annotation. */
export const LAST_APPLIED_CONFIGURATION = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * The form in which a watched object is stored: the object as the API server sent it,
 * less what no code of fleet-mirror reads, so a store of thousands of objects holds only
 * what is used:
 * - `metadata.managedFields` always: server-side-apply bookkeeping, often as large as the
 *   rest of the object, read nowhere. The local writer updates mirrors from its stored
 *   copies; an update (PUT) that omits `managedFields` leaves the server's own in place
 *   (only an explicit list replaces them), so nothing about the mirrors changes.
 * - the annotations named in `dropAnnotations` (the watcher's option), for a store whose
 *   objects are never written back: the remote actor drops
 *   `kubectl.kubernetes.io/last-applied-configuration` (a JSON copy of the whole object)
 *   from remote Services, of which it reads only the gateway annotations. The local
 *   writer's stores drop none: a mirror's foreign annotations are kept on update.
 * Every other field is kept: spec, status (a gateway's load-balancer ingress), labels
 * and the other annotations are read, and dropping a field that some code reads later
 * would be a silent defect. Returns `object` itself when there is nothing to drop.
 */
export function storedForm<T extends KubeObject>(object: T, dropAnnotations: readonly string[] = []): T {
  const { metadata } = object;
  const annotations = metadata.annotations;
  const dropsAnnotation = annotations !== undefined && dropAnnotations.some((a) => a in annotations);
  if (!("managedFields" in metadata) && !dropsAnnotation) return object;
  const kept: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(metadata)) if (field !== "managedFields") kept[field] = value;
  if (dropsAnnotation) {
    const rest: Record<string, string> = {};
    for (const [key, value] of Object.entries(annotations)) if (!dropAnnotations.includes(key)) rest[key] = value;
    kept["annotations"] = rest;
  }
  return { ...object, metadata: kept as ObjectMeta };
}

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
