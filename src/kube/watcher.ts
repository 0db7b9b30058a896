/**
 * A list/watch watcher with its store (a list/watch state machine and a reflector), built on the
 * lean `KubeClient`. It recovers by itself and only `stop()` stops it.
 *
 * States: Listing → Watching; back to Listing on 410 Gone (an ERROR event with code 410
 * or an HTTP 410), and after a failed list. Other watch failures re-watch from the last
 * resourceVersion seen.
 *
 * Guarantees:
 * - the store has one writer, this class; objects in it are shallow-frozen and never
 *   mutated; it is keyed by `objectKey(metadata)`; they are stored without
 *   `metadata.managedFields` and the `dropAnnotations` (`storedForm`, watch-store.ts),
 *   and as the `keep` option makes them (default: that stored form);
 * - after every complete (paginated) list the store is swapped atomically, then `change`
 *   is emitted for every key added, changed (different resourceVersion) or removed
 *   compared with the previous contents, so deletions missed while disconnected surface;
 *   then `listed`. A failed or partial list emits neither and leaves the store as it was:
 *   the last known state is kept while the API is unreachable;
 * - every failure emits `failure` (plain data) and is followed by a jittered exponential
 *   backoff (`WATCH_BACKOFF` by default: at most 4 s, so a cluster is back within
 *   seconds of its API server; see core/backoff.ts for the request rate while it is
 *   down); the backoff resets after a complete list and after a watch that delivered
 *   at least one event (bookmarks count). The one exception is an object of the wrong
 *   kind (`expectedKind`): it is skipped and reported, and the list or watch goes on;
 * - `change` listeners run synchronously, with the store already updated; they must
 *   not throw (a throw is reported as a failure with reason `internal`).
 */
import { EventEmitter } from "eventemitter3";
import { type BackoffOptions, exponentialBackoff } from "../core/backoff.ts";
import { abortableSleep, systemClock } from "../core/clock.ts";
import { type KubeObject, objectKey } from "../core/objects.ts";
import type { KubeClient, Query, WatchEvent } from "./client.ts";
import { KubeApiError } from "./errors.ts";
import { classifyWatchError, type WatchFailure, WatchFault } from "./watch-fault.ts";
import { decodeListPage, isRecord, rawResourceVersion, unexpectedKind, withListKind } from "./watch-items.ts";
import { type StoreChange, storedForm, WatchStore } from "./watch-store.ts";
import { resolveWatcherOptions, type WatcherOptions } from "./watcher-options.ts";

export type { WatchFailure } from "./watch-fault.ts";
export type { WatcherOptions } from "./watcher-options.ts";

export interface WatcherStats {
  /** Complete lists. */
  readonly lists: number;
  readonly watchesStarted: number;
  readonly failures: number;
  /** Relists caused by 410 Gone (during a watch or a paginated list). */
  readonly relistsOnGone: number;
}

export interface WatcherEvents<T> {
  /** After every complete list (the first and every relist), once its `change` events are out. */
  listed: [];
  /** A key's object changed; `previous`/`current` are undefined when it did not / no longer exists. */
  change: [key: string, previous: T | undefined, current: T | undefined];
  failure: [failure: WatchFailure];
  /** A watch was accepted by the server: the store is live again (after a failure, too). */
  watching: [];
}

/** A watch that ended normally this soon without any event counts as a failure, so a broken proxy cannot spin us. */
const EARLY_END_MS = 1_000;

export class Watcher<T extends KubeObject> extends EventEmitter<WatcherEvents<T>> {
  readonly path: string;
  readonly #client: KubeClient;
  #selectors: Query;
  /** The label selector of the last complete list (what the store holds). */
  #listedSelector: string | undefined;
  readonly #pageSize: number;
  readonly #watchTimeout: { readonly min: number; readonly max: number };
  readonly #inactivityTimeoutMs: number;
  readonly #backoff: BackoffOptions;
  readonly #random: () => number;
  readonly #expectedKind: string | undefined;
  readonly #dropAnnotations: readonly string[];
  readonly #keep: ((object: KubeObject, current: T | undefined) => T) | undefined;

