/**
 * ShardCoordinator: holds this replica's fair share of the S shards, each through its
 * own coordination.k8s.io Lease (`<leader-election-id>-s<S>-shard-<i>`), with the
 * single-leader elector's semantics per shard (elector.ts, lease.ts: expiry judged by
 * local observation, renew deadline < lease duration, 409 handling, release on stop).
 *
 * - Which shards: `wantedShards(live replicas, S, holders)` over the membership view
 *   (membership.ts), the same map in every replica that observed the same, so replicas
 *   never campaign against each other for long; none while the view is still joining
 *   (`joined` false: the lists have not settled since this replica started).
 * - A wanted shard gets an elector; it takes the shard's Lease only when it is free
 *   (never acquired, released, or expired by local observation).
 * - Another layout (core/layout-guard.ts): while the membership's lists show a live
 *   Lease of another layout (or showed one less than a lease duration ago), nothing new
 *   is wanted or taken (each elector asks before every take); the shards held are kept.
 *   A shard taken opens its writes only once a list sent after the take confirms that
 *   no shard or leader Lease of another layout is live; if one is, it is given up unused.
 * - A shard held and no longer wanted is given up in this order: the host closes the
 *   shard's write fence and stops its actors, and answers once none of its writes is in
 *   flight; only then is the Lease released. So its next holder never overlaps with us.
 * - A shard whose Lease is lost (renew deadline passed, or someone else's record) is
 *   lost alone: the host closes its fence at once (the writer's own deadline had
 *   closed it already), and the coordinator campaigns again if it still wants it. This
 *   is as safe as the single leader's exit: the fence closes at the renew deadline,
 *   `leaseDuration - renewDeadline` before anyone may take the Lease, whether or not
 *   this thread runs, and a writer thread that is gone writes nothing.
 *
 * `host.setShards` gets every change of the held shards and every moved deadline (ms on
 * `systemClock`, which every thread reads alike).
 */
import { systemClock } from "../core/clock.ts";
import { shardLeaseName } from "../core/lease-names.ts";
import { wantedShards } from "../core/shards.ts";
import type { KubeClient } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import { LeaderElector } from "./elector.ts";
import type { Leadership, ShardingView } from "./leadership.ts";
import { ReplicaMembership, type ReplicaView } from "./membership.ts";

export interface ShardHost {
  /**
   * The shards held now with their write deadlines; every other shard is not held.
   * Resolves once no write of a shard not held is in flight.
   */
  setShards(held: ReadonlyMap<number, number>): Promise<void>;
}

export interface ShardCoordinatorOptions {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly leaseId: string;
  readonly identity: string;
  readonly shards: number;
  /** --expected-replicas (0: unknown): see `observeJoin`. */
  readonly expectedReplicas?: number;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly logger: Logger;
  readonly host: ShardHost;
}

export class ShardCoordinator {
  readonly #o: ShardCoordinatorOptions;
  readonly #log: Logger;
  readonly #membership: ReplicaMembership;
  readonly #electors = new Map<number, LeaderElector>();
  /** Held shard → write deadline. */
  readonly #held = new Map<number, number>();
  /** Shards being given up: fence closing, then the Lease released. */
  readonly #releasing = new Set<number>();
  /** Shards whose Lease is taken and whose writes wait for the layout's confirmation. */
  readonly #confirming = new Set<number>();
  #wanted: readonly number[] = [];
  #stopped = false;
  /** Leaving (the process is stopping): no shard is taken any more; those held are renewed until `stop`. */
  #leaving = false;

