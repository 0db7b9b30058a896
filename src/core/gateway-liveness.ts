/**
 * The liveness of one probed gateway address (SPEC §10), as a pure transition:
 * `(state, event) → {state, effects}`. No I/O, no clock.
 *
 * Rules: an address starts alive; it is dead after FAILURES_TO_DEAD consecutive failures
 * (timeout, refused, non-2xx, any other error); it is alive again after one 2xx answer.
 * Invariants: `consecutiveFailures` counts the failures since the last success (it is
 * not reset when the address becomes dead); `alive` is false exactly when that count
 * has reached FAILURES_TO_DEAD. The only effect is `changed`, emitted exactly when
 * `alive` flips: a probe that confirms the current state has no effect, so it causes no
 * recomputation and no write.
 */

/** Consecutive failed probes after which an address is dead. */
export const FAILURES_TO_DEAD = 3;

/** Why a probe failed; `status` is an answer outside 2xx. */
export type ProbeFailureReason = "timeout" | "refused" | "status" | "error";

export const PROBE_FAILURE_REASONS: readonly ProbeFailureReason[] = ["timeout", "refused", "status", "error"];

export interface Liveness {
  readonly alive: boolean;
  readonly consecutiveFailures: number;
}

export type LivenessEvent =
  | { readonly kind: "succeeded" }
  | { readonly kind: "failed"; readonly reason: ProbeFailureReason };

export type LivenessEffect = { readonly kind: "changed"; readonly alive: boolean };

export const INITIAL_LIVENESS: Liveness = Object.freeze({ alive: true, consecutiveFailures: 0 });

/** `threshold`: the consecutive failures that make an address dead (a Link's probe names it; SPEC §15). */
export function transition(
  state: Liveness,
  event: LivenessEvent,
  threshold: number = FAILURES_TO_DEAD,
): { readonly state: Liveness; readonly effects: readonly LivenessEffect[] } {
  switch (event.kind) {
    case "succeeded": {
      const next: Liveness = { alive: true, consecutiveFailures: 0 };
      return { state: next, effects: state.alive ? [] : [{ kind: "changed", alive: true }] };
    }
    case "failed": {
      const failures = state.consecutiveFailures + 1;
      const alive = failures < threshold;
      // The count stops growing once dead: nothing reads beyond the threshold.
      const next: Liveness = { alive, consecutiveFailures: Math.min(failures, threshold) };
      return { state: next, effects: state.alive && !alive ? [{ kind: "changed", alive: false }] : [] };
    }
    default: {
      const unknown: never = event;
      throw new Error(`unknown liveness event ${JSON.stringify(unknown)}`);
    }
  }
}
