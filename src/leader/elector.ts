/**
 * LeaderElector: campaigns for a coordination.k8s.io/v1 Lease and keeps it renewed,
 * with the usual Lease-based leader-election semantics (decisions in `lease.ts`, pure), over the
 * project's lean HTTPS client.
 *
 * Timing contract (defaults 10 s / 7 s / 2 s; config guarantees lease > renew > retry):
 * - every `retryPeriodMs` a candidate reads the Lease and takes it when it is unheld or
 *   has expired by LOCAL observation (`lease.ts`); it also wakes up exactly when the
 *   observed record would expire, so a dead leader is replaced `leaseDuration` after
 *   its last renewal was first seen, not up to a retry period later;
 * - a leader renews every `retryPeriodMs`. Its renew deadline runs from the moment the
 *   last SUCCESSFUL renewal was SENT (before the server applied it, so before anyone
 *   could observe it): when no renewal succeeds for `renewDeadlineMs`, it loses
 *   leadership, on a timer, even while a request hangs;
 * - no overlap: another replica takes the Lease only `leaseDuration` after it observed
 *   the last renewal, i.e. at least `leaseDurationMs` after that renewal was sent; the
 *   old leader gave up `renewDeadlineMs` after it, so `leaseDurationMs -
 *   renewDeadlineMs` (3 s by default) is the margin in which the old leader must stop
 *   writing (`run.ts` terminates the writer at once), and which also absorbs clock-rate
 *   differences (never offsets: no wall clocks are compared);
 * - a leader that reads the Lease and finds another holder, none, or no Lease at all
 *   (deleted) loses leadership at once, without waiting for the deadline; it never
 *   re-takes or recreates a Lease it did not keep;
 * - `mayAcquire` is asked right before every take (never before a renewal): while it
 *   gives a reason (another Lease layout is live, core/layout-guard.ts) nothing is written.
 *
 * Events: "started-leading" once when the Lease is acquired; "stopped-leading"(reason)
 * at most once, when leadership is LOST (not on `stop()`): terminal, the process is
 * expected to exit and campaign again as a standby; "new-leader"(holder) whenever the
 * observed holder changes ("" = released / unheld).
 *
 * Errors never leave the loop: every failed read or write is logged (Lease, HTTP status
 * or transport code, retried or not) and tried again at the next period. The Lease's
 * API calls are in lease-api.ts, delays in schedule.ts, failure lines in failure-log.ts.
 */
import { EventEmitter } from "eventemitter3";
import { abortableSleep, type Clock, systemClock } from "../core/clock.ts";
import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import { emitSafely, logLeaseFailure, logRefusal } from "./failure-log.ts";
import type { Leadership } from "./leadership.ts";
import { type Decision, decide, holderOf, type Observation, observe, recordFromSpec, releaseRecord } from "./lease.ts";
import { describe, isStatus, LeaseApi, type LeaseObject } from "./lease-api.ts";
import { candidateDelay } from "./schedule.ts";

export interface LeaderElectorOptions {
  /** A client for the local cluster; the elector never closes it. */
  readonly client: KubeClient;
  readonly namespace: string;
  /** The Lease's name. */
  readonly name: string;
  /** Unique per replica. */
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly logger: Logger;
  /** Monotonic clock for every duration and observation time. Default `systemClock`. */
  readonly clock?: Clock;
  /** Wall clock, epoch ms, only for the informational timestamps in the Lease. Default `Date.now`. */
  readonly wallClock?: () => number;
  /**
   * The Lease as this process already observed it (on the same `clock`), e.g. by a
   * LIST: an unchanged record keeps that first sighting, so its expiry runs from then
   * rather than from this elector's first read. Default: nothing observed.
   */
  readonly observation?: Observation;
  /** Asked right before a take (create, or update to us): a reason not to take now, or undefined. */
  readonly mayAcquire?: () => string | undefined;
}

export interface LeaderElectorEvents {
  "started-leading": [];
  "stopped-leading": [reason: string];
  "new-leader": [holder: string];
  /** A renewal (or the acquisition) succeeded: writes may go on for `writableForMs`. */
  renewed: [writableForMs: number];
}

