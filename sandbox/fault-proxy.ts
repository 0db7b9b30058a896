/**
 * A fault-injecting HTTPS proxy in front of one sandbox kube-apiserver, for tests that
 * must show the controller survives a bad network or a misbehaving API server: latency,
 * injected error statuses, refused connections, silent stalls, cut and corrupted watch
 * streams, an endless watch line. With no rules (`{}`) it is transparent.
 *
 * Guarantees:
 * - listens on 127.0.0.1 only, on a free port; TLS to the client with the given serving
 *   certificate, TLS to the upstream trusting only `upstreamCaPem`;
 * - forwards every request header except the hop-by-hop ones (so bearer-token auth works
 *   end to end; client-certificate auth does not, since TLS terminates here), and streams
 *   bodies both ways: a watch is one long chunked response, relayed chunk by chunk;
 * - while the upstream is unreachable (killed, restarting), a request that got no
 *   response headers is answered `503 ServiceUnavailable` with a Kubernetes Status body,
 *   as kube-aggregator does for an unreachable backend; an upstream that dies
 *   mid-response has the client's connection destroyed (the client sees the stream cut);
 * - rule changes apply at once: to requests held by a stall, to the next chunk of every
 *   open stream, and to every new connection and request;
 * - no fixed sleeps: the only timers are `latencyMs` delays, all cleared by `stop()`,
 *   which also destroys every connection on both sides.
 *
 * Not supported: protocol upgrades (exec, port-forward); such requests are dropped.
 * The rules, the counters and the injected bytes are fault-rules.ts; what is forwarded,
 * proxy-http.ts.
 */
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import * as https from "node:https";
import type { Socket } from "node:net";
import { join } from "node:path";
import type { ControlPlane } from "./control-plane.ts";
import {
  corruptLine,
  type FaultProxyStats,
  type FaultRules,
  STATUS_REASONS,
  statusBody,
  validateRules,
} from "./fault-rules.ts";
import { issueCertificate } from "./pki.ts";
import { endToEnd, isWatch } from "./proxy-http.ts";

export interface FaultProxyOptions {
  /** `https://127.0.0.1:<port>[/prefix]` of the API server. */
  readonly upstream: string;
  readonly upstreamCaPem: string;
  readonly serving: { readonly certPem: string; readonly keyPem: string };
  /** Source of randomness in [0, 1) for `errorRate`. Default `Math.random`. */
  readonly random?: () => number;
}

/** One client request and what it became upstream. */
interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly method: string;
  readonly path: string;
  readonly watch: boolean;
  upstream: ReturnType<typeof https.request> | undefined;
  upstreamDone: boolean;
  timer: NodeJS.Timeout | undefined;
  waiter: (() => void) | undefined;
  closed: boolean;
}

export class FaultProxy {
  readonly url: string;
  readonly port: number;

