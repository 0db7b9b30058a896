/**
 * How a failed read or write of the Lease is logged: with the Lease, the identity,
 * whether it is retried and when the renew deadline falls; at error for a leader or a
 * 403 (RBAC: a configuration error), warn for a candidate's transient failure, and at
 * debug when it repeats the previous failure word for word (one line per change, not
 * one per period). A take refused by `mayAcquire` (another Lease layout is live) is
 * logged the same way: once, then at debug while the reason stays.
 */
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import { describe, isStatus, retryable } from "./lease-api.ts";

export interface FailureContext {
  readonly lease: string;
  readonly identity: string;
  readonly leading: boolean;
  readonly retryPeriodMs: number;
  /** Leader only: ms until the renew deadline. */
  readonly deadlineInMs: number;
  /** The text of the failure logged last ("" after a success). */
  readonly lastText: string;
}

/** Logs `error`; returns its text, the next `lastText`. */
export function logLeaseFailure(log: Logger, error: unknown, context: FailureContext): string {
  const text = describe(error);
  const { lease, identity, leading, retryPeriodMs } = context;
  const fields = {
    lease,
    identity,
    leading,
    retryable: retryable(error),
    err: serializeError(error, "leader-election"),
  };
  const message = leading
    ? `renewing Lease ${lease} failed (retry in ${retryPeriodMs} ms; deadline in ${Math.max(0, Math.round(context.deadlineInMs))} ms): ${text}`
    : `trying to acquire Lease ${lease} failed (retry in about ${retryPeriodMs} ms): ${text}`;
  if (text === context.lastText) log.debug(fields, message);
  else if (isStatus(error, 403) || leading) log.error(fields, message);
  else log.warn(fields, message);
  return text;
}

/** Logs that a take of `lease` is held back for `reason`; returns the text, the next `lastText`. */
export function logRefusal(log: Logger, lease: string, reason: string, lastText: string): string {
  const text = `not taking Lease ${lease}: ${reason}`;
  if (text === lastText) log.debug({ lease }, text);
  else log.info({ lease }, text);
  return text;
}

/** Calls `emit` (an elector's event); a listener that throws is logged and ignored, so the elector keeps its schedule. */
export function emitSafely(log: Logger, event: string, emit: () => void): void {
  try {
    emit();
  } catch (error) {
    log.error(
      { event, err: serializeError(error, "leader-election") },
      `a "${event}" listener threw; ignored so the elector keeps its schedule`,
    );
  }
}
