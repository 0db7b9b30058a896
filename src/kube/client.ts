/**
 * A lean Kubernetes API client over node:https (or node:http, for a test proxy): JSON
 * requests and newline-delimited JSON watch streams, nothing else. It runs inside worker
 * threads, so it must never import @kubernetes/client-node.
 *
 * Guarantees:
 * - one keep-alive agent per client, built from the ConnectionSpec (CA, client
 *   certificate, SNI name, skip-verify); `close()` destroys it and every socket;
 * - every failure is thrown as a `KubeApiError` (the server answered non-2xx) or a
 *   `KubeTransportError` (no usable answer: network, TLS, timeout, abort, bad JSON);
 *   both say method, path and server, carry plain fields only, and tell with
 *   `retryable` whether trying again can help;
 * - an aborted or timed-out exchange destroys its socket, so nothing leaks.
 */
import { readFileSync } from "node:fs";
import type * as HttpModule from "node:http";
import type * as HttpsModule from "node:https";
import * as tls from "node:tls";
import type { ConnectionSpec } from "./connection.ts";

// Not `import * as http from "node:http"`: an ESM namespace import of node:http reads
// every export, and one of them is a lazy getter that loads undici (fetch, HTTP/2):
// +31 ms of CPU in every actor thread's start (measured: 78 vs 47 ms per thread).
// getBuiltinModule returns the CommonJS module object, touching nothing.
const http: typeof HttpModule = process.getBuiltinModule("node:http");
const https: typeof HttpsModule = process.getBuiltinModule("node:https");

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/** Query parameters; `undefined` values are left out. */
export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

/**
 * One line of a watch stream. `object` is a JSON object (for ERROR a `Status`); its shape
 * beyond that is not checked here.
 */
export interface WatchEvent {
  readonly type: WatchEventType;
  readonly object: Readonly<Record<string, unknown>>;
}

export interface WatchHandlers {
  /** Called once per event, in stream order. A throw ends the watch, which rejects with that error. */
  onEvent(event: WatchEvent): void;
  /** Called for every chunk received (for an inactivity watchdog). */
  onBytes?(): void;
  /** Called once when the server accepted the watch (2xx response headers). */
  onOpen?(): void;
}

export interface KubeClientOptions {
  /** Limit on a whole `request()`, and on the wait for a watch's response headers. Default 30 000 ms. */
  readonly requestTimeoutMs?: number;
  /** Default `fleet-mirror`. */
  readonly userAgent?: string;
}

export interface RequestOptions {
  readonly query?: Query;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Default `application/json`; e.g. `application/merge-patch+json` for a PATCH. */
  readonly contentType?: string;
  readonly signal?: AbortSignal;
  /** Overrides the client's `requestTimeoutMs` for this request. */
  readonly timeoutMs?: number;
}

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
 * JSON expected). `cause` is the original error, when there is one.
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

  /** True except for `ABORTED` and `CLOSED`, which the caller asked for. */
  get retryable(): boolean {
    return this.code !== "ABORTED" && this.code !== "CLOSED";
  }
}

const WATCH_EVENT_TYPES: ReadonlySet<string> = new Set<WatchEventType>([
  "ADDED",
  "MODIFIED",
  "DELETED",
  "BOOKMARK",
  "ERROR",
]);

/** Bytes of an error body kept for the message; the rest is drained and dropped. */
const MAX_ERROR_BODY = 64 * 1024;

