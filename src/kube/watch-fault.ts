/**
 * How the watcher names a failure: every error of a list or watch becomes a `WatchFault`
 * with a short, metric-friendly reason, and is reported as a `WatchFailure` (plain data).
 */
import { KubeApiError, KubeTransportError } from "./errors.ts";

/** What a `failure` event carries; plain data, safe to post across threads. */
export interface WatchFailure {
  readonly phase: "list" | "watch";
  /**
   * Short and metric-friendly: a transport code (`ECONNREFUSED`, `ECONNRESET`,
   * `ETIMEDOUT`, ...), `http-<status>`, `gone`, `watch-inactive`, `watch-ended-early`,
   * `decode`, `line-too-long` (a watch line grew past the client's cap),
   * `response-too-large` (a list page grew past the client's body cap), `invalid-object`,
   * `wrong-kind` (an object was skipped, `retryInMs` 0: the list or watch went on),
   * `internal`.
   */
  readonly reason: string;
  readonly message: string;
  /** Consecutive failures so far, this one included (1 for the first). */
  readonly attempt: number;
  /** How long the watcher waits before its next attempt. */
  readonly retryInMs: number;
}

/** OpenSSL / Node codes of certificate and handshake failures; their messages say "TLS" so a status row names them clearly. */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|HOSTNAME_MISMATCH|EPROTO$)/;

/** Transport codes of the client that have a reason of their own. */
const CODE_REASONS: Readonly<Record<string, string>> = {
  DECODE: "decode",
  LINE_TOO_LONG: "line-too-long",
  RESPONSE_TOO_LARGE: "response-too-large",
};

/**
 * A remote's Retry-After is a lower bound on the next delay, up to this: a remote must
 * not park its cluster's watch for hours with one header.
 */
export const MAX_RETRY_AFTER_MS = 30_000;

/** A failure already classified, thrown inside the watcher's loop. */
export class WatchFault extends Error {
  readonly reason: string;
  readonly retryAfterMs: number;
  readonly gone: boolean;

  constructor(
    reason: string,
    message: string,
    options: { gone?: boolean; retryAfterMs?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.reason = reason;
    this.gone = options.gone ?? false;
    this.retryAfterMs = Math.min(MAX_RETRY_AFTER_MS, options.retryAfterMs ?? 0);
  }
}

/** Any error of a list or watch as a `WatchFault`. */
export function classifyWatchError(error: unknown): WatchFault {
  if (error instanceof WatchFault) return error;
  if (error instanceof KubeApiError) {
    return new WatchFault(error.status === 410 ? "gone" : `http-${error.status}`, error.message, {
      gone: error.status === 410,
      retryAfterMs: (error.retryAfterSeconds ?? 0) * 1000,
      cause: error,
    });
  }
  if (error instanceof KubeTransportError) {
    const message = TLS_CODE.test(error.code)
      ? `TLS: the server's certificate is not trusted with the kubeconfig's CA, or the TLS handshake failed (${error.code}): ${error.message}`
      : error.message;
    return new WatchFault(CODE_REASONS[error.code] ?? error.code, message, { cause: error });
  }
  return new WatchFault("internal", error instanceof Error ? error.message : String(error), { cause: error });
}
