/**
 * A watch of a resource that a cluster may not serve (the MCS API's ServiceExports in a
 * remote cluster, its ServiceImports in the local one; SPEC §12), found at run time: a
 * discovery GET of the group-version says whether the cluster serves it; while it does,
 * a watch holds its objects; while it does not, or refuses the read (403), or discovery
 * fails, discovery is repeated every recheck period, so CRDs installed or a rule granted
 * later are picked up. The state machine is `mcsTransition` (core/mcs.ts); this file
 * performs its effects. It reads; it never writes.
 *
 * Invariants:
 * - at most one watch runs; a refused read stops it and keeps what it held (a 403 is no
 *   answer about which exports exist, as an unreachable cluster keeps its mirrors), a
 *   CRD that went away (404, or discovery without it) forgets every export;
 * - `changed(key)` is called for every key whose object `get` returns differently,
 *   whatever the transition;
 * - `known` turns true once, when the objects are first known (listed, or known not to
 *   be served); before that they are unknown, never "none": a refused or failed read
 *   makes nothing known, so a caller keeps whatever it holds of them;
 * - `settled` turns true once, at the read's first answer of either kind (known, or a
 *   failure), so whoever waits for the objects waits no longer than one answer.
 */

import { exponentialBackoff } from "../core/backoff.ts";
import {
  INITIAL_MCS_AVAILABILITY,
  MCS_VERSIONS,
  type McsAvailability,
  type McsEvent,
  type McsResource,
  mcsCollectionPath,
  mcsDiscoveryPath,
  mcsTransition,
  serves,
} from "../core/mcs.ts";
import { type KubeObject, objectKey } from "../core/objects.ts";
import { KubeApiError, type KubeClient } from "./client.ts";
import { Watcher, type WatchFailure } from "./watcher.ts";

/**
 * How often a cluster without the readable resource is checked again, unless told
 * otherwise (`--mcs-recheck-period`, the same default). Each remote check is a TLS
 * handshake of its own (the cluster's one connection holds its Service watch), so at a
 * fleet's scale the period is a steady cost: 1 000 remotes without the CRDs every 60 s
 * were ≈ 17 handshakes a second and ≈ 35 MB more RSS after three minutes; every 5 min it is a fifth of the handshakes, and CRDs installed
 * or a read granted later are picked up within 5 min.
 */
export const DEFAULT_MCS_RECHECK_MS = 300_000;

/** A discovery that failed with nothing known is retried after 1 s, 2 s, 4 s … up to the recheck period (±20 %). */
const DISCOVERY_RETRY = { initialMs: 1_000 } as const;

/** The log lines of a state change (a pino-like logger). */
export interface OptionalWatchLog {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface OptionalWatchDeps {
  readonly client: KubeClient;
  readonly resource: McsResource;
  /** Only objects with these labels are held (e.g. the writer's own ServiceImports). */
  readonly labelSelector?: string;
  /** Default DEFAULT_MCS_RECHECK_MS. */
  readonly recheckMs?: number;
  readonly inactivityTimeoutMs?: number;
  readonly log: OptionalWatchLog;
  /** Wraps callbacks (watcher events, timers) in the actor's guard. */
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  /** Hands a promise of the actor's to its fault handling. */
  readonly track: (promise: Promise<void>) => void;
  /** What `get(key)` returns changed. */
  readonly changed: (key: string) => void;
  /** The availability changed (state, message, settled or known); `previous` is what it was. */
  readonly availabilityChanged: (availability: McsAvailability, previous: McsAvailability) => void;
}

export class OptionalWatch<T extends KubeObject> {
  readonly #deps: OptionalWatchDeps;
  #availability: McsAvailability = INITIAL_MCS_AVAILABILITY;
  /** The running watch. */
  #watcher: Watcher<T> | undefined;
  /** A stopped watch whose objects still count (a refused read): until a new watch lists. */
  #held: Watcher<T> | undefined;
  #recheck: NodeJS.Timeout | undefined;
  /** Discoveries failed in a row (the retry's backoff step). */
  #failedDiscoveries = 0;
  #stopped = false;
  #discoveries = 0;

  constructor(deps: OptionalWatchDeps) {
    this.#deps = deps;
  }

  get availability(): McsAvailability {
    return this.#availability;
  }

  /** Discovery requests sent so far (the first and every recheck), for status and tests. */
  get discoveries(): number {
    return this.#discoveries;
  }

  /** The read has answered once, known or not (see the invariants). */
  get settled(): boolean {
    return this.#availability.settled;
  }

  /** The objects are known: `keys`/`get` say which exist (see the invariants). */
  get known(): boolean {
    return this.#availability.known;
  }

  get(key: string): T | undefined {
    const watcher = this.#watcher;
    return watcher?.hasSynced ? watcher.get(key) : this.#held?.get(key);
  }

  /** The objects `get` returns. */
  values(): T[] {
    const watcher = this.#watcher?.hasSynced ? this.#watcher : this.#held;
    return watcher ? [...watcher.values()] : [];
  }

