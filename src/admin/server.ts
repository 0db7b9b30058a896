/**
 * The admin HTTP server of `fleet-mirror run` (node:http, plain text and JSON):
 *   GET /metrics   Prometheus text exposition of `registry`
 *   GET /healthz   200 "ok" / 503 reason (liveness)
 *   GET /readyz    200 "ok" / 503 reason (readiness); `?verbose` lists the check and its note
 *   GET /status    AdminStatus JSON (read by `fleet-mirror status`)
 * HEAD is served like GET without a body; other methods get 405, other paths 404.
 * The server only reads `source` and `registry`; it never changes the controller.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { parseHostPort } from "../flag-values.ts";
import type { Logger } from "../log.ts";
import { serializeError } from "../protocol/errors.ts";
import type { AdminSource, AdminStatus, Check } from "./source.ts";

// Not `import { createServer } from "node:http"`: an ESM import of node:http reads every
// export, and one is a lazy getter that loads undici (fetch, WebSocket, HTTP/2), which the
// main thread of `run` otherwise never uses: ≈ 0.05–0.1 CPU-s of every start. The
// CommonJS module object touches nothing (as src/kube/transport.ts does for the threads).
const { createServer } = process.getBuiltinModule("node:http");

export interface AdminServerOptions {
  /** `host:port`; `:port` listens on every interface; port 0 picks a free port. */
  readonly addr: string;
  readonly logger: Logger;
  readonly source: AdminSource;
  readonly registry: Registry;
}

export interface AdminServer {
  /** `http://host:port` as bound (the real port when 0 was asked for). */
  readonly url: string;
  readonly port: number;
  /** Stops listening and closes every connection, idle keep-alive ones included. */
  close(): Promise<void>;
}

/** The text of a health check: "ok" or the reason; verbose adds the check's name and note. */
export function checkText(name: string, check: Check, verbose: boolean): string {
  if (!verbose) return check.ok ? "ok\n" : `${check.reason ?? "failed"}\n`;
  const note = check.reason ? `: ${check.reason}` : "";
  return `[${check.ok ? "+" : "-"}]${name} ${check.ok ? "ok" : "failed"}${note}\n${name} check ${check.ok ? "passed" : "failed"}\n`;
}

/**
 * Starts listening on `addr` and logs "admin server listening" with `url`.
 * @throws the listen error (address in use, permission denied) — the caller fails fast.
 */
export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const { host, port } = parseHostPort(options.addr, "admin-addr");
  const { logger, source, registry } = options;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? "/", "http://admin");
    const send = (status: number, contentType: string, body: string, headers: Record<string, string> = {}): void => {
      res.writeHead(status, {
        "content-type": contentType,
        "content-length": Buffer.byteLength(body),
        "cache-control": "no-store",
        ...headers,
      });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    const known = ["/metrics", "/healthz", "/readyz", "/status"];
    if (!known.includes(url.pathname)) return send(404, "text/plain; charset=utf-8", "not found\n");
    if (req.method !== "GET" && req.method !== "HEAD")
      return send(405, "text/plain; charset=utf-8", "method not allowed\n", { allow: "GET, HEAD" });
    const verbose = url.searchParams.has("verbose");
    switch (url.pathname) {
      case "/metrics":
        return send(200, registry.contentType, await registry.metrics());
      case "/healthz":
      case "/readyz": {
        const name = url.pathname.slice(1);
        const check = name === "healthz" ? source.healthy() : source.ready();
        return send(check.ok ? 200 : 503, "text/plain; charset=utf-8", checkText(name, check, verbose));
      }
      case "/status": {
        const fleet = source.fleet();
        const status: AdminStatus = { ...(fleet ?? {}), leadership: source.leadership(), time: Date.now() };
        return send(200, "application/json", `${JSON.stringify(status)}\n`);
      }
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // A collector or the status snapshot threw: the scrape fails visibly, the server goes on.
      const err = serializeError(error, `admin server: ${req.method} ${req.url}`);
      logger.error({ err }, "admin request failed");
      if (res.headersSent) res.destroy();
      else {
        res.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
        res.end(`internal error: ${err.message}\n`);
      }
    });
  });
  // A slow or idle client must not hold a socket for long; scrapes are quick.
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    // "" (":9999") means every interface: node listens on :: (and 0.0.0.0) without a host.
    server.listen({ port, ...(host !== "" ? { host } : {}) }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (error) => logger.error({ err: serializeError(error, "admin server") }, "admin server error"));
  const address = server.address() as AddressInfo;
  const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${shown}:${address.port}`;
  logger.info({ url }, "admin server listening");
  return {
    url,
    port: address.port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