/** Bound on the release at stop: a standby takes over after the Lease expires anyway. */
const RELEASE_TIMEOUT_MS = 5_000;

export class LeaderElector extends EventEmitter<LeaderElectorEvents> {
  readonly #api: LeaseApi;
  readonly #namespace: string;
  readonly #name: string;
  readonly #identity: string;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #wallClock: () => number;
  readonly #mayAcquire: (() => string | undefined) | undefined;

  #observation: Observation | undefined;
  #leading = false;
  /** Epoch ms of the last change of `#leading`. */
  #since: number | undefined;
  /** Monotonic ms at which the last successful renewal (or the acquisition) was SENT. */
  #renewedAt = 0;
  #deadlineTimer: ReturnType<Clock["setTimeout"]> | undefined;
  /** Aborts the request in flight and the sleep between attempts. */
  #abort = new AbortController();
  #loop: Promise<void> | undefined;
  #stopped = false;
  #lost: string | undefined;
  /** The last error logged, so a failure repeated every period is logged at debug after the first. */
  #lastErrorText = "";

  constructor(options: LeaderElectorOptions) {
    super();
    this.#api = new LeaseApi(options.client, options.namespace, options.name);
    this.#namespace = options.namespace;
    this.#name = options.name;
    this.#identity = options.identity;
    this.#leaseDurationMs = options.leaseDurationMs;
    this.#renewDeadlineMs = options.renewDeadlineMs;
    this.#retryPeriodMs = options.retryPeriodMs;
    this.#log = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#wallClock = options.wallClock ?? Date.now;
    this.#observation = options.observation;
    this.#mayAcquire = options.mayAcquire;
  }

  /** `namespace/name` of the Lease, for logs. */
  get lease(): string {
    return `${this.#namespace}/${this.#name}`;
  }

  /** True between "started-leading" and the loss of the Lease or `stop()`. */
  get isLeader(): boolean {
    return this.#leading;
  }

