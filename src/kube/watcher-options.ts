/** The watcher's options, their defaults and their validation. */
import { type BackoffOptions, WATCH_BACKOFF } from "../core/backoff.ts";
import type { KubeObject } from "../core/objects.ts";
import type { KubeClient, Query } from "./client.ts";

export interface WatcherOptions<T extends KubeObject = KubeObject> {
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
   * `maxMs` (default 4 000), each delay drawn from [base / 2, base] (`WATCH_BACKOFF`); a
   * Retry-After from the server is a lower bound (up to `MAX_RETRY_AFTER_MS`).
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
  /**
   * Annotations removed from every object before it is stored (`storedForm` in
   * watch-store.ts; `metadata.managedFields` is always removed). Only for a store whose
   * objects are never written back. Default: none.
   */
  readonly dropAnnotations?: readonly string[];
  /**
   * What the store keeps of each accepted object, given its stored form (above) and what
   * the store holds under its key now: for a store whose reader needs less than the
   * object, or a form derived from it once (client-go's transform). It must keep
   * `metadata` (the key, `resourceVersion`: change detection) and must not throw; the
   * object it gets is only known to have `metadata.name`. Default: the stored form.
   */
  readonly keep?: (object: KubeObject, current: T | undefined) => T;
}

/** The options with every default filled in. */
export interface ResolvedWatcherOptions<T extends KubeObject = KubeObject> {
  readonly client: KubeClient;
  readonly path: string;
  readonly selectors: Query;
  readonly pageSize: number;
  readonly watchTimeout: { readonly min: number; readonly max: number };
  readonly inactivityTimeoutMs: number;
  readonly backoff: BackoffOptions;
  readonly random: () => number;
  readonly expectedKind: string | undefined;
  readonly dropAnnotations: readonly string[];
  readonly keep: ((object: KubeObject, current: T | undefined) => T) | undefined;
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0)
    throw new Error(`watcher option ${name} must be a positive number, got ${value}`);
  return value;
}

/** Throws on invalid options (non-positive sizes, min > max, a path not starting with `/`). */
export function resolveWatcherOptions<T extends KubeObject>(options: WatcherOptions<T>): ResolvedWatcherOptions<T> {
  if (!options.path.startsWith("/")) throw new Error(`watcher path must start with "/": ${options.path}`);
  const min = positive("watchTimeoutSeconds.min", options.watchTimeoutSeconds?.min ?? 240);
  const max = positive("watchTimeoutSeconds.max", options.watchTimeoutSeconds?.max ?? 480);
  if (min > max) throw new Error(`watcher option watchTimeoutSeconds: min ${min} > max ${max}`);
  const initialMs = positive("backoff.initialMs", options.backoff?.initialMs ?? WATCH_BACKOFF.initialMs);
  const maxMs = positive("backoff.maxMs", options.backoff?.maxMs ?? WATCH_BACKOFF.maxMs);
  return {
    client: options.client,
    path: options.path,
    selectors: { labelSelector: options.labelSelector, fieldSelector: options.fieldSelector },
    pageSize: Math.floor(positive("pageSize", options.pageSize ?? 500)),
    watchTimeout: { min: Math.floor(min), max: Math.floor(max) },
    inactivityTimeoutMs: positive("inactivityTimeoutMs", options.inactivityTimeoutMs ?? 150_000),
    backoff: { ...WATCH_BACKOFF, initialMs, maxMs: Math.max(initialMs, maxMs) },
    random: options.random ?? Math.random,
    expectedKind: options.expectedKind,
    dropAnnotations: options.dropAnnotations ?? [],
    keep: options.keep,
  };
}
