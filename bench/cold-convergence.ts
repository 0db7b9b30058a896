/**
 * Cold convergence: K clusters × S exported Services (K credentials Secrets with distinct
 * cluster names, all pointing at ONE remote API server that holds S exported Services and
 * a gateway). The controller starts in-process with an unlimited write rate and 16
 * writes in flight; the clock runs from `start()` until every mirror Service AND
 * Endpoints exists with the right content (a label-selected list of the local API every
 * 250 ms).
 *
 * The limit, in the same run and on the same local API server: a bare client creating
 * the identical objects (the mirrors just written, copied into fresh namespaces, the same
 * number of them) with the same concurrency, a Service then its Endpoints per mirror.
 * ratio = bare time / fleet-mirror time (1.0 = as fast as the API server allows).
 * Writes per mirror come from the local API server's own `apiserver_request_total`.
 */
import type { Endpoints, Service } from "../src/core/objects.ts";
import type { Supervisor } from "../src/supervisor/supervisor.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import {
  type BenchOptions,
  collectionPath,
  copyForCreate,
  diffCounts,
  endpointsPointAt,
  ensureLocalNamespace,
  listAll,
  localAdminClient,
  localWritesByKind,
  MIRROR_SELECTOR,
  printTable,
  progress,
  round,
  runPool,
  type ScenarioResult,
  serviceHasPort,
  shapeRemote,
  sleep,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

export const WRITE_CONCURRENCY = 16;
const GATEWAY_IP = "198.18.0.10";

export interface ConvergeRun {
  readonly fleet: Fleet;
  readonly supervisor: Supervisor;
  readonly mirrors: number;
  readonly convergeMs: number;
  readonly firstMirrorMs: number | null;
  readonly syncedMs: number;
  readonly fleetWrites: number;
  readonly fleetWritesByKind: Record<string, number>;
  readonly services: Service[];
  readonly endpoints: Endpoints[];
}

/** Starts a fleet of K clusters × S services and the controller; resolves when every mirror is right. */
export async function converge(clusters: number, services: number): Promise<ConvergeRun> {
  const fleet = await Fleet.start(["remote"]);
  try {
    await shapeRemote(fleet, "remote", { services, clusters, gatewayIp: GATEWAY_IP });
    const client = localAdminClient(fleet);
    const mirrors = clusters * services;
    const writesBefore = await fleet.localWriteCount();
    const kindsBefore = await localWritesByKind(fleet);
    globalThis.gc?.();
    const started = Date.now();
    progress(`cold convergence: ${clusters} clusters × ${services} services, controller starting`);
    const supervisor = fleet.startInProcess({
      logLevel: "silent",
      writeQps: 0,
      writeConcurrency: WRITE_CONCURRENCY,
    });
    const syncedP = waitAllSynced(supervisor, clusters).then(() => Date.now() - started);
    let firstMirrorMs: number | null = null;
    let reported = started;
    let svcs: Service[] = [];
    let eps: Endpoints[] = [];
    for (;;) {
      [svcs, eps] = await Promise.all([
        listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR),
        listAll<Endpoints>(client, "/api/v1/endpoints", MIRROR_SELECTOR),
      ]);
      if (firstMirrorMs === null && svcs.length > 0) firstMirrorMs = Date.now() - started;
      const okSvc = svcs.filter((s) => serviceHasPort(s, 80)).length;
      const okEp = eps.filter((e) => endpointsPointAt(e, GATEWAY_IP)).length;
      if (okSvc === mirrors && okEp === mirrors) break;
      if (Date.now() - reported > 10_000) {
        reported = Date.now();
        progress(`converging: ${okSvc} Services, ${okEp} Endpoints right of ${mirrors}`);
      }
      if (Date.now() - started > 1_800_000) throw new Error(`not converged: ${okSvc}/${okEp} of ${mirrors}`);
      await sleep(250);
    }
    const convergeMs = Date.now() - started;
    const syncedMs = await syncedP;
    await waitWriterIdle(supervisor);
    const fleetWrites = (await fleet.localWriteCount()) - writesBefore;
    const fleetWritesByKind = diffCounts(await localWritesByKind(fleet), kindsBefore);
    client.close();
    return {
      fleet,
      supervisor,
      mirrors,
      convergeMs,
      firstMirrorMs,
      syncedMs,
      fleetWrites,
      fleetWritesByKind,
      services: svcs,
      endpoints: eps,
    };
  } catch (error) {
    await fleet.stop();
    throw error;
  }
}

