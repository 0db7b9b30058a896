/**
 * Cold convergence: K clusters × S exported Services (K credentials Secrets with distinct
 * cluster names, all pointing at ONE remote API server that holds S exported Services and
 * a gateway). The controller starts in-process with an unlimited write rate and 16
 * writes in flight; the clock runs from `start()` until every mirror Service AND its
 * address object (the `<mirror>-ipv4` EndpointSlice in the default mode, the Endpoints
 * in `endpoints` mode) exists with the right content (a label-selected list of the
 * local API every 250 ms).
 *
 * Every size runs in both `--endpoints-api` modes, EndpointSlices first, each on a
 * fresh world shaped the same. The limit, in the same world and on the same local API
 * server: a bare client creating the identical objects that mode wrote (the mirrors
 * just written, copied into fresh namespaces) with the same concurrency, per mirror a
 * Service then its slice (owned by that Service, as the controller's) or its Endpoints.
 * ratio = bare time / fleet-mirror time (1.0 = as fast as the API server allows).
 * Writes per mirror come from the local API server's own `apiserver_request_total`,
 * broken down by verb and resource (endpointslices vs endpoints); in endpoints mode the
 * slices the built-in EndpointSliceMirroring controller derives are counted apart
 * (`mirroringControllerWrites`), for fleet-mirror and the bare client alike.
 */
import { SERVICE_NAME_LABEL } from "../src/core/labels.ts";
import type { KubeObject, Service } from "../src/core/objects.ts";
import type { Supervisor } from "../src/supervisor/supervisor.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import {
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  diffCounts,
  listAll,
  localAdminClient,
  localWritesByKind,
  MIRROR_SELECTOR,
  printTable,
  progress,
  round,
  runPool,
  type ScenarioResult,
  shapeRemote,
  sleep,
  splitWrites,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";
import {
  addressesPath,
  addressesPointAt,
  collectionPath,
  copyAddressesForCreate,
  copyForCreate,
  ensureLocalNamespace,
  serviceHasPort,
} from "./mirror-objects.ts";
import { ProgressRecorder, type ProgressSeries } from "./series.ts";

export const WRITE_CONCURRENCY = 16;
const GATEWAY_IP = "198.18.0.10";

export interface ConvergeRun {
  readonly mode: BenchMode;
  readonly fleet: Fleet;
  readonly supervisor: Supervisor;
  readonly mirrors: number;
  readonly convergeMs: number;
  readonly firstMirrorMs: number | null;
  readonly syncedMs: number;
  readonly fleetWrites: number;
  /** All local writes while converging, by `VERB resource`. */
  readonly fleetWritesByKind: Record<string, number>;
  /** The built-in EndpointSliceMirroring controller's slice writes (endpoints mode; see splitWrites). */
  readonly mirroringControllerWrites: number;
  readonly services: Service[];
  /** The mirrors' address objects: EndpointSlices or Endpoints, per `mode`. */
  readonly addresses: KubeObject[];
  /** Mirrors right (Service and address object) at each list, from the controller's start. */
  readonly progress: ProgressSeries;
}

/**
 * Starts a fleet of K clusters × S services and the controller with `--endpoints-api`
 * `mode`; resolves when every mirror is right.
 */
export async function converge(
  clusters: number,
  services: number,
  mode: BenchMode,
  exportBy: "annotation" | "label" = "annotation",
): Promise<ConvergeRun> {
  const fleet = await Fleet.start(["remote"]);
  try {
    await shapeRemote(fleet, "remote", { services, clusters, gatewayIp: GATEWAY_IP, exportBy });
    const client = localAdminClient(fleet);
    const mirrors = clusters * services;
    const kindsBefore = await localWritesByKind(fleet);
    globalThis.gc?.();
    const started = Date.now();
    progress(
      `cold convergence (${mode}, by ${exportBy}): ${clusters} clusters × ${services} services, controller starting`,
    );
    const supervisor = fleet.startInProcess({
      endpointsApi: mode,
      logLevel: "silent",
      writeQps: 0,
      writeConcurrency: WRITE_CONCURRENCY,
    });
    const syncedP = waitAllSynced(supervisor, clusters).then(() => Date.now() - started);
    let firstMirrorMs: number | null = null;
    let reported = started;
    const recorder = new ProgressRecorder(started);
    let svcs: Service[] = [];
    let addresses: KubeObject[] = [];
    for (;;) {
      [svcs, addresses] = await Promise.all([
        listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR),
        listAll<KubeObject>(client, addressesPath(mode), MIRROR_SELECTOR),
      ]);
      if (firstMirrorMs === null && svcs.length > 0) firstMirrorMs = Date.now() - started;
      const okSvcs = svcs.filter((s) => serviceHasPort(s, 80));
      const okEps = addresses.filter((a) => addressesPointAt(mode, a, GATEWAY_IP));
      const okSvc = okSvcs.length;
      const okEp = okEps.length;
      const right = new Set(okEps.map((a) => addressService(mode, a)));
      recorder.mark(okSvcs.filter((s) => right.has(`${s.metadata.namespace}/${s.metadata.name}`)).length);
      if (okSvc === mirrors && okEp === mirrors) break;
      if (Date.now() - reported > 10_000) {
        reported = Date.now();
        progress(`converging (${mode}): ${okSvc} Services, ${okEp} ${mode} right of ${mirrors}`);
      }
      if (Date.now() - started > 1_800_000) throw new Error(`not converged: ${okSvc}/${okEp} of ${mirrors}`);
      await sleep(250);
    }
    const convergeMs = Date.now() - started;
    const syncedMs = await syncedP;
    await waitWriterIdle(supervisor);
    const fleetWritesByKind = diffCounts(await localWritesByKind(fleet), kindsBefore);
    const { fleetMirror: fleetWrites, mirroringController } = splitWrites(mode, fleetWritesByKind);
    client.close();
    return {
      mode,
      fleet,
      supervisor,
      mirrors,
      convergeMs,
      firstMirrorMs,
      syncedMs,
      fleetWrites,
      fleetWritesByKind,
      mirroringControllerWrites: mirroringController,
      services: svcs,
      addresses,
      progress: recorder.series(),
    };
  } catch (error) {
    await fleet.stop();
    throw error;
  }
}

