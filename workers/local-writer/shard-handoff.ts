/**
 * The writer's side of a shard handoff (`--shards S`, DESIGN "Sharding across replicas"):
 * the shards held now and their write deadlines, as the supervisor's `writer.shards`
 * asserts them; what the reconciler may plan; what is forgotten when a shard is given up.
 *
 * Invariants:
 * - a `writer.shards` older than the newest applied is ignored (the latest assertion wins);
 * - the desired state of clusters of shards no longer held is forgotten (nothing of theirs
 *   is planned or collected here any more) and their channels closed;
 * - a shard gained (or a fence reopened) has every key re-checked, but a gained shard's
 *   keys are planned only once the stores hold its mirrors (`plannable`): planned before,
 *   each would look missing and be created in vain;
 * - `writer.shards-fenced` is answered only once no write of a shard not held is in flight.
 */
import { listedOwnership } from "../../src/core/shard-label.ts";
import { hostsCluster, type ShardOwnership } from "../../src/core/shards.ts";
import type { Logger } from "../../src/log.ts";
import type { DesiredChannels } from "./desired-channels.ts";
import type { DesiredStore } from "./desired-store.ts";
import type { WriteFence } from "./fence.ts";
import type { LocalStores } from "./local-stores.ts";

export interface ShardHandoffDeps {
  readonly fence: WriteFence;
  readonly stores: Pick<LocalStores, "setShardFilter" | "observedHeld">;
  readonly desired: Pick<DesiredStore, "clusters" | "forget">;
  readonly channels: Pick<DesiredChannels, "clusters" | "close">;
  readonly executor: { whenDrained(shards: Iterable<number>): Promise<void> };
  readonly log: Logger;
  /** The writer's stores are synced and its workers run. */
  readonly ready: () => boolean;
  readonly enqueue: (key: string) => void;
  readonly enqueueFederated: () => void;
  readonly resyncAll: () => void;
  /** Events held back by a closed fence may go now. */
  readonly pumpEvents: () => void;
  /** No write of a shard not held is in flight any more, as of `writer.shards` `seq`. */
  readonly fenced: (seq: number) => void;
}

export class ShardHandoff {
  readonly #deps: ShardHandoffDeps;
  /** The newest `writer.shards` applied. */
  #seq = -1;

  constructor(deps: ShardHandoffDeps) {
    this.#deps = deps;
  }

  /** What the reconciler may plan: the held shards whose mirrors the stores already hold. */
  plannable(): ShardOwnership {
    return listedOwnership(this.#deps.fence.ownership, this.#deps.stores.observedHeld);
  }

  /** Applies `writer.shards` `seq`: the shards held now and their write deadlines. */
  apply(seq: number, held: readonly { readonly shard: number; readonly writableUntil: number }[]): void {
    const { fence, stores, desired, channels, log } = this.#deps;
    if (seq >= this.#seq) {
      this.#seq = seq;
      const change = fence.setShards(held);
      stores.setShardFilter(fence.ownership);
      if (change.dropped.length > 0) {
        const ownership = fence.ownership;
        const leaving = [...desired.clusters()].filter((c) => !hostsCluster(ownership, c));
        for (const key of desired.forget(leaving)) this.#deps.enqueue(key);
        for (const cluster of channels.clusters()) if (!hostsCluster(ownership, cluster)) channels.close(cluster);
        // A dropped shard may own a fleet-wide Service, reported by its owner only: reduce each again.
        if (this.#deps.ready()) this.#deps.enqueueFederated();
        log.info({ shards: change.dropped, clusters: leaving.length }, "shards given up: their keys are left alone");
      }
      if (change.gained.length > 0) log.info({ shards: change.gained }, "shards gained");
      if (this.#deps.ready() && (change.reopened || change.gained.length > 0)) this.#deps.resyncAll();
      if (change.reopened) this.#deps.pumpEvents();
    }
    const { shards, held: now } = fence.ownership;
    const notHeld = Array.from({ length: shards }, (_, i) => i).filter((s) => !now.has(s));
    const acked = this.#seq;
    void this.#deps.executor.whenDrained(notHeld).then(() => this.#deps.fenced(acked));
  }
}
