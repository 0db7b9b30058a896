/**
 * One HTTP probe of one gateway address (SPEC §10): the only I/O of gateway health.
 *
 * `GET http://<address>:<port><path>`, no keep-alive (a fresh connection per probe, closed
 * as soon as the status line is read: no socket outlives its probe), one deadline for
 * the whole exchange (connect + headers): when it passes, the request is destroyed.
 * 2xx is success; any other status, a refused or reset connection, and the deadline are
 * failures. The promise never rejects.
 */
import type * as HttpModule from "node:http";
import type { ProbeFailureReason } from "../../src/core/gateway-liveness.ts";

// Not `import * as http from "node:http"`: that namespace import touches a lazy getter
// that loads undici (see src/kube/transport.ts); the CommonJS module object does not.
const http: typeof HttpModule = process.getBuiltinModule("node:http");

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
  readonly address: string;
  readonly port: number;
  readonly path: string;
  readonly timeoutMs: number;
  readonly userAgent: string;
  /** Aborting it ends the probe at once (a failure of reason `error`, "aborted"). */
  readonly signal?: AbortSignal;
}

export type Probe = (request: ProbeRequest) => Promise<ProbeResult>;

const REFUSED = new Set(["ECONNREFUSED", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "EPIPE"]);

/** Performs one probe; see the file comment. */
export const httpProbe: Probe = (request) =>
  new Promise<ProbeResult>((resolve) => {
    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    const target = `${request.address.includes(":") ? `[${request.address}]` : request.address}:${request.port}${request.path}`;
    let settled = false;
    let req: HttpModule.ClientRequest | undefined;
    let deadline: NodeJS.Timeout | undefined;
    const onAbort = (): void =>
      settle({ ok: false, reason: "error", message: `GET ${target}: aborted`, latencyMs: elapsed() });
    const settle = (result: ProbeResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      request.signal?.removeEventListener("abort", onAbort);
      req?.destroy();
      resolve(result);
    };
    if (request.signal?.aborted) return onAbort();
    request.signal?.addEventListener("abort", onAbort);
    try {
      req = http.request({
        host: request.address,
        port: request.port,
        path: request.path,
        method: "GET",
        agent: false,
        headers: { "user-agent": request.userAgent, connection: "close" },
      });
    } catch (error) {
      // Invalid options (the path and address are checked before, so not expected).
      return settle({
        ok: false,
        reason: "error",
        message: `GET ${target}: ${(error as Error).message}`,
        latencyMs: 0,
      });
    }
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
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      res.resume();
      if (status >= 200 && status < 300) settle({ ok: true, status, latencyMs: elapsed() });
      else
        settle({ ok: false, reason: "status", status, message: `GET ${target}: HTTP ${status}`, latencyMs: elapsed() });
    });
    req.on("error", (error: NodeJS.ErrnoException) => {
      const code = error.code ?? "";
      settle({
        ok: false,
        reason: REFUSED.has(code) ? "refused" : "error",
        message: `GET ${target}: ${code || error.message}`,
        latencyMs: elapsed(),
      });
    });
    req.end();
  });
