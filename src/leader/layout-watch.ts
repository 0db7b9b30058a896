/**
 * LayoutWatch: this replica's view of the Leases of OTHER layouts of its lease id
 * (core/lease-names.ts), fed with every LIST of the namespace's Leases, and the rules of
 * core/layout-guard.ts on top of it: whether a Lease may be taken now (`refused`), and
 * whether a Lease just taken may open its writes (`confirm`).
 *
 * Sharded, the membership's lists feed it (membership.ts: one per retry period, and one
 * at once when a confirmation waits, through `listSoon`). The single leader has no
 * membership: `run` lists for it every retry period, while it campaigns and while it
 * leads (reads only: a standby still writes nothing).
 *
 * A Lease of another layout is live while held and not expired by local observation
 * (lease.ts), exactly as the elector judges its own. Emits "changed" whenever the reason
 * to refuse a take changes (appears, changes, clears), and logs each change once.
 */
import { EventEmitter } from "eventemitter3";
import { abortableSleep, type Clock, systemClock } from "../core/clock.ts";
import {
  confirmation,
  type ForeignLease,
  type LayoutState,
  NO_LIST,
  observeLayouts,
  takeRefused,
} from "../core/layout-guard.ts";
import { leaseLayout, parseLeaseName } from "../core/lease-names.ts";
import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import { expiresAt, holderOf, type Observation, observe, recordFromSpec } from "./lease.ts";
import { describe, isStatus, listLeases } from "./lease-api.ts";
import { candidateDelay } from "./schedule.ts";

export interface LayoutWatchOptions {
  /** --leader-election-id. */
  readonly leaseId: string;
  /** This replica's shard count (1: the single leader). */
  readonly shards: number;
  readonly leaseDurationMs: number;
  readonly retryPeriodMs: number;
  readonly logger: Logger;
  readonly clock?: Clock;
}

interface Waiter {
  readonly takenAt: number;
  readonly resolve: (ok: boolean) => void;
  readonly timer: ReturnType<Clock["setTimeout"]>;
}

export class LayoutWatch extends EventEmitter<{ changed: [] }> {
  readonly #o: LayoutWatchOptions;
  readonly #clock: Clock;
  readonly #layout: string;
  readonly #observations = new Map<string, Observation>();
  #state: LayoutState = NO_LIST;
  /** The refusal last reported; `null` before the first list (nothing reported yet). */
  #refusal: string | undefined | null = null;
  #waiters: Waiter[] = [];
  /** Asks whoever lists for a list as soon as it can (set by the membership, or by `run`). */
  listSoon: () => void = () => {};
  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;
  #wake: AbortController | undefined;
  /** A list was asked for while one was under way: list again at once. */
  #again = false;

  constructor(options: LayoutWatchOptions) {
    super();
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#layout = leaseLayout(options.shards);
  }

  /** This replica's layout (`leader`, `s<S>`). */
  get layout(): string {
    return this.#layout;
  }

  /** The live Leases of other layouts in the latest list. */
  get foreign(): readonly ForeignLease[] {
    return this.#state.foreign;
  }

  /** Lease `name` of another layout as last listed, with when it was first seen unchanged. */
  observation(name: string): Observation | undefined {
    return this.#observations.get(name);
  }

