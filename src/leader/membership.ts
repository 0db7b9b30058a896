/**
 * ReplicaMembership: which replicas are live and who holds each shard, as this replica
 * observes it through Kubernetes Leases alone (no other coordination).
 *
 * Every replica keeps a membership Lease of its own (`<leader-election-id>-member-…`,
 * `memberLeaseName`) renewed every retry period, and every retry period it LISTs the
 * Leases of the leader-election namespace:
 * - a replica is live while its membership Lease names it and has not expired by LOCAL
 *   observation (the same rule as `lease.ts`: a record unchanged for longer than its
 *   duration; wall clocks are never compared); this replica is always live to itself;
 * - the holder of shard i is the holder of `<leader-election-id>-s<S>-shard-<i>` unless
 *   that record expired by local observation (then the shard is free);
 * - Leases of another layout (core/lease-names.ts: another S, the single leader's, an
 *   earlier version's names) are handed to the `LayoutWatch` (`layout`), which says
 *   whether a shard may be taken at all (`refused` in the view) and confirms each take;
 * - a membership Lease released (empty holder) or expired for a further lease duration
 *   is deleted, on its resourceVersion, so replaced Pods leave no Leases behind; its
 *   replica, should it still be running, simply creates it again. So is any Lease of
 *   another layout once released or expired that long (what a layout change leaves).
 *
 * - joining: a replica that has just started takes no shard until the lists settle
 *   (`observeJoin`, src/core/shards.ts): after its own membership Lease became visible,
 *   the live set stayed the same for a retry period, it shows `--expected-replicas`
 *   replicas (when given), or a lease duration passed. The
 *   view says so (`joined`); replicas started together then want disjoint shares from
 *   the start instead of the first one taking every shard and giving most back. While
 *   joining it lists `JOIN_LISTS_PER_PERIOD` times per retry period (its own Lease is
 *   still renewed once per period), so it settles about a retry period after the last
 *   replica started with it appeared, not up to two periods later.
 *
 * Emits "view" whenever the live set, a holder or `joined` changes. Errors never leave the loop:
 * a failed renewal or list is logged (once per distinct failure) and tried again at the
 * next period; the view then stays as it was.
 */
import { EventEmitter } from "eventemitter3";
import { abortableSleep, type Clock, systemClock } from "../core/clock.ts";
import { leaseLayout, memberLeaseName, parseLeaseName } from "../core/lease-names.ts";
import { type JoinState, observeJoin } from "../core/shards.ts";
import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import { LayoutWatch } from "./layout-watch.ts";
import {
  expiresAt,
  formatMicroTime,
  holderOf,
  type LeaseRecord,
  leaseDurationSeconds,
  type Observation,
  observe,
  recordFromSpec,
} from "./lease.ts";
import { deleteLease, describe, isStatus, LeaseApi, type LeaseObject, listLeases } from "./lease-api.ts";
import { candidateDelay } from "./schedule.ts";

export interface ReplicaView {
  /** Live replica identities, sorted (this replica included). */
  readonly live: readonly string[];
  /** Shard → its holder, for shards whose Lease is held and not expired by local observation. */
  readonly holders: ReadonlyMap<number, string>;
  /** The lists have settled since this replica joined (`observeJoin`): it may take shards. */
  readonly joined: boolean;
  /** Why no shard may be taken now (another layout's Leases, `LayoutWatch.refused`); undefined: they may. */
  readonly refused?: string;
}

export interface ReplicaMembershipOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  /** --leader-election-id: the prefix of every Lease of this Deployment. */
  readonly leaseId: string;
  readonly identity: string;
  readonly shards: number;
  /** --expected-replicas (0 or absent: unknown): the join settles once this many are live. */
  readonly expectedReplicas?: number;
  readonly leaseDurationMs: number;
  readonly retryPeriodMs: number;
  readonly logger: Logger;
  readonly clock?: Clock;
  readonly wallClock?: () => number;
}

/**
 * Lists per retry period while joining: a replica appearing is seen within a quarter
 * period, and the quiet window ends that much after it (a few LISTs of one namespace's
 * Leases, for the seconds of a start).
 */
const JOIN_LISTS_PER_PERIOD = 4;

/** Bound on the release at stop: the others drop this replica once its Lease expires anyway. */
const RELEASE_TIMEOUT_MS = 5_000;

