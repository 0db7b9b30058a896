/**
 * Headless Services (SPEC §12), the shape: K clusters × S StatefulSets × H pods
 * (K credentials Secrets pointing at ONE remote API server that holds S exported
 * headless Services, each with one EndpointSlice of H endpoints with hostnames
 * `<svc>-0…<svc>-(H−1)`, as the endpointslice controller writes a StatefulSet's).
 *
 * Part 1, convergence and writes (in-process controller, default `--endpoints-api`,
 * no write limit, as cold-convergence.ts): the clock runs from `start()` until every
 * per-host mirror `<h>-<c>` exists with its slice pointing at the gateway AND every
 * headless mirror `<svc>-<c>` has a slice with H endpoints, each with its hostname.
 * Writes are counted per object from two local watches (Services and EndpointSlices,
 * mirror label) started before the controller: every ADDED or MODIFIED event is one
 * write that changed the object. A per-host mirror's least is 2 (its Service, its
 * slice): `writesPerHostMirror` ≤ 2 is the target. A headless mirror's slice is
 * rewritten as its hosts' cluster IPs arrive (the writer coalesces them):
 * `writesPerHeadlessMirror` says how much. The local API server's own request count
 * (`apiserverWrites`) is the cross-check.
 *
 * Part 2, the remote actor's memory per watched headless Service (production build,
 * a thread per cluster, `--max-threads 0`, as memory.ts): two worlds of K clusters
 * measured in turn, the same S Services exported, as ordinary ClusterIP Services and as
 * headless ones with H hosts. Growth per watched headless Service = (mean actor-thread
 * heap used, headless − plain) / S; process RSS growth is shown too, but it holds the
 * writer's K·S·H extra per-host mirrors, not only the actors' watches.
 */
import { sliceMirrorName } from "../src/core/endpoint-slices.ts";
import { HEADLESS_MIRROR_LABEL } from "../src/core/headless.ts";
import type { EndpointSlice, Service } from "../src/core/objects.ts";
import { Watcher } from "../src/kube/watcher.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import { createHeadless, setSlice } from "../test/helpers/headless.ts";
import { WRITE_CONCURRENCY } from "./cold-convergence.ts";
import {
  type BenchOptions,
  diffCounts,
  GATEWAY_PORT,
  listAll,
  localAdminClient,
  localWritesByKind,
  MIRROR_SELECTOR,
  mb,
  printTable,
  progress,
  round,
  runPool,
  type ScenarioResult,
  sleep,
  waitAllSynced,
  writeResult,
} from "./harness.ts";
import { actorHeaps, processRss, startController, waitStatus, writerSettled } from "./memory.ts";
import { serviceHasPort, slicePointsAt } from "./mirror-objects.ts";

const GATEWAY_IP = "198.18.0.40";
const NAMESPACE = "bench";
const SETTLE_MS = 3_000;

interface Shape {
  readonly clusters: number;
  readonly services: number;
  readonly hosts: number;
}

const serviceNames = (shape: Shape): string[] => Array.from({ length: shape.services }, (_, i) => `db-${i}`);

/** The remote: a gateway, S exported Services (headless with H hosts each, or plain), K Secrets. */
async function shapeHeadlessRemote(fleet: Fleet, shape: Shape, headless: boolean): Promise<void> {
  await fleet.createGateway("remote", { ingress: [{ ip: GATEWAY_IP }], port: GATEWAY_PORT });
  await fleet.ensureNamespace("remote", NAMESPACE);
  await runPool(serviceNames(shape), 4, async (name) => {
    await createHeadless(fleet, "remote", NAMESPACE, name, { headless });
    if (headless)
      await setSlice(
        fleet,
        "remote",
        NAMESPACE,
        name,
        `${name}-pods`,
        Array.from({ length: shape.hosts }, (_, j) => `${name}-${j}`),
      );
  });
  await fleet.remoteToken("remote");
  await runPool(
    Array.from({ length: shape.clusters }, (_, k) => `c${k}`),
    8,
    async (clusterName) => {
      await fleet.register("remote", { clusterName });
    },
  );
}

/** Counts the changes of each local mirror object (ADDED or MODIFIED: one write each). */
class WriteCounter<T extends Service | EndpointSlice> {
  readonly writes = new Map<string, number>();
  readonly watcher: Watcher<T>;

