/**
 * A hostile remote API server (node:http on loopback): it answers every list of Services
 * with one endless-looking ServiceList of `bodyBytes` (1.5 GiB by default), ignoring
 * `limit`, streamed as fast as the client reads it (back-pressure honoured, nothing
 * buffered here). Everything else is 404 (no MCS API, no other resource). Used by the
 * process-level cap test (test/integration/hostile-remote.test.ts) and the bench
 * scenario `hostile-body` (bench/hostile-body.ts).
 *
 * Registered like any cluster: `kubeconfig()` points at it over http with a token (the
 * controller accepts an http:// server only with `--allow-insecure-remotes`; this one never
 * checks the token).
 */
import { readFileSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";

export const HOSTILE_BODY_BYTES = 1.5 * 1024 * 1024 * 1024;

/** One Service of the body, about 1 KiB, so the body is valid JSON as far as it goes. */
function serviceItem(i: number): string {
  return JSON.stringify({
    metadata: {
      name: `svc-${i}`,
      namespace: "hostile",
      resourceVersion: String(i),
      annotations: { pad: "x".repeat(900) },
    },
    spec: { ports: [{ port: 80 }] },
  });
}

export interface HostileStats {
  /** Lists of Services answered (each one a new attempt of the watcher). */
  readonly lists: number;
  /** Lists whose client went away before the whole body was written. */
  readonly listsCut: number;
  /** Body bytes written, over every list. */
  readonly bytes: number;
  /** The most body bytes one list got written before it ended. */
  readonly maxListBytes: number;
}

export interface HostileRemote {
  readonly url: string;
  readonly stats: HostileStats;
  /** A kubeconfig for `fleet-mirror` to register this remote under `cluster`. */
  kubeconfig(cluster: string): string;
  close(): Promise<void>;
}

export async function startHostileRemote(options: { readonly bodyBytes?: number } = {}): Promise<HostileRemote> {
  const bodyBytes = options.bodyBytes ?? HOSTILE_BODY_BYTES;
  const stats = { lists: 0, listsCut: 0, bytes: 0, maxListBytes: 0 };
  const head = Buffer.from('{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[');
  const tail = Buffer.from("]}");
  // A block of items written again and again: 64 items, ≈ 64 KiB.
  const block = Buffer.from(`${Array.from({ length: 64 }, (_, i) => serviceItem(i)).join(",")},`);

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://hostile");
    if (req.method !== "GET" || url.pathname !== "/api/v1/services" || url.searchParams.get("watch") === "true") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404 }));
      return;
    }
    stats.lists += 1;
    let written = 0;
    const count = (n: number): void => {
      written += n;
      stats.bytes += n;
      stats.maxListBytes = Math.max(stats.maxListBytes, written);
    };
    res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
    res.on("error", () => {});
    res.on("close", () => {
      if (!res.writableFinished) stats.listsCut += 1;
    });
    res.write(head);
    count(head.length);
    const pump = (): void => {
      while (!res.destroyed) {
        if (written + block.length + tail.length > bodyBytes) {
          // The last item is followed by a comma: close the array with one more item.
          const last = Buffer.from(`${serviceItem(-1)}]}`);
          res.end(last);
          count(last.length);
          return;
        }
        count(block.length);
        if (!res.write(block)) {
          res.once("drain", pump);
          return;
        }
      }
    };
    pump();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    stats,
    kubeconfig: (cluster) =>
      [
        "apiVersion: v1",
        "kind: Config",
        `clusters: [{name: ${cluster}, cluster: {server: "${url}"}}]`,
        "users: [{name: fleet-mirror, user: {token: hostile}}]",
        `contexts: [{name: ${cluster}, context: {cluster: ${cluster}, user: fleet-mirror}}]`,
        `current-context: ${cluster}`,
        "",
      ].join("\n"),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The resident set of process `pid` in MiB, from /proc (Linux). */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]);
  if (!Number.isFinite(kb)) throw new Error(`no VmRSS for process ${pid}`);
  return kb / 1024;
}