  /** Why no Lease may be taken now (another layout is live, or was a lease duration ago); undefined: one may. */
  refused(): string | undefined {
    return takeRefused(this.#state, this.#clock.now(), this.#o.leaseDurationMs);
  }

  /** Counts one LIST of the namespace's Leases, sent at `sentAt` (monotonic ms). */
  observe(listed: readonly { readonly name: string; readonly spec: unknown }[], sentAt: number): void {
    const now = this.#clock.now();
    const seen = new Set<string>();
    const foreign: ForeignLease[] = [];
    for (const lease of listed) {
      const parsed = parseLeaseName(this.#o.leaseId, lease.name);
      if (!parsed || parsed.layout === this.#layout) continue;
      seen.add(lease.name);
      const observation = observe(this.#observations.get(lease.name), recordFromSpec(lease.spec), now);
      this.#observations.set(lease.name, observation);
      const holder = holderOf(observation);
      if (holder !== "" && now < expiresAt(observation))
        foreign.push({ name: lease.name, layout: parsed.layout, role: parsed.role, holder });
    }
    for (const name of [...this.#observations.keys()]) if (!seen.has(name)) this.#observations.delete(name);
    foreign.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.#state = observeLayouts(this.#state, sentAt, now, foreign);
    for (const waiter of [...this.#waiters]) {
      const ok = confirmation(this.#state, waiter.takenAt);
      if (ok !== undefined) this.#settle(waiter, ok);
    }
    this.#report();
  }

  /**
   * Resolves once a list sent at or after `takenAt` (when a take's answer arrived) was
   * counted: true when it shows no live shard or leader Lease of another layout (the
   * Lease may open its writes), false otherwise, or when no such list came within a lease
   * duration (the Lease is then given up unused). Asks for a list at once.
   */
  confirm(takenAt: number): Promise<boolean> {
    const now = confirmation(this.#state, takenAt);
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        takenAt,
        resolve,
        timer: this.#clock.setTimeout(() => this.#settle(waiter, false), this.#o.leaseDurationMs),
      };
      this.#waiters.push(waiter);
      this.listSoon();
    });
  }

  /** The single leader: lists the namespace's Leases every retry period (and at once when asked). Idempotent. */
  run(client: KubeClient, namespace: string): void {
    if (this.#loop || this.#abort.signal.aborted) return;
    this.listSoon = () => {
      this.#again = true;
      this.#wake?.abort();
    };
    this.#loop = (async () => {
      let lastError = "";
      while (!this.#abort.signal.aborted) {
        this.#again = false;
        const sentAt = this.#clock.now();
        try {
          const bounds = { signal: this.#abort.signal, timeoutMs: this.#o.retryPeriodMs };
          this.observe(await listLeases(client, namespace, bounds), sentAt);
          lastError = "";
        } catch (error) {
          if (this.#abort.signal.aborted) return;
          const text = describe(error);
          const fields = { err: serializeError(error, "leader-election") };
          const message = `listing Leases (to see other layouts) failed; retrying in about ${this.#o.retryPeriodMs} ms: ${text}`;
          // A 403 is RBAC (the Role lacks list on Leases): a configuration error.
          if (text === lastError) this.#o.logger.debug(fields, message);
          else if (isStatus(error, 403)) this.#o.logger.error(fields, message);
          else this.#o.logger.warn(fields, message);
          lastError = text;
        }
        if (this.#again) continue;
        this.#wake = new AbortController();
        const wake = AbortSignal.any([this.#abort.signal, this.#wake.signal]);
        await abortableSleep(this.#clock, candidateDelay(this.#o.retryPeriodMs, undefined, 0), wake);
      }
    })();
  }

  /** Stops listing; confirmations still waiting resolve false. Idempotent. */
  async stop(): Promise<void> {
    this.#abort.abort(new Error("layout watch stopped"));
    for (const waiter of [...this.#waiters]) this.#settle(waiter, false);
    await this.#loop;
  }

  #settle(waiter: Waiter, ok: boolean): void {
    if (!this.#waiters.includes(waiter)) return;
    this.#waiters = this.#waiters.filter((w) => w !== waiter);
    this.#clock.clearTimeout(waiter.timer);
    waiter.resolve(ok);
  }

  /** Logs and emits a change of the refusal (the first list logs only a refusal). */
  #report(): void {
    const refusal = this.refused();
    if (refusal === this.#refusal) return;
    const first = this.#refusal === null;
    this.#refusal = refusal;
    if (refusal !== undefined)
      this.#o.logger.warn(
        { layout: this.#layout, foreign: this.#state.foreign.map((f) => f.name) },
        `layout ${this.#layout} takes no Lease: ${refusal}`,
      );
    else if (!first)
      this.#o.logger.info({ layout: this.#layout }, `layout ${this.#layout}: no Lease of another layout is live`);
    this.emit("changed");
  }
}