  /** What the admin server reports. */
  leadership(): Leadership {
    const holder = holderOf(this.#observation);
    return {
      enabled: true,
      leading: this.#leading,
      identity: this.#identity,
      ...(holder !== "" ? { holder } : {}),
      ...(this.#since !== undefined ? { since: this.#since } : {}),
    };
  }

  /** Starts campaigning. Idempotent; a no-op after `stop()` or a loss. */
  run(): void {
    if (this.#loop || this.#stopped || this.#lost !== undefined) return;
    this.#log.info(
      { lease: this.lease, identity: this.#identity },
      `campaigning for Lease ${this.lease} as ${this.#identity}`,
    );
    this.#loop = this.#campaign();
  }

  /**
   * Stops campaigning and renewing. When leading, releases the Lease (empty holder,
   * 1 s duration) so a standby takes over at its next try; the release is bounded by
   * 5 s and its failure is logged, not thrown (the Lease then simply expires).
   * Never emits "stopped-leading". Idempotent.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#abort.abort(new Error("leader elector stopped"));
    this.#clearDeadline();
    await this.#loop;
    // Release what the Lease says we hold, even if the acquisition's answer arrived
    // only after stop() began; never after a loss (the Lease is not ours to touch).
    if (this.#lost !== undefined || holderOf(this.#observation) !== this.#identity) return;
    if (this.#leading) {
      this.#leading = false;
      this.#since = this.#wallClock();
    }
    await this.#release();
  }

  // -------------------------------------------------------------------------------

  async #campaign(): Promise<void> {
    while (!this.#stopped && this.#lost === undefined) {
      const wait = await this.#tryAcquireOrRenew();
      if (this.#stopped || this.#lost !== undefined) return;
      await abortableSleep(this.#clock, wait, this.#abort.signal);
    }
  }

  /** One attempt; resolves with the delay until the next one. Never rejects. */
  async #tryAcquireOrRenew(): Promise<number> {
    const sentAt = this.#clock.now();
    const signal = this.#abort.signal;
    const timeoutMs = this.#leading
      ? Math.max(1, this.#renewedAt + this.#renewDeadlineMs - sentAt)
      : this.#renewDeadlineMs;
    try {
      let lease = await this.#get(signal, timeoutMs);
      for (let attempt = 0; ; attempt++) {
        const decision = this.#decide();
        if (decision.action === "wait") {
          if (this.#leading) {
            this.#lose(`the Lease is now held by ${decision.holder}`);
            return 0;
          }
          return this.#candidateDelay(decision.expiresAt);
        }
        if (this.#leading && decision.action === "create") {
          // Deleted under us: a candidate may create it and lead at once, without
          // waiting for any expiry, so recreating it could overlap with that leader.
          this.#lose("the Lease was deleted");
          return 0;
        }
        if (this.#leading && decision.action === "update" && decision.acquire) {
          // The Lease says it is not ours any more (released or changed by someone
          // else): never write under a Lease we did not keep, even if we could re-take it.
          this.#lose(`the Lease no longer names us (holder "${holderOf(this.#observation)}")`);
          return 0;
        }
        const refusal = this.#leading ? undefined : this.#mayAcquire?.();
        if (refusal !== undefined) {
          this.#lastErrorText = logRefusal(this.#log, this.lease, refusal, this.#lastErrorText);
          return this.#candidateDelay(undefined);
        }
        try {
          const written = await this.#write(lease, decision, signal, timeoutMs);
          this.#observed(written);
          this.#succeeded(sentAt, decision);
          return this.#leading ? this.#retryPeriodMs : this.#candidateDelay(undefined);
        } catch (error) {
          // Optimistic concurrency: someone wrote the Lease since we read it (409
          // Conflict), or created it first (409 AlreadyExists). Read again and decide
          // on what is there now — once; a second clash waits for the next period.
          if (!isStatus(error, 409) || attempt > 0 || this.#stopped || this.#lost !== undefined) throw error;
          lease = await this.#get(signal, timeoutMs);
        }
      }
    } catch (error) {
      if (!this.#stopped && this.#lost === undefined) this.#logFailure(error);
      return this.#leading ? this.#retryPeriodMs : this.#candidateDelay(undefined);
    }
  }

  /** Decides on the Lease as last read (`#get` and `#observed` keep `#observation` current). */
  #decide(): Decision {
    return decide({
      observation: this.#observation,
      identity: this.#identity,
      leaseDurationMs: this.#leaseDurationMs,
      now: this.#clock.now(),
      wallNow: this.#wallClock(),
    });
  }

  /** GET the Lease; undefined on 404. Updates the observation. */
  async #get(signal: AbortSignal, timeoutMs: number): Promise<LeaseObject | undefined> {
    const lease = await this.#api.get({ signal, timeoutMs });
    if (lease) this.#observed(lease);
    else this.#observation = undefined;
    return lease;
  }

  /** Records a Lease read or written, at the local time it arrived. */
  #observed(lease: LeaseObject): void {
    const before = holderOf(this.#observation);
    this.#observation = observe(this.#observation, recordFromSpec(lease.spec), this.#clock.now());
    const holder = holderOf(this.#observation);
    if (holder !== before) {
      this.#log.info(
        { lease: this.lease, holder, previous: before },
        holder === "" ? `Lease ${this.lease} is free` : `Lease ${this.lease} is held by ${holder}`,
      );
      this.#emitSafely("new-leader", holder);
    }
  }

  #write(
    lease: LeaseObject | undefined,
    decision: Exclude<Decision, { action: "wait" }>,
    signal: AbortSignal,
    timeoutMs: number,
  ): Promise<LeaseObject> {
    if (decision.action === "create" || !lease) return this.#api.create(decision.record, { signal, timeoutMs });
    return this.#api.put(lease, decision.record, { signal, timeoutMs });
  }

  #succeeded(sentAt: number, decision: Exclude<Decision, { action: "wait" }>): void {
    // An answer that arrives after a loss or stop() changes nothing: losing is terminal,
    // and stop() releases whatever the Lease says we hold.
    if (this.#stopped || this.#lost !== undefined) return;
    this.#lastErrorText = "";
    this.#renewedAt = sentAt;
    this.#armDeadline();
    if (this.#leading) {
      this.#emitSafely("renewed", this.writableForMs());
      return;
    }
    this.#leading = true;
    this.#since = this.#wallClock();
    this.#log.info(
      { lease: this.lease, identity: this.#identity, transitions: decision.record.leaseTransitions },
      `acquired Lease ${this.lease}: leading`,
    );
    this.#emitSafely("started-leading");
  }

  /**
   * How long this replica may still write: until its renew deadline, which comes
   * `leaseDurationMs - renewDeadlineMs` before anyone else can take the Lease. 0 when
   * not leading.
   */
  writableForMs(): number {
    if (!this.#leading || this.#lost !== undefined || this.#stopped) return 0;
    return Math.max(0, this.#renewedAt + this.#renewDeadlineMs - this.#clock.now());
  }

  /** (Re)arms the renew deadline: `renewDeadlineMs` after the last successful renewal was sent. */
  #armDeadline(): void {
    this.#clearDeadline();
    const delay = this.#renewedAt + this.#renewDeadlineMs - this.#clock.now();
    this.#deadlineTimer = this.#clock.setTimeout(
      () => this.#lose(`could not renew the Lease within the renew deadline (${this.#renewDeadlineMs} ms)`),
      delay,
    );
  }

  #clearDeadline(): void {
    if (this.#deadlineTimer !== undefined) this.#clock.clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = undefined;
  }

  /** Terminal: leadership is gone; stop everything and tell the listeners (once). */
  #lose(reason: string): void {
    if (this.#lost !== undefined || this.#stopped || !this.#leading) return;
    this.#lost = reason;
    this.#leading = false;
    this.#since = this.#wallClock();
    this.#clearDeadline();
    this.#abort.abort(new Error(`leadership lost: ${reason}`));
    this.#log.error({ lease: this.lease, identity: this.#identity, reason }, `lost Lease ${this.lease}: ${reason}`);
    this.#emitSafely("stopped-leading", reason);
  }

  /** A candidate's next try (see schedule.ts). */
  #candidateDelay(expiresAt: number | undefined): number {
    return candidateDelay(this.#retryPeriodMs, expiresAt, this.#clock.now());
  }

  async #release(): Promise<void> {
    const signal = AbortSignal.timeout(RELEASE_TIMEOUT_MS);
    try {
      let lease = await this.#get(signal, RELEASE_TIMEOUT_MS);
      for (let attempt = 0; ; attempt++) {
        const record = releaseRecord(this.#observation, this.#identity, this.#wallClock());
        if (!lease || !record) {
          this.#log.warn(
            { lease: this.lease, holder: holderOf(this.#observation) },
            `not releasing Lease ${this.lease}: it is no longer ours`,
          );
          return;
        }
        try {
          this.#observed(await this.#api.put(lease, record, { signal, timeoutMs: RELEASE_TIMEOUT_MS }));
          this.#log.info({ lease: this.lease }, `released Lease ${this.lease}`);
          return;
        } catch (error) {
          if (!isStatus(error, 409) || attempt > 0) throw error;
          lease = await this.#get(signal, RELEASE_TIMEOUT_MS);
        }
      }
    } catch (error) {
      this.#log.error(
        { lease: this.lease, err: serializeError(error, "leader-election") },
        `could not release Lease ${this.lease} (a standby takes it once it expires): ${describe(error)}`,
      );
    }
  }

  #logFailure(error: unknown): void {
    this.#lastErrorText = logLeaseFailure(this.#log, error, {
      lease: this.lease,
      identity: this.#identity,
      leading: this.#leading,
      retryPeriodMs: this.#retryPeriodMs,
      deadlineInMs: this.#renewedAt + this.#renewDeadlineMs - this.#clock.now(),
      lastText: this.#lastErrorText,
    });
  }

  #emitSafely<E extends keyof LeaderElectorEvents>(event: E, ...args: LeaderElectorEvents[E]): void {
    // eventemitter3's typing of emit's rest parameter needs the spread as a tuple.
    emitSafely(this.#log, event, () => (this.emit as (e: E, ...a: LeaderElectorEvents[E]) => boolean)(event, ...args));
  }
}
