/**
 * A list/watch watcher with its store (kube-rs `watcher` + `reflector`), built on the
 * lean `KubeClient`. It recovers by itself and only `stop()` stops it.
 *
 * States: Listing → Watching; back to Listing on 410 Gone (an ERROR event with code 410
 * or an HTTP 410), and after a failed list. Other watch failures re-watch from the last
 * resourceVersion seen.
 *
 * Guarantees:
 * - the store has one writer, this class; objects in it are shallow-frozen and never
 *   mutated; it is keyed by `objectKey(metadata)`;
 * - after every complete (paginated) list the store is swapped atomically, then `change`
 *   is emitted for every key added, changed (different resourceVersion) or removed
 *   compared with the previous contents, so deletions missed while disconnected surface;
 *   then `listed`. A failed or partial list emits neither and leaves the store as it was:
 *   the last known state is kept while the API is unreachable;
 * - every failure emits `failure` (plain data) and is followed by a jittered exponential
 *   backoff; the backoff resets after a complete list and after a watch that delivered
 *   at least one event (bookmarks count). The one exception is an object of the wrong
 *   kind (`expectedKind`): it is skipped and reported, and the list or watch goes on;
 * - `change` listeners run synchronously, with the store already updated; they must
 *   not throw (a throw is reported as a failure with reason `internal`).
 */
import { EventEmitter } from "eventemitter3";
import { type BackoffOptions, exponentialBackoff } from "../core/backoff.ts";
import { type KubeObject, objectKey } from "../core/objects.ts";
import { KubeApiError, type KubeClient, KubeTransportError, type Query, type WatchEvent } from "./client.ts";

export interface WatcherOptions {
  readonly client: KubeClient;
  /** A collection path, e.g. `/api/v1/services` or `/api/v1/namespaces/ns/secrets`. */
  readonly path: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /** Objects per list page (`limit`). Default 500. */
  readonly pageSize?: number;
  /**
   * The watch's `timeoutSeconds`, drawn at random in [min, max] for every watch so a
   * fleet of watchers does not reconnect in lockstep. Default 240..480.
   */
  readonly watchTimeoutSeconds?: { readonly min: number; readonly max: number };
  /** A watch that receives no byte for this long is dropped and re-opened. Default 150 000 ms (bookmarks arrive about every minute). */
  readonly inactivityTimeoutMs?: number;
  /**
   * Backoff after consecutive failures: doubles from `initialMs` (default 250) up to
   * `maxMs` (default 30 000), jittered ±50 % (capped at `maxMs`); a Retry-After from the
   * server is a lower bound.
   */
  readonly backoff?: { readonly initialMs?: number; readonly maxMs?: number };
  /** Source of randomness in [0, 1), for jitter and watch timeouts. Default `Math.random`. */
  readonly random?: () => number;
  /**
   * The `kind` every object must have, e.g. `Service`. A list item or watch event whose
   * `kind` is set and differs is rejected: not stored, reported as a `failure` with reason
   * `wrong-kind`, and the list or watch goes on (a watch moves past its resourceVersion).
   * Objects without `kind` (list items usually) are accepted. Default: no check.
   */
  readonly expectedKind?: string;
}

/** What a `failure` event carries; plain data, safe to post across threads. */
export interface WatchFailure {
  readonly phase: "list" | "watch";
  /**
   * Short and metric-friendly: a transport code (`ECONNREFUSED`, `ECONNRESET`,
   * `ETIMEDOUT`, ...), `http-<status>`, `gone`, `watch-inactive`, `watch-ended-early`,
   * `decode`, `invalid-object`, `wrong-kind` (an object was skipped, `retryInMs` 0: the
   * list or watch went on), `internal`.
   */
  readonly reason: string;
  readonly message: string;
  /** Consecutive failures so far, this one included (1 for the first). */
  readonly attempt: number;
  /** How long the watcher waits before its next attempt. */
  readonly retryInMs: number;
}

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

/** OpenSSL / Node codes of certificate and handshake failures; their messages say "TLS" so a status row names them clearly. */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|HOSTNAME_MISMATCH|EPROTO$)/;

/** A failure already classified, thrown inside the loop. */
class WatchFault extends Error {
  readonly reason: string;
  readonly retryAfterMs: number;
  readonly gone: boolean;

  constructor(
    reason: string,
    message: string,
    options: { gone?: boolean; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
    this.gone = options.gone ?? false;
    this.retryAfterMs = options.retryAfterMs ?? 0;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`watcher option ${name} must be a positive number, got ${value}`);
  return value;
}

export class Watcher<T extends KubeObject> extends EventEmitter<WatcherEvents<T>> {
  readonly path: string;
  readonly #client: KubeClient;
  readonly #selectors: Query;
  readonly #pageSize: number;
  readonly #watchTimeout: { readonly min: number; readonly max: number };
  readonly #inactivityTimeoutMs: number;
  readonly #backoff: BackoffOptions;
  readonly #random: () => number;
  readonly #expectedKind: string | undefined;