  readonly #store = new WatchStore<T>();
  #hasSynced = false;
  #lastListedAt: number | undefined;
  #stats = { lists: 0, watchesStarted: 0, failures: 0, relistsOnGone: 0 };
  #consecutiveFailures = 0;
  /** The resourceVersion to watch from: the last one seen; undefined means a list is needed. */
  #resourceVersion: string | undefined;

  #loop: Promise<void> | undefined;
  #stopped = false;
  readonly #stop = new AbortController();
  /** Aborted by `setLabelSelector`: ends the list or watch in flight, which is then not a failure. */
  #phase = new AbortController();

  /** Throws on invalid options (non-positive sizes, min > max, a path not starting with `/`). */
  constructor(options: WatcherOptions<T>) {
    super();
    const resolved = resolveWatcherOptions(options);
    this.path = resolved.path;
    this.#client = resolved.client;
    this.#selectors = resolved.selectors;
    this.#pageSize = resolved.pageSize;
    this.#watchTimeout = resolved.watchTimeout;
    this.#inactivityTimeoutMs = resolved.inactivityTimeoutMs;
    this.#backoff = resolved.backoff;
    this.#random = resolved.random;
    this.#expectedKind = resolved.expectedKind;
    this.#dropAnnotations = resolved.dropAnnotations;
    this.#keep = resolved.keep;
  }

