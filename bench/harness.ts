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
import { sliceName } from "../src/core/endpoint-slices.ts";
import { EXPORTED_LABEL } from "../src/core/export.ts";
import {
  GATEWAY_NAME,
  GATEWAY_NS,
  MANAGED_BY_FLEET_MIRROR,
  MANAGED_BY_LABEL,
  MIRRORED_SERVICE,
} from "../src/core/labels.ts";
import type { EndpointSlice, Endpoints, KubeObject, Service } from "../src/core/objects.ts";
import { KubeClient } from "../src/kube/client.ts";
import { Watcher } from "../src/kube/watcher.ts";
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

/** Whether a mirror Service carries the remote's ports (`port` of the first one). */
export function serviceHasPort(svc: Service | undefined, port: number): boolean {
  return svc?.spec?.ports?.[0]?.port === port;
}

/** Whether mirror Endpoints point at exactly `ip`:GATEWAY_PORT. */
export function endpointsPointAt(ep: Endpoints | undefined, ip: string): boolean {
  const subset = ep?.subsets?.[0];
  return (
    ep?.subsets?.length === 1 &&
    subset?.addresses?.length === 1 &&
    subset.addresses[0]?.ip === ip &&
    subset.ports?.some((p) => p.port === GATEWAY_PORT) === true
  );
}

/**
 * Whether `slice` is the right IPv4 slice of mirror `mirror` (SPEC §9): fleet-mirror's
 * `managed-by`, one ready endpoint at exactly `ip`, GATEWAY_PORT among its ports.
 */
export function slicePointsAt(slice: EndpointSlice | undefined, mirror: string, ip: string): boolean {
  const endpoint = slice?.endpoints?.[0];
  return (
    slice?.metadata.name === sliceName(mirror, "ipv4") &&
    slice.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_FLEET_MIRROR &&
    slice.addressType === "IPv4" &&
    slice.endpoints?.length === 1 &&
    endpoint?.addresses.length === 1 &&
    endpoint.addresses[0] === ip &&
    endpoint.conditions?.ready === true &&
    slice.ports?.some((p) => p.port === GATEWAY_PORT) === true
  );
}

/** The mirror a slice belongs to: its `<mirror>-ipv4` name less the suffix. */
export function sliceMirror(slice: EndpointSlice): string {
  return slice.metadata.name.replace(/-ipv[46]$/, "");
}

/**
 * Whether a mirror's address object (Endpoints, or its IPv4 slice) points at exactly
 * `ip`:GATEWAY_PORT, in the mode that wrote it.
 */
export function addressesPointAt(mode: BenchMode, obj: KubeObject | undefined, ip: string): boolean {
  return mode === "endpoints"
    ? endpointsPointAt(obj as Endpoints | undefined, ip)
    : obj !== undefined && slicePointsAt(obj as EndpointSlice, sliceMirror(obj as EndpointSlice), ip);
}

/**
 * A label-selected watch on a local collection that counts the objects satisfying
 * `done`, and resolves `until(n)` as soon as n of them do (checked on every event).
 */
export class CountingWatch<T extends KubeObject> {
  readonly watcher: Watcher<T>;
  readonly #satisfied = new Set<string>();
  #done: (obj: T) => boolean;
  #waiter: { n: number; resolve: () => void } | undefined;

  constructor(client: KubeClient, path: string, done: (obj: T) => boolean) {
    this.#done = done;
    this.watcher = new Watcher<T>({ client, path, labelSelector: MIRROR_SELECTOR, pageSize: 5000 });
    this.watcher.on("change", (key, _prev, current) => {
      if (current && this.#done(current)) this.#satisfied.add(key);
      else this.#satisfied.delete(key);
      this.#check();
    });
  }

  async start(): Promise<void> {
    const listed = new Promise<void>((resolve) => this.watcher.once("listed", () => resolve()));
    this.watcher.start();
    await listed;
  }

  /** Changes the predicate and re-evaluates the whole store. */
  expect(done: (obj: T) => boolean): void {
    this.#done = done;
    this.#satisfied.clear();
    for (const obj of this.watcher.values()) {
      if (done(obj)) this.#satisfied.add(`${obj.metadata.namespace}/${obj.metadata.name}`);
    }
  }

  get count(): number {
    return this.#satisfied.size;
  }

  until(n: number, timeoutMs = 900_000): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out waiting for ${n} objects (have ${this.count})`)),
        timeoutMs,
      );
      this.#waiter = {
        n,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.#check();
    });
  }

  #check(): void {
    if (this.#waiter && this.#satisfied.size >= this.#waiter.n) {
      const { resolve } = this.#waiter;
      this.#waiter = undefined;
      resolve();
    }
  }

  async stop(): Promise<void> {
    await this.watcher.stop();
  }
}

/** A copy of a mirror object fit for a POST into `namespace` (server-set fields dropped). */
export function copyForCreate<T extends KubeObject>(obj: T, namespace: string): Record<string, unknown> {
  const { metadata, ...rest } = obj as T & { spec?: Record<string, unknown>; status?: unknown };
  const copy: Record<string, unknown> = {
    ...rest,
    metadata: {
      name: metadata.name,
      namespace,
      ...(metadata.labels ? { labels: metadata.labels } : {}),
      ...(metadata.annotations ? { annotations: metadata.annotations } : {}),
    },
  };
  delete copy["status"];
  const spec = copy["spec"];
  if (spec && typeof spec === "object") {
    const { clusterIP: _ip, clusterIPs: _ips, ...specRest } = spec as Record<string, unknown>;
    copy["spec"] = specRest;
  }
  return copy;
}

/**
 * A copy of a mirror's address object (`mode`'s Endpoints or slice) fit for a POST into
 * `namespace`, next to the copy of its Service whose uid is `serviceUid`: a slice is
 * owned by its Service, as the controller writes it (SPEC §9).
 */
export function copyAddressesForCreate(
  mode: BenchMode,
  obj: KubeObject,
  namespace: string,
  service: { name: string; uid: string | undefined },
): Record<string, unknown> {
  const copy = copyForCreate(obj, namespace);
  if (mode === "endpoints") return copy;
  const owner = { apiVersion: "v1", kind: "Service", name: service.name, uid: service.uid, controller: true };
  return { ...copy, metadata: { ...(copy["metadata"] as object), ownerReferences: [owner] } };
}

export function ensureLocalNamespace(client: KubeClient, name: string): Promise<unknown> {
  return client.request("POST", "/api/v1/namespaces", { body: { metadata: { name } } });
}

export function collectionPath(kind: "services" | "endpoints" | "endpointslices", namespace: string): string {
  return kind === "endpointslices"
    ? `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`
    : `/api/v1/namespaces/${namespace}/${kind}`;
}

/** The cluster-wide collection of a mirror's address objects in `mode`. */
export function addressesPath(mode: BenchMode): string {
  return mode === "endpoints" ? "/api/v1/endpoints" : "/apis/discovery.k8s.io/v1/endpointslices";
}
