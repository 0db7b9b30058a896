/**
 * The offered load of the steady-latency scenario and its observation, shared by the
 * fleet-mirror phase and the bare-client phase so that both see the same load: remote
 * changes at a fixed rate (a repeating mix of port change / port change / new export /
 * unexport, round-robin over the remotes), and a watch on the local API recording when
 * each expected mirror change is visible. Latency runs from just before the remote
 * request is sent (an upper bound: it includes the remote write) to the local watch
 * event. A change whose Service still has one in flight is skipped (counted).
 */
import { mirrorName } from "../src/core/naming.ts";
import type { Service } from "../src/core/objects.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { Watcher } from "../src/kube/watcher.ts";
import type { Fleet } from "../test/helpers/fleet.ts";
import { percentile, round, sleep } from "./harness.ts";
import { distribution } from "./series.ts";

/** The remote namespace of the exported Services. */
export const REMOTE_NAMESPACE = "bench";

type Op = "port" | "export" | "unexport";
export const MIX: readonly Op[] = ["port", "port", "export", "unexport"];

export interface RemoteState {
  readonly name: string;
  readonly clusters: readonly string[];
  /** Exported Services with no change in flight. */
  readonly idle: string[];
}

export interface Stats {
  readonly n: number;
  readonly p50: number | null;
  readonly p95: number | null;
  readonly p99: number | null;
  readonly max: number | null;
}

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

export interface LoadOptions {
  readonly fleet: Fleet;
  /** A client of the local API server, for the observing watch. */
  readonly local: KubeClient;
  readonly states: readonly RemoteState[];
  /** Where the mirrors are watched: the local namespace they live in, and a label selector. */
  readonly observe: { readonly namespace: string; readonly labelSelector: string };
  readonly remoteChangesPerS: number;
  readonly durationS: number;
  /** The next port to set: ports only grow, across phases too. */
  readonly firstPort: number;
  /** Names of newly exported Services are `<exportPrefix><n>`, distinct per phase. */
  readonly exportPrefix: string;
}

export interface LoadResult {
  readonly perMirror: Stats;
  /** Per-mirror latency (ms) at CDF_PERCENTILES (series.ts). */
  readonly perMirrorDistribution: number[];
  readonly perChange: Stats;
  readonly row: Record<string, unknown>;
  readonly nextPort: number;
}

function stats(values: readonly number[]): Stats {
  return {
    n: values.length,
    p50: percentile(values, 50),
    p95: percentile(values, 95),
    p99: percentile(values, 99),
    max: percentile(values, 100),
  };
}

/** Offers the load for `durationS` and waits (at most 60 s) until every expected change is seen. */
export async function offerLoad(opts: LoadOptions): Promise<LoadResult> {
  const { fleet, states, observe } = opts;
  const pending = new Map<string, Pending>();
  const mirrorLatencies: number[] = [];
  const changes: Change[] = [];
  const watcher = new Watcher<Service>({
    client: opts.local,
    path: `/api/v1/namespaces/${observe.namespace}/services`,
    labelSelector: observe.labelSelector,
  });
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
  let port = opts.firstPort;
  const inFlight: Promise<void>[] = [];
  const total = Math.round(opts.remoteChangesPerS * opts.durationS);
  const interval = 1000 / opts.remoteChangesPerS;
  const started = Date.now();
  for (let i = 0; i < total; i++) {
    const wait = started + i * interval - Date.now();
    if (wait > 0) await sleep(wait);
    const op = MIX[i % MIX.length] ?? "port";
    const remote = states[i % states.length];
    if (!remote) continue;
    const service = op === "export" ? `${opts.exportPrefix}${created++}` : remote.idle.shift();
    if (!service) {
      skipped++;
      continue;
    }
    const newPort = port++;
    const change: Change = { op, t0: Date.now(), remaining: remote.clusters.length };
    changes.push(change);
    const release = op === "unexport" ? () => {} : () => remote.idle.push(service);
    const check =
      op === "port"
        ? (svc: Service | undefined) => svc?.spec?.ports?.[0]?.port === newPort
        : op === "export"
          ? (svc: Service | undefined) => svc !== undefined
          : (svc: Service | undefined) => svc === undefined;
    for (const cluster of remote.clusters) {
      pending.set(`${observe.namespace}/${mirrorName(service, cluster)}`, { change, check, release });
    }
    const request =
      op === "port"
        ? fleet.patchService(remote.name, REMOTE_NAMESPACE, service, (svc) => {
            const p = svc.spec?.ports?.[0];
            if (p) p.port = newPort;
          })
        : op === "export"
          ? fleet.createService(remote.name, REMOTE_NAMESPACE, service)
          : fleet.unexport(remote.name, REMOTE_NAMESPACE, service);
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

  const changeLatencies = changes.flatMap((c) => (c.doneAt === undefined ? [] : [c.doneAt - c.t0]));
  return {
    perMirror: stats(mirrorLatencies),
    perMirrorDistribution: distribution(mirrorLatencies),
    perChange: stats(changeLatencies),
    nextPort: port,
    row: {
      achievedRemoteChangesPerS: round(changes.length / (sendMs / 1000), 1),
      remoteChanges: changes.length,
      failedRequests: failures,
      skipped,
      unobservedMirrorChanges: unobserved,
    },
  };
}
