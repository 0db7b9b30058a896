/**
 * The bare client of the probe-cpu scenario, run as a child process (its CPU read from
 * /proc by the parent): node's http probing address:port pairs at a fixed period, the
 * limit fleet-mirror's probing is compared with. On the wire it does what the
 * controller's probe does (workers/remote-cluster/http-probe.ts): `GET <path>`, a new
 * connection per probe (`agent: false`, `connection: close`), one deadline of the
 * period for connect + headers, the request destroyed as soon as the status line
 * arrives; at most one probe per pair in flight, a pair's first probe at a uniform
 * offset in [0, period), then one started every period. Nothing else: no liveness
 * state, no metrics, no messages per probe.
 */
import { request } from "node:http";
import type { ProbePair } from "./probe-servers.ts";

export type BareProberCommand =
  | {
      readonly op: "start";
      readonly pairs: readonly ProbePair[];
      readonly path: string;
      readonly periodMs: number;
    }
  | { readonly op: "stats" };

export type BareProberReply =
  | { readonly op: "started" }
  | { readonly op: "stats"; readonly probes: number; readonly ok: number };

let probes = 0;
let ok = 0;

function probe(pair: ProbePair, path: string, timeoutMs: number, done: () => void): void {
  let settled = false;
  const req = request({
    host: pair.address,
    port: pair.port,
    path,
    method: "GET",
    agent: false,
    headers: { "user-agent": "bench-bare-prober", connection: "close" },
  });
  const settle = (success: boolean): void => {
    if (settled) return;
    settled = true;
    clearTimeout(deadline);
    req.destroy();
    probes += 1;
    if (success) ok += 1;
    done();
  };
  const deadline = setTimeout(() => settle(false), timeoutMs);
  req.on("response", (res) => {
    res.resume();
    settle((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300);
  });
  req.on("error", () => settle(false));
  req.end();
}

function loop(pair: ProbePair, path: string, periodMs: number): void {
  const started = performance.now();
  probe(pair, path, periodMs, () => {
    setTimeout(() => loop(pair, path, periodMs), Math.max(0, periodMs - (performance.now() - started)));
  });
}

process.on("message", (command: BareProberCommand) => {
  if (command.op === "start") {
    for (const pair of command.pairs)
      setTimeout(() => loop(pair, command.path, command.periodMs), Math.floor(Math.random() * command.periodMs));
    process.send?.({ op: "started" } satisfies BareProberReply);
  } else if (command.op === "stats") {
    process.send?.({ op: "stats", probes, ok } satisfies BareProberReply);
  }
});
// The parent's exit closes the IPC channel: leave with it, never orphaned.
process.on("disconnect", () => process.exit(0));
