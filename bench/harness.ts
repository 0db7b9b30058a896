/**
 * The small shared harness of `npm run bench`: the machine's description, a percentile
 * helper, table printing, result files, a bounded-concurrency runner, and the fleet
 * shaping every scenario repeats (one remote API server with S exported Services behind
 * one gateway, K credentials Secrets with distinct cluster names pointing at it).
 *
 * Benchmarks are never assertions: they measure, print and write what they saw.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { EXPORTED_LABEL } from "../src/core/export.ts";
import { GATEWAY_NAME, GATEWAY_NS, MIRRORED_SERVICE } from "../src/core/labels.ts";
import { KubeClient } from "../src/kube/client.ts";
import type { Supervisor } from "../src/supervisor/supervisor.ts";
import { adminConnection } from "../test/helpers/connection.ts";
import type { Fleet } from "../test/helpers/fleet.ts";
import { eventually } from "../test/helpers/kube.ts";

export interface Machine {
  readonly cpus: number;
  readonly memGb: number;
  readonly node: string;
  readonly kernel: string;
}

export interface BenchOptions {
  /** Tiny sizes, to validate the code quickly (never for published numbers). */
  readonly smoke: boolean;
  /** Directory of the result files. */
  readonly out: string;
  /** Remote changes per second of steady-latency (default 50; smoke 10). */
  readonly steadyRate?: number | undefined;
  /** Skip the packed-placement row of memory (recorded as null with the reason). */
  readonly skipPacked?: boolean | undefined;
  /** Thread-mode sizes of the memory scenario instead of 50 and 200 (ad hoc runs; no summary). */
  readonly memoryClusters?: readonly number[] | undefined;
  /** Pairs of runs of the links scenario (default 3, smoke 1; ad hoc: fewer when time is short, recorded in links.json). */
  readonly linksPairs?: number | undefined;
}

/** What a scenario hands back to `run.ts`: its full result, and the summary keys it measured. */
export interface ScenarioResult {
  readonly result: Record<string, unknown>;
  readonly summary: Record<string, number | null>;
}

export const MIRROR_SELECTOR = `${MIRRORED_SERVICE}=true`;

/**
 * The `--endpoints-api` modes every scenario runs side by side, the default
 * (EndpointSlices, SPEC §9) first, then Endpoints (SPEC §3), each in a world of its own
 * shaped the same. (`both`, a migration setting, writes the two and is not benched.)
 */
export const BENCH_MODES = ["endpointslices", "endpoints"] as const;
export type BenchMode = (typeof BENCH_MODES)[number];
export const GATEWAY_PORT = 4143;

export function machine(): Machine {
  return {
    cpus: cpus().length,
    memGb: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    kernel: release(),
  };
}

export function machineString(m: Machine = machine()): string {
  return `${m.cpus} CPUs, ${m.memGb} GB RAM, Node ${m.node}, Linux ${m.kernel}`;
}

/** The p-th percentile (0..100) of `values` by nearest rank; null for an empty list. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? null;
}

export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export const mb = (bytes: number): number => round(bytes / 2 ** 20, 1);

/** Prints `rows` as an aligned table under `title`. */
export function printTable(title: string, rows: readonly Readonly<Record<string, unknown>>[]): void {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: unknown): string => (v === undefined ? "" : v === null ? "null" : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join("  ");
  const out = [
    `\n== ${title}`,
    line(columns),
    line(widths.map((w) => "-".repeat(w))),
    ...rows.map((r) => line(columns.map((c) => cell(r[c])))),
  ];
  process.stdout.write(`${out.join("\n")}\n`);
}

/** Writes `<out>/<name>.json` with the machine's description and the date added. */
export function writeResult(out: string, name: string, data: Readonly<Record<string, unknown>>): string {
  mkdirSync(out, { recursive: true });
  const file = join(out, `${name}.json`);
  const body = { scenario: name, ...data, machine: machine(), date: new Date().toISOString() };
  writeFileSync(file, `${compactNumberArrays(JSON.stringify(body, null, 2))}\n`);
  return file;
}

/**
 * Pretty-printed JSON with every array of numbers on one line (a series of 60 points stays
 * one line, not 60). Only such arrays span lines with numbers alone: a JSON string never
 * holds a raw newline, so no string is touched.
 */
