/**
 * The remote cluster's ServiceExports (SPEC §12), found at run time: a discovery GET of
 * the MCS group-version says whether the cluster serves them; while it does, a watch of
 * every ServiceExport holds them; while it does not, or refuses the read (403), or
 * discovery fails, discovery is repeated every recheck period, so CRDs installed or a
 * rule granted later are picked up. The state machine is `mcsTransition`
 * (core/mcs.ts); this file performs its effects. It reads; it never writes.
 *
 * Invariants:
 * - at most one watch runs; a refused read stops it and keeps what it held (a 403 is no
 *   answer about which exports exist, as an unreachable cluster keeps its mirrors), a
 *   CRD that went away (404, or discovery without it) forgets every export;
 * - `changed(key)` is called for every ServiceExport key whose object `get` returns
 *   differently, whatever the transition;
 * - `settled` turns true once, when the exports are first known (listed, or known not
 *   to be served or readable), so the actor's complete set never lacks them by accident.
 */
import {
  INITIAL_MCS_AVAILABILITY,
  MCS_DISCOVERY_PATH,
  type McsAvailability,
  type McsEvent,
  mcsTransition,
  SERVICE_EXPORTS_PATH,
  type ServiceExport,
  servesServiceExports,
} from "../../src/core/mcs.ts";
import { objectKey } from "../../src/core/objects.ts";
import { KubeApiError, type KubeClient } from "../../src/kube/client.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import type { RemoteActorOptions } from "../../src/protocol/messages.ts";

/** How often a cluster without readable ServiceExports is checked again, unless the options say otherwise. */
export const DEFAULT_MCS_RECHECK_MS = 60_000;

export interface ServiceExportsDeps {
  readonly client: KubeClient;
  /** `mcsRecheckMs` (default DEFAULT_MCS_RECHECK_MS) and `watchInactivityTimeoutMs` are read. */
  readonly options: Pick<RemoteActorOptions, "mcsRecheckMs" | "watchInactivityTimeoutMs">;
  readonly log: LineLogger;
  /** Wraps callbacks (watcher events, timers) in the actor's guard. */
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  /** Hands a promise of the actor's to its fault handling. */
  readonly track: (promise: Promise<void>) => void;
  /** What `get(key)` returns changed. */
  readonly changed: (key: string) => void;
  /** The availability changed (state, message or settled). */
  readonly availabilityChanged: (availability: McsAvailability) => void;
}

export class ServiceExports {
  readonly #deps: ServiceExportsDeps;
  #availability: McsAvailability = INITIAL_MCS_AVAILABILITY;
  /** The running watch. */
  #watcher: Watcher<ServiceExport> | undefined;
  /** A stopped watch whose objects still count (a refused read): until a new watch lists. */
  #held: Watcher<ServiceExport> | undefined;
  #recheck: NodeJS.Timeout | undefined;
  #stopped = false;
  #discoveries = 0;

  constructor(deps: ServiceExportsDeps) {
    this.#deps = deps;
  }

  get availability(): McsAvailability {
    return this.#availability;
  }

  /** Discovery requests sent so far (the first and every recheck), for status and tests. */
  get discoveries(): number {
    return this.#discoveries;
  }

  /** The exports are known (see the invariants). */
  get settled(): boolean {
    return this.#availability.settled;
  }

  get(key: string): ServiceExport | undefined {
    const watcher = this.#watcher;
    return watcher?.hasSynced ? watcher.get(key) : this.#held?.get(key);
  }

  keys(): string[] {
    return [...keysOf(this.#watcher?.hasSynced ? this.#watcher : this.#held)];
  }

  /** Discovers at once. Idempotent. */
  start(): void {
    if (this.#stopped || this.#availability.state !== "unknown" || this.#recheck) return;
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
    this.#deps.track(
      this.#deps.client.request<unknown>("GET", MCS_DISCOVERY_PATH).then(
        (document) => this.#apply({ kind: "discovered", served: servesServiceExports(document) }),
        (error: unknown) =>
          this.#apply(
            error instanceof KubeApiError && error.status === 404
              ? { kind: "discovered", served: false }
              : { kind: "discovery-failed", message: error instanceof Error ? error.message : String(error) },
          ),
      ),
    );
  }

  #apply(event: McsEvent): void {
    if (this.#stopped) return;
    const previous = this.#availability;
    const step = mcsTransition(previous, event);
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
          clearTimeout(this.#recheck);
          this.#recheck = setTimeout(
            this.#deps.guard(() => this.#discover()),
            this.#deps.options.mcsRecheckMs ?? DEFAULT_MCS_RECHECK_MS,
          );
          break;
      }
    }
    if (step.changed) {
      const { state, message } = step.availability;
      if (state === "active" || state === "watching") this.#deps.log.info({ mcs: state }, `MCS export is ${state}`);
      else this.#deps.log.warn({ mcs: state }, `MCS export is ${state}: ${message ?? ""}`);
    }
    if (step.changed || previous.settled !== step.availability.settled)
      this.#deps.availabilityChanged(step.availability);
  }

  #startWatch(): void {
    const watcher = new Watcher<ServiceExport>({
      client: this.#deps.client,
      path: SERVICE_EXPORTS_PATH,
      expectedKind: "ServiceExport",
      ...(this.#deps.options.watchInactivityTimeoutMs
        ? { inactivityTimeoutMs: this.#deps.options.watchInactivityTimeoutMs }
        : {}),
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

function* keysOf(watcher: Watcher<ServiceExport> | undefined): Generator<string> {
  if (watcher) for (const object of watcher.values()) yield objectKey(object.metadata);
}