/** The bare-client limit: the same objects, into fresh namespaces, with the same concurrency. */
export async function bareCreate(fleet: Fleet, services: readonly Service[], endpoints: readonly Endpoints[]) {
  const client = localAdminClient(fleet);
  try {
    const epByKey = new Map(endpoints.map((e) => [`${e.metadata.namespace}/${e.metadata.name}`, e]));
    const namespaces = [...new Set(services.map((s) => s.metadata.namespace ?? "default"))];
    const started = Date.now();
    await runPool(namespaces, WRITE_CONCURRENCY, async (ns) => {
      await ensureLocalNamespace(client, `bare-${ns}`);
    });
    await runPool(services, WRITE_CONCURRENCY, async (svc) => {
      const ns = `bare-${svc.metadata.namespace ?? "default"}`;
      await client.request("POST", collectionPath("services", ns), { body: copyForCreate(svc, ns) });
      const ep = epByKey.get(`${svc.metadata.namespace}/${svc.metadata.name}`);
      if (ep) await client.request("POST", collectionPath("endpoints", ns), { body: copyForCreate(ep, ns) });
    });
    return { bareMs: Date.now() - started, namespaces: namespaces.length };
  } finally {
    client.close();
  }
}

export async function runColdConvergence(opts: BenchOptions): Promise<ScenarioResult> {
  const sizes = opts.smoke
    ? [{ clusters: 5, services: 5 }]
    : [
        { clusters: 50, services: 50 },
        { clusters: 200, services: 25 },
      ];
  const rows: Record<string, unknown>[] = [];
  for (const size of sizes) {
    const run = await converge(size.clusters, size.services);
    try {
      await run.supervisor.stop();
      const writesBeforeBare = await run.fleet.localWriteCount();
      const bare = await bareCreate(run.fleet, run.services, run.endpoints);
      const bareWrites = (await run.fleet.localWriteCount()) - writesBeforeBare;
      rows.push({
        clusters: size.clusters,
        servicesPerCluster: size.services,
        mirrors: run.mirrors,
        convergeMs: run.convergeMs,
        firstMirrorMs: run.firstMirrorMs,
        allSyncedMs: run.syncedMs,
        bareMs: bare.bareMs,
        ratio: round(bare.bareMs / run.convergeMs, 3),
        fleetWrites: run.fleetWrites,
        fleetWritesByKind: JSON.stringify(run.fleetWritesByKind),
        writesPerMirror: round(run.fleetWrites / run.mirrors, 3),
        bareWrites,
        mirrorsPerSecond: round(run.mirrors / (run.convergeMs / 1000), 1),
        bareMirrorsPerSecond: round(run.mirrors / (bare.bareMs / 1000), 1),
      });
    } finally {
      await run.fleet.stop();
    }
  }
  printTable("cold convergence (ratio = bare-client time / fleet-mirror time)", rows);
  writeResult(opts.out, "cold-convergence", {
    smoke: opts.smoke,
    writeConcurrency: WRITE_CONCURRENCY,
    writeQps: "unlimited",
    pollIntervalMs: 250,
    runs: rows,
  });
  const main = rows[0];
  const ratio = main?.["ratio"];
  const wpm = main?.["writesPerMirror"];
  return {
    result: { runs: rows },
    summary: opts.smoke
      ? {}
      : {
          cold_converge_ratio: typeof ratio === "number" ? ratio : null,
          writes_per_mirror: typeof wpm === "number" ? wpm : null,
        },
  };
}
