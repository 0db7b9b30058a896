/**
 * A tiny fake API server (node:http on loopback) serving scripted list pages and watch
 * streams, with a KubeClient pointed at it: for unit tests of the lean client and the
 * watcher. The real API server is exercised in test/integration/.
 */
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import type { Service } from "../../src/core/objects.ts";
import { KubeClient, type KubeClientOptions, type WatchEvent } from "../../src/kube/client.ts";

export type Handler = (url: URL, res: http.ServerResponse, req: http.IncomingMessage) => void;

export interface FakeApi {
  readonly url: string;
  readonly client: KubeClient;
  /** Every request received, in order. */
  readonly requests: URL[];
  lists(): URL[];
  watches(): URL[];
  /** Server-side responses that were closed (by either side). */
  readonly closed: URL[];
  close(): Promise<void>;
}

export async function fakeApi(handle: Handler, clientOptions: KubeClientOptions = {}): Promise<FakeApi> {
  const requests: URL[] = [];
  const closed: URL[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://fake");
    requests.push(url);
    res.on("close", () => closed.push(url));
    handle(url, res, req);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const base = `http://127.0.0.1:${port}`;
  const client = new KubeClient(
    { server: base, auth: { kind: "anonymous" } },
    { requestTimeoutMs: 2_000, ...clientOptions },
  );
  return {
    url: base,
    client,
    requests,
    closed,
    lists: () => requests.filter((u) => u.searchParams.get("watch") !== "true"),
    watches: () => requests.filter((u) => u.searchParams.get("watch") === "true"),
    async close() {
      client.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function svc(name: string, resourceVersion: string, namespace = "default"): Service {
  return { metadata: { name, namespace, resourceVersion }, spec: { ports: [{ port: 80 }] } };
}

export function sendJson(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

export function sendList(
  res: http.ServerResponse,
  items: readonly Service[],
  resourceVersion: string,
  next?: string,
): void {
  sendJson(res, 200, {
    apiVersion: "v1",
    kind: "ServiceList",
    metadata: { resourceVersion, ...(next ? { continue: next } : {}) },
    items,
  });
}

export function sendStatus(
  res: http.ServerResponse,
  code: number,
  reason: string,
  headers: Record<string, string> = {},
): void {
  sendJson(
    res,
    code,
    { kind: "Status", apiVersion: "v1", status: "Failure", reason, code, message: `fake ${reason}` },
    headers,
  );
}

export interface Stream {
  event(type: WatchEvent["type"], object: unknown): void;
  raw(text: string): void;
  end(): void;
}

export function openStream(res: http.ServerResponse): Stream {
  res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
  res.flushHeaders();
  return {
    event: (type, object) => res.write(`${JSON.stringify({ type, object })}\n`),
    raw: (text) => res.write(text),
    end: () => res.end(),
  };
}

export const bookmark = (resourceVersion: string) => ({
  kind: "Service",
  apiVersion: "v1",
  metadata: { resourceVersion },
});

export async function until<T>(what: string, check: () => T | undefined | false, timeoutMs = 1_500): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
