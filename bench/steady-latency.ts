/**
 * Steady-state latency: K clusters synced, spread over R remote API servers (K/R cluster
 * names point at each, so ONE remote change updates K/R mirrors: the fan-out is reported,
 * not hidden). The offered load is `--steady-rate` mirror changes per second over the
 * fleet (default 50, the "50 changes/s over 50 clusters"), i.e. rate / (K/R)
 * remote changes per second (`steady-load.ts`: the mix, the observation, the latency).
 *
 * Each mode runs two phases on one world: fleet-mirror (in-process, no write limit),
 * then the bare client (`bare-mirrorer.ts`: a list/watch per remote and an immediate
 * write per event, into its own namespace) under the same load. `steady_p99_ratio` is
 * fleet-mirror's p99 over the bare client's p99: what the controller adds to the path
 * the API servers alone take. The local write load is rate × K/R mirror changes per
 * second; when that exceeds what the local API server accepts, both phases measure the
 * backlog.
 *
 * Both `--endpoints-api` modes run side by side, EndpointSlices first, each on a fresh
 * world shaped the same; latency is observed on the mirror Services (a port change,
 * export and unexport show there in either mode), the local writes per mode are counted
 * by resource.
 */
import { Fleet } from "../test/helpers/fleet.ts";
import { BARE_MIRROR_LABEL, BareMirrorer } from "./bare-mirrorer.ts";
import {
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  diffCounts,
  localAdminClient,
  localWritesByKind,
  MIRROR_SELECTOR,
  printTable,
  remoteAdminClients,
  round,
  type ScenarioResult,
  shapeRemote,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";
import { CDF_PERCENTILES } from "./series.ts";
import { MIX, offerLoad, REMOTE_NAMESPACE, type RemoteState, type Stats } from "./steady-load.ts";

/** The local namespace of the bare client's mirrors. */
const BARE_NAMESPACE = "bare-bench";

interface Latencies {
  readonly perMirror: Stats;
  readonly perChange: Stats;
  readonly perMirrorDistribution: number[];
}

interface ModeResult {
  readonly row: Record<string, unknown>;
  readonly fleetMirror: Latencies;
  readonly bare: Latencies;
}

/** p99(fleet-mirror) / p99(bare client), or null when either is missing. */
export function p99Ratio(fleetMirror: Stats, bare: Stats): number | null {
  if (fleetMirror.p99 === null || bare.p99 === null || bare.p99 <= 0) return null;
  return round(fleetMirror.p99 / bare.p99, 2);
}

export async function runSteadyLatency(opts: BenchOptions): Promise<ScenarioResult> {
  const runs: Record<string, unknown>[] = [];
  const latencies: Record<string, unknown>[] = [];
  const p99 = new Map<BenchMode, number | null>();
  const ratio = new Map<BenchMode, number | null>();
  for (const mode of BENCH_MODES) {
    const { row, fleetMirror, bare } = await steadyOnce(opts, mode);
    const modeRatio = p99Ratio(fleetMirror.perMirror, bare.perMirror);
    runs.push({
      ...row,
      p99Ratio: modeRatio,
      latencyMs: { perMirror: fleetMirror.perMirror, perRemoteChange: fleetMirror.perChange },
      bareLatencyMs: { perMirror: bare.perMirror, perRemoteChange: bare.perChange },
      // The per-mirror latency distribution of both clients (bench/charts.ts draws it).
      latencyDistributionMs: {
        percentiles: CDF_PERCENTILES,
        fleetMirror: fleetMirror.perMirrorDistribution,
        bare: bare.perMirrorDistribution,
      },
    });
    latencies.push(
      { endpointsApi: mode, client: "fleet-mirror", of: "mirror change", ...fleetMirror.perMirror },
      { endpointsApi: mode, client: "bare", of: "mirror change", ...bare.perMirror },
      { endpointsApi: mode, client: "fleet-mirror", of: "remote change (all fan-out)", ...fleetMirror.perChange },
      { endpointsApi: mode, client: "bare", of: "remote change (all fan-out)", ...bare.perChange },
    );
    p99.set(mode, fleetMirror.perMirror.p99);
    ratio.set(mode, modeRatio);
  }
  printTable(
    "steady state: remote change → local mirror visible, both --endpoints-api modes",
    runs.map(({ latencyMs: _, bareLatencyMs: _b, latencyDistributionMs: _d, ...row }) => row),
  );
  printTable("latency (ms): fleet-mirror and the bare client under the same load", latencies);
  writeResult(opts.out, "steady-latency", { smoke: opts.smoke, mix: MIX, runs });
  return {
    result: { runs },
    summary: opts.smoke
      ? {}
      : {
          steady_p99_ms: p99.get("endpointslices") ?? null,
          steady_p99_ms_endpoints_mode: p99.get("endpoints") ?? null,
          steady_p99_ratio: ratio.get("endpointslices") ?? null,
          steady_p99_ratio_endpoints_mode: ratio.get("endpoints") ?? null,
        },
  };
}

/** One mode: a fresh world; fleet-mirror synced and loaded; then the bare client, synced and loaded alike. */
async function steadyOnce(opts: BenchOptions, mode: BenchMode): Promise<ModeResult> {
  const remotes = opts.smoke ? ["r1"] : ["r1", "r2", "r3", "r4", "r5"];
  const clusters = opts.smoke ? 5 : 50;
  const servicesPerRemote = opts.smoke ? 5 : 20;
  const perRemote = clusters / remotes.length;
  // The target is stated in changes per second over the fleet, i.e. mirror changes: in a
  // real fleet every cluster's Services change independently. Here K/R cluster names
  // share each remote API server, so one remote change is K/R mirror changes, and the
  // remote rate is the mirror rate divided by that fan-out.
  const mirrorRatePerSecond = opts.steadyRate ?? (opts.smoke ? 10 : 50);
  const ratePerSecond = mirrorRatePerSecond / perRemote;
  const durationS = opts.smoke ? 5 : 60;

  const fleet = await Fleet.start(remotes);
  const client = localAdminClient(fleet);
  const remoteClients = remoteAdminClients(fleet);
  const clientFor = remoteClients.get;
  try {
    const states: RemoteState[] = [];
    for (const [i, remote] of remotes.entries()) {
      const names = await shapeRemote(fleet, remote, {
        services: servicesPerRemote,
        clusters: perRemote,
        gatewayIp: gatewayIp(i),
        namespace: REMOTE_NAMESPACE,
        prefix: `${remote}c`,
      });
      states.push({
        name: remote,
        clusters: names,
        idle: Array.from({ length: servicesPerRemote }, (_, s) => `svc-${s}`),
      });
    }
    const load = { fleet, local: client, states, remoteChangesPerS: ratePerSecond, durationS };

    const supervisor = fleet.startInProcess({
      endpointsApi: mode,
      logLevel: "silent",
      writeQps: 0,
      writeConcurrency: 16,
    });
    await waitAllSynced(supervisor, clusters);
    await waitWriterIdle(supervisor);
    const kindsBefore = await localWritesByKind(fleet);
    const ours = await offerLoad({
      ...load,
      observe: { namespace: REMOTE_NAMESPACE, labelSelector: MIRROR_SELECTOR },
      firstPort: 1000,
      exportPrefix: "new-",
    });
    await waitWriterIdle(supervisor);
    const writesByKind = diffCounts(await localWritesByKind(fleet), kindsBefore);
    await supervisor.stop();

    // The bare client on the same world (fleet-mirror stopped): the same number of
    // concurrent writes per event as fleet-mirror's writer had in flight at most.
    const bare = new BareMirrorer({ local: client, namespace: BARE_NAMESPACE, mode, concurrency: 16 });
    await bare.start(
      fleet,
      remotes.map((remote, i) => ({
        remote,
        clusters: states[i]?.clusters ?? [],
        gatewayIp: gatewayIp(i),
      })),
      clientFor,
    );
    const bareWritesBefore = bare.writes;
    const theirs = await offerLoad({
      ...load,
      observe: { namespace: BARE_NAMESPACE, labelSelector: `${BARE_MIRROR_LABEL}=true` },
      firstPort: ours.nextPort,
      exportPrefix: "bare-new-",
    });
    await bare.stop();

    const row = {
      endpointsApi: mode,
      clusters,
      remotes: remotes.length,
      fanOut: perRemote,
      remoteChangesPerS: ratePerSecond,
      mirrorChangesPerS: ratePerSecond * perRemote,
      durationS,
      ...ours.row,
      localWritesByKind: JSON.stringify(writesByKind),
      bare: JSON.stringify({
        ...theirs.row,
        writes: bare.writes - bareWritesBefore,
        retries: bare.retries,
        failedWrites: bare.failures,
        failures: bare.failureSamples,
      }),
    };
    return {
      row,
      fleetMirror: ours,
      bare: theirs,
    };
  } finally {
    client.close();
    remoteClients.close();
    await fleet.stop();
  }
}

function gatewayIp(i: number): string {
  return `198.18.0.${20 + i}`;
}