  /** Starts listing and watching. Idempotent; a stopped watcher stays stopped. */
  start(): void {
    if (this.#loop || this.#stopped) return;
    this.#loop = this.#run();
  }

  /** Aborts the request in flight and any wait; resolves once the loop has exited and no timer is left. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#stop.abort();
    await this.#loop;
  }

  get(key: string): T | undefined {
    return this.#store.get(key);
  }

  values(): IterableIterator<T> {
    return this.#store.values();
  }

  keys(): IterableIterator<string> {
    return this.#store.keys();
  }

  get size(): number {
    return this.#store.size;
  }

  /**
   * Lists and watches with `labelSelector` from now on (undefined: none). The request in
   * flight is ended at once and a list with the new selector replaces the store, its
   * changes emitted as for any relist (objects the selector no longer matches leave
   * with a change to undefined); until then the store holds what the old one matched.
   * A list that was running with the old selector is not used. No-op when unchanged.
   */
  setLabelSelector(labelSelector: string | undefined): void {
    if (this.#selectors.labelSelector === labelSelector) return;
    this.#selectors = { ...this.#selectors, labelSelector };
    this.#resourceVersion = undefined;
    this.#phase.abort();
  }

  /** Whether the store holds what the current label selector matches (its last list used it). */
  get listedWithSelector(): boolean {
    return this.#hasSynced && this.#listedSelector === this.#selectors.labelSelector;
  }

  /** True once the first list completed; stays true (the store then holds the last known state). */
  get hasSynced(): boolean {
    return this.#hasSynced;
  }

  /** `Date.now()` at the end of the last complete list. */
  get lastListedAt(): number | undefined {
    return this.#lastListedAt;
  }

  /** A snapshot of the counters. */
  get stats(): WatcherStats {
    return { ...this.#stats };
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      if (this.#phase.signal.aborted) this.#phase = new AbortController();
      const signal = this.#phase.signal;
      const resourceVersion = this.#resourceVersion;
      const phase = resourceVersion === undefined ? "list" : "watch";
      try {
        if (resourceVersion === undefined) {
          const listed = await this.#list(signal);
          // A selector set during the list: that list is not the store's; list again.
          if (!signal.aborted) this.#resourceVersion = listed;
          this.#consecutiveFailures = 0;
        } else {
          await this.#watch(resourceVersion, signal);
        }
      } catch (error) {
        if (this.#stopped) break;
        if (signal.aborted) continue; // a new selector ended it: no failure, list at once
        const fault = classifyWatchError(error);
        if (fault.gone) {
          this.#resourceVersion = undefined;
          this.#stats.relistsOnGone++;
          // 410 is an answer, not an outage: the server is up (often just back, its watch
          // cache reset). Relist at the first backoff step instead of the outage's bound;
          // if the list fails, the backoff grows again from there.
          this.#consecutiveFailures = 0;
        }
        this.#consecutiveFailures++;
        this.#stats.failures++;
        const attempt = this.#consecutiveFailures;
        const retryInMs = Math.max(
          Math.round(exponentialBackoff(this.#backoff, attempt - 1, this.#random)),
          fault.retryAfterMs,
        );
        try {
          this.emit("failure", { phase, reason: fault.reason, message: fault.message, attempt, retryInMs });
        } catch {
          // A failure listener threw; the loop must go on.
        }
        // A new selector ends the wait: its list is due now.
        await abortableSleep(systemClock, retryInMs, AbortSignal.any([this.#stop.signal, signal]));
      }
    }
  }

  /** One complete paginated list, then the atomic swap. Resolves with the list's resourceVersion. */
  async #list(signal: AbortSignal): Promise<string> {
    const selectors = this.#selectors;
    const fresh = new Map<string, T>();
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      let page: unknown;
      try {
        page = await this.#client.request<unknown>("GET", this.path, {
          query: { ...selectors, limit: this.#pageSize, continue: continueToken },
          signal: AbortSignal.any([this.#stop.signal, signal]),
        });
      } catch (error) {
        // The continue token expired (its snapshot was compacted away): the next list
        // starts again from a fresh snapshot, page by page. Not one unpaginated request, as
        // client-go's pager does: its answer is as large as the whole collection, which a
        // large remote makes larger than the client's body cap, and it would fail at every
        // try; a fresh paginated list finishes within the compaction window (5 min by
        // default) unless its pages take longer than that, far beyond any list that fits.
        if (error instanceof KubeApiError && error.status === 410 && continueToken !== undefined) {
          throw new WatchFault("gone", `list continue token expired, relisting: ${error.message}`, {
            gone: true,
            cause: error,
          });
        }
        throw error;
      }
      const decoded = decodeListPage(page, this.path);
      for (const item of decoded.items) {
        if (this.#wrongKind(item, "list", "list item")) continue;
        const filled = withListKind(this.#accept(item, "list item"), decoded);
        fresh.set(objectKey(filled.metadata), Object.freeze(filled));
      }
      resourceVersion = decoded.resourceVersion;
      continueToken = decoded.continueToken;
    } while (continueToken !== undefined);
    if (resourceVersion === undefined || resourceVersion === "") {
      throw new WatchFault("decode", `GET ${this.path}: list answer has no resourceVersion`);
    }
    if (this.#stopped || signal.aborted) return resourceVersion;

    this.#listedSelector = typeof selectors.labelSelector === "string" ? selectors.labelSelector : undefined;
    const changes = this.#store.replace(fresh);
    this.#hasSynced = true;
    this.#lastListedAt = Date.now();
    this.#stats.lists++;
    for (const change of changes) this.#emitChange(change);
    this.emit("listed");
    return resourceVersion;
  }

  /**
   * One watch from `resourceVersion`; every event moves `#resourceVersion` forward, so
   * the next watch starts from the last one seen. Resolves when the server ends the
   * stream normally; throws on any failure.
   */
  async #watch(resourceVersion: string, signal: AbortSignal): Promise<void> {
    let delivered = false;
    let inactive = false;
    let streamError: WatchFault | undefined;
    const abort = new AbortController();
    const onStop = (): void => abort.abort();
    this.#stop.signal.addEventListener("abort", onStop, { once: true });
    signal.addEventListener("abort", onStop, { once: true });
    const watchdog = setTimeout(() => {
      inactive = true;
      abort.abort();
    }, this.#inactivityTimeoutMs);
    const span = this.#watchTimeout.max - this.#watchTimeout.min + 1;
    const timeoutSeconds = this.#watchTimeout.min + Math.min(span - 1, Math.floor(this.#random() * span));
    const startedAt = Date.now();
    this.#stats.watchesStarted++;

    const onEvent = (event: WatchEvent): void => {
      if (abort.signal.aborted) return;
      if (event.type === "ERROR") {
        const code = event.object["code"];
        const message = typeof event.object["message"] === "string" ? event.object["message"] : "";
        streamError =
          code === 410
            ? new WatchFault("gone", `watch ${this.path} from ${this.#resourceVersion}: 410 Gone: ${message}`, {
                gone: true,
              })
            : new WatchFault(
                typeof code === "number" ? `http-${code}` : "watch-error",
                `watch ${this.path}: ERROR event ${String(code)}: ${message}`,
              );
        abort.abort();
        return;
      }
      delivered = true;
      // A bookmark, or an object of the wrong kind (skipped), still moves the resourceVersion on.
      if (event.type === "BOOKMARK" || this.#wrongKind(event.object, "watch", `${event.type} event`)) {
        this.#resourceVersion = rawResourceVersion(event.object) ?? this.#resourceVersion;
        return;
      }
      const object = Object.freeze(this.#accept(event.object, `${event.type} event`));
      if (object.metadata.resourceVersion) this.#resourceVersion = object.metadata.resourceVersion;
      const change =
        event.type === "DELETED" ? this.#store.delete(objectKey(object.metadata)) : this.#store.set(object);
      if (change) this.#emitChange(change);
    };

    try {
      await this.#client.watch(
        this.path,
        { ...this.#selectors, resourceVersion, allowWatchBookmarks: true, timeoutSeconds },
        { onEvent, onBytes: () => watchdog.refresh(), onOpen: () => this.emit("watching") },
        abort.signal,
      );
    } catch (error) {
      if (streamError) throw streamError;
      if (inactive && !this.#stopped) {
        throw new WatchFault(
          "watch-inactive",
          `watch ${this.path}: no bytes for ${this.#inactivityTimeoutMs} ms, reconnecting`,
          { cause: error },
        );
      }
      throw error;
    } finally {
      clearTimeout(watchdog);
      this.#stop.signal.removeEventListener("abort", onStop);
      signal.removeEventListener("abort", onStop);
      if (delivered) this.#consecutiveFailures = 0;
    }
    if (streamError) throw streamError;
    if (!delivered && Date.now() - startedAt < EARLY_END_MS) {
      throw new WatchFault("watch-ended-early", `watch ${this.path}: stream ended at once without any event`);
    }
  }

  /**
   * True when `value` carries a `kind` other than the expected one; the object is then
   * skipped and a `wrong-kind` failure emitted (no backoff: nothing needs retrying).
   */
  #wrongKind(value: unknown, phase: "list" | "watch", what: string): boolean {
    const found = unexpectedKind(value, this.#expectedKind);
    if (!found) return false;
    const { kind, name } = found;
    this.#stats.failures++;
    try {
      this.emit("failure", {
        phase,
        reason: "wrong-kind",
        message: `${this.path}: ${what} ${name} has kind ${JSON.stringify(kind)}, expected ${this.#expectedKind}; skipped`,
        attempt: this.#consecutiveFailures + 1,
        retryInMs: 0,
      });
    } catch {
      // A failure listener threw; the stream must go on.
    }
    return true;
  }

  /**
   * Checks the minimum an object needs to be stored (metadata.name); throws a
   * `decode`-class fault otherwise. Returns the object in its stored form (`storedForm`),
   * then as `keep` makes it.
   */
  #accept(value: unknown, what: string): T {
    if (isRecord(value) && isRecord(value["metadata"]) && typeof value["metadata"]["name"] === "string") {
      const stored = storedForm(value as unknown as T, this.#dropAnnotations);
      return this.#keep ? this.#keep(stored, this.#store.get(objectKey(stored.metadata))) : stored;
    }
    throw new WatchFault("invalid-object", `${this.path}: ${what} has no metadata.name`);
  }

  #emitChange([key, previous, current]: StoreChange<T>): void {
    this.emit("change", key, previous, current);
  }
}
