/**
 * LeaderElector: campaigns for a coordination.k8s.io/v1 Lease and keeps it renewed,
 * with client-go's leader-election semantics (decisions in `lease.ts`, pure), over the
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
 *   re-takes or recreates a Lease it did not keep.
 *
 * Events: "started-leading" once when the Lease is acquired; "stopped-leading"(reason)
 * at most once, when leadership is LOST (not on `stop()`). Losing is terminal: the
 * elector stops campaigning, and the process is expected to exit (as controller-runtime
 * does); a new elector would have to be built to campaign again. "new-leader"(holder)
 * whenever the observed holder changes ("" = released / unheld).
 *
 * Errors never leave the loop: every failed read or write is logged with the Lease,
 * the HTTP status or transport code and whether it is retried, and tried again at the
 * next period.
 */
import { EventEmitter } from "eventemitter3";
import { type Clock, systemClock } from "../core/clock.ts";
import { KubeApiError, type KubeClient, KubeTransportError } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import type { Leadership } from "./leadership.ts";
import {
  type Decision,
  decide,
  holderOf,
  type LeaseRecord,
  type Observation,
  observe,
  recordFromSpec,
  releaseRecord,
} from "./lease.ts";

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
}

export interface LeaderElectorEvents {
  "started-leading": [];
  "stopped-leading": [reason: string];
  "new-leader": [holder: string];
  /** A renewal (or the acquisition) succeeded: writes may go on for `writableForMs`. */
  renewed: [writableForMs: number];
}

/** A candidate's retry is stretched by up to this fraction, so replicas do not poll in lockstep. */
const JITTER = 0.2;
/** Woken this long after an observed Lease's expiry, so the expiry has surely passed. */
const EXPIRY_SLACK_MS = 20;
/** Bound on the release at stop: a standby takes over after the Lease expires anyway. */
const RELEASE_TIMEOUT_MS = 5_000;

interface LeaseObject {
  readonly metadata?: { readonly resourceVersion?: string } & Record<string, unknown>;
  readonly spec?: unknown;
  readonly [field: string]: unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asLease(value: unknown, what: string): LeaseObject {
  if (!isRecord(value) || value["kind"] !== "Lease") throw new Error(`${what}: the answer is not a Lease`);
  return value as LeaseObject;
}

function isStatus(error: unknown, status: number): error is KubeApiError {
  return error instanceof KubeApiError && error.status === status;
}

export class LeaderElector extends EventEmitter<LeaderElectorEvents> {
  readonly #client: KubeClient;
  readonly #namespace: string;
  readonly #name: string;
  readonly #identity: string;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #log: Logger;
  readonly #clock: Clock;
  readonly #wallClock: () => number;
  readonly #collection: string;
  readonly #path: string;

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
    this.#client = options.client;
    this.#namespace = options.namespace;
    this.#name = options.name;
    this.#identity = options.identity;
    this.#leaseDurationMs = options.leaseDurationMs;
    this.#renewDeadlineMs = options.renewDeadlineMs;
    this.#retryPeriodMs = options.retryPeriodMs;
    this.#log = options.logger;
    this.#clock = options.clock ?? systemClock;
    this.#wallClock = options.wallClock ?? Date.now;
    this.#collection = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#namespace)}/leases`;
    this.#path = `${this.#collection}/${encodeURIComponent(this.#name)}`;
  }

  /** `namespace/name` of the Lease, for logs. */
  get lease(): string {
    return `${this.#namespace}/${this.#name}`;
  }

  get identity(): string {
    return this.#identity;
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
      await this.#sleep(wait);
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
    try {
      const lease = asLease(await this.#client.request<unknown>("GET", this.#path, { signal, timeoutMs }), this.#path);
      this.#observed(lease);
      return lease;
    } catch (error) {
      if (!isStatus(error, 404)) throw error;
      this.#observation = undefined;
      return undefined;
    }
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

  async #write(
    lease: LeaseObject | undefined,
    decision: Exclude<Decision, { action: "wait" }>,
    signal: AbortSignal,
    timeoutMs: number,
  ): Promise<LeaseObject> {
    if (decision.action === "create" || !lease) {
      const body = {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: this.#name, namespace: this.#namespace },
        spec: decision.record,
      };
      return asLease(
        await this.#client.request<unknown>("POST", this.#collection, { body, signal, timeoutMs }),
        this.#collection,
      );
    }
    return this.#put(lease, decision.record, signal, timeoutMs);
  }

  /** PUT the Lease with `record` over its spec; the read's resourceVersion makes it conditional. */
  async #put(lease: LeaseObject, record: LeaseRecord, signal: AbortSignal, timeoutMs: number): Promise<LeaseObject> {
    const spec = isRecord(lease.spec) ? lease.spec : {};
    const body = { ...lease, spec: { ...spec, ...record } };
    return asLease(await this.#client.request<unknown>("PUT", this.#path, { body, signal, timeoutMs }), this.#path);
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

  /** A candidate's next try: the retry period with jitter, or just after the observed Lease expires if sooner. */
  #candidateDelay(expiresAt: number | undefined): number {
    const retry = this.#retryPeriodMs * (1 + Math.random() * JITTER);
    if (expiresAt === undefined) return retry;
    return Math.min(retry, Math.max(0, expiresAt - this.#clock.now()) + EXPIRY_SLACK_MS);
  }

  #sleep(ms: number): Promise<void> {
    const signal = this.#abort.signal;
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        this.#clock.clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = this.#clock.setTimeout(done, ms);
      signal.addEventListener("abort", done, { once: true });
    });
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
          this.#observed(await this.#put(lease, record, signal, RELEASE_TIMEOUT_MS));
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
    const text = describe(error);
    const fields = {
      lease: this.lease,
      identity: this.#identity,
      leading: this.#leading,
      retryable: retryable(error),
      err: serializeError(error, "leader-election"),
    };
    const message = this.#leading
      ? `renewing Lease ${this.lease} failed (retry in ${this.#retryPeriodMs} ms; deadline in ${Math.max(0, Math.round(this.#renewedAt + this.#renewDeadlineMs - this.#clock.now()))} ms): ${text}`
      : `trying to acquire Lease ${this.lease} failed (retry in about ${this.#retryPeriodMs} ms): ${text}`;
    // 403 is a configuration error (RBAC), worth an error each time it changes;
    // transient failures are warnings. The same failure repeated is logged once.
    if (text === this.#lastErrorText) this.#log.debug(fields, message);
    else if (isStatus(error, 403) || this.#leading) this.#log.error(fields, message);
    else this.#log.warn(fields, message);
    this.#lastErrorText = text;
  }

  #emitSafely<E extends keyof LeaderElectorEvents>(event: E, ...args: LeaderElectorEvents[E]): void {
    try {
      // eventemitter3's typing of emit's rest parameter needs the spread as a tuple.
      (this.emit as (e: E, ...a: LeaderElectorEvents[E]) => boolean)(event, ...args);
    } catch (error) {
      this.#log.error(
        { event, err: serializeError(error, "leader-election") },
        `a "${event}" listener threw; ignored so the elector keeps its schedule`,
      );
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function retryable(error: unknown): boolean {
  if (error instanceof KubeApiError || error instanceof KubeTransportError) return error.retryable;
  return true;
}
