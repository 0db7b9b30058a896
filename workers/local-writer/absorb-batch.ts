/**
 * What one desired batch from a remote-cluster actor does to the writer: kept in the
 * desired store, and every key it may change enqueued (level-triggered: the keys, never
 * the changes, go to the queue).
 *
 * Invariants:
 * - a batch of a cluster this replica does not host (its shard was given up) is refused,
 *   so no stale set is kept; a batch of an unregistered cluster is refused by the store;
 * - a headless mirror's per-host mirrors are enqueued with it (SPEC §12);
 * - a complete batch enqueues every local mirror observed for its cluster, so the ones
 *   it no longer wants are collected (SPEC §6), and re-reduces the shared keys
 *   (fleet-wide, imports) whose count of known clusters it may change (SPEC §11, §12).
 */
import type { ToWriterFromActor } from "../../src/protocol/messages.ts";
import type { DesiredStore } from "./desired-store.ts";
import type { LocalStores } from "./local-stores.ts";
import type { SharedTriggers } from "./shared-triggers.ts";

export interface AbsorbDeps {
  readonly desired: DesiredStore;
  readonly stores: Pick<LocalStores, "perHostIndex" | "observedMirrorsOf">;
  readonly sharedKeys: Pick<SharedTriggers, "afterComplete">;
  /** Whether this replica hosts `cluster` now (unsharded: always). */
  readonly hosts: (cluster: string) => boolean;
  readonly enqueue: (key: string) => void;
}

/** Absorbs `batch`; false: refused (the channel answers with a rejection and the actor resends). */
export function absorbBatch(deps: AbsorbDeps, batch: ToWriterFromActor): boolean {
  const { desired, stores, enqueue } = deps;
  if (!deps.hosts(batch.cluster)) return false;
  const wasKnown = desired.known(batch.cluster);
  const exportsWereKnown = desired.exportsKnownOf(batch.cluster);
  const keys = desired.applyBatch(batch);
  if (keys === undefined) return false;
  for (const key of keys) {
    enqueue(key);
    for (const host of stores.perHostIndex.of(key)) enqueue(host);
  }
  if (batch.complete) {
    for (const key of stores.observedMirrorsOf(batch.cluster)) enqueue(key);
    // Exports turning known or unknown change how the cluster counts in every import
    // it is seen in, held or only observed (reconcile-imports.ts): re-reduce those too.
    const unchanged = wasKnown && exportsWereKnown === desired.exportsKnownOf(batch.cluster);
    deps.sharedKeys.afterComplete(batch.cluster, unchanged);
  }
  return true;
}