export class ReplicaMembership extends EventEmitter<{ view: [ReplicaView] }> {
  readonly #o: ReplicaMembershipOptions;
  readonly #clock: Clock;
  readonly #wallClock: () => number;
  readonly #own: LeaseApi;
  readonly #ownName: string;
  readonly #layoutName: string;
  /** The Leases of other layouts, and the rules about them. */
  readonly layout: LayoutWatch;
  /** Our membership Lease as last written or read; undefined: read it (or create it) next. */
  #ownLease: LeaseObject | undefined;
  #acquireTime: string | undefined;
  /** Monotonic ms of the last renewal attempt of our membership Lease. */
  #renewedAt: number | undefined;
  readonly #observations = new Map<string, Observation>();
  #view: ReplicaView;
  #viewKey = "";
  #join: JoinState | undefined;
  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;
  #stopped = false;
  #lastErrorText = "";
  /** Wakes the loop's sleep for a list at once (a confirmation waits). */
  #wake: AbortController | undefined;
  /** A list was asked for while one was under way: list again at once. */
  #again = false;

  constructor(options: ReplicaMembershipOptions) {
    super();
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#wallClock = options.wallClock ?? Date.now;
    this.#ownName = memberLeaseName(options.leaseId, options.shards, options.identity);
    this.#layoutName = leaseLayout(options.shards);
    this.#own = new LeaseApi(options.client, options.namespace, this.#ownName);
    this.layout = new LayoutWatch({
      leaseId: options.leaseId,
      shards: options.shards,
      leaseDurationMs: options.leaseDurationMs,
      retryPeriodMs: options.retryPeriodMs,
      logger: options.logger,
      ...(options.clock ? { clock: options.clock } : {}),
    });
    this.layout.listSoon = () => {
      this.#again = true;
      this.#wake?.abort();
    };
    const refused = this.layout.refused();
    this.#view = { live: [options.identity], holders: new Map(), joined: false, ...(refused ? { refused } : {}) };
  }

  get view(): ReplicaView {
    return this.#view;
  }

  /** The record of Lease `name` as last listed, with when it was first seen unchanged. */
  observation(name: string): Observation | undefined {
    return this.#observations.get(name);
  }

  /** `namespace/name` of this replica's membership Lease. */
  get lease(): string {
    return `${this.#o.namespace}/${this.#ownName}`;
  }

