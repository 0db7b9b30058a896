/**
 * The remote EndpointSlices of this cluster's exported headless Services (SPEC §12):
 * one label-selected watch per such Service (`kubernetes.io/service-name=<svc>` in its
 * namespace), never a watch of every slice of the cluster (a big cluster has tens of
 * thousands). A watch starts when a Service becomes an exported headless Service and
 * stops when it no longer is one; its store keeps only the slices' hostnames.
 *
 * Invariants:
 * - `hosts(key)` is `hostsAnswer` (core/headless.ts) of what this incarnation knows: the
 *   last list and every change since, the hosts within their grace period, the shape
 *   last seen, whether reads are refused. `pending` until a first list; `hostsChanged`
 *   is called whenever that answer changes, never for a list or an event that leaves it
 *   as it was;
 * - unknown is never "none": what a list said stays known until another list says
 *   otherwise. A host missing from the slices stays a host for `hostGraceMs` (a pod
 *   being replaced, as in a StatefulSet rollout, keeps its per-host mirror and cluster
 *   IP); a refused read (403, or 404: not served) keeps the hosts last listed, and a
 *   Service never listed is `unknown` (the writer keeps what it has), not ordinary;
 * - a 403 on any of these reads means the remote role lacks EndpointSlices, which is
 *   cluster-wide: every watch stops, `denied` holds the message for the status
 *   (reported once per cluster by the supervisor), and the watches are tried again
 *   every `deniedRetryMs` (a retry that lists clears it; one that meets 403 again
 *   changes nothing). The grace of hosts away does not run out meanwhile;
 * - `hostClaimant(ns, h)` is the first (in key order) of the Services of namespace `ns`
 *   whose answered hosts hold `h`: two headless Services with a host of the same name
 *   would both want the per-host mirror `<h>-<c>`, and the first keeps it. Whenever the
 *   claimants of a host change, the others claiming it are told (`hostsChanged`), so the
 *   one that loses or gains the name is recomputed;
 * - `pending` is true while a wanted watch has neither listed nor failed nor been
 *   denied: the actor's complete set waits for that first answer (at most a request
 *   timeout), then says "hosts unknown" of a Service still not listed.
 */
import { type ExportSettings, exportOf } from "../../src/core/export.ts";
import {
  awayUntil,
  evidenceOf,
  type HeadlessHosts,
  type HeadlessShape,
  type HostsEvidence,
  hostsAnswer,
  hostsAway,
  isHeadless,
  keepHostnames,
  shapeOf,
} from "../../src/core/headless.ts";
import { SERVICE_NAME_LABEL } from "../../src/core/labels.ts";
import { type EndpointSlice, type Service, splitKey } from "../../src/core/objects.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";

/** The remote resource a headless Service's hostnames are read from, as `status` names it. */
export const SLICES_RESOURCE = "discovery.k8s.io/endpointslices";

/** How often reads a remote denied are tried again: slowly, a role changes seldom. */
export const DENIED_RETRY_MS = 60_000;

/**
 * How long a host missing from its Service's remote slices keeps its per-host mirror,
 * unless told otherwise (`--headless-host-grace`, the same default): a StatefulSet pod
 * being replaced leaves the slices until the new pod has an IP (seconds; minutes when a
 * volume moves to another node). Within it the host stays, so its per-host Service
 * keeps its uid and cluster IP; past it, its mirror goes (a scale-down).
 */
export const DEFAULT_HOST_GRACE_MS = 300_000;

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
  /**
   * `deniedRetryMs` default DENIED_RETRY_MS; `headlessHostGraceMs` default
   * DEFAULT_HOST_GRACE_MS; `watchInactivityTimeoutMs` the watcher's default.
   */
  readonly options: {
    readonly deniedRetryMs?: number;
    readonly headlessHostGraceMs?: number;
    readonly watchInactivityTimeoutMs?: number;
  };
  /** Milliseconds on a monotonic clock (tests); default `performance.now`. */
  readonly now?: () => number;
}

/** What this incarnation knows of one wanted Service's slices. */
interface HeadlessWatch {
  /** The running watch; undefined while reads are denied (the rest stays known). */
  watcher: Watcher<EndpointSlice> | undefined;
  /** What the last list (and the changes since) said; undefined before any. */
  evidence: HostsEvidence | undefined;
  /** What the slices last showed the Service to be (kept for a list without endpoints). */
  shape: HeadlessShape | undefined;
  /** Hosts gone from the slices, with when they went (within the grace). */
  away: Map<string, number>;
  /** The running watch failed before its first list: the complete set waits no longer. */
  failed: boolean;
  /** The last answer of `hosts`. */
  answer: HeadlessHosts;
  /** When the first host away leaves for good. */
  graceTimer: NodeJS.Timeout | undefined;
}