  keys(): string[] {
    return [...keysOf(this.#watcher?.hasSynced ? this.#watcher : this.#held)];
  }

  /** Discovers at once. Idempotent. */
  start(): void {
    if (this.#stopped || this.#discoveries > 0) return;
    this.#discover();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#recheck);
    const watchers = [this.#watcher, this.#held];
    this.#watcher = undefined;
    this.#held = undefined;
    await Promise.all(watchers.map((w) => w?.stop()));
  }

  #discover(): void {
    this.#recheck = undefined;
    this.#discoveries += 1;
    this.#deps.track(this.#discoverVersions().then((event) => this.#apply(event)));
  }

  /**
   * The first of `MCS_VERSIONS` whose discovery document lists the resource (SPEC §16:
   * v1beta1 preferred, v1alpha1 still read); a 404 or a document without it moves on to
   * the next; any other failure ends discovery as failed.
   */
  async #discoverVersions(): Promise<McsEvent> {
    for (const version of MCS_VERSIONS) {
      try {
        // The first discovery goes first, on the connection the client's list and watch
        // then keep; a recheck comes while that connection holds a watch, so its own is not kept.
        const document = await this.#deps.client.request<unknown>("GET", mcsDiscoveryPath(version), {
          closeConnection: this.#discoveries > 1,
        });
        if (serves(document, this.#deps.resource)) return { kind: "discovered", served: true, version };
      } catch (error) {
        if (error instanceof KubeApiError && error.status === 404) continue;
        return { kind: "discovery-failed", message: error instanceof Error ? error.message : String(error) };
      }
    }
    return { kind: "discovered", served: false };
  }

  #apply(event: McsEvent): void {
    if (this.#stopped) return;
    this.#failedDiscoveries = event.kind === "discovery-failed" ? this.#failedDiscoveries + 1 : 0;
    const previous = this.#availability;
    const step = mcsTransition(previous, event, this.#deps.resource);
    this.#availability = step.availability;
    for (const effect of step.effects) {
      switch (effect) {
        case "start-watch":
          this.#startWatch();
          break;
        case "stop-watch":
          this.#stopWatch(false);
          break;
        case "drop-watch":
          this.#stopWatch(true);
          break;
        case "schedule-recheck":
        case "schedule-retry": {
          const period = this.#deps.recheckMs ?? DEFAULT_MCS_RECHECK_MS;
          const delay =
            effect === "schedule-retry"
              ? exponentialBackoff(
                  { initialMs: Math.min(DISCOVERY_RETRY.initialMs, period), maxMs: period },
                  Math.max(0, this.#failedDiscoveries - 1),
                )
              : period;
          clearTimeout(this.#recheck);
          this.#recheck = setTimeout(
            this.#deps.guard(() => this.#discover()),
            delay,
          );
          break;
        }
      }
    }
    // Said once per state and message: a recheck that finds the resource served again
    // (and names its version) while the read is still refused says nothing new.
    const { state, message } = step.availability;
    if (state !== previous.state || message !== previous.message) {
      const what = `${this.#deps.resource.plural}.${this.#deps.resource.group}`;
      if (state === "active" || state === "watching") this.#deps.log.info({ mcs: state }, `${what}: ${state}`);
      else this.#deps.log.warn({ mcs: state }, `${what}: ${state}: ${message ?? ""}`);
    }
    const { settled, known } = step.availability;
    if (step.changed || previous.settled !== settled || previous.known !== known)
      this.#deps.availabilityChanged(step.availability, previous);
  }

  #startWatch(): void {
    const { resource, labelSelector, inactivityTimeoutMs } = this.#deps;
    const watcher = new Watcher<T>({
      client: this.#deps.client,
      path: mcsCollectionPath(resource, this.#availability.version ?? MCS_VERSIONS[0]),
      expectedKind: resource.kind,
      ...(labelSelector ? { labelSelector } : {}),
      ...(inactivityTimeoutMs ? { inactivityTimeoutMs } : {}),
    });
    this.#watcher = watcher;
    const { guard } = this.#deps;
    // Before its first list the held objects count: the new watch's own changes are
    // reported once it has listed (`get` reads it from then on).
    watcher.on(
      "change",
      guard((key: string) => {
        if (watcher.hasSynced && this.#watcher === watcher) this.#deps.changed(key);
      }),
    );
    watcher.on(
      "listed",
      guard(() => {
        if (this.#watcher !== watcher) return;
        const held = this.#held;
        this.#held = undefined;
        // Keys whose object `get` now returns differently: every listed key, and the held ones.
        for (const key of new Set([...keysOf(held), ...keysOf(watcher)])) this.#deps.changed(key);
        if (held) this.#deps.track(held.stop());
        this.#apply({ kind: "listed" });
      }),
    );
    watcher.on(
      "failure",
      guard((failure: WatchFailure) => {
        if (this.#watcher !== watcher) return;
        const status = /^http-(\d{3})$/.exec(failure.reason)?.[1];
        this.#apply({ kind: "watch-failed", status: status ? Number(status) : 0, message: failure.message });
      }),
    );
    watcher.start();
  }

  /** Stops the running watch; `drop`: forgets every export, else keeps what was listed. */
  #stopWatch(drop: boolean): void {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    if (!watcher) return;
    if (drop) {
      const held = this.#held;
      this.#held = undefined;
      const gone = new Set([...keysOf(watcher.hasSynced ? watcher : held)]);
      this.#deps.track(Promise.all([watcher.stop(), held?.stop()]).then(() => undefined));
      for (const key of gone) this.#deps.changed(key);
      return;
    }
    // A watch refused before it listed holds nothing new: the earlier held objects stay.
    if (watcher.hasSynced) {
      const held = this.#held;
      this.#held = watcher;
      if (held) this.#deps.track(held.stop());
      this.#deps.track(watcher.stop());
    } else this.#deps.track(watcher.stop());
  }
}

function* keysOf<T extends KubeObject>(watcher: Watcher<T> | undefined): Generator<string> {
  if (watcher) for (const object of watcher.values()) yield objectKey(object.metadata);
}
