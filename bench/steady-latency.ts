/**
 * Steady-state latency: K clusters synced, spread over R remote API servers (K/R cluster
 * names point at each, so ONE remote change updates K/R mirrors: the fan-out is reported,
 * not hidden). The offered load is `--steady-rate` mirror changes per second over the
 * fleet (default 50, the "50 changes/s over 50 clusters"), i.e. rate / (K/R)
 * remote changes per second. Remote changes are applied at a fixed rate, a repeating mix of
 * port change / port change / new export / unexport, round-robin over the remotes. A watch
 * on the local API (`/api/v1/services`, label-selected) records when each expected mirror
 * change is visible. Latency runs from just before the remote request is sent (an upper
 * bound: it includes the remote write) to the local watch event.
 *
 * Reported: p50/p95/p99/max per mirror change, and per remote change (until all K/R of
 * its mirrors are visible). A change whose Service still has one in flight is skipped
 * (counted): a pool of S idle exported Services per remote is drawn from. Note the local
 * write load is rate × K/R mirror changes per second; when that exceeds what the local
 * API server accepts (see the bare-client rate of cold-convergence), latency measures
 * the backlog, not the controller.
 *
 * Both `--endpoints-api` modes run side by side, EndpointSlices first, each on a fresh
 * world shaped the same; latency is observed on the mirror Services (a port change,
 * export and unexport show there in either mode), the local writes per mode are counted
 * by resource.
 */
import { mirrorName } from "../src/core/naming.ts";
import type { Service } from "../src/core/objects.ts";
import { Watcher } from "../src/kube/watcher.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import {
  BENCH_MODES,
  type BenchMode,
  type BenchOptions,
  diffCounts,
  localAdminClient,
  localWritesByKind,
  MIRROR_SELECTOR,
  percentile,
  printTable,
  round,
  type ScenarioResult,
  shapeRemote,
  sleep,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";

const NAMESPACE = "bench";

type Op = "port" | "export" | "unexport";
const MIX: readonly Op[] = ["port", "port", "export", "unexport"];

interface Change {
  readonly op: Op;
  readonly t0: number;
  remaining: number;
  doneAt?: number;
}

interface Pending {
  readonly change: Change;
  readonly check: (svc: Service | undefined) => boolean;
  readonly release: () => void;
}

interface RemoteState {
  readonly name: string;
  readonly clusters: readonly string[];
  /** Exported Services with no change in flight. */
  readonly idle: string[];
}

interface Stats {
  readonly n: number;
  readonly p50: number | null;
  readonly p95: number | null;
  readonly p99: number | null;
  readonly max: number | null;
}

export async function runSteadyLatency(opts: BenchOptions): Promise<ScenarioResult> {
  const runs: Record<string, unknown>[] = [];
  const latencies: Record<string, unknown>[] = [];
  const p99 = new Map<BenchMode, number | null>();
  for (const mode of BENCH_MODES) {
    const { row, perMirror, perChange } = await steadyOnce(opts, mode);
    runs.push({ ...row, latencyMs: { perMirror, perRemoteChange: perChange } });
    latencies.push(
      { endpointsApi: mode, of: "mirror change", ...perMirror },
      { endpointsApi: mode, of: "remote change (all fan-out)", ...perChange },
    );
    p99.set(mode, perMirror.p99);
  }
  printTable(
    "steady state: remote change → local mirror visible, both --endpoints-api modes",
    runs.map(({ latencyMs: _, ...row }) => row),
  );
  printTable("latency (ms)", latencies);
  writeResult(opts.out, "steady-latency", { smoke: opts.smoke, mix: MIX, runs });
  return {
    result: { runs },
    summary: opts.smoke
      ? {}
      : {
          steady_p99_ms: p99.get("endpointslices") ?? null,
          steady_p99_ms_endpoints_mode: p99.get("endpoints") ?? null,
        },
  };
}

