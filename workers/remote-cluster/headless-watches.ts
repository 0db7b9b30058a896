/**
 * The remote EndpointSlices of this cluster's exported headless Services (SPEC §12):
 * one label-selected watch per such Service (`kubernetes.io/service-name=<svc>` in its
 * namespace), never a watch of every slice of the cluster (a big cluster has tens of
 * thousands). A watch starts when a Service becomes an exported headless Service and
 * stops when it no longer is one; its store keeps only the slices' hostnames.
 *
 * Invariants:
 * - `hosts(key)` is `pending` from a watch's start until its first complete list, then
 *   `listed` with the hostnames of the last list and every change since (sorted,
 *   unique); `hostsChanged(key)` is called when that answer changes, never for a list
 *   or an event that leaves the hostnames as they were;
 * - a 403 on any of these reads means the remote role lacks EndpointSlices, which is
 *   cluster-wide: every watch stops, `hosts` is `denied` for every Service (an ordinary
 *   mirror, SPEC §12), `denied` holds the message for the status (reported once per
 *   cluster by the supervisor), and the watches are tried again every `deniedRetryMs`
 *   (a retry that lists clears it; one that meets 403 again changes nothing);
 * - `hostClaimant(ns, h)` is the first (in key order) of the Services of namespace `ns`
 *   whose listed hostnames hold `h`: two headless Services with a host of the same name
 *   would both want the per-host mirror `<h>-<c>`, and the first keeps it. Whenever the
 *   claimants of a host change, the others claiming it are told (`hostsChanged`), so the
 *   one that loses or gains the name is recomputed;
 * - `pending` is true while a wanted watch has neither listed nor been denied: the
 *   actor's complete set waits for it, so a complete set never turns a headless mirror
 *   into an ordinary one and back (or leaves it out, which would delete it).
 */
import { type ExportSettings, exportOf } from "../../src/core/export.ts";
import { type HeadlessHosts, hostnamesOf, isHeadless } from "../../src/core/headless.ts";
import { SERVICE_NAME_LABEL } from "../../src/core/labels.ts";
import { type EndpointSlice, type KubeObject, type Service, splitKey } from "../../src/core/objects.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";

/** The remote resource a headless Service's hostnames are read from, as `status` names it. */
export const SLICES_RESOURCE = "discovery.k8s.io/endpointslices";

/** How often reads a remote denied are tried again: slowly, a role changes seldom. */
export const DENIED_RETRY_MS = 60_000;

export interface HeadlessWatchesDeps {
  readonly client: KubeClient;
  readonly log: LineLogger;
  /** Wraps the watches' callbacks and timers in the actor's guard. */
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  /** A promise of the actor's own (a watch stopping): a rejection is the actor's fault. */
  readonly track: (promise: Promise<void>) => void;
  /** What `hosts(key)` answers for headless Service `key` changed. */
  readonly hostsChanged: (key: string) => void;
  /** `denied` changed. */
  readonly statusChanged: () => void;
  /** `deniedRetryMs` default DENIED_RETRY_MS; `watchInactivityTimeoutMs` the watcher's default. */
  readonly options: { readonly deniedRetryMs?: number; readonly watchInactivityTimeoutMs?: number };
}

interface HeadlessWatch {
  readonly watcher: Watcher<EndpointSlice>;
  /** Joined hostnames of the last answer; undefined before the first list. */
  hostnames: readonly string[] | undefined;
}

/** What a watch keeps of a slice: its key, version and hostnames (its addresses are the remote's, never used). */
function keepHostnames(object: KubeObject): EndpointSlice {
  const { name, namespace, resourceVersion } = object.metadata;
  const slice = object as EndpointSlice;
  const hostnames = (slice.endpoints ?? []).flatMap((e) =>
    typeof e.hostname === "string" && e.hostname !== "" ? [{ addresses: [], hostname: e.hostname }] : [],
  );
  return {
    metadata: { name, ...(namespace ? { namespace } : {}), ...(resourceVersion ? { resourceVersion } : {}) },
    endpoints: hostnames,
  };
}

