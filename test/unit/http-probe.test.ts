/**
 * The HTTP probe against real servers on this machine's loopback: what counts as
 * success and as each kind of failure, and that no socket outlives a probe.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createTcpServer, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  httpProbe,
  MAX_STATUS_LINE_BYTES,
  type ProbeRequest,
  parseStatusLine,
} from "../../workers/remote-cluster/http-probe.ts";

describe("HTTP gateway probe", () => {
  let server: Server;
  let port = 0;
  const open = new Set<Socket>();
  const paths: string[] = [];

  before(async () => {
    server = createServer((req, res) => {
      paths.push(req.url ?? "");
      if (req.url === "/ready") res.end("ok");
      else if (req.url === "/unavailable") {
        res.statusCode = 503;
        res.end("not ready");
      } else if (req.url === "/redirect") {
        res.statusCode = 302;
        res.end();
      } else if (req.url === "/endless") {
        res.writeHead(200);
        res.write("x"); // headers sent, the body never ends
      }
      // any other path: never answers
    });
    server.on("connection", (socket) => {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const probe = (path: string, extra: Partial<ProbeRequest> = {}) =>
    httpProbe({ address: "127.0.0.1", port, path, timeoutMs: 500, userAgent: "test", ...extra });

  /** Waits until the server has no open connection (closing is asynchronous on its side). */
  async function noSocketsLeft(): Promise<void> {
    for (let i = 0; i < 200 && open.size > 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(open.size, 0, "every probe's connection is closed");
  }

  it("succeeds on a 2xx answer, with its latency, and asks the given path", async () => {
    const result = await probe("/ready");
    assert.equal(result.ok, true);
    assert.ok(result.latencyMs >= 0 && result.latencyMs < 500);
    assert.equal(paths.at(-1), "/ready");
    await noSocketsLeft();
  });

  it("fails with reason status on a non-2xx answer (503, and a redirect is not followed)", async () => {
    const unavailable = await probe("/unavailable");
    assert.equal(unavailable.ok, false);
    assert.equal(!unavailable.ok && unavailable.reason, "status");
    assert.match(!unavailable.ok ? unavailable.message : "", /HTTP 503/);
    const redirect = await probe("/redirect");
    assert.equal(!redirect.ok && redirect.reason, "status");
    await noSocketsLeft();
  });

  it("fails with reason timeout when the server accepts and never answers, and closes the connection", async () => {
    const started = performance.now();
    const result = await probe("/hang", { timeoutMs: 300 });
    const took = performance.now() - started;
    assert.equal(!result.ok && result.reason, "timeout");
    assert.ok(took >= 290 && took < 2_000, `took ${took} ms`);
    await noSocketsLeft();
  });

  it("succeeds on headers alone and does not wait for a body that never ends", async () => {
    const result = await probe("/endless", { timeoutMs: 2_000 });
    assert.equal(result.ok, true);
    await noSocketsLeft();
  });

  it("probes an IPv6 address, with a bracketed Host header", async () => {
    let host: string | undefined;
    const v6 = createServer((req, res) => {
      host = req.headers.host;
      res.end("ok");
    });
    await new Promise<void>((resolve) => v6.listen(0, "::1", resolve));
    try {
      const v6Port = (v6.address() as AddressInfo).port;
      const result = await probe("/ready", { address: "::1", port: v6Port });
      assert.equal(result.ok, true);
      assert.equal(host, `[::1]:${v6Port}`);
    } finally {
      v6.closeAllConnections();
      await new Promise((resolve) => v6.close(resolve));
    }
  });

  it("fails with reason refused when nothing listens", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const freePort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const result = await probe("/ready", { port: freePort });
    assert.equal(!result.ok && result.reason, "refused");
  });

  it("ends at once, as an error, when aborted", async () => {
    const abort = new AbortController();
    const pending = probe("/hang", { timeoutMs: 10_000, signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    const result = await pending;
    assert.equal(!result.ok && result.reason, "error");
    assert.match(!result.ok ? result.message : "", /aborted/);
    await noSocketsLeft();
  });
  /** A raw TCP server answering every connection with `answer` (chunks written one by one). */
  async function rawServer(answer: (socket: Socket) => void): Promise<{ port: number; close: () => Promise<void> }> {
    const sockets = new Set<Socket>();
    const raw = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => sockets.delete(socket));
      socket.on("close", () => sockets.delete(socket));
      socket.once("data", () => answer(socket));
    });
    await new Promise<void>((resolve) => raw.listen(0, "127.0.0.1", resolve));
    return {
      port: (raw.address() as AddressInfo).port,
      close: async () => {
        for (const socket of sockets) socket.destroy();
        await new Promise((resolve) => raw.close(resolve));
      },
    };
  }

  it("reads a status line that arrives in several pieces", async () => {
    const raw = await rawServer((socket) => {
      socket.write("HTT");
      setImmediate(() => socket.write("P/1.1 20"));
      setTimeout(() => socket.write("4 No Content\r\n\r\n"), 20);
    });
    try {
      const result = await probe("/ready", { port: raw.port });
      assert.deepEqual(result.ok && result.status, 204);
    } finally {
      await raw.close();
    }
  });

  it("fails with reason error on an answer that is not HTTP/1.x, a line too long, or a close before any status line", async () => {
    const cases: readonly [string, (socket: Socket) => void, RegExp][] = [
      ["not HTTP", (socket) => socket.end("SSH-2.0-OpenSSH\r\n"), /not an HTTP\/1\.x answer/],
      ["too long", (socket) => socket.write("H".repeat(MAX_STATUS_LINE_BYTES + 10)), /status line longer than/],
      ["closed", (socket) => socket.end(), /closed before a status line/],
    ];
    for (const [name, answer, message] of cases) {
      const raw = await rawServer(answer);
      try {
        const result = await probe("/ready", { port: raw.port });
        assert.equal(!result.ok && result.reason, "error", name);
        assert.match(!result.ok ? result.message : "", message, name);
      } finally {
        await raw.close();
      }
    }
  });

  it("parses HTTP/1.0 and HTTP/1.1 status lines only", () => {
    assert.equal(parseStatusLine("HTTP/1.1 200 OK"), 200);
    assert.equal(parseStatusLine("HTTP/1.0 503 Service Unavailable"), 503);
    assert.equal(parseStatusLine("HTTP/1.1 204"), 204);
    assert.equal(parseStatusLine("HTTP/2 200"), undefined);
    assert.equal(parseStatusLine("HTTP/1.1 2000 OK"), undefined);
    assert.equal(parseStatusLine("http/1.1 200 OK"), undefined);
    assert.equal(parseStatusLine(""), undefined);
  });
});
