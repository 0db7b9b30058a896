/**
 * A lean Kubernetes API client over node:https (or node:http, for a test proxy): JSON
 * requests and newline-delimited JSON watch streams, nothing else. It runs inside worker
 * threads, so it must never import @kubernetes/client-node.
 *
 * Guarantees:
 * - one keep-alive agent per client (transport.ts); `close()` destroys it and every socket;
 * - every failure is thrown as a `KubeApiError` (the server answered non-2xx) or a
 *   `KubeTransportError` (no usable answer: network, TLS, timeout, abort, bad JSON, a
 *   watch line over the cap); both say method, path and server, carry plain fields
 *   only, and tell with `retryable` whether trying again can help (errors.ts);
 * - an aborted or timed-out exchange destroys its socket, so nothing leaks;
 * - a watch holds at most `maxWatchLineBytes` of an unfinished line (watch-lines.ts), and
 *   any other answer at most `maxResponseBytes` of its body (response-body.ts): a larger
 *   one fails its request with `RESPONSE_TOO_LARGE` as soon as the cap is passed;
 * - every `Warning` header of every answer is counted, and each distinct text logged
 *   once per client (warnings.ts).
 */
import type { ConnectionSpec } from "../core/connection.ts";
import { collectGarbageNow } from "../heap-settle.ts";
import { apiError, type ExchangeContext, type KubeTransportError, transportError } from "./errors.ts";
import {
  BodyCollector,
  byteCap,
  collectErrorBody,
  DEFAULT_MAX_RESPONSE_BYTES,
  ResponseTooLargeError,
} from "./response-body.ts";
import { ApiTransport, http, type Query } from "./transport.ts";
import { type ApiWarningCounts, type WarningLogger, WarningTracker, warningValues } from "./warnings.ts";
import {
  DEFAULT_MAX_WATCH_LINE_BYTES,
  decodeWatchEvent,
  LineSplitter,
  LineTooLongError,
  type WatchEvent,
} from "./watch-lines.ts";

export { KubeApiError, KubeError, KubeTransportError } from "./errors.ts";
export { DEFAULT_MAX_RESPONSE_BYTES } from "./response-body.ts";
export type { Query } from "./transport.ts";
export type { ApiWarningCounts } from "./warnings.ts";
export type { WatchEvent, WatchEventType } from "./watch-lines.ts";

export type HttpMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

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
  /**
   * Longest watch line held while waiting for its newline, in bytes; a longer one ends
   * the watch with `LINE_TOO_LONG`. Default 4 MiB (`DEFAULT_MAX_WATCH_LINE_BYTES`).
   */
  readonly maxWatchLineBytes?: number;
  /**
   * Largest body of an answer to `request()` (a list page, an object), in bytes, counted
   * as the chunks arrive; a larger one fails the request with `RESPONSE_TOO_LARGE` and
   * its socket is destroyed. Default 64 MiB (`DEFAULT_MAX_RESPONSE_BYTES`).
   */
  readonly maxResponseBytes?: number | undefined;
  /**
   * Called whenever the bytes of answers this client holds change: bodies of `request()`
   * being received, then decoded (released once parsed or failed), summed over the
   * requests in flight. For a caller that reports its memory. Default: none.
   */
  readonly onHeldBytes?: ((bytes: number) => void) | undefined;
  /** Where the first sighting of each distinct `Warning` text is logged (warn level). Default: not logged. */
  readonly logger?: WarningLogger;
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
  /**
   * Closes the connection after the answer instead of keeping it for reuse: for a rare
   * request next to a client's watch, whose kept connection would sit idle (≈ 90 KB).
   */
  readonly closeConnection?: boolean;
}

const statusText = (status: number): string | undefined => http.STATUS_CODES[status];

export class KubeClient {
  readonly server: string;
  readonly #transport: ApiTransport;
  readonly #timeoutMs: number;
  readonly #maxLineBytes: number;
  readonly #maxBodyBytes: number;
  readonly #onHeldBytes: ((bytes: number) => void) | undefined;
  /** Bytes of the bodies of every `request()` in flight (see `onHeldBytes`). */
  #heldBytes = 0;
  readonly #warnings: WarningTracker;
  #closed = false;

