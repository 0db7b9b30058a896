/**
 * Gateway fan-out: one gateway IP change on a remote that K clusters point at, with S
 * exported Services behind that gateway (K × S = 2 000 mirrors; smoke: 2 × 10). The
 * clock runs from the remote status write until a watch on the local mirror address
 * objects (the `<mirror>-ipv4` EndpointSlices in the default mode, the Endpoints in
 * `endpoints` mode) has seen every one of them point at the new IP. Both modes run side
 * by side, EndpointSlices first, each on a fresh world shaped the same.
 *
 * The limit: a bare client making the same writes on identical objects (copies of the
 * 2 000 mirror Services and address objects of that mode in a fresh namespace, created
 * untimed, a slice owned by its Service copy) with the same concurrency (16): per
 * mirror, one PUT of the slice or Endpoints to the new IP, then one PUT of the Service
 * with its new `mirror.linkerd.io/remote-gateway-resource-version` annotation (SPEC §3:
 * the Service carries the gateway's resourceVersion, so a gateway change rewrites both
 * objects of every mirror).
 *
 * Both sides are timed to their last write: fleet-mirror's time ends once every mirror's
 * address object shows the new IP AND every mirror Service carries the gateway's new
 * resourceVersion, as the bare client's ends after both of its writes per copy. (Until
 * the fourth round of issue 12 fleet-mirror's time ended at the last address write,
 * which favoured it by up to the share of the Service writes; that time is still
 * reported per pair as `fleetAddressesMs`, the moment traffic can follow the change.)
 *
 * One pair of runs is not a figure: on 2 vCPUs the bare client's own time varied 4.7–8.0
 * s from one run to the next. So each mode runs ROUNDS pairs, alternately (bare, fleet,
 * bare, fleet…), each to an IP not used before, on the same converged world: every timed
 * change starts from an idle world (the writer idle, every mirror at the previous IP),
 * and a slow minute of the machine hits one pair, not one side. The figure is the
 * median of the per-pair ratios (bare time / fleet-mirror time), with their min and max
 * as the spread. The copies carry the mirror label with another value, so fleet-mirror
 * (which keeps running, idle, through the bare runs) neither watches nor owns them.
 *
 * Each side starts once the local API server has been quiet for a second, the
 * mirroring controller's slice writes aside (writesSettled). The single pair started
 * fleet-mirror's run right after the convergence, while in endpoints mode that
 * controller was still creating the convergence's slices (199 of its 231 writes in the
 * fleet-mirror window were creates); now every side starts alike. The sizes are those of the
 * single pair: per mode a convergence and 4 000 untimed copy creates (≈ 40 s each on a
 * quiet machine at ≈ 100 writes/s) and three pairs of ≈ 6–10 s runs each, ≈ 4–5 minutes
 * for both modes (an estimate from the single pair's times; on a machine 3 helpers share
 * it took far longer).
 */