/** One mode: a fresh world, the controller synced, the offered load, the latencies. */
async function steadyOnce(
  opts: BenchOptions,
  mode: BenchMode,
): Promise<{ row: Record<string, unknown>; perMirror: Stats; perChange: Stats }> {
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
  try {
    const states: RemoteState[] = [];
    for (const [i, remote] of remotes.entries()) {
      const names = await shapeRemote(fleet, remote, {
        services: servicesPerRemote,
        clusters: perRemote,
        gatewayIp: `198.18.0.${20 + i}`,
        namespace: NAMESPACE,
        prefix: `${remote}c`,
      });
      states.push({
        name: remote,
        clusters: names,
        idle: Array.from({ length: servicesPerRemote }, (_, s) => `svc-${s}`),
      });
    }
    const supervisor = fleet.startInProcess({
      endpointsApi: mode,
      logLevel: "silent",
      writeQps: 0,
      writeConcurrency: 16,
    });
    await waitAllSynced(supervisor, clusters);
    await waitWriterIdle(supervisor);
    const kindsBefore = await localWritesByKind(fleet);

    const pending = new Map<string, Pending>();
    const mirrorLatencies: number[] = [];
    const changes: Change[] = [];
    const watcher = new Watcher<Service>({ client, path: "/api/v1/services", labelSelector: MIRROR_SELECTOR });
    watcher.on("change", (key, _prev, current) => {
      const p = pending.get(key);
      if (!p?.check(current)) return;
      const now = Date.now();
      pending.delete(key);
      mirrorLatencies.push(now - p.change.t0);
      p.change.remaining--;
      if (p.change.remaining === 0) {
        p.change.doneAt = now;
        p.release();
      }
    });
    const listed = new Promise<void>((resolve) => watcher.once("listed", () => resolve()));
    watcher.start();
    await listed;

    let failures = 0;
    let skipped = 0;
    let created = 0;
    let port = 1000;
    const inFlight: Promise<void>[] = [];
    const total = Math.round(ratePerSecond * durationS);
    const interval = 1000 / ratePerSecond;
    const started = Date.now();
    for (let i = 0; i < total; i++) {
      const wait = started + i * interval - Date.now();
      if (wait > 0) await sleep(wait);
      const op = MIX[i % MIX.length] ?? "port";
      const remote = states[i % states.length];
      if (!remote) continue;
      let service: string | undefined;
      if (op === "export") service = `new-${created++}`;
      else service = remote.idle.shift();
      if (!service) {
        skipped++;
        continue;
      }
      const svcName = service;
      const newPort = port++;
      const change: Change = { op, t0: Date.now(), remaining: remote.clusters.length };
      changes.push(change);
      const release = op === "unexport" ? () => {} : () => remote.idle.push(svcName);
      const check =
        op === "port"
          ? (svc: Service | undefined) => svc?.spec?.ports?.[0]?.port === newPort
          : op === "export"
            ? (svc: Service | undefined) => svc !== undefined
            : (svc: Service | undefined) => svc === undefined;
      for (const cluster of remote.clusters) {
        pending.set(`${NAMESPACE}/${mirrorName(svcName, cluster)}`, { change, check, release });
      }
      const request =
        op === "port"
          ? fleet.patchService(remote.name, NAMESPACE, svcName, (svc) => {
              const p = svc.spec?.ports?.[0];
              if (p) p.port = newPort;
            })
          : op === "export"
            ? fleet.createService(remote.name, NAMESPACE, svcName)
            : fleet.unexport(remote.name, NAMESPACE, svcName);
      inFlight.push(
        request.then(
          () => {},
          () => {
            failures++;
          },
        ),
      );
    }
    const sendMs = Date.now() - started;
    await Promise.all(inFlight);
    const drainDeadline = Date.now() + 60_000;
    while (pending.size > 0 && Date.now() < drainDeadline) await sleep(50);
    const unobserved = pending.size;
    await watcher.stop();
    await waitWriterIdle(supervisor);
    const writesByKind = diffCounts(await localWritesByKind(fleet), kindsBefore);
    await supervisor.stop();

    const changeLatencies = changes.flatMap((c) => (c.doneAt === undefined ? [] : [c.doneAt - c.t0]));
    const stats = (values: number[]): Stats => ({
      n: values.length,
      p50: percentile(values, 50),
      p95: percentile(values, 95),
      p99: percentile(values, 99),
      max: percentile(values, 100),
    });
    const perMirror = stats(mirrorLatencies);
    const perChange = stats(changeLatencies);
    const row = {
      endpointsApi: mode,
      clusters,
      remotes: remotes.length,
      fanOut: perRemote,
      remoteChangesPerS: ratePerSecond,
      achievedRemoteChangesPerS: round(changes.length / (sendMs / 1000), 1),
      mirrorChangesPerS: ratePerSecond * perRemote,
      durationS,
      remoteChanges: changes.length,
      failedRequests: failures,
      skipped,
      unobservedMirrorChanges: unobserved,
      localWritesByKind: JSON.stringify(writesByKind),
    };
    return { row, perMirror, perChange };
  } finally {
    client.close();
    await fleet.stop();
  }
}