  /** Throws when `connection.server` is not an absolute http(s) URL, or an option is out of range. */
  constructor(connection: ConnectionSpec, options: KubeClientOptions = {}) {
    this.#transport = new ApiTransport(connection, options.userAgent ?? "fleet-mirror");
    this.server = this.#transport.server;
    this.#timeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#maxLineBytes = new LineSplitter(options.maxWatchLineBytes ?? DEFAULT_MAX_WATCH_LINE_BYTES).maxBytes;
    this.#maxBodyBytes = byteCap(options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES, "maxResponseBytes");
    this.#onHeldBytes = options.onHeldBytes;
    this.#warnings = new WarningTracker(options.logger);
  }

  /** The timeout of a request that names none (`requestTimeoutMs`, default 30 s). */
  get requestTimeoutMs(): number {
    return this.#timeoutMs;
  }

  /** The `Warning` headers this client received so far (a snapshot). */
  get apiWarnings(): ApiWarningCounts {
    return this.#warnings.counts;
  }

  /**
   * Sends one JSON request and resolves with the parsed JSON answer (`undefined` for an
   * empty body). Throws `KubeApiError` on a non-2xx status, `KubeTransportError` on
   * anything else (including a timeout, `ETIMEDOUT`, after `timeoutMs` for the whole
   * exchange, an abort, `ABORTED`, and a body past `maxResponseBytes`,
   * `RESPONSE_TOO_LARGE`, raised as soon as the cap is passed: what was held is
   * released and the socket destroyed). The JSON is not validated against `T`.
   */
  request<T>(method: HttpMethod, path: string, options: RequestOptions = {}): Promise<T> {
    const at = this.#at(method, path);
    const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body), "utf8");
    return new Promise<T>((resolve, reject) => {
      const early = this.#refuse(at, options.signal);
      if (early) {
        reject(early);
        return;
      }
      // Node's https agent keeps the first request made on each keep-alive socket
      // reachable for the socket's whole life (a closure of the socket's creation holds
      // it), and with it every listener below. So no listener holds `resolve`/`reject` or
      // the answer itself: they reach both through `pending` and `body`, emptied when
      // the exchange settles. Otherwise a socket keeps its first answer (a whole list,
      // parsed and raw) alive: ≈ 135 KB of heap per remote actor at 50 Services, plus
      // the raw bytes.
      let pending: { readonly resolve: (value: T) => void; readonly reject: (error: Error) => void } | undefined = {
        resolve,
        reject,
      };
      /** The 2xx answer's body so far (at most the cap); released when the exchange settles. */
      const body = new BodyCollector(this.#maxBodyBytes);
      /** Bytes of this answer's body counted in `#heldBytes`, until the exchange settles. */
      let held = 0;
      const hold = (bytes: number): void => {
        held += bytes;
        this.#heldBytes += bytes;
        this.#onHeldBytes?.(this.#heldBytes);
      };
      const finish = (error: Error | undefined, value?: unknown): void => {
        const settle = pending;
        if (settle === undefined) return;
        pending = undefined;
        body.release();
        if (held > 0) hold(-held);
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", onAbort);
        if (error) settle.reject(error);
        else settle.resolve(value as T);
      };
      const headers: Record<string, string> = {};
      if (options.closeConnection) headers["connection"] = "close";
      if (payload) {
        headers["content-type"] = options.contentType ?? "application/json";
        headers["content-length"] = String(payload.length);
      }
      const req = this.#transport.request(method, path, options.query, headers, (res) => {
        this.#warnings.observe(warningValues(res.rawHeaders), method, path);
        res.on("error", (error) => finish(transportError(at, error)));
        res.on("close", () => {
          if (!res.complete) finish(transportError(at, new Error("connection closed mid-response")));
        });
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          collectErrorBody(res, (text) => finish(apiError(at, res, text, statusText)));
          return;
        }
        res.on("data", (chunk: Buffer) => {
          if (pending === undefined) return;
          if (body.push(chunk)) {
            hold(chunk.length);
            return;
          }
          finish(transportError(at, new ResponseTooLargeError(body.maxBytes), "RESPONSE_TOO_LARGE"));
          req.destroy(); // nothing more of this answer is read
          // What it held is garbage now: returned before the next attempt fills as much again.
          setImmediate(collectGarbageNow);
        });
        res.on("end", () => {
          if (pending === undefined) return;
          const text = body.take();
          if (text.trim() === "") {
            finish(undefined, undefined);
            return;
          }
          try {
            finish(undefined, JSON.parse(text));
          } catch (error) {
            finish(transportError(at, error, "DECODE"));
          }
        });
      });
      req.on("error", (error) => finish(transportError(at, error)));
      const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
      const timer = setTimeout(() => {
        req.destroy(transportError(at, new Error(`no complete answer within ${timeoutMs} ms`), "ETIMEDOUT"));
      }, timeoutMs);
      const onAbort = (): void => {
        req.destroy(transportError(at, options.signal?.reason, "ABORTED"));
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
   * the request timeout (`ETIMEDOUT`), when a line is not a watch event (`DECODE`), when
   * a line grows past `maxWatchLineBytes` (`LINE_TOO_LONG`; what it held is released),
   * and when `signal` aborts (`ABORTED`). A failed watch's socket is destroyed, never
   * returned to the pool. There is no limit on the stream's duration: inactivity is the
   * caller's business (`onBytes`).
   */
  watch(path: string, query: Query, handlers: WatchHandlers, signal: AbortSignal): Promise<void> {
    const at = this.#at("GET", path);
    return new Promise<void>((resolve, reject) => {
      const early = this.#refuse(at, signal);
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
      /** Hands one line to the caller; false when the watch has ended. */
      const deliver = (line: string): boolean => {
        if (line.trim() === "") return true;
        let event: WatchEvent;
        try {
          event = decodeWatchEvent(line);
        } catch (error) {
          fail(transportError(at, error, "DECODE"));
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
      const req = this.#transport.request("GET", path, { ...query, watch: true }, {}, (res) => {
        clearTimeout(headerTimer);
        this.#warnings.observe(warningValues(res.rawHeaders), "GET", path);
        res.on("error", (error) => finish(transportError(at, error)));
        res.on("close", () => {
          if (!res.complete) finish(transportError(at, new Error("connection closed mid-stream")));
        });
        const status = res.statusCode ?? 0;
        if (status < 200 || status >= 300) {
          collectErrorBody(res, (text) => finish(apiError(at, res, text, statusText)));
          return;
        }
        handlers.onOpen?.();
        const lines = new LineSplitter(this.#maxLineBytes);
        res.on("data", (chunk: Buffer) => {
          if (settled || signal.aborted) return;
          handlers.onBytes?.();
          let complete: string[];
          try {
            complete = lines.push(chunk);
          } catch (error) {
            fail(transportError(at, error, error instanceof LineTooLongError ? "LINE_TOO_LONG" : "DECODE"));
            return;
          }
          for (const line of complete) {
            if (settled || signal.aborted || !deliver(line)) return;
          }
        });
        res.on("end", () => {
          if (settled || signal.aborted) return;
          if (deliver(lines.end())) finish(undefined);
        });
      });
      req.on("error", (error) => finish(transportError(at, error)));
      const headerTimer = setTimeout(() => {
        req.destroy(transportError(at, new Error(`no response within ${this.#timeoutMs} ms`), "ETIMEDOUT"));
      }, this.#timeoutMs);
      const onAbort = (): void => {
        req.destroy(transportError(at, signal.reason, "ABORTED"));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      req.end();
    });
  }

  /** Destroys the agent and every socket, idle or in use. Later calls fail with `CLOSED`. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#transport.close();
  }

  #at(method: string, path: string): ExchangeContext {
    return { method, path, server: this.server };
  }

  #refuse(at: ExchangeContext, signal: AbortSignal | undefined): KubeTransportError | undefined {
    if (this.#closed) return transportError(at, new Error("client closed"), "CLOSED");
    if (signal?.aborted) return transportError(at, signal.reason, "ABORTED");
    return undefined;
  }
}