  constructor(fleet: Fleet, path: string) {
    this.watcher = new Watcher<T>({
      client: localAdminClient(fleet),
      path,
      labelSelector: MIRROR_SELECTOR,
      pageSize: 5000,
    });
    this.watcher.on("change", (key, previous, current) => {
      if (current && current.metadata.resourceVersion !== previous?.metadata.resourceVersion)
        this.writes.set(key, (this.writes.get(key) ?? 0) + 1);
    });
  }

  async start(): Promise<void> {
    const listed = new Promise<void>((resolve) => this.watcher.once("listed", () => resolve()));
    this.watcher.start();
    await listed;
  }
}

/** Whether headless mirror slice `slice` lists the H hosts of its Service, each with its hostname. */
function headlessSliceComplete(slice: EndpointSlice, hosts: number): boolean {
  const endpoints = slice.endpoints ?? [];
  return endpoints.length === hosts && endpoints.every((e) => e.hostname !== undefined && e.addresses.length > 0);
}

/** The mirror a slice belongs to; "" when it names none. */
const sliceOwner = (slice: EndpointSlice | undefined): string => (slice ? (sliceMirrorName(slice) ?? "") : "");

async function convergence(shape: Shape): Promise<Record<string, unknown>> {
  const fleet = await Fleet.start(["remote"]);
  try {
    await shapeHeadlessRemote(fleet, shape, true);
    const client = localAdminClient(fleet);
    const services = new WriteCounter<Service>(fleet, "/api/v1/services");
    const slices = new WriteCounter<EndpointSlice>(fleet, "/apis/discovery.k8s.io/v1/endpointslices");
    await Promise.all([services.start(), slices.start()]);
    const hostMirrors = shape.clusters * shape.services * shape.hosts;
    const headlessMirrors = shape.clusters * shape.services;
    const before = await localWritesByKind(fleet);
    globalThis.gc?.();
    const started = Date.now();
    progress(`headless: ${shape.clusters} clusters × ${shape.services} headless Services × ${shape.hosts} hosts`);
    const supervisor = fleet.startInProcess({
      endpointsApi: "endpointslices",
      logLevel: "silent",
      writeQps: 0,
      writeConcurrency: WRITE_CONCURRENCY,
    });
    try {
      const syncedP = waitAllSynced(supervisor, shape.clusters).then(() => Date.now() - started);
      let reported = started;
      let hostNames = new Set<string>();
      let headlessNames = new Set<string>();
      for (;;) {
        const [svcs, sls] = await Promise.all([
          listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR),
          listAll<EndpointSlice>(client, "/apis/discovery.k8s.io/v1/endpointslices", MIRROR_SELECTOR),
        ]);
        hostNames = new Set(
          svcs
            .filter((s) => s.metadata.labels?.[HEADLESS_MIRROR_LABEL] && serviceHasPort(s, 80))
            .map((s) => s.metadata.name),
        );
        headlessNames = new Set(svcs.filter((s) => s.spec?.clusterIP === "None").map((s) => s.metadata.name));
        const hostSlices = sls.filter(
          (s) => hostNames.has(sliceOwner(s)) && slicePointsAt(s, sliceOwner(s), GATEWAY_IP),
        );
        const headlessSlices = sls.filter(
          (s) => headlessNames.has(sliceOwner(s)) && headlessSliceComplete(s, shape.hosts),
        );
        if (hostSlices.length === hostMirrors && headlessSlices.length === headlessMirrors) break;
        if (Date.now() - reported > 10_000) {
          reported = Date.now();

          progress(
            `headless converging: ${hostSlices.length}/${hostMirrors} per-host mirrors, ${headlessSlices.length}/${headlessMirrors} headless mirrors complete`,
          );
        }
        if (Date.now() - started > 1_800_000) throw new Error("headless: not converged in 30 min");
        await sleep(250);
      }
      const convergeMs = Date.now() - started;
      const syncedMs = await syncedP;
      // The watches see the last writes a moment after the list did.
      await sleep(SETTLE_MS);
      const apiserver = diffCounts(await localWritesByKind(fleet), before);
      const writesOf = (isHost: boolean) => {
        let n = 0;
        for (const [key, count] of services.writes) {
          const name = key.slice(key.indexOf("/") + 1);
          if ((isHost ? hostNames : headlessNames).has(name)) n += count;
        }
        for (const [key, count] of slices.writes) {
          const owner = sliceOwner(slices.watcher.get(key));
          if ((isHost ? hostNames : headlessNames).has(owner)) n += count;
        }
        return n;
      };
      const hostWrites = writesOf(true);
      const headlessWrites = writesOf(false);
      return {
        clusters: shape.clusters,
        headlessServicesPerCluster: shape.services,
        hostsPerService: shape.hosts,
        hostMirrors,
        headlessMirrors,
        convergeMs,
        syncedMs,
        writesPerHostMirror: round(hostWrites / hostMirrors, 2),
        writesPerHeadlessMirror: round(headlessWrites / headlessMirrors, 2),
        apiserverWrites: Object.values(apiserver).reduce((a, b) => a + b, 0),
        apiserverWritesByKind: apiserver,
      };
    } finally {
      await Promise.all([services.watcher.stop(), slices.watcher.stop()]);
      await supervisor.stop();
    }
  } finally {
    await fleet.stop();
  }
}