export class HeadlessWatches {
  readonly #deps: HeadlessWatchesDeps;
  /** Keys of the exported headless Services (whether or not a watch runs). */
  readonly #wanted = new Set<string>();
  readonly #watches = new Map<string, HeadlessWatch>();
  /** `<namespace>/<hostname>` → the keys of the Services whose listed hostnames hold it. */
  readonly #claims = new Map<string, Set<string>>();
  #denied: string | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  /** Denied, and the watches were started again to find out whether they still are. */
  #retrying = false;
  #stopped = false;

  constructor(deps: HeadlessWatchesDeps) {
    this.#deps = deps;
  }

  /** Service `key` changed to `service` (undefined: deleted); only an exported headless Service is watched. */
  syncService(key: string, service: Service | undefined, settings: ExportSettings): void {
    this.sync(key, isHeadless(service) && !!service && exportOf(settings, service).kind === "exported");
  }

  /**
   * Service `key` changed, and is (`wanted`) or is not an exported headless Service now.
   * A headless Service of the same namespace with a host of the same name is told too:
   * whether that host may have a mirror depends on it (`headlessMirrors`).
   */
  sync(key: string, wanted: boolean): void {
    if (this.#stopped) return;
    const { namespace, name } = splitKey(key);
    for (const [other, watch] of this.#watches)
      if (other !== key && splitKey(other).namespace === namespace && watch.hostnames?.includes(name))
        this.#deps.hostsChanged(other);
    if (!wanted) {
      this.#wanted.delete(key);
      this.#stopWatch(key);
      return;
    }
    if (this.#wanted.has(key)) return;
    this.#wanted.add(key);
    // While reads are denied and no retry runs, the Service is an ordinary mirror.
    if (this.#denied === undefined || this.#retrying) this.#startWatch(key);
  }

  /** What is known of the hostnames of headless Service `key`. */
  hosts(key: string): HeadlessHosts {
    const hostnames = this.#watches.get(key)?.hostnames;
    if (hostnames) return { kind: "listed", hostnames };
    if (this.#denied !== undefined) return { kind: "denied" };
    return { kind: "pending" };
  }

  /** The first (in key order) headless Service of `namespace` with a host `hostname`; undefined: none. */
  hostClaimant(namespace: string, hostname: string): string | undefined {
    let first: string | undefined;
    for (const key of this.#claims.get(`${namespace}/${hostname}`) ?? [])
      if (first === undefined || key < first) first = key;
    return first;
  }

  /** Some exported headless Service's hostnames are not known yet (and reads are not denied). */
  get pending(): boolean {
    if (this.#denied !== undefined) return false;
    for (const key of this.#wanted) if (!this.#watches.get(key)?.hostnames) return true;
    return false;
  }

  /** The 403 that denies reading EndpointSlices, while it lasts. */
  get denied(): string | undefined {
    return this.#denied;
  }

  /** The status fields of a denied read (SPEC §12): none while reads are allowed. */
  status(): { deniedReads?: { resource: string; message: string }[] } {
    return this.#denied === undefined ? {} : { deniedReads: [{ resource: SLICES_RESOURCE, message: this.#denied }] };
  }

  /** Watches running now. */
  get watching(): number {
    return this.#watches.size;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
    for (const key of [...this.#watches.keys()]) this.#stopWatch(key);
  }

  #startWatch(key: string): void {
    const { namespace, name } = splitKey(key);
    if (!namespace || this.#watches.has(key)) return;
    const watcher = new Watcher<EndpointSlice>({
      client: this.#deps.client,
      path: `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`,
      labelSelector: `${SERVICE_NAME_LABEL}=${name}`,
      expectedKind: "EndpointSlice",
      keep: keepHostnames,
      ...(this.#deps.options.watchInactivityTimeoutMs
        ? { inactivityTimeoutMs: this.#deps.options.watchInactivityTimeoutMs }
        : {}),
    });
    const watch: HeadlessWatch = { watcher, hostnames: undefined };
    this.#watches.set(key, watch);
    const guard = this.#deps.guard;
    watcher.on(
      "change",
      guard(() => {
        if (watch.hostnames) this.#refresh(key, watch);
      }),
    );
    watcher.on(
      "listed",
      guard(() => {
        if (this.#denied !== undefined) this.#allowed();
        this.#refresh(key, watch);
      }),
    );
    watcher.on(
      "failure",
      guard((failure: WatchFailure) => {
        // Denied, or not served at all (a remote without discovery.k8s.io/v1): cluster-wide.
        if (failure.reason === "http-403" || (failure.reason === "http-404" && failure.phase === "list"))
          this.#deny(failure);
        else {
          // The first failure of a streak is news; the retries of an outage are not (the
          // Services' watch reports it too).
          const line = `remote EndpointSlices of headless Service ${key}: ${failure.message}`;
          if (failure.attempt === 1) this.#deps.log.warn({ failure, service: key }, line);
          else this.#deps.log.debug({ failure, service: key }, line);
        }
      }),
    );
    watcher.start();
  }

  #stopWatch(key: string): void {
    const watch = this.#watches.get(key);
    if (!watch) return;
    this.#watches.delete(key);
    this.#claim(key, watch.hostnames, []);
    watch.watcher.removeAllListeners();
    this.#deps.track(watch.watcher.stop());
  }

  #refresh(key: string, watch: HeadlessWatch): void {
    const hostnames = hostnamesOf(watch.watcher.values());
    if (watch.hostnames && watch.hostnames.join("\n") === hostnames.join("\n")) return;
    const before = watch.hostnames;
    watch.hostnames = hostnames;
    this.#claim(key, before, hostnames);
    this.#deps.hostsChanged(key);
  }

  /** Moves Service `key`'s claims from hosts `before` to `after`; the other claimants of a host that changed are told. */
  #claim(key: string, before: readonly string[] | undefined, after: readonly string[]): void {
    const { namespace = "" } = splitKey(key);
    const kept = new Set(after);
    const dropped = (before ?? []).filter((h) => !kept.has(h));
    const had = new Set(before ?? []);
    const added = after.filter((h) => !had.has(h));
    const others = new Set<string>();
    for (const hostname of dropped) {
      const claim = `${namespace}/${hostname}`;
      const keys = this.#claims.get(claim);
      keys?.delete(key);
      if (keys?.size === 0) this.#claims.delete(claim);
      for (const other of keys ?? []) others.add(other);
    }
    for (const hostname of added) {
      const claim = `${namespace}/${hostname}`;
      const keys = this.#claims.get(claim) ?? new Set<string>();
      this.#claims.set(claim, keys);
      for (const other of keys) others.add(other);
      keys.add(key);
    }
    for (const other of others) this.#deps.hostsChanged(other);
  }

  /** The remote refuses EndpointSlices: every watch stops; every Service is an ordinary mirror until a retry lists. */
  #deny(failure: WatchFailure): void {
    const first = this.#denied === undefined;
    const why = `${failure.reason === "http-403" ? "forbidden" : "not served"} (${failure.message.slice(0, 300)})`;
    this.#denied = `reading ${SLICES_RESOURCE} is ${why}; headless Services are mirrored as ordinary Services`;
    const keys = [...this.#watches.keys()];
    for (const key of keys) this.#stopWatch(key);
    if (first) {
      this.#deps.log.warn({ resource: SLICES_RESOURCE }, this.#denied);
      this.#deps.statusChanged();
      for (const key of this.#wanted) this.#deps.hostsChanged(key);
    }
    clearTimeout(this.#retryTimer);
    this.#retrying = false;
    this.#retryTimer = setTimeout(
      this.#deps.guard(() => this.#retry()),
      this.#deps.options.deniedRetryMs ?? DENIED_RETRY_MS,
    );
  }

  #retry(): void {
    if (this.#stopped) return;
    this.#retrying = true;
    for (const key of this.#wanted) this.#startWatch(key);
  }

  #allowed(): void {
    this.#denied = undefined;
    this.#retrying = false;
    clearTimeout(this.#retryTimer);
    this.#deps.log.info({ resource: SLICES_RESOURCE }, `reading ${SLICES_RESOURCE} is allowed again`);
    this.#deps.statusChanged();
    for (const key of this.#wanted) this.#startWatch(key);
  }
}