  constructor(options: ShardCoordinatorOptions) {
    this.#o = options;
    this.#log = options.logger;
    this.#membership = new ReplicaMembership({
      client: options.client,
      namespace: options.namespace,
      leaseId: options.leaseId,
      identity: options.identity,
      shards: options.shards,
      ...(options.expectedReplicas ? { expectedReplicas: options.expectedReplicas } : {}),
      leaseDurationMs: options.leaseDurationMs,
      retryPeriodMs: options.retryPeriodMs,
      logger: options.logger,
    });
    this.#membership.on("view", (view) => this.#reconcile(view));
  }

  run(): void {
    this.#log.info(
      { shards: this.#o.shards, identity: this.#o.identity, lease: this.#membership.lease },
      `sharded: ${this.#o.shards} shards; joining as ${this.#o.identity}`,
    );
    this.#membership.run();
  }

  /** What the admin server, the metrics and `status` report: every replica runs the controller. */
  leadership(): Leadership {
    return { enabled: true, leading: true, identity: this.#o.identity, sharding: this.status() };
  }

  status(): ShardingView {
    const view = this.#membership.view;
    return {
      shards: this.#o.shards,
      held: [...this.#held.keys()].sort((a, b) => a - b),
      wanted: [...this.#wanted],
      live: view.live,
      ...(view.refused ? { refused: view.refused } : {}),
      holders: Array.from({ length: this.#o.shards }, (_, shard) =>
        this.#held.has(shard) ? this.#o.identity : (view.holders.get(shard) ?? ""),
      ),
    };
  }

  /**
   * The process is stopping (SIGTERM): from now on no shard is taken, and a campaign for a
   * shard not held yet is ended, so that a replica finishing its last writes does not
   * pick up a shard another replica released meanwhile, only to release it again. The
   * shards held stay held (renewed, their writes fenced as ever) until `stop`.
   */
  leave(): void {
    if (this.#leaving || this.#stopped) return;
    this.#leaving = true;
    for (const [shard, elector] of [...this.#electors]) {
      if (this.#held.has(shard) || this.#releasing.has(shard)) continue;
      this.#electors.delete(shard);
      void elector.stop().catch((error: unknown) => {
        this.#log.error(
          { shard, err: serializeError(error, "shards") },
          `ending the campaign for shard ${shard} failed; its Lease expires instead`,
        );
      });
    }
  }

  /**
   * Leaves: the membership Lease is released first (the others then want our shards),
   * then every shard Lease is released. Call it after the writer stopped (nothing of
   * ours writes any more). Idempotent.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await this.#membership.stop();
    this.#held.clear();
    await Promise.all([...this.#electors.values()].map((elector) => elector.stop()));
    this.#electors.clear();
  }

  #reconcile(view: ReplicaView = this.#membership.view): void {
    if (this.#stopped || this.#leaving) return;
    // Still joining: want nothing yet (the first list may not show the replicas started
    // with this one). Nothing is held before the join settles, so nothing is given up.
    // Another layout live: keep what is held, want nothing more.
    this.#wanted = !view.joined
      ? []
      : view.refused !== undefined
        ? [...this.#held.keys()].sort((a, b) => a - b)
        : (wantedShards(view.live, this.#o.shards, view.holders).get(this.#o.identity) ?? []);
    const wanted = new Set(this.#wanted);
    for (const shard of wanted) if (!this.#electors.has(shard) && !this.#releasing.has(shard)) this.#campaign(shard);
    for (const shard of [...this.#electors.keys()])
      if (!wanted.has(shard) && !this.#releasing.has(shard)) void this.#giveUp(shard);
  }

  #campaign(shard: number): void {
    const name = shardLeaseName(this.#o.leaseId, this.#o.shards, shard);
    const observation = this.#membership.observation(name);
    const elector = new LeaderElector({
      client: this.#o.client,
      namespace: this.#o.namespace,
      name,
      identity: this.#o.identity,
      leaseDurationMs: this.#o.leaseDurationMs,
      renewDeadlineMs: this.#o.renewDeadlineMs,
      retryPeriodMs: this.#o.retryPeriodMs,
      logger: this.#log.child({ shard }),
      mayAcquire: () => this.#membership.layout.refused(),
      // The membership's list has watched this Lease already: a dead holder's record
      // expires from when it was first seen, not from this elector's first read, so a
      // takeover takes about one lease duration, not two.
      ...(observation ? { observation } : {}),
    });
    this.#electors.set(shard, elector);
    const current = (): boolean =>
      this.#electors.get(shard) === elector && !this.#releasing.has(shard) && !this.#stopped;
    elector.on("started-leading", () => {
      if (!current()) return;
      // No write before a list sent after this take shows no other layout holding.
      this.#confirming.add(shard);
      void this.#membership.layout.confirm(systemClock.now()).then((ok) => {
        this.#confirming.delete(shard);
        if (!current()) return;
        if (!ok) {
          this.#log.warn({ shard }, `took shard ${shard}, but another layout holds Leases: giving it up unused`);
          void this.#giveUp(shard);
          return;
        }
        this.#log.info({ shard }, `holding shard ${shard}`);
        this.#setDeadline(shard, elector.writableForMs());
      });
    });
    elector.on("renewed", (writableForMs) => {
      if (current() && !this.#confirming.has(shard) && this.#held.has(shard)) this.#setDeadline(shard, writableForMs);
    });
    elector.on("stopped-leading", (reason) => {
      if (this.#electors.get(shard) !== elector) return;
      // Lost alone: fence it now (the writer's own deadline closed it already when the
      // renew deadline passed), and campaign again if it is still wanted.
      this.#electors.delete(shard);
      if (this.#held.delete(shard)) {
        this.#log.warn({ shard, reason }, `lost shard ${shard} (${reason}): its writes and actors stop`);
        this.#push();
      }
      this.#reconcile();
    });
    elector.run();
  }

  /** Fence first, wait until none of the shard's writes is in flight, then release the Lease. */
  async #giveUp(shard: number): Promise<void> {
    const elector = this.#electors.get(shard);
    if (!elector) return;
    this.#releasing.add(shard);
    try {
      if (this.#held.delete(shard)) {
        this.#log.info({ shard }, `giving shard ${shard} up (no longer this replica's share)`);
        // The writer answers once none of the shard's writes is in flight. Should it not
        // answer by the renew deadline (a stuck writer sends nothing either), the Lease
        // is released anyway rather than holding the shard forever.
        let timer: NodeJS.Timeout | undefined;
        const answered = await Promise.race([
          this.#push().then(() => true),
          new Promise<false>((resolve) => {
            timer = setTimeout(() => resolve(false), this.#o.renewDeadlineMs);
          }),
        ]);
        clearTimeout(timer);
        if (!answered)
          this.#log.warn({ shard }, `the writer did not confirm shard ${shard}'s fence in time; releasing its Lease`);
      }
      await elector.stop();
    } catch (error) {
      this.#log.error(
        { shard, err: serializeError(error, "shards") },
        `giving shard ${shard} up failed; its Lease expires instead`,
      );
    } finally {
      if (this.#electors.get(shard) === elector) this.#electors.delete(shard);
      this.#releasing.delete(shard);
      this.#reconcile();
    }
  }

  #setDeadline(shard: number, writableForMs: number): void {
    this.#held.set(shard, systemClock.now() + writableForMs);
    void this.#push();
  }

  #push(): Promise<void> {
    return this.#o.host.setShards(new Map(this.#held)).catch((error: unknown) => {
      this.#log.error({ err: serializeError(error, "shards") }, "handing the held shards to the controller failed");
    });
  }
}
