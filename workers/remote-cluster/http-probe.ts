/**
 * One HTTP probe of one gateway address (SPEC §10): the only I/O of gateway health.
 *
 * `GET http://<address>:<port><path>` over a fresh TCP connection per probe, closed as
 * soon as the status line has arrived (no socket outlives its probe), with one deadline for
 * the whole exchange (connect + status line): when it passes, the socket is destroyed.
 * 2xx is success; any other status, a refused or reset connection, an answer that is not
 * HTTP/1.x, and the deadline are failures. The promise never rejects.
 *
 * Why not `http.request`: a probe needs only the status code, and node's HTTP client
 * (ClientRequest, header parser, IncomingMessage) allocates several times more per probe
 * than writing one request buffer and reading one line. With a thousand gateways every
 * 3 s in one actor thread (whose young generation is small on purpose), that garbage
 * was most of probing's CPU; the bench's `probe-cpu` scenario measures this against a bare
 * `http.request` client.
 */
import { connect, type Socket } from "node:net";
import type { ProbeFailureReason } from "../../src/core/gateway-liveness.ts";

export type ProbeResult =
  | { readonly ok: true; readonly status: number; readonly latencyMs: number }
  | {
      readonly ok: false;
      readonly reason: ProbeFailureReason;
      readonly message: string;
      /** Time until the answer (for `status`), or until the failure. */
      readonly latencyMs: number;
      readonly status?: number;
    };

export interface ProbeRequest {
  /** An IP address (IPv4 or IPv6); never a name: gateways' names are resolved before. */
  readonly address: string;
  readonly port: number;
  /** Absolute path of visible ASCII (checked by probe-spec.ts), so safe on the request line. */
  readonly path: string;
  readonly timeoutMs: number;
  readonly userAgent: string;
  /** Aborting it ends the probe at once (a failure of reason `error`, "aborted"). */
  readonly signal?: AbortSignal;
}

export type Probe = (request: ProbeRequest) => Promise<ProbeResult>;

const REFUSED = new Set(["ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "EPIPE"]);

/** A status line longer than this is not an HTTP server's answer to a probe. */
export const MAX_STATUS_LINE_BYTES = 1024;

const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: |$)/;

/**
 * The status code of a complete status line (without its CRLF), or undefined when the
 * line is not HTTP/1.0 or HTTP/1.1's.
 */
export function parseStatusLine(line: string): number | undefined {
  const match = STATUS_LINE.exec(line);
  return match?.[1] === undefined ? undefined : Number(match[1]);
}

/** Performs one probe; see the file comment. */
export const httpProbe: Probe = (request) =>
  new Promise<ProbeResult>((resolve) => {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    const host = request.address.includes(":") ? `[${request.address}]` : request.address;
    const target = `${host}:${request.port}${request.path}`;
    let settled = false;
    let socket: Socket | undefined;
    let deadline: NodeJS.Timeout | undefined;
    let head = "";
    const onAbort = (): void =>
      settle({ ok: false, reason: "error", message: `GET ${target}: aborted`, latencyMs: elapsed() });
    const settle = (result: ProbeResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      request.signal?.removeEventListener("abort", onAbort);
      socket?.destroy();
      resolve(result);
    };
    const fail = (message: string): void =>
      settle({ ok: false, reason: "error", message: `GET ${target}: ${message}`, latencyMs: elapsed() });
    if (request.signal?.aborted) return onAbort();
    request.signal?.addEventListener("abort", onAbort);
    deadline = setTimeout(
      () =>
        settle({
          ok: false,
          reason: "timeout",
          message: `GET ${target}: no answer within ${request.timeoutMs} ms`,
          latencyMs: elapsed(),
        }),
      request.timeoutMs,
    );
    try {
      socket = connect({ host: request.address, port: request.port, noDelay: true });
    } catch (error) {
      // Invalid options (the address and port are checked before, so not expected).
      return fail((error as Error).message);
    }
    socket.setEncoding("latin1");
    socket.once("connect", () => {
      socket?.write(
        `GET ${request.path} HTTP/1.1\r\nHost: ${host}:${request.port}\r\nUser-Agent: ${request.userAgent}\r\nAccept: */*\r\nConnection: close\r\n\r\n`,
      );
    });
    socket.on("data", (chunk: string) => {
      head += chunk;
      const end = head.indexOf("\r\n");
      if (end === -1) {
        if (head.length > MAX_STATUS_LINE_BYTES) fail(`status line longer than ${MAX_STATUS_LINE_BYTES} bytes`);
        return;
      }
      const line = head.slice(0, end);
      const status = parseStatusLine(line);
      if (status === undefined) return fail(`not an HTTP/1.x answer: ${JSON.stringify(line.slice(0, 80))}`);
      if (status >= 200 && status < 300) settle({ ok: true, status, latencyMs: elapsed() });
      else
        settle({ ok: false, reason: "status", status, message: `GET ${target}: HTTP ${status}`, latencyMs: elapsed() });
    });
    socket.once("end", () => fail("connection closed before a status line"));
    socket.on("error", (error: NodeJS.ErrnoException) => {
      const code = error.code ?? "";
      settle({
        ok: false,
        reason: REFUSED.has(code) ? "refused" : "error",
        message: `GET ${target}: ${code || error.message}`,
        latencyMs: elapsed(),
      });
    });
  });
