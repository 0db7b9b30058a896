/**
 * Priority tiers (SPEC §14): how long after the last ready gateway of the serving tier
 * dies every fleet-wide Service serves the next tier, how many writes that switch costs
 * per Service against how many of its objects change, and how many writes a converged
 * world makes with nothing changing.
 *
 * World: 3 remote API servers, one per tier (`near`, `mid`, `far`: priorities 10, 20,
 * 30), each registered under C cluster names (`near-0` …), each cluster's Secret naming
 * its own default gateway (`gateway/gw-<k>` of its remote: a LoadBalancer with one
 * ingress address in 203.0.113.201–230 made local for the run and an `mc-probe` port,
 * the default probe period 3 s) and carrying the priority annotation. Every remote holds
 * S Services `bench/svc-<i>` labelled fleet-wide members (no §2 annotations: through the
 * cluster's default gateway), so `svc-<i>-federated` has one part per cluster, 3 C in
 * all. Every gateway is answered by a real HTTP server in a child process
 * (probe-servers.ts). The controller runs in-process in the default `endpointslices`
 * mode without a write limit (`--write-qps 0`, as steady-latency): a switch is a burst
 * of S × (C + 2) writes (the next tier's C parts, the last dead gateway's part, the
 * Service), which the default 50 writes/s would stretch to most of a minute; the JSON
 * says what the default limit would make of it.
 *
 * Once every Service serves `near` (its parts ready, the others' not): writes over a
 * steady window (target 0). Then every `near` gateway but one stops (connections
 * refused) and its endpoints turn not ready while the last keeps the tier serving. Then
 * the last one stops at a recorded instant (taken just before the command goes out, so
 * an upper bound): a local watch on the parts records when each Service serves `mid`
 * (every `mid` part ready, every `near` and `far` part not ready); `tier_failover_s` =
 * the slowest Service. The local API server's write requests over the switch, until the
 * writer is idle and the count still, per Service, are `tier_switch_writes_per_service`,
 * with the objects that changed (watch events on the parts and the fleet-wide Services)
 * per Service beside it. Then a second steady window in the switched world.
 *
 * Where the switch's time goes (tier-switch-timeline.ts, `switchTimeline` in the JSON):
 * the controller logs at its default level into a file of its own, whose lines time the
 * actor's "dead" verdict and the writer's plan of each Service's failover; the local
 * watch times the writes; the writer's status gives its write latency, queue and writes
 * in flight. `loadAverage` is the machine's at the end of the switch.
 *
 * Needs CAP_NET_ADMIN (the route); without it the scenario records null with the reason.
 */
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { FEDERATED_LABEL } from "../src/core/federated.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../src/core/labels.ts";
import type { EndpointSlice, Service } from "../src/core/objects.ts";
import { PRIORITY_ANNOTATION } from "../src/core/tiers.ts";
import type { Supervisor } from "../src/supervisor/supervisor.ts";
import type { Fleet } from "../test/helpers/fleet.ts";
import { eventually } from "../test/helpers/kube.ts";
import { whenEach } from "./endpoint-readiness.ts";
import {
  type BenchOptions,
  diffCounts,
  GATEWAY_PORT,
  localWritesByKind,
  printTable,
  progress,
  round,
  runPool,
  type ScenarioResult,
  sleep,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";
import { ProbeWorld } from "./probe-world.ts";
import { TierServing } from "./tier-serving.ts";
import { tierSwitchTimeline } from "./tier-switch-timeline.ts";

const NAMESPACE = "bench";
const GATEWAY_NAMESPACE = "gateway";
/** Apart from failover's (4281) and the tests' probe ports. */
const PROBE_PORT = 4282;
/** The default probe period (no annotation): the target is 3 × period + 2 s. */
const PERIOD_S = 3;
const TIERS = [
  { remote: "near", priority: 10 },
  { remote: "mid", priority: 20 },
  { remote: "far", priority: 30 },
] as const;
/** The default `--write-qps`, for the JSON's note on what it would make of the switch. */
const DEFAULT_WRITE_QPS = 50;
const WAIT_MS = 120_000;

interface Cluster {
  readonly name: string;
  readonly remote: string;
  readonly tier: number;
  readonly priority: number;
  readonly gateway: string;
  readonly address: string;
}

/** Cluster k of tier t: gateway `gw-<k>` of its remote at 203.0.113.(201 + 10 t + k). */
function clustersOf(perTier: number): Cluster[] {
  return TIERS.flatMap(({ remote, priority }, tier) =>
    Array.from({ length: perTier }, (_, k) => ({
      name: `${remote}-${k}`,
      remote,
      tier,
      priority,
      gateway: `gw-${k}`,
      address: `203.0.113.${201 + 10 * tier + k}`,
    })),
  );
}

async function shape(fleet: Fleet, clusters: readonly Cluster[], services: number): Promise<void> {
  for (const remote of fleet.remotes) await fleet.remoteToken(remote);
  await runPool(clusters, 8, async (c) => {
    await fleet.createGateway(c.remote, {
      namespace: GATEWAY_NAMESPACE,
      name: c.gateway,
      ingress: [{ ip: c.address }],
      port: GATEWAY_PORT,
      probePort: PROBE_PORT,
    });
  });
  const work = fleet.remotes.flatMap((remote) => Array.from({ length: services }, (_, i) => ({ remote, i })));
  // Members through their cluster's default gateway (no §2 annotations).
  await runPool(work, 8, async ({ remote, i }) => {
    await fleet.createService(remote, NAMESPACE, `svc-${i}`, {
      gateway: false,
      labels: { [FEDERATED_LABEL]: "member" },
    });
  });
  await runPool(clusters, 8, async (c) => {
    await fleet.register(c.remote, {
      clusterName: c.name,
      annotations: {
        [GATEWAY_NAME]: c.gateway,
        [GATEWAY_NS]: GATEWAY_NAMESPACE,
        [PRIORITY_ANNOTATION]: String(c.priority),
      },
    });
  });
}

const sum = (counts: Readonly<Record<string, number>>): number => Object.values(counts).reduce((a, b) => a + b, 0);

/** Waits for the writer to be idle and the local write count to hold still over two readings 2 s apart. */
async function settled(fleet: Fleet, controller: Supervisor): Promise<void> {
  await waitWriterIdle(controller);
  let last = sum(await localWritesByKind(fleet));
  await eventually(
    "local writes still",
    async () => {
      const now = sum(await localWritesByKind(fleet));
      const still = now === last;
      last = now;
      return still ? true : undefined;
    },
    WAIT_MS,
    2_000,
  );
}

export async function runFailoverTiers(opts: BenchOptions): Promise<ScenarioResult> {
  const perTier = opts.smoke ? 2 : 10;
  const services = opts.smoke ? 10 : 200;
  const steadyS = opts.smoke ? 10 : 60;
  const clusters = clustersOf(perTier);
  const sizes = { services, tiers: TIERS.length, clustersPerTier: perTier, periodS: PERIOD_S, steadyWindowS: steadyS };
  const targetS = 3 * PERIOD_S + 2;
  const logDir = mkdtempSync(join(tmpdir(), "failover-tiers-"));
  const logFile = join(logDir, "controller.log");
  const world = await ProbeWorld.open("failover-tiers", {
    pairs: clusters.map((c) => ({ address: c.address, port: PROBE_PORT })),
    remotes: TIERS.map((t) => t.remote),
    // The default log level, into a file: its lines time the actor's and the writer's steps.
    controller: { endpointsApi: "endpointslices", writeQps: 0, logLevel: "info", logFile },
  });
  if ("note" in world) {
    const { note } = world;
    writeResult(opts.out, "failover-tiers", { smoke: opts.smoke, ...sizes, tierFailoverS: null, note });
    return { result: { note }, summary: opts.smoke ? {} : nullSummary() };
  }
  try {
    const { fleet, controller, servers } = world;
    const serving = new TierServing();
    /** Objects (parts and fleet-wide Services) that changed while set, and when the watch saw each change. */
    let changed: Set<string> | undefined;
    let changedAt: number[] = [];
    const noteChange = (what: string) => {
      if (!changed) return;
      changed.add(what);
      changedAt.push(Date.now());
    };
    const slices = await world.watch<EndpointSlice>(
      `/apis/discovery.k8s.io/v1/namespaces/${NAMESPACE}/endpointslices`,
      `${FEDERATED_LABEL}=true`,
      (key, previous, current) => {
        serving.update(key, current);
        if (previous && current) noteChange(`slice ${key}`);
      },
    );
    await world.watch<Service>(`/api/v1/namespaces/${NAMESPACE}/services`, `${FEDERATED_LABEL}=true`, (key, p, c) => {
      if (p && c) noteChange(`service ${key}`);
    });
    progress(`failover-tiers: ${services} fleet-wide Services over ${TIERS.length} tiers × ${perTier} clusters`);
    const startedAt = Date.now();
    await shape(fleet, clusters, services);
    await waitAllSynced(controller, clusters.length);
    const names = Array.from({ length: services }, (_, i) => `svc-${i}-federated`);
    const inTier = (tier: number) => clusters.filter((c) => c.tier === tier).map((c) => c.name);
    const [near, mid, far] = [inTier(0), inTier(1), inTier(2)];
    /** Resolves with when each Service first meets `ready`/`notReady` (undefined: not within the wait). */
    const whenServing = (ready: readonly string[], notReady: readonly string[], timeoutMs: number) =>
      whenEach(slices, names, (name) => serving.serves(name, ready, notReady), timeoutMs);
    const first = await whenServing(near, [...mid, ...far], 900_000);
    const missing = (done: Map<string, number | undefined>) => [...done].filter(([, at]) => at === undefined).length;
    if (missing(first) > 0) throw new Error(`${missing(first)} fleet-wide Services never served the first tier`);
    const convergedS = round((Math.max(...[...first.values()].map(Number)) - startedAt) / 1000, 1);
    await world.allProbed();
    await settled(fleet, controller);
    const steady = async (label: string) => {
      progress(`failover-tiers: ${steadyS} s with nothing changing (${label})`);
      const before = await localWritesByKind(fleet);
      await sleep(steadyS * 1000);
      return diffCounts(await localWritesByKind(fleet), before);
    };
    const steadyBefore = await steady("first tier serving");

    // Every first-tier gateway but the last: the tier still serves on one.
    const [last, ...others] = [...clusters.filter((c) => c.tier === 0)].reverse();
    if (!last) throw new Error("no first tier");
    progress(`failover-tiers: ${others.length} of ${near.length} first-tier gateways stop`);
    await servers.setMode(
      others.map((c) => c.address),
      "stopped",
    );
    const partial = await whenServing(
      [last.name],
      [...others, ...clusters.filter((c) => c.tier > 0)].map((c) => c.name),
      WAIT_MS,
    );
    if (missing(partial) > 0) throw new Error(`${missing(partial)} Services not down to one first-tier gateway`);
    await settled(fleet, controller);

    progress(`failover-tiers: the last first-tier gateway (${last.name}) stops`);
    const writesBefore = await localWritesByKind(fleet);
    const latencyBefore = controller.status().writer?.writeDuration;
    changed = new Set();
    changedAt = [];
    const logBefore = fileSize(logFile);
    const switchWait = whenServing(mid, [...near, ...far], WAIT_MS);
    const samples: { queueDepth: number; inFlight: number }[] = [];
    const sampler = setInterval(() => {
      const w = controller.status().writer;
      if (w) samples.push({ queueDepth: w.queueDepth, inFlight: w.inFlight });
    }, 250);
    const stoppedAt = Date.now();
    await servers.setMode([last.address], "stopped");
    const switched = await switchWait;
    const switchedMs = [...switched.values()].filter((at) => at !== undefined).map((at) => at - stoppedAt);
    await settled(fleet, controller);
    clearInterval(sampler);
    const switchWrites = diffCounts(await localWritesByKind(fleet), writesBefore);
    const timeline = tierSwitchTimeline({
      stoppedAt,
      address: last.address,
      logLines: readFrom(logFile, logBefore).split("\n"),
      served: switched,
      writesSeenAt: changedAt,
      latencyBefore,
      latencyAfter: controller.status().writer?.writeDuration,
      samples,
    });
    // SPEC §14: the serving tiers are a prefix, so after a failover the dead first tier
    // still serves (its endpoints follow their health) and only the third stands by.
    const standbyAfterSwitch = {
      firstTier: serving.standbyParts(near),
      secondTier: serving.standbyParts(mid),
      thirdTier: serving.standbyParts(far),
      perTierExpected: services * perTier,
    };
    const objectsChanged = changed.size;
    changed = undefined;
    const steadyAfter = await steady("second tier serving");

    const notSwitched = missing(switched);
    const tierFailoverS = notSwitched === 0 ? round(Math.max(...switchedMs) / 1000, 2) : null;
    const sorted = [...switchedMs].sort((a, b) => a - b);
    const p50S = sorted.length > 0 ? round((sorted[Math.floor((sorted.length - 1) / 2)] ?? 0) / 1000, 2) : null;
    const writesPerService = round(sum(switchWrites) / services, 2);
    const changedPartsPerService = round(objectsChanged / services, 2);
    const steadyWrites = Math.max(sum(steadyBefore), sum(steadyAfter));
    printTable(
      `failover-tiers (${services} Services, ${TIERS.length} tiers × ${perTier} clusters, period ${PERIOD_S} s)`,
      [
        {
          figure: "last serving gateway dies → every Service serves the next tier (max)",
          value: tierFailoverS,
          unit: "s",
        },
        { figure: "… p50 over the Services", value: p50S, unit: "s" },
        { figure: "… the gateway found dead (its actor's log)", value: timeline.detectedS, unit: "s" },
        {
          figure: "… the writer plans the first / last Service's switch",
          value: `${timeline.plannedS.first} / ${timeline.plannedS.last}`,
          unit: "s",
        },
        {
          figure: "… the first / last switch write seen",
          value: `${timeline.writesS.first} / ${timeline.writesS.last}`,
          unit: "s",
        },
        { figure: "switch writes seen per second", value: timeline.writesPerS, unit: "writes/s" },
        {
          figure: "one Service's writes, planned → serving (p50 / max)",
          value: `${timeline.keyWriteS.p50} / ${timeline.keyWriteS.last}`,
          unit: "s",
        },
        {
          figure: "write request latency (mean; p50, p99 bucket)",
          value: `${timeline.writeLatencyMs.mean}; ${timeline.writeLatencyMs.p50}, ${timeline.writeLatencyMs.p99}`,
          unit: "ms",
        },
        { figure: "switch writes per Service", value: writesPerService, unit: "writes" },
        {
          figure: "objects that changed per Service (parts + Service)",
          value: changedPartsPerService,
          unit: "objects",
        },
        { figure: `writes over ${steadyS} s, first tier serving`, value: sum(steadyBefore), unit: "writes" },
        { figure: `writes over ${steadyS} s, second tier serving`, value: sum(steadyAfter), unit: "writes" },
      ],
    );
    const result = {
      smoke: opts.smoke,
      ...sizes,
      endpointsApi: "endpointslices",
      writeQps: "unlimited",
      parts: services * clusters.length,
      convergedS,
      targetS,
      tierFailoverS,
      tierFailoverP50S: p50S,
      tierSwitchWritesPerService: writesPerService,
      changedObjectsPerService: changedPartsPerService,
      // What a switch of this size takes at the default write limit, written one after another.
      switchAtDefaultWriteQpsS: round(sum(switchWrites) / DEFAULT_WRITE_QPS, 1),
      switchWrites,
      // Seconds from the stop: detection, planning, the writes as the watch saw them (tier-switch-timeline.ts).
      switchTimeline: timeline,
      loadAverage: loadavg().map((l) => round(l, 2)),
      standbyAfterSwitch,
      steadyWritesFirstTier: steadyBefore,
      steadyWritesSecondTier: steadyAfter,
      tierSteadyWrites: steadyWrites,
      ...(notSwitched > 0 ? { note: `${notSwitched} Services did not serve the next tier within ${WAIT_MS} ms` } : {}),
    };
    writeResult(opts.out, "failover-tiers", result);
    return {
      result,
      summary: opts.smoke
        ? {}
        : {
            tier_failover_s: tierFailoverS,
            tier_switch_writes_per_service: writesPerService,
            tier_steady_writes: steadyWrites,
          },
    };
  } finally {
    await world.close();
    progress(`failover-tiers: the controller's log is ${logFile}`);
  }
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** The text of `path` from byte `offset` on ("" when it cannot be read). */
function readFrom(path: string, offset: number): string {
  try {
    return readFileSync(path).subarray(offset).toString("utf8");
  } catch {
    return "";
  }
}

function nullSummary(): Record<string, null> {
  return {
    tier_failover_s: null,
    tier_switch_writes_per_service: null,
    tier_steady_writes: null,
  };
}