export function compactNumberArrays(json: string): string {
  return json.replace(/\[\n[\d\s,.eE+-]*\]/g, (array) =>
    array.replace(/\s+/g, " ").replace("[ ", "[").replace(" ]", "]"),
  );
}

/** Runs `fn` over `items` with at most `concurrency` calls in flight; rejects on the first failure. */
export async function runPool<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      const item = items[i];
      if (i >= items.length || item === undefined) return;
      await fn(item, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
}

/** A progress line on stderr (tables go to stdout). */
export function progress(message: string): void {
  process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Admin clients of the fleet's remote API servers (lean client, node:https): one per
 * remote, made on first use, all ended by `close`.
 */
export function remoteAdminClients(fleet: Fleet): { readonly get: (remote: string) => KubeClient; close(): void } {
  const clients = new Map<string, KubeClient>();
  return {
    get: (remote) => {
      let client = clients.get(remote);
      if (!client) {
        client = new KubeClient(adminConnection(fleet.plane.cluster(remote)), { requestTimeoutMs: 120_000 });
        clients.set(remote, client);
      }
      return client;
    },
    close: () => {
      for (const client of clients.values()) client.close();
    },
  };
}

/** The test's admin client for the local API server (lean client, node:https). */
export function localAdminClient(fleet: Fleet): KubeClient {
  return new KubeClient(adminConnection(fleet.plane.cluster("local")), { requestTimeoutMs: 120_000 });
}

/**
 * One remote with a gateway at `gatewayIp` and `services` exported Services
 * `svc-0..svc-(S-1)` in namespace `namespace`, registered `clusters` times as
 * `<prefix>0..<prefix>(K-1)`.
 */
/**
 * `exportBy: "label"` exports the Services by the export label of SPEC §12 instead of the
 * §2 annotations, through each cluster's default gateway, which its Secret names (the
 * same gateway Service `gateway/gateway`): the same mirrors, another mode.
 */
export async function shapeRemote(
  fleet: Fleet,
  remote: string,
  opts: {
    services: number;
    clusters: number;
    gatewayIp: string;
    namespace?: string;
    prefix?: string;
    exportBy?: "annotation" | "label";
    /** false: no credentials Secret (the caller registers the clusters otherwise, e.g. by Links); default true. */
    register?: boolean;
  },
): Promise<string[]> {
  const namespace = opts.namespace ?? "bench";
  const byLabel = opts.exportBy === "label";
  await fleet.createGateway(remote, { ingress: [{ ip: opts.gatewayIp }], port: GATEWAY_PORT });
  await fleet.ensureNamespace(remote, namespace);
  const names = Array.from({ length: opts.services }, (_, i) => `svc-${i}`);
  await runPool(names, 8, async (name) => {
    await fleet.createService(
      remote,
      namespace,
      name,
      byLabel ? { gateway: false, labels: { [EXPORTED_LABEL]: "true" } } : {},
    );
  });
  const clusters = Array.from({ length: opts.clusters }, (_, k) => `${opts.prefix ?? "c"}${k}`);
  if (opts.register === false) return clusters;
  await fleet.remoteToken(remote);
  await runPool(clusters, 8, async (clusterName) => {
    await fleet.register(
      remote,
      byLabel ? { clusterName, annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gateway" } } : { clusterName },
    );
  });
  return clusters;
}

/** Resolves once `clusters` clusters are synced; returns the time it took from `startedAt`. */
export async function waitAllSynced(supervisor: Supervisor, clusters: number, timeoutMs = 900_000): Promise<number> {
  const startedAt = Date.now();
  let reported = startedAt;
  const states = () => {
    const counts: Record<string, number> = {};
    for (const r of supervisor.status().clusters) counts[r.state] = (counts[r.state] ?? 0) + 1;
    return JSON.stringify(counts);
  };
  await eventually(
    () => `${clusters} clusters synced (states ${states()})`,
    () => {
      const rows = supervisor.status().clusters;
      if (Date.now() - reported > 10_000) {
        reported = Date.now();
        progress(`waiting for ${clusters} clusters synced: ${states()}`);
      }
      return rows.length === clusters && rows.every((r) => r.state === "synced") ? true : undefined;
    },
    timeoutMs,
    // Supervisor.status() costs milliseconds at K = 1000: polling faster would load the
    // very main thread being measured.
    250,
  );
  return Date.now() - startedAt;
}

/**
 * Resolves once the writer is ready, holds the complete desired set of every cluster the
 * supervisor runs, and has an empty queue and nothing in flight, all in one status.
 *
 * "Every cluster synced" alone is not convergence: a cluster is synced once its remote
 * list is done, its complete set reaches the writer a batch delay later, and the
 * writer's status is published once a second. With clusters packed on few threads they
 * all list at once, so an idle status from just before their sets arrived would start
 * the measurement on an unconverged world (its initial writes counted as the load's).
 * The writer's status is one snapshot of its own thread: complete sets with an empty
 * queue in the same snapshot mean every key they enqueued was written.
 */
export async function waitWriterIdle(supervisor: Supervisor, timeoutMs = 900_000): Promise<void> {
  let reported = Date.now();
  const describe = () => {
    const w = supervisor.status().writer;
    const complete = Object.values(w?.clusters ?? {}).filter((c) => c.complete).length;
    return w
      ? `ready ${w.ready}, complete sets ${complete}/${supervisor.status().clusters.length}, queue ${w.queueDepth}, in flight ${w.inFlight}, retries ${w.retries}`
      : "no writer";
  };
  await eventually(
    () => `writer idle (${describe()})`,
    () => {
      if (Date.now() - reported > 10_000) {
        reported = Date.now();
        progress(`waiting for the writer: ${describe()}`);
      }
      const { writer: w, clusters } = supervisor.status();
      if (!w?.ready || w.queueDepth > 0 || w.inFlight > 0) return undefined;
      return clusters.every((c) => w.clusters[c.cluster]?.complete === true) ? true : undefined;
    },
    timeoutMs,
    250,
  );
}

interface List<T> {
  readonly items?: readonly T[];
  readonly metadata?: { readonly continue?: string };
}

/** Every object of a collection with `labelSelector`, following pagination. */
export async function listAll<T>(client: KubeClient, path: string, labelSelector: string): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  do {
    const page: List<T> = await client.request<List<T>>("GET", path, {
      query: { labelSelector, limit: 5000, continue: token },
    });
    items.push(...(page.items ?? []));
    token = page.metadata?.continue || undefined;
  } while (token);
  return items;
}

/**
 * Local write requests by `VERB resource` (services, endpoints, endpointslices,
 * namespaces), from the local API server's own `apiserver_request_total`; subtract two
 * of them for a breakdown (`diffCounts`), split it by writer with `splitWrites`.
 */
export async function localWritesByKind(fleet: Fleet): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const line of (await fleet.localMetrics()).split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    const verb = /verb="([A-Z]+)"/.exec(line)?.[1];
    const resource = /resource="(services|endpoints|endpointslices|namespaces)"/.exec(line)?.[1];
    if (!verb || !resource || !["POST", "PUT", "PATCH", "DELETE"].includes(verb)) continue;
    const key = `${verb} ${resource}`;
    counts[key] = (counts[key] ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return counts;
}

/**
 * A write breakdown split by writer. In `endpoints` mode fleet-mirror writes no
 * EndpointSlice (SPEC §9), while the built-in EndpointSliceMirroring controller derives
 * one from every mirror Endpoints, as in a real cluster: those slice writes are the
 * mirroring controller's, counted apart. In `endpointslices` mode every create and
 * update is fleet-mirror's (a mirror Service has no selector and there are no mirror
 * Endpoints to mirror); only the garbage collector's DELETE of a deleted mirror's owned
 * slices is not, and the scenarios that report this split delete no mirror.
 */
export function splitWrites(
  mode: BenchMode,
  byKind: Readonly<Record<string, number>>,
): { fleetMirror: number; mirroringController: number } {
  let fleetMirror = 0;
  let mirroringController = 0;
  for (const [kind, n] of Object.entries(byKind)) {
    if (mode === "endpoints" && kind.endsWith(" endpointslices")) mirroringController += n;
    else fleetMirror += n;
  }
  return { fleetMirror, mirroringController };
}

export function diffCounts(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, n] of Object.entries(after)) {
    const d = n - (before[key] ?? 0);
    if (d !== 0) out[key] = d;
  }
  return out;
}
