/**
 * What a test tells the fault proxy (sandbox/fault-proxy.ts) to do and reads back from
 * it, and the bytes it injects: the rules and their validation, its counters, the
 * Kubernetes Status body of an injected error, and the bad line of a corrupted watch.
 * Pure: no sockets here.
 */

export interface FaultRules {
  /** Added before forwarding each request (ms). Watches included. */
  latencyMs?: number;
  /** Fraction 0..1 of NON-watch requests answered by the proxy itself with `errorStatus` (a proper Kubernetes Status JSON body). */
  errorRate?: number;
  /** The status of injected errors. Default 503. */
  errorStatus?: 409 | 429 | 500 | 503;
  /** With 429 (and 503): the Retry-After header (seconds), also put in Status.details.retryAfterSeconds. No header when omitted. */
  retryAfterSeconds?: number;
  /** New TCP connections are closed at once (connection refused-like: destroy the socket immediately). */
  refuse?: boolean;
  /**
   * Silent hang: accept connections/requests and never answer nor close (for new
   * requests); existing streams stop receiving bytes but stay open. When the stall is
   * lifted, held requests are forwarded and held bytes delivered (a healed partition),
   * unless their client gave up meanwhile.
   */
  stall?: boolean;
  /** Inject one bad line into each NEW watch stream right after it opens: "invalid-json" → a line that is not JSON; "wrong-kind" → an ADDED event whose object has kind "Pod" and a metadata.name. */
  corruptWatch?: "invalid-json" | "wrong-kind";
  /**
   * Each NEW watch stream, once its headers are out, becomes one line that never ends:
   * bytes without a newline, written as fast as the client reads them (back-pressure
   * honoured, so the proxy itself holds little), until the client goes away. The
   * upstream watch is dropped.
   */
  endlessWatchLine?: boolean;
  /** Only requests for which this returns true are subject to errorRate/latency (default: all). `path` excludes the query. */
  match?: (method: string, path: string) => boolean;
}

export interface FaultProxyStats {
  /** HTTP requests received (watches included). */
  readonly requests: number;
  /** Watch requests received. */
  readonly watches: number;
  readonly injectedErrors: number;
  /** Watch exchanges destroyed by `cutWatches()`. */
  readonly watchesCut: number;
  /** TCP connections destroyed at once because of `refuse`. */
  readonly refused: number;
  /** Client connections open now. */
  readonly openConnections: number;
  /**
   * Requests received and not finished now: held by a stall, in flight upstream, or being
   * answered. 0 once every request held by a stall was forwarded and answered, or dropped
   * because its client gave up.
   */
  readonly openRequests: number;
  /** Bytes written into endless watch lines (`endlessWatchLine`). */
  readonly endlessLineBytes: number;
  /** Endless watch lines the client ended (closed its side). */
  readonly endlessLinesEnded: number;
}

export const STATUS_REASONS: Readonly<Record<number, string>> = {
  409: "Conflict",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
};

/** A Kubernetes Status body, as an API server answers an error. */
export function statusBody(code: number, reason: string, message: string, retryAfterSeconds?: number): string {
  return JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    ...(retryAfterSeconds !== undefined ? { details: { retryAfterSeconds } } : {}),
    code,
  });
}

/** @throws Error naming the first rule out of range. */
export function validateRules(rules: FaultRules): void {
  const { latencyMs, errorRate, retryAfterSeconds } = rules;
  if (latencyMs !== undefined && !(Number.isFinite(latencyMs) && latencyMs >= 0)) {
    throw new Error(`fault rule latencyMs must be a number >= 0, got ${latencyMs}`);
  }
  if (errorRate !== undefined && !(errorRate >= 0 && errorRate <= 1)) {
    throw new Error(`fault rule errorRate must be within 0..1, got ${errorRate}`);
  }
  if (retryAfterSeconds !== undefined && !(Number.isInteger(retryAfterSeconds) && retryAfterSeconds >= 0)) {
    throw new Error(`fault rule retryAfterSeconds must be an integer >= 0, got ${retryAfterSeconds}`);
  }
}

/** The bad line a corrupted watch stream starts with (`FaultRules.corruptWatch`). */
export function corruptLine(kind: "invalid-json" | "wrong-kind", path: string): string {
  if (kind === "invalid-json") return "this is not JSON {\n";
  const namespace = /\/namespaces\/([^/]+)\//.exec(path)?.[1] ?? "default";
  const pod = {
    type: "ADDED",
    object: {
      kind: "Pod",
      apiVersion: "v1",
      // No resourceVersion: a watcher must not resume a watch from an invented one.
      metadata: { name: "fault-proxy-wrong-kind", namespace },
    },
  };
  return `${JSON.stringify(pod)}\n`;
}