  #store = new Map<string, T>();
  #hasSynced = false;
  #lastListedAt: number | undefined;
  #stats = { lists: 0, watchesStarted: 0, failures: 0, relistsOnGone: 0 };
  #consecutiveFailures = 0;
  /** The resourceVersion to watch from: the last one seen; undefined means a list is needed. */
  #resourceVersion: string | undefined;
  /** A paginated list hit 410 (continue token expired): the next list is one unpaginated request, as client-go does. */
  #unpaginatedNext = false;

  #loop: Promise<void> | undefined;
  #stopped = false;
  readonly #stop = new AbortController();

  /** Throws on invalid options (non-positive sizes, min > max, a path not starting with `/`). */
  constructor(options: WatcherOptions) {
    super();
    if (!options.path.startsWith("/")) throw new Error(`watcher path must start with "/": ${options.path}`);
    this.path = options.path;
    this.#client = options.client;
    this.#selectors = { labelSelector: options.labelSelector, fieldSelector: options.fieldSelector };
    this.#pageSize = Math.floor(positive("pageSize", options.pageSize ?? 500));
    const min = positive("watchTimeoutSeconds.min", options.watchTimeoutSeconds?.min ?? 240);
    const max = positive("watchTimeoutSeconds.max", options.watchTimeoutSeconds?.max ?? 480);
    if (min > max) throw new Error(`watcher option watchTimeoutSeconds: min ${min} > max ${max}`);
    this.#watchTimeout = { min: Math.floor(min), max: Math.floor(max) };
    this.#inactivityTimeoutMs = positive("inactivityTimeoutMs", options.inactivityTimeoutMs ?? 150_000);
    const initialMs = positive("backoff.initialMs", options.backoff?.initialMs ?? 250);
    const maxMs = positive("backoff.maxMs", options.backoff?.maxMs ?? 30_000);
    this.#backoff = { initialMs, maxMs: Math.max(initialMs, maxMs), jitter: 0.5 };
    this.#random = options.random ?? Math.random;
    this.#expectedKind = options.expectedKind;
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
      const resourceVersion = this.#resourceVersion;
      const phase = resourceVersion === undefined ? "list" : "watch";
      try {
        if (resourceVersion === undefined) {
          this.#resourceVersion = await this.#list();
          this.#consecutiveFailures = 0;
        } else {
          await this.#watch(resourceVersion);
        }
      } catch (error) {
        if (this.#stopped) break;
        const fault = this.#classify(error);
        if (fault.gone) {
          this.#resourceVersion = undefined;
          this.#stats.relistsOnGone++;
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
        await this.#sleep(retryInMs);
      }
    }
  }

  /** One complete paginated list, then the atomic swap. Resolves with the list's resourceVersion. */
  async #list(): Promise<string> {
    const fresh = new Map<string, T>();
    const paginated = !this.#unpaginatedNext;
    let continueToken: string | undefined;
    let resourceVersion: string | undefined;
    do {
      let page: unknown;
      try {
        page = await this.#client.request<unknown>("GET", this.path, {
          query: { ...this.#selectors, limit: paginated ? this.#pageSize : undefined, continue: continueToken },
          signal: this.#stop.signal,
        });
      } catch (error) {
        if (error instanceof KubeApiError && error.status === 410 && continueToken !== undefined) {
          this.#unpaginatedNext = true;
          throw new WatchFault("gone", `list continue token expired, relisting: ${error.message}`, {
            gone: true,
            cause: error,
          });
        }
        throw error;
      }
      const items = isRecord(page) ? page["items"] : undefined;
      const meta = isRecord(page) ? page["metadata"] : undefined;
      if (!isRecord(page) || !Array.isArray(items) || !isRecord(meta)) {
        throw new WatchFault("decode", `GET ${this.path}: list answer has no items or metadata`);
      }
      const apiVersion = typeof page["apiVersion"] === "string" ? page["apiVersion"] : undefined;
      const kind = typeof page["kind"] === "string" ? page["kind"].replace(/List$/, "") : undefined;
      for (const item of items) {
        if (this.#wrongKind(item, "list", "list item")) continue;
        const object = this.#accept(item, "list item");
        // List items come without apiVersion/kind; fill them in so they look like watch objects.
        const filled = {
          ...(apiVersion !== undefined && object.apiVersion === undefined ? { apiVersion } : {}),
          ...(kind !== undefined && object.kind === undefined ? { kind } : {}),
          ...object,
        } as T;
        fresh.set(objectKey(filled.metadata), Object.freeze(filled));
      }
      resourceVersion = typeof meta["resourceVersion"] === "string" ? meta["resourceVersion"] : undefined;
      const next = meta["continue"];
      continueToken = typeof next === "string" && next !== "" ? next : undefined;
    } while (continueToken !== undefined);
    if (resourceVersion === undefined || resourceVersion === "") {
      throw new WatchFault("decode", `GET ${this.path}: list answer has no resourceVersion`);
    }
    if (this.#stopped) return resourceVersion;

    this.#unpaginatedNext = false;
    const previous = this.#store;
    this.#store = fresh;
    this.#hasSynced = true;
    this.#lastListedAt = Date.now();
    this.#stats.lists++;
    for (const [key, current] of fresh) {
      const before = previous.get(key);
      if (before === undefined || before.metadata.resourceVersion !== current.metadata.resourceVersion) {
        this.emit("change", key, before, current);
      }
    }
    for (const [key, before] of previous) {
      if (!fresh.has(key)) this.emit("change", key, before, undefined);
    }
    this.emit("listed");
    return resourceVersion;
  }

  /**
   * One watch from `resourceVersion`; every event moves `#resourceVersion` forward, so
   * the next watch starts from the last one seen. Resolves when the server ends the
   * stream normally; throws on any failure.
   */
  async #watch(resourceVersion: string): Promise<void> {
    let delivered = false;
    let inactive = false;
    let streamError: WatchFault | undefined;
    const abort = new AbortController();
    const onStop = (): void => abort.abort();
    this.#stop.signal.addEventListener("abort", onStop, { once: true });
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
      if (event.type === "BOOKMARK") {
        const meta = event.object["metadata"];
        const rv = isRecord(meta) ? meta["resourceVersion"] : undefined;
        if (typeof rv === "string" && rv !== "") this.#resourceVersion = rv;
        return;
      }
      if (this.#wrongKind(event.object, "watch", `${event.type} event`)) {
        const meta = event.object["metadata"];
        const rv = isRecord(meta) ? meta["resourceVersion"] : undefined;
        if (typeof rv === "string" && rv !== "") this.#resourceVersion = rv;
        return;
      }
      const object = Object.freeze(this.#accept(event.object, `${event.type} event`));
      const key = objectKey(object.metadata);
      const previous = this.#store.get(key);
      if (object.metadata.resourceVersion) this.#resourceVersion = object.metadata.resourceVersion;
      if (event.type === "DELETED") {
        if (previous === undefined) return;
        this.#store.delete(key);
        this.emit("change", key, previous, undefined);
      } else {
        this.#store.set(key, object);
        this.emit("change", key, previous, object);
      }
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
    if (this.#expectedKind === undefined || !isRecord(value)) return false;
    const kind = value["kind"];
    if (typeof kind !== "string" || kind === "" || kind === this.#expectedKind) return false;
    const meta = value["metadata"];
    const name = isRecord(meta) ? `${String(meta["namespace"] ?? "")}/${String(meta["name"] ?? "?")}` : "?";
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

  /** Checks the minimum an object needs to be stored (metadata.name); throws a `decode`-class fault otherwise. */
  #accept(value: unknown, what: string): T {
    if (isRecord(value) && isRecord(value["metadata"]) && typeof value["metadata"]["name"] === "string") {
      return value as unknown as T;
    }
    throw new WatchFault("invalid-object", `${this.path}: ${what} has no metadata.name`);
  }

  #classify(error: unknown): WatchFault {
    if (error instanceof WatchFault) return error;
    if (error instanceof KubeApiError) {
      return new WatchFault(error.status === 410 ? "gone" : `http-${error.status}`, error.message, {
        gone: error.status === 410,
        retryAfterMs: (error.retryAfterSeconds ?? 0) * 1000,
        cause: error,
      });
    }
    if (error instanceof KubeTransportError) {
      const message = TLS_CODE.test(error.code)
        ? `TLS: the server's certificate is not trusted with the kubeconfig's CA, or the TLS handshake failed (${error.code}): ${error.message}`
        : error.message;
      return new WatchFault(error.code === "DECODE" ? "decode" : error.code, message, { cause: error });
    }
    return new WatchFault("internal", error instanceof Error ? error.message : String(error), { cause: error });
  }

  /** Waits `ms`, or less if stopped. Leaves no timer behind. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.#stopped) {
        resolve();
        return;
      }
      const done = (): void => {
        clearTimeout(timer);
        this.#stop.signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#stop.signal.addEventListener("abort", done, { once: true });
    });
  }
}
