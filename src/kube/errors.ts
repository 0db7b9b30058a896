/**
 * The two errors of the lean client, and how an HTTP answer becomes one. Both carry
 * plain fields only (method, path, server, ...) and say with `retryable` whether trying
 * again can help.
 */
import type * as HttpModule from "node:http";

/** The common shape of both client errors. */
export abstract class KubeError extends Error {
  readonly method: string;
  readonly path: string;
  readonly server: string;

  constructor(message: string, fields: { method: string; path: string; server: string }, options?: ErrorOptions) {
    super(message, options);
    this.method = fields.method;
    this.path = fields.path;
    this.server = fields.server;
  }

  /** Whether the same request, sent again later, may succeed. */
  abstract get retryable(): boolean;
}

/**
 * The API server answered with a non-2xx status. `reason` is the Status object's reason
 * (`NotFound`, `AlreadyExists`, `Conflict`, `Gone`, `Expired`, `Forbidden`,
 * `TooManyRequests`, ...), or the HTTP status text without spaces when the body was not
 * a Status (e.g. from a proxy). `message` names method, path, server, status and reason.
 */
export class KubeApiError extends KubeError {
  override readonly name = "KubeApiError";
  readonly status: number;
  readonly reason: string;
  /** The server's own message (Status.message), without the request context. */
  readonly statusMessage: string;
  /** From the Retry-After header, else Status.details.retryAfterSeconds. */
  readonly retryAfterSeconds?: number;

  constructor(fields: {
    method: string;
    path: string;
    server: string;
    status: number;
    reason: string;
    statusMessage: string;
    retryAfterSeconds?: number | undefined;
  }) {
    super(
      `${fields.method} ${fields.path} on ${fields.server}: HTTP ${fields.status} ${fields.reason}` +
        (fields.statusMessage ? `: ${fields.statusMessage}` : ""),
      fields,
    );
    this.status = fields.status;
    this.reason = fields.reason;
    this.statusMessage = fields.statusMessage;
    if (fields.retryAfterSeconds !== undefined) this.retryAfterSeconds = fields.retryAfterSeconds;
  }

  /**
   * True for 408, 429, 5xx and 409 Conflict (an optimistic-concurrency clash: read again
   * and retry); false for every other status, including 409 AlreadyExists and 410 Gone
   * (a watch must relist, not retry).
   */
  get retryable(): boolean {
    const s = this.status;
    return s === 408 || s === 429 || s >= 500 || (s === 409 && this.reason !== "AlreadyExists");
  }
}

/**
 * No usable answer. `code` is the system or TLS error code (`ECONNREFUSED`,
 * `ECONNRESET`, `ETIMEDOUT`, `CERT_HAS_EXPIRED`, ...), or one of ours: `ABORTED` (the
 * caller's signal), `CLOSED` (the client was closed), `DECODE` (the body was not the
 * JSON expected), `LINE_TOO_LONG` (a watch line grew past the client's cap),
 * `RESPONSE_TOO_LARGE` (a response body grew past the client's cap). `cause` is the
 * original error, when there is one.
 */
export class KubeTransportError extends KubeError {
  override readonly name = "KubeTransportError";
  readonly code: string;

  constructor(
    fields: { method: string; path: string; server: string; code: string; detail: string },
    options?: ErrorOptions,
  ) {
    super(`${fields.method} ${fields.path} on ${fields.server}: ${fields.code}: ${fields.detail}`, fields, options);
    this.code = fields.code;
  }

  /**
   * True except for `ABORTED` and `CLOSED`, which the caller asked for, and
   * `RESPONSE_TOO_LARGE`: the same request sent again at once gets the same answer (a
   * watcher still tries again after its backoff, in case the remote changed).
   */
  get retryable(): boolean {
    return this.code !== "ABORTED" && this.code !== "CLOSED" && this.code !== "RESPONSE_TOO_LARGE";
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function parseRetryAfter(header: string | undefined): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

function errorCode(error: unknown): string {
  if (isRecord(error) && typeof error["code"] === "string") return error["code"];
  return "EUNKNOWN";
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Where an exchange happened, for the errors it ends with. */
export interface ExchangeContext {
  readonly method: string;
  readonly path: string;
  readonly server: string;
}

/**
 * The `KubeApiError` for a non-2xx answer: reason, message and retry hint from its
 * Status body when it has one, else from the HTTP status and the body's first 200 chars.
 */
export function apiError(
  at: ExchangeContext,
  res: Pick<HttpModule.IncomingMessage, "statusCode" | "headers">,
  body: string,
  statusText: (status: number) => string | undefined,
): KubeApiError {
  const status = res.statusCode ?? 0;
  let reason = (statusText(status) ?? "Unknown").replace(/[^A-Za-z]/g, "");
  let statusMessage = "";
  let retryAfterSeconds = parseRetryAfter(res.headers["retry-after"]);
  try {
    const parsed: unknown = JSON.parse(body);
    if (isRecord(parsed) && parsed["kind"] === "Status") {
      if (typeof parsed["reason"] === "string" && parsed["reason"] !== "") reason = parsed["reason"];
      if (typeof parsed["message"] === "string") statusMessage = parsed["message"];
      const details = parsed["details"];
      if (retryAfterSeconds === undefined && isRecord(details) && typeof details["retryAfterSeconds"] === "number") {
        retryAfterSeconds = details["retryAfterSeconds"];
      }
    }
  } catch {
    statusMessage = body.slice(0, 200).trim();
  }
  return new KubeApiError({ ...at, status, reason, statusMessage, retryAfterSeconds });
}

/** `error` as a `KubeTransportError` (unchanged when it is one), with `code` or the error's own code. */
export function transportError(at: ExchangeContext, error: unknown, code?: string): KubeTransportError {
  if (error instanceof KubeTransportError) return error;
  return new KubeTransportError(
    { ...at, code: code ?? errorCode(error), detail: errorText(error) },
    error === undefined ? undefined : { cause: error },
  );
}
