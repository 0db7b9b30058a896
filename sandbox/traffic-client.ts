/**
 * The client Pod's program (run by traffic.ts inside the Pod's network namespace, so its
 * lookups read the Pod's resolv.conf and its connections leave through the Pod's veth).
 *
 * Protocol, JSON lines: each line on stdin is a request batch
 *   {"id": 1, "host": "search-federated", "port": 80, "count": 10, "timeoutMs": 2000}
 * and each answer on stdout, one line per batch, in the order the batches end:
 *   {"id": 1, "outcomes": [{"answer": "east"}, {"error": "ECONNREFUSED"}, …]}
 * `count` requests run at once, each an HTTP GET / on a new connection (no keep-alive: a
 * Service's endpoint is chosen per connection), its name resolved anew through the
 * system resolver (getaddrinfo: search path and ndots as in a Pod). An outcome is the
 * answer's body (the cluster the gateway stands for) or the error's code; every request
 * has exactly one. With `"lookup": true` each of the `count` is a lookup of `host` instead
 * (getaddrinfo, as the connection's would be): its answer is the addresses, sorted and
 * joined by commas.
 */
import { lookup } from "node:dns/promises";
import { request } from "node:http";
import { createInterface } from "node:readline";

export interface TrafficBatch {
  readonly id: number;
  readonly host: string;
  readonly port: number;
  readonly count: number;
  readonly timeoutMs: number;
  readonly lookup?: boolean;
}

export type Outcome = { readonly answer: string } | { readonly error: string };

export interface TrafficResult {
  readonly id: number;
  readonly outcomes: readonly Outcome[];
}

function once(host: string, port: number, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    const req = request({ host, port, path: "/", agent: false, timeout: timeoutMs }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () =>
        settle(res.statusCode === 200 ? { answer: body.trim() } : { error: `HTTP ${res.statusCode}` }),
      );
      res.on("error", (error: NodeJS.ErrnoException) => settle({ error: error.code ?? error.message }));
    });
    req.on("timeout", () => req.destroy(Object.assign(new Error("timeout"), { code: "TIMEOUT" })));
    req.on("error", (error: NodeJS.ErrnoException) => settle({ error: error.code ?? error.message }));
    req.end();
  });
}

async function resolve(host: string): Promise<Outcome> {
  try {
    const addresses = await lookup(host, { all: true });
    return {
      answer: addresses
        .map((a) => a.address)
        .sort()
        .join(","),
    };
  } catch (error) {
    return { error: (error as NodeJS.ErrnoException).code ?? (error as Error).message };
  }
}

async function batch(line: string): Promise<TrafficResult> {
  const b = JSON.parse(line) as TrafficBatch;
  const outcomes = await Promise.all(
    Array.from({ length: b.count }, () => (b.lookup ? resolve(b.host) : once(b.host, b.port, b.timeoutMs))),
  );
  return { id: b.id, outcomes };
}

if (import.meta.main) {
  const lines = createInterface({ input: process.stdin });
  lines.on("line", (line) => {
    void batch(line).then(
      (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
      (error: unknown) => process.stderr.write(`traffic-client: bad batch ${line}: ${String(error)}\n`),
    );
  });
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}
