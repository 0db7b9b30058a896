/**
 * What this writer wrote or deleted that its watch has not delivered yet. Reconcile reads
 * the local objects through `observed()`, so a key reconciled again before the watch
 * catches up neither writes a second time nor deletes a second time.
 *
 * Rules:
 * - a written object wins over the watch's copy until the watch shows its resourceVersion
 *   or a newer one;
 * - a deletion (tombstone) wins until the watch shows the object gone, or shows an object
 *   that is not the deleted one (another uid, or a newer resourceVersion: recreated);
 *   a tombstone answers "absent", so the key is not planned for a second DELETE;
 * - bounded: an entry expires `ttlMs` after it was made (default MUTATION_TTL_MS: the
 *   watch delivers in well under a second, so an entry that old means the watch lost it,
 *   and the watch's copy, or the next relist, is the truth again); at most `maxEntries`
 *   entries (the oldest go first). An expired entry only costs a redundant request (a
 *   409 Conflict or a 404 on a delete), never a wrong write.
 */
import type { Clock } from "../../src/core/clock.ts";
import type { MirrorObjectKind } from "../../src/core/mirror-kinds.ts";
import type { KubeObject } from "../../src/core/objects.ts";

/** Entries are keyed by kind and object key (a slice by its own key, not its mirror's). */
export type MirrorKind = MirrorObjectKind;

/** Entries live this long at most: a few seconds past when the watch should have caught up. */
export const MUTATION_TTL_MS = 15_000;
/** At most this many entries (writes not yet seen by the watch) are held. */
export const MUTATION_MAX_ENTRIES = 20_000;

/** Compares two resourceVersions of the same object; etcd-backed ones are integers. */
export function newer(a: string | undefined, b: string | undefined): boolean {
  if (!a || !b || !/^\d+$/.test(a) || !/^\d+$/.test(b)) return false;
  return BigInt(a) > BigInt(b);
}

type Entry =
  | { readonly kind: "written"; readonly object: KubeObject; readonly at: number }
  | {
      readonly kind: "deleted";
      /** The deleted object's uid and resourceVersion, as observed when the DELETE was planned. */
      readonly uid: string | undefined;
      readonly resourceVersion: string | undefined;
      readonly at: number;
    };

export class MutationCache {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  /** `Kind/namespace/name` → entry; insertion order is age order (an update re-inserts). */
  readonly #entries = new Map<string, Entry>();

  constructor(clock: Clock, options: { ttlMs?: number; maxEntries?: number } = {}) {
    this.#clock = clock;
    this.#ttlMs = options.ttlMs ?? MUTATION_TTL_MS;
    this.#maxEntries = options.maxEntries ?? MUTATION_MAX_ENTRIES;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The API server answered a create, an update or an adoption GET with `object`. */
  written(kind: MirrorKind, key: string, object: KubeObject): void {
    this.#set(`${kind}/${key}`, { kind: "written", object, at: this.#clock.now() });
  }

  /** The API server accepted the DELETE of `deleted` (the object as observed before). */
  deleted(kind: MirrorKind, key: string, deleted: KubeObject | undefined): void {
    this.#set(`${kind}/${key}`, {
      kind: "deleted",
      uid: deleted?.metadata.uid,
      resourceVersion: deleted?.metadata.resourceVersion,
      at: this.#clock.now(),
    });
  }

  /** The local object as reconcile must see it: the watch's copy merged with our own writes. */
  observed<T extends KubeObject>(kind: MirrorKind, key: string, fromWatch: T | undefined): T | undefined {
    this.sweep();
    const entry = this.#entries.get(`${kind}/${key}`);
    if (!entry) return fromWatch;
    if (entry.kind === "written") {
      if (!fromWatch || newer(entry.object.metadata.resourceVersion, fromWatch.metadata.resourceVersion))
        return entry.object as T;
      return fromWatch;
    }
    return fromWatch && this.#notTheDeleted(entry, fromWatch) ? fromWatch : undefined;
  }

  /** The watch (or a relist) delivered `current` for the key: entries it caught up with go. */
  watched(kind: MirrorKind, key: string, current: KubeObject | undefined): void {
    const id = `${kind}/${key}`;
    const entry = this.#entries.get(id);
    if (!entry) return;
    const caughtUp =
      !current ||
      (entry.kind === "written"
        ? !newer(entry.object.metadata.resourceVersion, current.metadata.resourceVersion)
        : this.#notTheDeleted(entry, current));
    if (caughtUp) this.#entries.delete(id);
  }

  /** Drops every entry older than the TTL. Called on every read, on each relist and periodically. */
  sweep(): void {
    const oldest = this.#clock.now() - this.#ttlMs;
    for (const [id, entry] of this.#entries) {
      if (entry.at > oldest) break; // age order: the rest are younger
      this.#entries.delete(id);
    }
  }

  #notTheDeleted(entry: Entry & { kind: "deleted" }, current: KubeObject): boolean {
    if (entry.uid !== undefined && current.metadata.uid !== undefined && current.metadata.uid !== entry.uid)
      return true;
    return newer(current.metadata.resourceVersion, entry.resourceVersion);
  }

  #set(id: string, entry: Entry): void {
    this.#entries.delete(id);
    this.#entries.set(id, entry);
    this.sweep();
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
  }
}
