/**
 * The local writer's stored objects with their repeated strings shared. At 10 000 mirrors the writer holds two watched objects and
 * one desired mirror per mirror, each parsed or structured-cloned on its own, so every
 * repeated value (`TCP`, `IPv4`, `fleet-mirror`, a cluster's name, a gateway's address,
 * the label values every mirror of a cluster shares) is a string of its own per object.
 * `SharedStrings.compact` replaces each such string of a JSON-like value by one
 * canonical copy.
 *
 * Invariants:
 * - the result equals its input: the same keys in the same order, the same values
 *   (strings are equal, only their identity changes), so `JSON.stringify` of it is the
 *   same text as before. Reads, compares and every body built from a stored copy (an update
 *   spreads the observed object) are unchanged: nothing is dropped;
 * - values under `UNSHARED_FIELDS` (unique per object version) are kept as they are:
 *   sharing them saves nothing and would only fill the table;
 * - bounded: at most `maxEntries` strings are held; when full the table starts again
 *   empty (strings already shared stay shared in the objects that hold them), so a
 *   long-running writer whose names churn never holds more than that.
 */

/** Unique per object or per version: never worth a table entry. */
const UNSHARED_FIELDS: ReadonlySet<string> = new Set(["uid", "resourceVersion", "creationTimestamp"]);

/** Default bound on the table: a few times the distinct strings of 10 000 mirrors. */
export const SHARED_STRINGS_MAX_ENTRIES = 100_000;

/** Longer strings are rarely repeated (a foreign annotation, a JSON copy): kept as they are. */
const MAX_SHARED_LENGTH = 256;

export class SharedStrings {
  readonly #maxEntries: number;
  #table = new Map<string, string>();

  constructor(maxEntries = SHARED_STRINGS_MAX_ENTRIES) {
    this.#maxEntries = maxEntries;
  }

  /** Strings held now. */
  get size(): number {
    return this.#table.size;
  }

  /** The canonical copy of `value` (equal to it). */
  share(value: string): string {
    if (value.length > MAX_SHARED_LENGTH) return value;
    const held = this.#table.get(value);
    if (held !== undefined) return held;
    if (this.#table.size >= this.#maxEntries) this.#table = new Map();
    this.#table.set(value, value);
    return value;
  }

  /**
   * `value` with its strings shared: each string of a plain object or array (at any
   * depth) is replaced by its canonical copy, in place, so V8 keeps the layout the
   * parser gave the object (a copy built key by key spills properties past the fourth
   * into a separate array: measured, it cost more than the strings saved). A frozen
   * object or array is copied instead (keys in their order). Equal values either way:
   * no reader can tell. Returns `value`, or its copy when it was frozen.
   */
  compact<T>(value: T): T {
    return this.#compact(value, undefined) as T;
  }

  #compact(value: unknown, field: string | undefined): unknown {
    if (typeof value === "string") return field !== undefined && UNSHARED_FIELDS.has(field) ? value : this.share(value);
    if (value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) {
      const array: unknown[] = Object.isFrozen(value) ? [...value] : value;
      for (let i = 0; i < array.length; i++) array[i] = this.#compact(array[i], undefined);
      return array;
    }
    const object: Record<string, unknown> = Object.isFrozen(value) ? { ...value } : (value as Record<string, unknown>);
    for (const key of Object.keys(object)) object[key] = this.#compact(object[key], key);
    return object;
  }
}