import { MIRRORED_SERVICE, REMOTE_GATEWAY_RESOURCE_VERSION, SERVICE_NAME_LABEL } from "../src/core/labels.ts";
import type { EndpointSlice, Endpoints, KubeObject, Service } from "../src/core/objects.ts";
import type { Supervisor } from "../src/supervisor/supervisor.ts";
import type { Fleet } from "../test/helpers/fleet.ts";
import { converge, WRITE_CONCURRENCY } from "./cold-convergence.ts";
import { cpuDelta, cpuSplit } from "./cpu-split.ts";
import {
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  diffCounts,
  GATEWAY_PORT,
  localAdminClient,
  localWritesByKind,
  percentile,
  printTable,
  progress,
  round,
  runPool,
  type ScenarioResult,
  sleep,
  splitWrites,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";
import {
  addressesPath,
  addressesPointAt,
  CountingWatch,
  collectionPath,
  copyAddressesForCreate,
  copyForCreate,
  ensureLocalNamespace,
} from "./mirror-objects.ts";

/** Pairs (bare run, fleet-mirror run) per mode; odd, so the median is one pair's ratio. */
const ROUNDS = 3;

/** The gateway's IP in round `i` (0-based): a new one every round. */
const roundIp = (i: number) => `198.18.0.${100 + i}`;

export async function runGatewayFanout(opts: BenchOptions): Promise<ScenarioResult> {
  const size = opts.smoke ? { clusters: 2, services: 10 } : { clusters: 20, services: 100 };
  const rows: Awaited<ReturnType<typeof fanoutMode>>[] = [];
  for (const mode of BENCH_MODES) rows.push(await fanoutMode(size, mode));
  printTable(
    `gateway fan-out, both --endpoints-api modes, ${ROUNDS} alternating pairs each (ratio = median of bare-client time / fleet-mirror time)`,
    rows.map(({ pairs: _pairs, ...row }) => row),
  );
  writeResult(opts.out, "gateway-fanout", {
    smoke: opts.smoke,
    writeConcurrency: WRITE_CONCURRENCY,
    rounds: ROUNDS,
    runs: rows,
  });
  const ratio = (mode: BenchMode) => rows.find((r) => r.endpointsApi === mode)?.ratio ?? null;
  return {
    result: { runs: rows },
    summary: opts.smoke
      ? {}
      : { gateway_fanout_ratio: ratio("endpointslices"), gateway_fanout_ratio_endpoints_mode: ratio("endpoints") },
  };
}

/** The new address list of a copied address object: the one gateway endpoint at `ip`. */
function pointedAt(mode: BenchMode, obj: KubeObject, ip: string): Endpoints | EndpointSlice {
  if (mode === "endpoints") {
    const ep = obj as Endpoints;
    return {
      ...ep,
      subsets: [{ addresses: [{ ip }], ports: ep.subsets?.[0]?.ports ?? [{ port: GATEWAY_PORT }] }],
    };
  }
  const slice = obj as EndpointSlice;
  const conditions = { ready: true, serving: true, terminating: false };
  return { ...slice, endpoints: [{ addresses: [ip], conditions }] };
}

/** A copy's labels: the mirror label's value changed, so no mirror selector matches it. */
function unmirrored(copy: Record<string, unknown>): Record<string, unknown> {
  const metadata = copy["metadata"] as { labels?: Record<string, string> };
  const labels = { ...metadata.labels, [MIRRORED_SERVICE]: "bare-copy" };
  return { ...copy, metadata: { ...metadata, labels } };
}

interface Copy {
  addresses: KubeObject;
  service: Service;
}

interface Pair {
  readonly ip: string;
  readonly bareMs: number;
  /** Until the last of fleet-mirror's writes (address objects and Services): the timed figure. */
  readonly fleetMs: number;
  /** Until every address object showed the new IP (the Services' annotation writes may still be under way). */
  readonly fleetAddressesMs: number;
  readonly ratio: number;
  /** fleet-mirror's writes for the change (the other writes of its side are the mirroring controller's). */
  readonly fleetWrites: number;
  readonly mirroringControllerWrites: number;
  /** Every local write of each side, until the API server was quiet again. */
  readonly fleetWritesByKind: Record<string, number>;
  readonly bareWritesByKind: Record<string, number>;
  /** CPU-seconds of each side by process and thread (bench/cpu-split.ts), until quiet again. */
  readonly fleetCpuS: Record<string, number>;
  readonly bareCpuS: Record<string, number>;
}

async function fanoutMode(size: { clusters: number; services: number }, mode: BenchMode) {
  const run = await converge(size.clusters, size.services, mode);
  const { fleet, supervisor } = run;
  const client = localAdminClient(fleet);
  try {
    // The bare client's copies of every mirror, created untimed.
    const ns = "bare-fanout";
    await ensureLocalNamespace(client, ns);
    const services = new Map(run.services.map((svc) => [svc.metadata.name, svc]));
    const copies: Copy[] = [];
    await runPool(run.addresses, WRITE_CONCURRENCY, async (obj) => {
      const mirror = mode === "endpoints" ? obj.metadata.name : obj.metadata.labels?.[SERVICE_NAME_LABEL];
      const svc = mirror === undefined ? undefined : services.get(mirror);
      if (!svc) throw new Error(`no mirror Service for ${mode} ${obj.metadata.name}`);
      const service = await client.request<Service>("POST", collectionPath("services", ns), {
        body: unmirrored(copyForCreate(svc, ns)),
      });
      const body = copyAddressesForCreate(mode, obj, ns, { name: svc.metadata.name, uid: service.metadata.uid });
      const addresses = await client.request<KubeObject>("POST", collectionPath(mode, ns), {
        body: unmirrored(body),
      });
      copies.push({ addresses, service });
    });

    const pairs: Pair[] = [];
    // Each side starts on a quiet API server: fleet-mirror idle and no write still
    // coming from the other side's run (but the mirroring controller's, see
    // writesSettled). A side's writes and CPU are counted until the next quiet moment,
    // so they include what it set off in other components.
    await waitWriterIdle(supervisor);
    const settleStarted = Date.now();
    const writesBeforeSettle = await localWritesByKind(fleet);
    await writesSettled(fleet, mode);
    // What still reached the API server after fleet-mirror was idle and the copies were
    // made (in endpoints mode, some of the mirroring controller's backlog: a slice for
    // every mirror Endpoints of the convergence and every copy just made).
    const initialSettle = {
      ms: Date.now() - settleStarted,
      writesByKind: diffCounts(await localWritesByKind(fleet), writesBeforeSettle),
    };
    for (let i = 0; i < ROUNDS; i++) {
      const ip = roundIp(i);
      const [cpu0, writes0] = [cpuSplit(), await localWritesByKind(fleet)];
      const bareMs = await bareRound(client, mode, ns, copies, ip, i);
      await writesSettled(fleet, mode);
      const [cpu1, writes1] = [cpuSplit(), await localWritesByKind(fleet)];
      const { fleetMs, fleetAddressesMs } = await fleetRound(fleet, supervisor, mode, run.mirrors, ip);
      await writesSettled(fleet, mode);
      const [cpu2, writes2] = [cpuSplit(), await localWritesByKind(fleet)];
      const fleetWritesByKind = diffCounts(writes2, writes1);
      const { fleetMirror: fleetWrites, mirroringController } = splitWrites(mode, fleetWritesByKind);
      pairs.push({
        ip,
        bareMs,
        fleetMs,
        fleetAddressesMs,
        ratio: round(bareMs / fleetMs, 3),
        fleetWrites,
        mirroringControllerWrites: mirroringController,
        fleetWritesByKind,
        bareWritesByKind: diffCounts(writes1, writes0),
        fleetCpuS: cpuDelta(cpu2, cpu1),
        bareCpuS: cpuDelta(cpu1, cpu0),
      });
      progress(
        `gateway fan-out (${mode}) pair ${i + 1}/${ROUNDS}: bare ${bareMs} ms, fleet-mirror ${fleetMs} ms (addresses ${fleetAddressesMs} ms)`,
      );
    }
    await supervisor.stop();

    const ratios = pairs.map((p) => p.ratio);
    const median = percentile(ratios, 50) ?? 0;
    const medianPair = pairs.find((p) => p.ratio === median) ?? pairs[0];
    const writes = pairs.map((p) => p.fleetWrites);
    return {
      endpointsApi: mode,
      clusters: size.clusters,
      servicesPerCluster: size.services,
      mirrors: run.mirrors,
      convergeMs: run.convergeMs,
      ratio: median,
      ratioMin: Math.min(...ratios),
      ratioMax: Math.max(...ratios),
      // The pair whose ratio is the median.
      fleetMs: medianPair?.fleetMs ?? null,
      bareMs: medianPair?.bareMs ?? null,
      fleetMsAll: pairs.map((p) => p.fleetMs).join(" "),
      fleetAddressesMsAll: pairs.map((p) => p.fleetAddressesMs).join(" "),
      bareMsAll: pairs.map((p) => p.bareMs).join(" "),
      // Writes per change, the most of any pair (every pair makes the same writes).
      fleetWrites: Math.max(...writes),
      writesPerMirror: round(Math.max(...writes) / run.mirrors, 3),
      mirroringControllerWrites: Math.max(...pairs.map((p) => p.mirroringControllerWrites)),
      // CPU-seconds of the local API server and etcd per side, summed over the pairs.
      localApiserverCpuS: `bare ${sumCpu(pairs, "bareCpuS", LOCAL_APISERVER)} / fleet ${sumCpu(pairs, "fleetCpuS", LOCAL_APISERVER)}`,
      initialSettleMs: initialSettle.ms,
      initialSettleWrites: JSON.stringify(initialSettle.writesByKind),
      etcdCpuS: `bare ${sumCpu(pairs, "bareCpuS", "etcd")} / fleet ${sumCpu(pairs, "fleetCpuS", "etcd")}`,
      pairs,
    };
  } finally {
    client.close();
    await fleet.stop();
  }
}

const LOCAL_APISERVER = "kube-apiserver/local";

const sumCpu = (pairs: readonly Pair[], side: "bareCpuS" | "fleetCpuS", name: string) =>
  round(
    pairs.reduce((sum, p) => sum + (p[side][name] ?? 0), 0),
    2,
  );

/**
 * Resolves once the local API server has taken no write for a second (its own counters),
 * the mirroring controller's aside. That controller (endpoints mode) writes through
 * kube-controller-manager's client at its default 20 requests/s, so the slices of 2 000
 * changed Endpoints take it minutes; waiting that out would make a pair cost minutes of
 * idle time. Its writes are a steady trickle under both sides instead (each side's
 * count says how many fell in its window).
 */
async function writesSettled(fleet: Fleet, mode: BenchMode, timeoutMs = 120_000): Promise<void> {
  const counted = async () => {
    const byKind = await localWritesByKind(fleet);
    return JSON.stringify(
      Object.entries(byKind).filter(([kind]) => !(mode === "endpoints" && kind.endsWith(" endpointslices"))),
    );
  };
  const deadline = Date.now() + timeoutMs;
  let last = await counted();
  for (;;) {
    await sleep(1_000);
    const now = await counted();
    if (now === last) return;
    if (Date.now() > deadline) throw new Error("the local API server kept taking writes for 2 minutes");
    last = now;
  }
}

/** The bare client's timed writes: every copy's address object to `ip`, then its Service. */
async function bareRound(
  client: ReturnType<typeof localAdminClient>,
  mode: BenchMode,
  ns: string,
  copies: Copy[],
  ip: string,
  index: number,
): Promise<number> {
  const started = Date.now();
  await runPool(copies, WRITE_CONCURRENCY, async (copy) => {
    // Each PUT carries the resourceVersion of the copy's last write, as a controller's
    // update would; the response is the next round's base.
    copy.addresses = await client.request<KubeObject>(
      "PUT",
      `${collectionPath(mode, ns)}/${copy.addresses.metadata.name}`,
      { body: pointedAt(mode, copy.addresses, ip) },
    );
    const svc = copy.service;
    const annotations = { ...svc.metadata.annotations, [REMOTE_GATEWAY_RESOURCE_VERSION]: `bare-client-${index}` };
    copy.service = await client.request<Service>("PUT", `${collectionPath("services", ns)}/${svc.metadata.name}`, {
      body: { ...svc, metadata: { ...svc.metadata, annotations } },
    });
  });
  return Date.now() - started;
}

/**
 * One timed gateway change to `ip` through fleet-mirror: ms until every mirror's address
 * object shows it (`fleetAddressesMs`) and until every mirror Service carries the new
 * gateway resourceVersion as well (`fleetMs`, its last write: the timed figure).
 */
async function fleetRound(
  fleet: Fleet,
  supervisor: Supervisor,
  mode: BenchMode,
  mirrors: number,
  ip: string,
): Promise<{ fleetMs: number; fleetAddressesMs: number }> {
  const client = localAdminClient(fleet);
  const watch = new CountingWatch<KubeObject>(client, addressesPath(mode), (obj) => addressesPointAt(mode, obj, ip));
  // The change is done once every Service carries the new gateway resourceVersion too:
  // the bare client's time includes its Service writes, so fleet-mirror's does.
  const serviceWatch = new CountingWatch<Service>(client, "/api/v1/services", () => false);
  try {
    await watch.start();
    await serviceWatch.start();
    const started = Date.now();
    const gateway = await fleet.setGatewayIngress("remote", [{ ip }]);
    const version = gateway.metadata?.resourceVersion;
    serviceWatch.expect((svc) => svc.metadata.annotations?.[REMOTE_GATEWAY_RESOURCE_VERSION] === version);
    await watch.until(mirrors);
    const fleetAddressesMs = Date.now() - started;
    await serviceWatch.until(mirrors);
    const fleetMs = Date.now() - started;
    await waitWriterIdle(supervisor);
    return { fleetMs, fleetAddressesMs };
  } finally {
    await serviceWatch.stop();
    await watch.stop();
    client.close();
  }
}
