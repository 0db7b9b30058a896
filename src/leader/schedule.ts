/**
 * When the elector tries next: pure delay arithmetic (the wait itself is
 * `abortableSleep`, core/clock.ts).
 */

/** A candidate's retry is stretched by up to this fraction, so replicas do not poll in lockstep. */
const JITTER = 0.2;
/** Woken this long after an observed Lease's expiry, so the expiry has surely passed. */
const EXPIRY_SLACK_MS = 20;

/**
 * A candidate's next try: the retry period with jitter, or just after the observed
 * Lease expires (`expiresAt`, monotonic ms) if that is sooner.
 */
export function candidateDelay(
  retryPeriodMs: number,
  expiresAt: number | undefined,
  now: number,
  random: () => number = Math.random,
): number {
  const retry = retryPeriodMs * (1 + random() * JITTER);
  if (expiresAt === undefined) return retry;
  return Math.min(retry, Math.max(0, expiresAt - now) + EXPIRY_SLACK_MS);
}