function isRecord(value: unknown): value is Record<string, unknown> {
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

const TOKEN_FILE_REREAD_MS = 60_000;

export class KubeClient {
  readonly server: string;
  readonly #url: URL;
  readonly #transport: typeof http | typeof https;
  readonly #agent: HttpModule.Agent;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #tokenFile: { readonly path: string; token: string; readAt: number } | undefined;
  readonly #timeoutMs: number;
  readonly #servername: string | undefined;
  #closed = false;

  /** Throws when `connection.server` is not an absolute http(s) URL. */
  constructor(connection: ConnectionSpec, options: KubeClientOptions = {}) {
    let url: URL;
    try {
      url = new URL(connection.server);
    } catch (error) {
      throw new Error(`invalid API server URL ${JSON.stringify(connection.server)}`, { cause: error });
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") {
      throw new Error(`API server URL must be http(s): ${connection.server}`);
    }
    this.server = connection.server.replace(/\/+$/, "");
    this.#url = url;
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#servername = connection.tlsServerName;
    const headers: Record<string, string> = {
      accept: "application/json",
      "user-agent": options.userAgent ?? "fleet-mirror",
    };
    if (connection.auth.kind === "token") headers["authorization"] = `Bearer ${connection.auth.token}`;
    this.#headers = headers;
    this.#tokenFile =
      connection.auth.kind === "token-file" ? { path: connection.auth.path, token: "", readAt: 0 } : undefined;
    if (url.protocol === "https:") {
      this.#transport = https;
      // One SecureContext per client: given ca/cert/key instead, every new connection
      // parses the PEMs again (a burst of connections then costs milliseconds each).
      const secureContext = tls.createSecureContext({
        ...(connection.caPem !== undefined ? { ca: connection.caPem } : {}),
        ...(connection.auth.kind === "client-certificate"
          ? { cert: connection.auth.certPem, key: connection.auth.keyPem }
          : {}),
      });
      this.#agent = new https.Agent({
        keepAlive: true,
        rejectUnauthorized: connection.insecureSkipTlsVerify !== true,
        secureContext,
        ...(connection.tlsServerName !== undefined ? { servername: connection.tlsServerName } : {}),
      });
    } else {
      this.#transport = http;
      this.#agent = new http.Agent({ keepAlive: true });
    }
  }

  /** The request headers; with `token-file` auth, the token as last read (re-read each minute). */
  #currentHeaders(): Record<string, string> {
    const headers: Record<string, string> = { ...this.#headers };
    const file = this.#tokenFile;
    if (file) {
      if (Date.now() - file.readAt > TOKEN_FILE_REREAD_MS) {
        try {
          file.token = readFileSync(file.path, "utf8").trim();
          file.readAt = Date.now();
        } catch {
          // Keep the last token; the API server's 401 will say what is wrong.
        }
      }
      if (file.token) headers["authorization"] = `Bearer ${file.token}`;
    }
    return headers;
  }

  /**
   * Sends one JSON request and resolves with the parsed JSON answer (`undefined` for an
   * empty body). Throws `KubeApiError` on a non-2xx status, `KubeTransportError` on
   * anything else (including a timeout, `ETIMEDOUT`, after `timeoutMs` for the whole
   * exchange, and an abort, `ABORTED`). The JSON is not validated against `T`.
   */
  request<T>(method: HttpMethod, path: string, options: RequestOptions = {}): Promise<T> {
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body), "utf8");
    return new Promise<T>((resolve, reject) => {
      const early = this.#refuse(method, path, options.signal);
      if (early) {
        reject(early);
        return;
      }
      let settled = false;
      const finish = (error: Error | undefined, value?: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        if (error) reject(error);
        else resolve(value as T);
      };
      const headers: Record<string, string> = this.#currentHeaders();
      if (payload) {
        headers["content-type"] = options.contentType ?? "application/json";
        headers["content-length"] = String(payload.length);
      }
      const req = this.#transport.request(
        this.#target(path, options.query),
        { method, headers, agent: this.#agent, ...this.#tlsOptions() },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          const ok = res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300;
          res.on("data", (chunk: Buffer) => {
            if (!ok && size >= MAX_ERROR_BODY) return;
            size += chunk.length;
            chunks.push(chunk);
          });
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            if (!ok) {
              finish(this.#apiError(method, path, res, text));
              return;
            }
            if (text.trim() === "") {
              finish(undefined, undefined);
              return;
            }
            try {
              finish(undefined, JSON.parse(text));
            } catch (error) {
              finish(this.#transportError(method, path, error, "DECODE"));
            }
          });
          res.on("error", (error) => finish(this.#transportError(method, path, error)));
          res.on("close", () => {
            if (!res.complete) finish(this.#transportError(method, path, new Error("connection closed mid-response")));
          });
        },
      );
      req.on("error", (error) => finish(this.#transportError(method, path, error)));
      const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
      const timer = setTimeout(() => {
        req.destroy(
          this.#transportError(method, path, new Error(`no complete answer within ${timeoutMs} ms`), "ETIMEDOUT"),
        );
      }, timeoutMs);
      const onAbort = (): void => {
        req.destroy(this.#transportError(method, path, options.signal?.reason, "ABORTED"));
      };
      options.signal?.addEventListener("abort", onAbort, { once: true });
      req.end(payload);
    });
  }

  /**
   * Opens a watch (`GET path?watch=true&...query`) and feeds each event of the
   * newline-delimited JSON stream to `handlers.onEvent`, in order, as it arrives.
   *
   * Resolves when the server ends the stream normally (e.g. its `timeoutSeconds`
   * elapsed). Rejects with `KubeApiError` when the response status is not 2xx; with
   * `KubeTransportError` on a socket/TLS error, when no response headers arrive within
   * the request timeout (`ETIMEDOUT`), when a line is not a watch event (`DECODE`), and
   * when `signal` aborts (`ABORTED`; the socket is destroyed, never returned to the
   * pool). There is no limit on the stream's duration: inactivity is the caller's
   * business (`onBytes`).
   */
  watch(path: string, query: Query, handlers: WatchHandlers, signal: AbortSignal): Promise<void> {
    const method = "GET";
    return new Promise<void>((resolve, reject) => {
      const early = this.#refuse(method, path, signal);
      if (early) {
        reject(early);
        return;
      }
      let settled = false;
      const finish = (error: unknown): void => {
        if (settled) return;
        settled = true;
        clearTimeout(headerTimer);
        signal.removeEventListener("abort", onAbort);
        if (error === undefined) resolve();
        else reject(error);
      };
      /** Ends the exchange with `error`, destroying the socket so it cannot be reused mid-stream. */
      const fail = (error: unknown): void => {
        finish(error);
        req.destroy();
      };
      const req = this.#transport.request(
        this.#target(path, { ...query, watch: true }),
        { method, headers: this.#currentHeaders(), agent: this.#agent, ...this.#tlsOptions() },
        (res) => {
          clearTimeout(headerTimer);
          const status = res.statusCode ?? 0;
          if (status < 200 || status >= 300) {
            const chunks: Buffer[] = [];
            let size = 0;
            res.on("data", (chunk: Buffer) => {
              if (size >= MAX_ERROR_BODY) return;
              size += chunk.length;
              chunks.push(chunk);
            });
            res.on("end", () => finish(this.#apiError(method, path, res, Buffer.concat(chunks).toString("utf8"))));
          } else {
            handlers.onOpen?.();
            res.setEncoding("utf8");
            let pending = "";
            const deliver = (line: string): boolean => {
              if (line.trim() === "") return true;
              let event: WatchEvent;
              try {
                event = decodeWatchEvent(line);
              } catch (error) {
                fail(this.#transportError(method, path, error, "DECODE"));
                return false;
              }
              try {
                handlers.onEvent(event);
              } catch (error) {
                fail(error);
                return false;
              }
              return true;
            };
            res.on("data", (chunk: string) => {
              if (settled || signal.aborted) return;
              handlers.onBytes?.();
              pending += chunk;
              let newline = pending.indexOf("\n");
              while (newline >= 0 && !settled && !signal.aborted) {
                const line = pending.slice(0, newline);
                pending = pending.slice(newline + 1);
                if (!deliver(line)) return;
                newline = pending.indexOf("\n");
              }
            });
            res.on("end", () => {
              if (settled || signal.aborted) return;
              if (deliver(pending)) finish(undefined);
            });
          }
          res.on("error", (error) => finish(this.#transportError(method, path, error)));
          res.on("close", () => {
            if (!res.complete) finish(this.#transportError(method, path, new Error("connection closed mid-stream")));
          });
        },
      );
      req.on("error", (error) => finish(this.#transportError(method, path, error)));
      const headerTimer = setTimeout(() => {
        req.destroy(
          this.#transportError(method, path, new Error(`no response within ${this.#timeoutMs} ms`), "ETIMEDOUT"),
        );
      }, this.#timeoutMs);
      const onAbort = (): void => {
        req.destroy(this.#transportError(method, path, signal.reason, "ABORTED"));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      req.end();
    });
  }

  /** Destroys the agent and every socket, idle or in use. Later calls fail with `CLOSED`. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#agent.destroy();
  }

  #refuse(method: string, path: string, signal: AbortSignal | undefined): KubeTransportError | undefined {
    if (this.#closed) return this.#transportError(method, path, new Error("client closed"), "CLOSED");
    if (signal?.aborted) return this.#transportError(method, path, signal.reason, "ABORTED");
    return undefined;
  }

  #target(path: string, query: Query | undefined): URL {
    const url = new URL(this.#url.href);
    url.pathname = url.pathname.replace(/\/+$/, "") + path;
    if (query) {
      for (const [name, value] of Object.entries(query)) {
        if (value !== undefined) url.searchParams.set(name, String(value));
      }
    }
    return url;
  }

  #tlsOptions(): { servername?: string } {
    return this.#servername !== undefined ? { servername: this.#servername } : {};
  }

  #apiError(method: string, path: string, res: HttpModule.IncomingMessage, body: string): KubeApiError {
    const status = res.statusCode ?? 0;
    let reason = (http.STATUS_CODES[status] ?? "Unknown").replace(/[^A-Za-z]/g, "");
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
    return new KubeApiError({ method, path, server: this.server, status, reason, statusMessage, retryAfterSeconds });
  }

  #transportError(method: string, path: string, error: unknown, code?: string): KubeTransportError {
    if (error instanceof KubeTransportError) return error;
    return new KubeTransportError(
      { method, path, server: this.server, code: code ?? errorCode(error), detail: errorText(error) },
      error === undefined ? undefined : { cause: error },
    );
  }
}

/** Parses one line of a watch stream; throws when it is not `{type, object}` with a known type. */
function decodeWatchEvent(line: string): WatchEvent {
  const parsed: unknown = JSON.parse(line);
  if (!isRecord(parsed)) throw new Error("watch event is not a JSON object");
  const { type, object } = parsed;
  if (typeof type !== "string" || !WATCH_EVENT_TYPES.has(type)) {
    throw new Error(`unknown watch event type ${JSON.stringify(type)}`);
  }
  if (!isRecord(object)) throw new Error(`watch event ${type} has no object`);
  return { type: type as WatchEventType, object };
}