/** One world, plain or headless, in a production process with a thread per cluster: actor heaps and RSS. */
async function actorMemory(shape: Shape, headless: boolean): Promise<Record<string, unknown>> {
  const world = headless ? "headless" : "plain";
  progress(`headless memory: ${world} world, ${shape.clusters} clusters × ${shape.services} Services`);
  const fleet = await Fleet.start(["remote"]);
  try {
    await shapeHeadlessRemote(fleet, shape, headless);
    const [proc, admin] = await startController(fleet, ["--max-threads", "0"]);
    try {
      const mirrors = shape.clusters * shape.services * (headless ? shape.hosts + 1 : 1);
      await waitStatus(proc, admin, `${world}: the writer idle`, writerSettled(shape.clusters));
      const client = localAdminClient(fleet);
      while ((await listAll<Service>(client, "/api/v1/services", MIRROR_SELECTOR)).length < mirrors) await sleep(500);
      await sleep(SETTLE_MS);
      const used = await actorHeaps(admin);
      const { rss } = processRss(proc.child.pid ?? 0);
      return {
        world,
        clusters: shape.clusters,
        servicesPerCluster: shape.services,
        hostsPerService: headless ? shape.hosts : 0,
        mirrors,
        actorThreads: used.length,
        actorHeapUsedMbAvg: used.length === 0 ? null : mb(used.reduce((a, b) => a + b, 0) / used.length),
        rssMb: mb(rss),
        rssBytes: rss,
        actorHeapBytesAvg: used.length === 0 ? null : used.reduce((a, b) => a + b, 0) / used.length,
      };
    } finally {
      await proc.stop();
    }
  } finally {
    await fleet.stop();
  }
}

export async function runHeadless(opts: BenchOptions): Promise<ScenarioResult> {
  const shape: Shape = opts.smoke ? { clusters: 2, services: 2, hosts: 5 } : { clusters: 20, services: 5, hosts: 50 };
  const converged = await convergence(shape);
  printTable("headless: convergence and writes (per-host mirror target ≤ 2)", [
    Object.fromEntries(Object.entries(converged).filter(([k]) => k !== "apiserverWritesByKind")),
  ]);
  const plain = await actorMemory(shape, false);
  const headless = await actorMemory(shape, true);
  const perService = (a: unknown, b: unknown, per: number) =>
    typeof a === "number" && typeof b === "number" ? round((b - a) / per / 1024, 1) : null;
  const actorHeapKbPerHeadlessService = perService(
    plain["actorHeapBytesAvg"],
    headless["actorHeapBytesAvg"],
    shape.services,
  );
  const rssKbPerHeadlessService = perService(plain["rssBytes"], headless["rssBytes"], shape.clusters * shape.services);
  const memoryRows = [plain, headless].map((r) =>
    Object.fromEntries(Object.entries(r).filter(([k]) => k !== "rssBytes" && k !== "actorHeapBytesAvg")),
  );
  printTable(
    `headless: remote actor memory, plain vs headless world (${actorHeapKbPerHeadlessService} KB actor heap per watched headless Service)`,
    memoryRows,
  );
  writeResult(opts.out, "headless", {
    smoke: opts.smoke,
    endpointsApi: "endpointslices",
    writeQps: "unlimited",
    convergence: converged,
    memory: memoryRows,
    actorHeapKbPerHeadlessService,
    rssKbPerHeadlessService,
  });
  return {
    result: { convergence: converged, memory: memoryRows, actorHeapKbPerHeadlessService, rssKbPerHeadlessService },
    summary: opts.smoke
      ? {}
      : {
          headless_writes_per_host_mirror: Number(converged["writesPerHostMirror"]),
          headless_actor_heap_kb_per_service: actorHeapKbPerHeadlessService,
        },
  };
}
