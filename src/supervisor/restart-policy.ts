/**
 * When to restart a crashed actor: a pure function of its failure history.
 *
 * Exponential backoff (initial · 2^(n-1), capped) over the failures inside `windowMs`;
 * `crashLoopAfter` failures inside the window make it a crash loop, which is reported
 * (status, log, Event) and retried only every `crashLoopRetryMs`: never given up on
 * silently, never restarted hot.
 */
export interface RestartPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly windowMs: number;
  readonly crashLoopAfter: number;
  readonly crashLoopRetryMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = Object.freeze({
  initialMs: 1_000,
  maxMs: 60_000,
  windowMs: 10 * 60_000,
  crashLoopAfter: 5,
  crashLoopRetryMs: 5 * 60_000,
});

export interface RestartDecision {
  readonly delayMs: number;
  readonly crashLoop: boolean;
  /** Failures counted inside the window (the history to keep). */
  readonly recent: readonly number[];
}

export function decideRestart(
  failures: readonly number[],
  now: number,
  policy: RestartPolicy = DEFAULT_RESTART_POLICY,
): RestartDecision {
  const recent = failures.filter((t) => now - t <= policy.windowMs);
  const n = Math.max(1, recent.length);
  if (recent.length >= policy.crashLoopAfter) return { delayMs: policy.crashLoopRetryMs, crashLoop: true, recent };
  return { delayMs: Math.min(policy.maxMs, policy.initialMs * 2 ** (n - 1)), crashLoop: false, recent };
}
