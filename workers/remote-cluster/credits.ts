/**
 * The actor's side of the desired channel's credit rule (pure).
 *
 * Acks are cumulative: `desired.ack {seq}` means the writer has taken every batch of
 * this epoch on this channel up to and including `seq`. So `lastAcked` only moves
 * forward (`max`), never past `lastSent`, and the batches in flight are `lastSent −
 * lastAcked`: a lost, duplicated or reordered ack is harmless, since any later ack
 * restores every credit. `resend: true` means the writer did not absorb something:
 * everything sent so far is settled (`lastAcked = lastSent`) and the next batch must be
 * the complete desired set. Acks of another epoch are ignored.
 */

export interface Credits {
  readonly epoch: number;
  /** Seq of the last batch sent (0 before the first); seqs grow by 1 per batch. */
  readonly lastSent: number;
  /** Highest seq the writer acknowledged (0 before any); <= lastSent. */
  readonly lastAcked: number;
}

export interface AckLike {
  readonly epoch: number;
  readonly seq: number;
  readonly resend?: true;
}

export function initialCredits(epoch: number): Credits {
  return { epoch, lastSent: 0, lastAcked: 0 };
}

/** Batches sent and not yet acknowledged. */
export function inFlight(credits: Credits): number {
  return credits.lastSent - credits.lastAcked;
}

/** Whether one more batch may be sent with at most `maxInFlight` un-acknowledged. */
export function maySend(credits: Credits, maxInFlight: number): boolean {
  return inFlight(credits) < maxInFlight;
}

/** Counts one more batch sent; returns the new state (its `lastSent` is the batch's seq). */
export function sent(credits: Credits): Credits {
  return { ...credits, lastSent: credits.lastSent + 1 };
}

/**
 * Applies an ack. `resend` in the result: the complete set must be sent next. An ack of
 * another epoch changes nothing.
 */
export function acked(credits: Credits, ack: AckLike): { readonly credits: Credits; readonly resend: boolean } {
  if (ack.epoch !== credits.epoch) return { credits, resend: false };
  if (ack.resend === true) return { credits: { ...credits, lastAcked: credits.lastSent }, resend: true };
  const lastAcked = Math.max(credits.lastAcked, Math.min(ack.seq, credits.lastSent));
  return { credits: lastAcked === credits.lastAcked ? credits : { ...credits, lastAcked }, resend: false };
}

/**
 * A new desired port (a new or restarted writer, which knows nothing of earlier
 * batches): everything sent before is settled; seqs go on growing.
 */
export function settled(credits: Credits): Credits {
  return { ...credits, lastAcked: credits.lastSent };
}