const hostsOf = (answer: HeadlessHosts): readonly string[] => (answer.kind === "listed" ? answer.hostnames : []);
const sameAnswer = (a: HeadlessHosts, b: HeadlessHosts): boolean =>
  a.kind === b.kind && hostsOf(a).join("\n") === hostsOf(b).join("\n");

export class HeadlessWatches {
  readonly #deps: HeadlessWatchesDeps;
  readonly #now: () => number;
  /** Keys of the exported headless Services, with what is known of each. */
  readonly #watches = new Map<string, HeadlessWatch>();
  /** `<namespace>/<hostname>` → the keys of the Services whose answered hosts hold it. */
  readonly #claims = new Map<string, Set<string>>();
  #denied: string | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  /** Denied, and the watches were started again to find out whether they still are. */
  #retrying = false;
  #stopped = false;

  constructor(deps: HeadlessWatchesDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? (() => performance.now());
  }

  get #graceMs(): number {
    return this.#deps.options.headlessHostGraceMs ?? DEFAULT_HOST_GRACE_MS;
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
      if (other !== key && splitKey(other).namespace === namespace && hostsOf(watch.answer).includes(name))
        this.#deps.hostsChanged(other);
    if (!wanted) {
      this.#forget(key);
      return;
    }
    if (this.#watches.has(key)) return;
    const watch: HeadlessWatch = {
      watcher: undefined,
      evidence: undefined,
      shape: undefined,
      away: new Map(),
      failed: false,
      answer: { kind: "pending" },
      graceTimer: undefined,
    };
    this.#watches.set(key, watch);
    // While reads are denied and no retry runs, the Service is not read: its hosts are unknown.
    if (this.#denied === undefined || this.#retrying) this.#startWatch(key, watch);
    else this.#refresh(key, watch);
  }

  /** What is known of the hostnames of headless Service `key`. */
  hosts(key: string): HeadlessHosts {
    return this.#watches.get(key)?.answer ?? { kind: "pending" };
  }

  /** The first (in key order) headless Service of `namespace` with a host `hostname`; undefined: none. */
  hostClaimant(namespace: string, hostname: string): string | undefined {
    let first: string | undefined;
    for (const key of this.#claims.get(`${namespace}/${hostname}`) ?? [])
      if (first === undefined || key < first) first = key;
    return first;
  }

  /** Some exported headless Service's first slice list has not answered yet (listed, failed or denied). */
  get pending(): boolean {
    if (this.#denied !== undefined) return false;
    for (const watch of this.#watches.values()) if (!watch.evidence && !watch.failed) return true;
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
    let running = 0;
    for (const watch of this.#watches.values()) if (watch.watcher) running += 1;
    return running;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retryTimer);
    for (const key of [...this.#watches.keys()]) this.#forget(key);
  }

  #startWatch(key: string, watch: HeadlessWatch): void {
    const { namespace, name } = splitKey(key);
    if (!namespace || watch.watcher) return;
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
    watch.watcher = watcher;
    watch.failed = false;
    const guard = this.#deps.guard;
    // Before its first list a new watch's store is empty: the last known evidence stands.
    watcher.on(
      "change",
      guard(() => {
        if (watcher.hasSynced) this.#observe(key, watch, watcher);
      }),
    );
    watcher.on(
      "listed",
      guard(() => {
        if (this.#denied !== undefined) this.#allowed();
        this.#observe(key, watch, watcher);
      }),
    );
    watcher.on(
      "failure",
      guard((failure: WatchFailure) => {
        // Denied, or not served at all (a remote without discovery.k8s.io/v1): cluster-wide.
        if (failure.reason === "http-403" || (failure.reason === "http-404" && failure.phase === "list")) {
          this.#deny(failure);
          return;
        }
        // The first failure of a streak is news; the retries of an outage are not (the
        // Services' watch reports it too). Before a first list it answers the complete
        // set's wait: this Service's hosts are unknown for now.
        const line = `remote EndpointSlices of headless Service ${key}: ${failure.message}`;
        if (failure.attempt === 1) this.#deps.log.warn({ failure, service: key }, line);
        else this.#deps.log.debug({ failure, service: key }, line);
        if (!watch.evidence && !watch.failed) {
          watch.failed = true;
          this.#deps.hostsChanged(key);
        }
      }),
    );
    watcher.start();
  }

  /** Stops the running watch of `key`, if any; what it said stays known. */
  #stopWatch(watch: HeadlessWatch): void {
    const watcher = watch.watcher;
    watch.watcher = undefined;
    if (!watcher) return;
    watcher.removeAllListeners();
    this.#deps.track(watcher.stop());
  }

  /** `key` is no longer an exported headless Service: its watch, its grace and its claims go. */
  #forget(key: string): void {
    const watch = this.#watches.get(key);
    if (!watch) return;
    this.#watches.delete(key);
    clearTimeout(watch.graceTimer);
    this.#stopWatch(watch);
    this.#claim(key, hostsOf(watch.answer), []);
  }

  /** The watch of `key` listed or changed: its slices are the evidence now. */
  #observe(key: string, watch: HeadlessWatch, watcher: Watcher<EndpointSlice>): void {
    const evidence = evidenceOf(watcher.values());
    watch.away = hostsAway(hostsOf(watch.answer), watch.away, evidence, this.#now(), this.#graceMs);
    watch.evidence = evidence;
    watch.shape = shapeOf(evidence) ?? watch.shape;
    this.#refresh(key, watch);
  }

  /** Recomputes the answer of `key`; tells whoever depends on it when it changed; rearms the grace timer. */
  #refresh(key: string, watch: HeadlessWatch): void {
    clearTimeout(watch.graceTimer);
    watch.graceTimer = undefined;
    const until = awayUntil(watch.away, this.#graceMs);
    if (until !== undefined)
      watch.graceTimer = setTimeout(
        this.#deps.guard(() => this.#expire(key, watch)),
        Math.max(0, until - this.#now()),
      );
    const answer = hostsAnswer({
      evidence: watch.evidence,
      away: watch.away.keys(),
      shape: watch.shape,
      denied: this.#denied !== undefined,
    });
    if (sameAnswer(answer, watch.answer)) return;
    const before = watch.answer;
    watch.answer = answer;
    this.#claim(key, hostsOf(before), hostsOf(answer));
    this.#deps.hostsChanged(key);
  }

  /** The grace of some host away ran out; while reads are refused nothing runs out (unknown is not gone). */
  #expire(key: string, watch: HeadlessWatch): void {
    watch.graceTimer = undefined;
    if (this.#stopped || this.#watches.get(key) !== watch || this.#denied !== undefined || !watch.evidence) return;
    watch.away = hostsAway(hostsOf(watch.answer), watch.away, watch.evidence, this.#now(), this.#graceMs);
    this.#refresh(key, watch);
  }

  /** Moves Service `key`'s claims from hosts `before` to `after`; the other claimants of a host that changed are told. */
  #claim(key: string, before: readonly string[], after: readonly string[]): void {
    const { namespace = "" } = splitKey(key);
    const kept = new Set(after);
    const dropped = before.filter((h) => !kept.has(h));
    const had = new Set(before);
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

  /** The remote refuses EndpointSlices: every watch stops; what was listed stays, what was not is unknown. */
  #deny(failure: WatchFailure): void {
    const first = this.#denied === undefined;
    const why = `${failure.reason === "http-403" ? "forbidden" : "not served"} (${failure.message.slice(0, 300)})`;
    this.#denied = `reading ${SLICES_RESOURCE} is ${why}; headless Services keep the hosts last read, and one never read is mirrored as an ordinary Service unless its mirror is headless already`;
    for (const watch of this.#watches.values()) this.#stopWatch(watch);
    if (first) {
      this.#deps.log.warn({ resource: SLICES_RESOURCE }, this.#denied);
      this.#deps.statusChanged();
    }
    // A Service never listed is unknown now, not pending (one added during a retry too).
    for (const [key, watch] of this.#watches) this.#refresh(key, watch);
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
    for (const [key, watch] of this.#watches) this.#startWatch(key, watch);
  }

  #allowed(): void {
    this.#denied = undefined;
    this.#retrying = false;
    clearTimeout(this.#retryTimer);
    this.#deps.log.info({ resource: SLICES_RESOURCE }, `reading ${SLICES_RESOURCE} is allowed again`);
    this.#deps.statusChanged();
    for (const [key, watch] of this.#watches) {
      this.#startWatch(key, watch);
      this.#refresh(key, watch);
    }
  }
}