  readonly #server: https.Server;
  readonly #agent: https.Agent;
  readonly #upstream: URL;
  readonly #random: () => number;
  readonly #sockets = new Set<Socket>();
  readonly #exchanges = new Set<Exchange>();
  /** Work held back by a stall, run in order when it is lifted. */
  readonly #waiters = new Set<() => void>();
  #rules: FaultRules = {};
  #stopped = false;
  #counters = {
    requests: 0,
    watches: 0,
    injectedErrors: 0,
    watchesCut: 0,
    refused: 0,
    endlessLineBytes: 0,
    endlessLinesEnded: 0,
  };

  private constructor(server: https.Server, agent: https.Agent, upstream: URL, random: () => number, port: number) {
    this.#server = server;
    this.#agent = agent;
    this.#upstream = upstream;
    this.#random = random;
    this.port = port;
    this.url = `https://127.0.0.1:${port}`;
  }

  /**
   * Starts on 127.0.0.1 (free port) in front of `upstream`. Throws when `upstream` is not
   * an https URL or the server cannot listen.
   */
  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const upstream = new URL(options.upstream);
    if (upstream.protocol !== "https:") throw new Error(`fault proxy upstream must be https: ${options.upstream}`);
    const agent = new https.Agent({ keepAlive: true, ca: options.upstreamCaPem });
    const server = https.createServer({ cert: options.serving.certPem, key: options.serving.keyPem });
    // Longer than any client's idle keep-alive, so a client never reuses a socket we are closing.
    server.keepAliveTimeout = 120_000;
    // Watches are long; only the request itself must arrive in time.
    server.requestTimeout = 0;
    server.headersTimeout = 60_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    if (address === null || typeof address !== "object") {
      server.close();
      agent.destroy();
      throw new Error("fault proxy: could not read its listening address");
    }
    const proxy = new FaultProxy(server, agent, upstream, options.random ?? Math.random, address.port);
    server.on("connection", (socket: Socket) => proxy.#onConnection(socket));
    server.on("request", (req: IncomingMessage, res: ServerResponse) => proxy.#onRequest(req, res));
    return proxy;
  }

  /** Replaces the rules; `{}` = transparent. Lifting a stall releases what it held. Throws on out-of-range values. */
  setRules(rules: FaultRules): void {
    validateRules(rules);
    const wasStalled = this.#rules.stall === true;
    this.#rules = { ...rules };
    if (wasStalled && rules.stall !== true) {
      const held = [...this.#waiters];
      this.#waiters.clear();
      for (const run of held) run();
    }
  }

  get rules(): Readonly<FaultRules> {
    return this.#rules;
  }

  /** Destroys every open watch exchange (both sides) — the client sees the stream cut. Returns how many. */
  cutWatches(): number {
    let cut = 0;
    for (const exchange of [...this.#exchanges]) {
      if (!exchange.watch) continue;
      this.#destroy(exchange);
      cut++;
    }
    this.#counters.watchesCut += cut;
    return cut;
  }

  /** Destroys every open client connection and every upstream exchange. Returns the number of client connections. */
  cutAll(): number {
    const sockets = [...this.#sockets];
    for (const exchange of [...this.#exchanges]) this.#destroy(exchange);
    for (const socket of sockets) socket.destroy();
    return sockets.length;
  }

  get stats(): FaultProxyStats {
    return { ...this.#counters, openConnections: this.#sockets.size, openRequests: this.#exchanges.size };
  }

  /** Stops listening, destroys every connection on both sides and clears every timer. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#waiters.clear();
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    const sockets = [...this.#sockets].map((socket) =>
      socket.destroyed ? Promise.resolve() : new Promise<void>((resolve) => socket.once("close", () => resolve())),
    );
    this.cutAll();
    this.#server.closeAllConnections();
    this.#agent.destroy();
    await Promise.all([closed, ...sockets]);
    this.#sockets.clear();
  }

  #onConnection(socket: Socket): void {
    if (this.#stopped || this.#rules.refuse === true) {
      if (!this.#stopped) this.#counters.refused++;
      socket.destroy();
      return;
    }
    this.#sockets.add(socket);
    socket.once("close", () => this.#sockets.delete(socket));
  }

  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "https://fault-proxy.invalid");
    const exchange: Exchange = {
      req,
      res,
      method: req.method ?? "GET",
      path: url.pathname,
      watch: isWatch(url),
      upstream: undefined,
      upstreamDone: false,
      timer: undefined,
      waiter: undefined,
      closed: false,
    };
    this.#counters.requests++;
    if (exchange.watch) this.#counters.watches++;
    this.#exchanges.add(exchange);
    // Errors on a client socket that went away are expected here; 'close' does the cleanup.
    req.on("error", () => {});
    res.on("error", () => {});
    res.once("close", () => {
      exchange.closed = true;
      this.#exchanges.delete(exchange);
      clearTimeout(exchange.timer);
      if (exchange.waiter) this.#waiters.delete(exchange.waiter);
      if (exchange.upstream && !exchange.upstreamDone) exchange.upstream.destroy();
    });

    const subject = this.#rules.match ? this.#rules.match(exchange.method, exchange.path) : true;
    this.#whenFlowing(exchange, () => {
      const latencyMs = subject ? (this.#rules.latencyMs ?? 0) : 0;
      const next = (): void => {
        exchange.timer = undefined;
        this.#whenFlowing(exchange, () => this.#dispatch(exchange, subject));
      };
      if (latencyMs > 0) exchange.timer = setTimeout(next, latencyMs);
      else next();
    });
  }

  /** Runs `fn` now, or when the stall is lifted; never for an exchange that closed meanwhile. */
  #whenFlowing(exchange: Exchange, fn: () => void): void {
    if (exchange.closed || this.#stopped) return;
    if (this.#rules.stall !== true) {
      fn();
      return;
    }
    const waiter = (): void => {
      exchange.waiter = undefined;
      if (!exchange.closed && !this.#stopped) fn();
    };
    exchange.waiter = waiter;
    this.#waiters.add(waiter);
  }

  #dispatch(exchange: Exchange, subject: boolean): void {
    const rules = this.#rules;
    const errorRate = rules.errorRate ?? 0;
    if (!exchange.watch && subject && errorRate > 0 && this.#random() < errorRate) {
      this.#injectError(exchange, rules.errorStatus ?? 503, rules.retryAfterSeconds);
      return;
    }
    this.#forward(exchange);
  }

  #injectError(exchange: Exchange, code: number, retryAfterSeconds: number | undefined): void {
    this.#counters.injectedErrors++;
    const reason = STATUS_REASONS[code] ?? "InternalError";
    const withRetry = (code === 429 || code === 503) && retryAfterSeconds !== undefined ? retryAfterSeconds : undefined;
    const body = statusBody(code, reason, `fault-proxy: injected ${code} ${reason}`, withRetry);
    exchange.req.resume();
    exchange.res.writeHead(code, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      ...(withRetry !== undefined ? { "retry-after": String(withRetry) } : {}),
    });
    exchange.res.end(body);
  }

  #forward(exchange: Exchange): void {
    const { req, res } = exchange;
    const base = this.#upstream;
    const prefix = base.pathname.replace(/\/+$/, "");
    const headers = endToEnd(req.headers);
    headers["host"] = base.host;
    const upstream = https.request({
      protocol: base.protocol,
      hostname: base.hostname,
      port: base.port,
      method: exchange.method,
      path: prefix + (req.url ?? "/"),
      headers,
      agent: this.#agent,
    });
    exchange.upstream = upstream;
    upstream.on("error", (error: NodeJS.ErrnoException) => {
      if (exchange.closed || res.destroyed) return;
      if (!res.headersSent) {
        const body = statusBody(
          503,
          "ServiceUnavailable",
          `fault-proxy: upstream ${base.host} unreachable: ${error.code ?? error.message}`,
        );
        res.writeHead(503, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
      } else {
        res.destroy();
      }
    });
    upstream.on("response", (upstreamRes: IncomingMessage) => this.#relay(exchange, upstreamRes));
    req.pipe(upstream);
  }

  #relay(exchange: Exchange, upstreamRes: IncomingMessage): void {
    const { res } = exchange;
    upstreamRes.on("error", () => res.destroy());
    upstreamRes.on("close", () => {
      // upstreamDone: the proxy dropped the upstream itself (endlessWatchLine); the client's side goes on.
      if (!upstreamRes.complete && !exchange.upstreamDone) res.destroy();
    });
    upstreamRes.pause();
    this.#whenFlowing(exchange, () => {
      const status = upstreamRes.statusCode ?? 502;
      const streaming = exchange.watch && status >= 200 && status < 300;
      const headers = endToEnd(upstreamRes.headers);
      if (streaming) delete headers["content-length"];
      res.writeHead(status, headers);
      if (streaming && this.#rules.endlessWatchLine === true) {
        exchange.upstreamDone = true;
        upstreamRes.destroy();
        this.#endlessLine(exchange);
        return;
      }
      const corruption = streaming ? this.#rules.corruptWatch : undefined;
      if (corruption !== undefined) res.write(corruptLine(corruption, exchange.path));
      else if (streaming) res.flushHeaders();
      upstreamRes.on("data", (chunk: Buffer) => this.#deliver(exchange, upstreamRes, chunk));
      upstreamRes.on("end", () => {
        exchange.upstreamDone = true;
        res.end();
      });
      upstreamRes.resume();
    });
  }

  /** Writes one upstream chunk to the client, holding it back while stalled and honouring back-pressure. */
  #deliver(exchange: Exchange, upstreamRes: IncomingMessage, chunk: Buffer): void {
    const { res } = exchange;
    if (this.#rules.stall === true) {
      upstreamRes.pause();
      this.#whenFlowing(exchange, () => {
        this.#deliver(exchange, upstreamRes, chunk);
        upstreamRes.resume();
      });
      return;
    }
    if (!res.write(chunk)) {
      upstreamRes.pause();
      res.once("drain", () => upstreamRes.resume());
    }
  }

  /** Writes `x` bytes to the client, never a newline, as fast as it reads, until it goes away. */
  #endlessLine(exchange: Exchange): void {
    const { res } = exchange;
    const chunk = Buffer.alloc(64 * 1024, "x");
    res.once("close", () => this.#counters.endlessLinesEnded++);
    const pump = (): void => {
      while (!exchange.closed && !this.#stopped && !res.destroyed) {
        this.#counters.endlessLineBytes += chunk.length;
        if (!res.write(chunk)) {
          res.once("drain", pump);
          return;
        }
      }
    };
    pump();
  }

  #destroy(exchange: Exchange): void {
    exchange.upstream?.destroy();
    exchange.res.destroy();
    exchange.req.socket.destroy();
  }
}

/**
 * Starts a proxy in front of `plane`'s cluster `cluster`, with a serving certificate for
 * 127.0.0.1/localhost signed by the sandbox CA, so any client that trusts the cluster's
 * CA (`SandboxCluster.caPem`) also trusts the proxy.
 */
export async function startFaultProxyFor(plane: ControlPlane, cluster: string): Promise<FaultProxy> {
  const target = plane.cluster(cluster);
  const name = `fault-proxy-${cluster.replace(/[^a-zA-Z0-9-]/g, "_")}-${randomBytes(3).toString("hex")}`;
  const serving = await issueCertificate(plane.ca, join(plane.dir, "pki"), name, {
    commonName: "fault-proxy",
    usage: "server",
    altNames: ["IP:127.0.0.1", "DNS:localhost"],
  });
  return FaultProxy.start({ upstream: target.server, upstreamCaPem: target.caPem, serving });
}