  /** Starts renewing and listing. Idempotent. */
  run(): void {
    if (this.#loop || this.#stopped) return;
    this.#loop = (async () => {
      while (!this.#stopped) {
        this.#again = false;
        await this.#tick();
        if (this.#stopped) return;
        if (this.#again) continue;
        const period = this.#view.joined ? this.#o.retryPeriodMs : this.#o.retryPeriodMs / JOIN_LISTS_PER_PERIOD;
        this.#wake = new AbortController();
        const wake = AbortSignal.any([this.#abort.signal, this.#wake.signal]);
        await abortableSleep(this.#clock, candidateDelay(period, undefined, 0), wake);
      }
    })();
  }

  /**
   * Stops, and releases our membership Lease (empty holder) so the others drop this
   * replica at their next list instead of a lease duration later. Bounded; a failure is
   * logged (the Lease then expires). Idempotent.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#abort.abort(new Error("membership stopped"));
    await this.#loop;
    await this.layout.stop();
    const bounds = { signal: AbortSignal.timeout(RELEASE_TIMEOUT_MS), timeoutMs: RELEASE_TIMEOUT_MS };
    try {
      const lease = this.#ownLease ?? (await this.#own.get(bounds));
      if (!lease || holderOf(observe(undefined, recordFromSpec(lease.spec), 0)) !== this.#o.identity) return;
      const now = formatMicroTime(this.#wallClock());
      await this.#own.put(lease, { holderIdentity: "", leaseDurationSeconds: 1, renewTime: now }, bounds);
      this.#o.logger.info({ lease: this.lease }, `released membership Lease ${this.lease}`);
    } catch (error) {
      this.#o.logger.warn(
        { lease: this.lease, err: serializeError(error, "shards: membership") },
        `could not release membership Lease ${this.lease} (the others drop this replica once it expires): ${describe(error)}`,
      );
    }
  }

  async #tick(): Promise<void> {
    const signal = this.#abort.signal;
    const bounds = { signal, timeoutMs: this.#o.retryPeriodMs };
    try {
      const now = this.#clock.now();
      // Once per retry period, also while joining lists come more often.
      if (
        this.#ownLease === undefined ||
        now - (this.#renewedAt ?? now) >= this.#o.retryPeriodMs ||
        this.#view.joined
      ) {
        this.#renewedAt = now;
        await this.#renewOwn(bounds);
      }
      const sentAt = this.#clock.now();
      const listed = await listLeases(this.#o.client, this.#o.namespace, bounds);
      this.layout.observe(listed, sentAt);
      this.#observeAll(listed);
      await this.#collect(listed, bounds);
      this.#lastErrorText = "";
    } catch (error) {
      if (this.#stopped) return;
      const text = describe(error);
      const fields = { lease: this.lease, err: serializeError(error, "shards: membership") };
      const message = `renewing membership or listing Leases failed (retry in about ${this.#o.retryPeriodMs} ms): ${text}`;
      if (text === this.#lastErrorText) this.#o.logger.debug(fields, message);
      else this.#o.logger.warn(fields, message);
      this.#lastErrorText = text;
    }
  }

  /** Create or renew our membership Lease. Only this replica writes it, so a clash just means: read it again. */
  async #renewOwn(bounds: { signal: AbortSignal; timeoutMs: number }): Promise<void> {
    const now = formatMicroTime(this.#wallClock());
    this.#acquireTime ??= now;
    const record: Required<Omit<LeaseRecord, "leaseTransitions">> = {
      holderIdentity: this.#o.identity,
      leaseDurationSeconds: leaseDurationSeconds(this.#o.leaseDurationMs),
      acquireTime: this.#acquireTime,
      renewTime: now,
    };
    try {
      const lease = this.#ownLease ?? (await this.#own.get(bounds));
      this.#ownLease = lease ? await this.#own.put(lease, record, bounds) : await this.#own.create(record, bounds);
    } catch (error) {
      this.#ownLease = undefined;
      if (!isStatus(error, 409) && !isStatus(error, 404)) throw error;
    }
  }

  #observeAll(listed: readonly { name: string; spec: unknown }[]): void {
    const now = this.#clock.now();
    const seen = new Set<string>();
    for (const lease of listed) {
      if (this.#parseOwn(lease.name) === undefined) continue;
      seen.add(lease.name);
      this.#observations.set(lease.name, observe(this.#observations.get(lease.name), recordFromSpec(lease.spec), now));
    }
    for (const name of [...this.#observations.keys()]) if (!seen.has(name)) this.#observations.delete(name);
    const live = new Set([this.#o.identity]);
    const holders = new Map<number, string>();
    for (const [name, observation] of this.#observations) {
      const holder = holderOf(observation);
      if (holder === "" || now >= expiresAt(observation)) continue;
      const shard = this.#parseOwn(name)?.shard;
      if (shard !== undefined) holders.set(shard, holder);
      else live.add(holder);
    }
    const sorted = [...live].sort();
    const own = this.#observations.get(this.#ownName);
    if (own && holderOf(own) === this.#o.identity)
      this.#join = observeJoin(
        this.#join,
        sorted,
        now,
        this.#o.retryPeriodMs,
        this.#o.leaseDurationMs,
        this.#o.expectedReplicas ?? 0,
      );
    const refused = this.layout.refused();
    const view: ReplicaView = {
      live: sorted,
      holders,
      joined: this.#join?.settled === true,
      ...(refused !== undefined ? { refused } : {}),
    };
    const key = JSON.stringify([view.live, [...holders].sort((a, b) => a[0] - b[0]), view.joined, refused ?? ""]);
    if (key === this.#viewKey) return;
    const before = this.#view;
    this.#viewKey = key;
    this.#view = view;
    if (before.live.join(",") !== view.live.join(","))
      this.#o.logger.info({ live: view.live }, `live replicas: ${view.live.join(", ")}`);
    if (view.joined && !before.joined)
      this.#o.logger.info(
        { live: view.live, joiningMs: now - (this.#join?.since ?? now) },
        `membership settled: live replicas ${view.live.join(", ")}; taking a fair share of the shards`,
      );
    this.emit("view", view);
  }

  /**
   * Deletes membership Leases of this layout released, or expired for a further lease
   * duration (never ours), and any Lease of another layout likewise (never a live one:
   * its holder would lose it).
   */
  async #collect(
    listed: readonly { name: string; resourceVersion: string }[],
    bounds: { signal: AbortSignal; timeoutMs: number },
  ): Promise<void> {
    const now = this.#clock.now();
    for (const lease of listed) {
      if (lease.name === this.#ownName) continue;
      const own = this.#parseOwn(lease.name);
      if (own?.role === "shard") continue;
      const observation = own ? this.#observations.get(lease.name) : this.layout.observation(lease.name);
      if (!observation) continue;
      const released = holderOf(observation) === "";
      const longGone = now >= expiresAt(observation) + this.#o.leaseDurationMs;
      if (!released && !longGone) continue;
      try {
        await deleteLease(this.#o.client, this.#o.namespace, lease.name, lease.resourceVersion, bounds);
        this.#o.logger.info(
          { lease: lease.name, holder: holderOf(observation) },
          `deleted ${own ? "membership " : "other layout's "}Lease ${lease.name} (${released ? "released" : "expired"})`,
        );
      } catch (error) {
        // Renewed meanwhile (409) or deleted by another replica: nothing to do.
        if (!isStatus(error, 409)) throw error;
      }
    }
  }

  /** The role (and shard) of Lease `name` when it is of this replica's layout; undefined otherwise. */
  #parseOwn(name: string): { role: string; shard?: number } | undefined {
    const parsed = parseLeaseName(this.#o.leaseId, name);
    return parsed?.layout === this.#layoutName ? parsed : undefined;
  }
}
