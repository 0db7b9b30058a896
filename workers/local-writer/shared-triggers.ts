/**
 * Which keys clusters share (fleet-wide Services, SPEC §11; MCS imports, SPEC §12) a
 * change may affect, so that only those are reduced again: a shared key's reduction
 * reads every cluster's part and the key's slices, and a fleet of a thousand clusters
 * sends a thousand complete batches at every writer start.
 *
 * A shared key's reduction depends on (a) the known clusters' desired parts of it, (b)
 * which of the clusters its observed objects name are unknown (kept), (c) whether any
 * registered cluster is unknown at all (a key without a known member waits, else it is
 * deleted), and (d) the registration (its order and times rank members and exports).
 * So:
 * - a batch: the keys whose desired parts it changed (the desired store returns them,
 *   unchanged parts excluded) and, when it makes its cluster known, the keys where that
 *   cluster has a part (desired: also returned by the store; observed: here) and, once
 *   no cluster is unknown any more, the keys that waited;
 * - a keep set: every key the first time (nothing was known) or when the registration
 *   order or times changed; else the keys of the clusters it does not keep, and the
 *   waiting ones if it dropped a cluster and no cluster is unknown any more.
 * The periodic resync re-checks every key regardless (the safety net).
 */
import type { DesiredStore } from "./desired-store.ts";

export interface SharedTriggerDeps {
  readonly desired: DesiredStore;
  /** Shared keys whose observed objects name a cluster, and every observed shared key. */
  readonly observed: {
    sharedKeysOf(cluster: string): Iterable<string>;
    sharedKeys(): Iterable<string>;
    sharedClusters(): Iterable<string>;
  };
  /** Keys whose last reduction waited for unknown clusters. */
  readonly waiting: () => Iterable<string>;
  /** Whether this replica hosts `cluster` (sharded: only hosted clusters can be unknown here). */
  readonly hosts: (cluster: string) => boolean;
  readonly enqueue: (key: string) => void;
}

/** What a keep set changes for shared keys: compared before and after it is applied. */
export interface Registration {
  readonly known: boolean;
  readonly signature: string;
}

export class SharedTriggers {
  readonly #deps: SharedTriggerDeps;

  constructor(deps: SharedTriggerDeps) {
    this.#deps = deps;
  }

  /** The registration as it bears on shared keys (see `afterKeep`). */
  registration(): Registration {
    const { desired } = this.#deps;
    const order = desired.order();
    return {
      known: desired.registrationKnown,
      signature: JSON.stringify([
        order,
        order.map((cluster) => desired.registeredAt(cluster) ?? ""),
        order.map((cluster) => desired.priority(cluster)),
      ]),
    };
  }

  /** A complete batch of `cluster` was absorbed; `wasKnown`: it had sent one before. */
  afterComplete(cluster: string, wasKnown: boolean): void {
    if (wasKnown) return;
    for (const key of this.#deps.observed.sharedKeysOf(cluster)) this.#deps.enqueue(key);
    this.#endWaits();
  }

  /**
   * A keep set `keep` was applied over `before`, dropping `dropped`. Clusters the
   * observed shared objects name that it does not keep (dropped, or never heard of: their
   * Secret was removed while fleet-mirror was down) leave their keys.
   */
  afterKeep(before: Registration, dropped: readonly string[], keep: readonly string[]): void {
    const after = this.registration();
    if (!before.known || before.signature !== after.signature) {
      this.all();
      return;
    }
    const gone = new Set(dropped);
    for (const cluster of this.#deps.observed.sharedClusters()) if (!keep.includes(cluster)) gone.add(cluster);
    for (const cluster of gone) for (const key of this.#deps.observed.sharedKeysOf(cluster)) this.#deps.enqueue(key);
    if (dropped.length > 0) this.#endWaits();
  }

  /** Every shared key: desired (some cluster has a part) and observed (leftovers included). */
  all(): void {
    for (const key of this.#deps.desired.sharedKeys()) this.#deps.enqueue(key);
    for (const key of this.#deps.observed.sharedKeys()) this.#deps.enqueue(key);
  }

  /** Once no cluster this replica hosts is unknown, a key that waited may be deleted now. */
  #endWaits(): void {
    const { desired } = this.#deps;
    if (!desired.registrationKnown) return;
    for (const cluster of desired.unknownClusters()) if (this.#deps.hosts(cluster)) return;
    for (const key of [...this.#deps.waiting()]) this.#deps.enqueue(key);
  }
}