/** The Service (in the same namespace) an address object belongs to: the slice's label, or the Endpoints' own name. */
function addressService(mode: BenchMode, obj: KubeObject): string {
  const name = mode === "endpoints" ? obj.metadata.name : obj.metadata.labels?.[SERVICE_NAME_LABEL];
  return `${obj.metadata.namespace}/${name}`;
}

/**
 * The bare-client limit: the same objects, into fresh namespaces, with the same
 * concurrency. A slice is created after its Service and owned by it, as the controller
 * does (it needs the Service's uid).
 */
export async function bareCreate(run: Pick<ConvergeRun, "fleet" | "mode" | "services" | "addresses">) {
  const { mode } = run;
  const client = localAdminClient(run.fleet);
  try {
    const epByKey = new Map(run.addresses.map((e) => [addressService(mode, e), e]));
    const services = run.services;
    const namespaces = [...new Set(services.map((s) => s.metadata.namespace ?? "default"))];
    const started = Date.now();
    const recorder = new ProgressRecorder(started);
    let written = 0;
    await runPool(namespaces, WRITE_CONCURRENCY, async (ns) => {
      await ensureLocalNamespace(client, `bare-${ns}`);
    });
    await runPool(services, WRITE_CONCURRENCY, async (svc) => {
      const ns = `bare-${svc.metadata.namespace ?? "default"}`;
      const created = await client.request<Service>("POST", collectionPath("services", ns), {
        body: copyForCreate(svc, ns),
      });
      const ep = epByKey.get(`${svc.metadata.namespace}/${svc.metadata.name}`);
      if (!ep) throw new Error(`no ${mode} object for mirror ${svc.metadata.namespace}/${svc.metadata.name}`);
      const body = copyAddressesForCreate(mode, ep, ns, { name: svc.metadata.name, uid: created.metadata.uid });
      await client.request("POST", collectionPath(mode, ns), { body });
      recorder.mark(++written);
    });
    return { bareMs: Date.now() - started, namespaces: namespaces.length, progress: recorder.series() };
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
    for (const mode of BENCH_MODES) rows.push(await convergeAndBare(size, mode));
  }
  printTable(
    "cold convergence, both --endpoints-api modes (ratio = bare-client time / fleet-mirror time)",
    rows.map(({ mirrorsOverTime: _, ...row }) => row),
  );
  writeResult(opts.out, "cold-convergence", {
    smoke: opts.smoke,
    writeConcurrency: WRITE_CONCURRENCY,
    writeQps: "unlimited",
    pollIntervalMs: 250,
    runs: rows,
  });
  const figures = (mode: BenchMode) => {
    const main = rows.find((r) => r["endpointsApi"] === mode);
    const ratio = main?.["ratio"];
    const wpm = main?.["writesPerMirror"];
    return [typeof ratio === "number" ? ratio : null, typeof wpm === "number" ? wpm : null] as const;
  };
  const [ratio, wpm] = figures("endpointslices");
  const [ratioEp, wpmEp] = figures("endpoints");
  return {
    result: { runs: rows },
    summary: opts.smoke
      ? {}
      : {
          cold_converge_ratio: ratio,
          writes_per_mirror: wpm,
          cold_converge_ratio_endpoints_mode: ratioEp,
          writes_per_mirror_endpoints_mode: wpmEp,
        },
  };
}

/** One size in one mode: the controller's convergence, then the bare client's on the same API server. */
async function convergeAndBare(
  size: { clusters: number; services: number },
  mode: BenchMode,
): Promise<Record<string, unknown>> {
  const run = await converge(size.clusters, size.services, mode);
  try {
    await run.supervisor.stop();
    const kindsBeforeBare = await localWritesByKind(run.fleet);
    const bare = await bareCreate(run);
    const bareWrites = splitWrites(mode, diffCounts(await localWritesByKind(run.fleet), kindsBeforeBare)).fleetMirror;
    return {
      endpointsApi: mode,
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
      mirroringControllerWrites: run.mirroringControllerWrites,
      bareWrites,
      mirrorsPerSecond: round(run.mirrors / (run.convergeMs / 1000), 1),
      bareMirrorsPerSecond: round(run.mirrors / (bare.bareMs / 1000), 1),
      // Mirrors right over time, each from its own start (bench/charts.ts draws them).
      mirrorsOverTime: { fleetMirror: run.progress, bare: bare.progress },
    };
  } finally {
    await run.fleet.stop();
  }
}
