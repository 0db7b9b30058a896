/**
 * The partition policy (SPEC §14, `--stale-after`), the pure part: whether a remote
 * cluster whose API server is unreachable counts as partitioned, and what that does to
 * a gateway's view. No I/O, no clock (time comes in arguments).
 *
 * Invariants (unit tested):
 * - off (`staleAfterMs` 0) or reachable: never partitioned;
 * - partitioned once unreachable for `staleAfterMs` or longer, and until reachable again;
 * - partitioned, an unprobed gateway's addresses are all not ready; a probed one keeps its
 *   probe's verdict (alive addresses ready, dead ones not); nothing is removed.
 */
import type { GatewayView } from "./desired.ts";

/** Whether the cluster is partitioned now, and else when it would be (ms) if still unreachable. */
export function partitionState(
  staleAfterMs: number,
  unreachableSince: number | undefined,
  now: number,
): { readonly partitioned: boolean; readonly at?: number } {
  if (staleAfterMs <= 0 || unreachableSince === undefined) return { partitioned: false };
  const at = unreachableSince + staleAfterMs;
  return now >= at ? { partitioned: true } : { partitioned: false, at };
}

/** `view` as a partitioned cluster's gateway: unprobed, every address not ready. */
export function partitionedView(view: GatewayView, probed: boolean): GatewayView {
  if (probed || view.addresses.length === 0) return view;
  return { ...view, notReadyAddresses: [...view.addresses] };
}
