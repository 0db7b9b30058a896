/**
 * What probing costs the controller (SPEC §10), against the limit: a bare Node HTTP client
 * probing the same pairs at the same rate, side by side in one run.
 *
 * World: one remote API server with 4 gateway Services `gateway/gw-<k>`, each with the
 * same A ingress addresses of 203.0.113.0/24 (made local for the run), used by one
 * exported Service each; gateway k's `mc-probe` port is 4291 + k, so the controller
 * probes A × 4 address:port pairs (1 000; smoke 20) every 3 s (the default period).
 * Every pair is answered (200) by a real HTTP server in a child process
 * (probe-servers.ts): its CPU is not counted.
 *
 * The controller is `fleet-mirror run` from dist/ as its own process; its CPU is the
 * kernel's (/proc/<pid>/stat, every thread). Three windows of D seconds (60; smoke 8),
 * one after the other:
 * 1. the controller synced and idle, the gateways without `mc-probe` port (probing off);
 * 2. the same process after the `mc-probe` ports were added, once every pair has been
 *    probed and one more period has passed (probing on);
 * 3. the controller stopped, the bare client (bare-prober.ts, its own process) probing
 *    the same pairs, path and period, after one period of warm-up.
 * `probe_cpu_ratio` = (CPU/s on − CPU/s off) / CPU/s of the bare client. The probes each
 * window made are counted by the servers (the same instrument for both). Each window
 * also splits the CPU by thread name (/proc/<pid>/task), to show where the controller
 * spends what the bare client does not (actor thread, main thread, GC helpers).
 *
 * Needs CAP_NET_ADMIN (the route); without it the scenario records null with the reason.
 */
import { fork } from "node:child_process";
import { GATEWAY_NAME, GATEWAY_NS, GATEWAY_PORT_NAME } from "../src/core/labels.ts";
import { DEFAULT_PROBE_PATH, DEFAULT_PROBE_PERIOD_SECONDS, PROBE_PORT_NAME } from "../src/core/probe-spec.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import { eventually } from "../test/helpers/kube.ts";
import type { BareProberCommand, BareProberReply } from "./bare-prober.ts";
import {
  type BenchOptions,
  GATEWAY_PORT,
  printTable,
  progress,
  round,
  type ScenarioResult,
  sleep,
  writeResult,
} from "./harness.ts";
import { startController, waitStatus, writerSettled } from "./memory.ts";
import { localProbeRange, type ProbePair, ProbeServers } from "./probe-servers.ts";
import { processCpuSeconds, threadCpuSeconds } from "./process-cpu.ts";

const NAMESPACE = "bench";
const GATEWAY_NAMESPACE = "gateway";
/** One gateway per port; apart from the ports tests and failover use. */
const PROBE_PORTS = [4291, 4292, 4293, 4294];
const PERIOD_MS = DEFAULT_PROBE_PERIOD_SECONDS * 1000;
const SETTLE_MS = 3_000;

interface Window {
  readonly cpuS: number;
  /** CPU-seconds by thread name (threads alive at both ends of the window). */
  readonly threads?: Readonly<Record<string, number>>;
  readonly wallS: number;
  /** Requests the probe servers received during the window. */
  readonly probes: number;
}

/** CPU-seconds `pid` uses over `seconds` of wall time, and the probes the servers saw meanwhile. */
async function cpuWindow(pid: number, seconds: number, servers: ProbeServers): Promise<Window> {
  const before = (await servers.probed()).requests;
  const threads0 = threadCpuSeconds(pid);
  const cpu0 = processCpuSeconds(pid);
  const wall0 = performance.now();
  await sleep(seconds * 1000);
  const cpu1 = processCpuSeconds(pid);
  const threads1 = threadCpuSeconds(pid);
  const wallS = (performance.now() - wall0) / 1000;
  const probes = (await servers.probed()).requests - before;
  const threads: Record<string, number> = {};
  for (const [name, s1] of threads1) {
    const used = round(s1 - (threads0.get(name) ?? 0), 2);
    if (used > 0) threads[name] = used;
  }
  return { cpuS: round(cpu1 - cpu0, 2), wallS: round(wallS, 2), probes, threads };
}

const perSecond = (w: Window): number => w.cpuS / w.wallS;

async function shape(fleet: Fleet, addresses: readonly string[]): Promise<void> {
  await fleet.ensureNamespace("remote", GATEWAY_NAMESPACE);
  await fleet.ensureNamespace("remote", NAMESPACE);
  const api = fleet.api("remote");
  for (const [k] of PROBE_PORTS.entries()) {
    const name = `gw-${k}`;
    await api.createNamespacedService({
      namespace: GATEWAY_NAMESPACE,
      body: {
        metadata: { name },
        spec: { type: "LoadBalancer", ports: [{ name: GATEWAY_PORT_NAME, port: GATEWAY_PORT, protocol: "TCP" }] },
      },
    });
    await fleet.setGatewayIngress(
      "remote",
      addresses.map((ip) => ({ ip })),
      { namespace: GATEWAY_NAMESPACE, name },
    );
    await api.createNamespacedService({
      namespace: NAMESPACE,
      body: {
        metadata: { name: `svc-${k}`, annotations: { [GATEWAY_NAME]: name, [GATEWAY_NS]: GATEWAY_NAMESPACE } },
        spec: { ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }], selector: { app: "web" } },
      },
    });
  }
  await fleet.register("remote");
}

/** Turns probing on: gateway k gets its `mc-probe` port. */
async function addProbePorts(fleet: Fleet): Promise<void> {
  for (const [k, port] of PROBE_PORTS.entries())
    await fleet.patchService("remote", GATEWAY_NAMESPACE, `gw-${k}`, (svc) => {
      svc.spec?.ports?.push({ name: PROBE_PORT_NAME, port, protocol: "TCP" });
    });
}

/** The bare client's window: forked, probing, one period of warm-up, then D seconds measured. */
async function bareWindow(pairs: readonly ProbePair[], seconds: number, servers: ProbeServers) {
  const child = fork(new URL("./bare-prober.ts", import.meta.url).pathname, [], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const reply = (op: BareProberReply["op"]): Promise<BareProberReply> =>
    new Promise((resolve, reject) => {
      const onMessage = (message: BareProberReply): void => {
        if (message.op !== op) return;
        child.off("exit", onExit);
        child.off("message", onMessage);
        resolve(message);
      };
      const onExit = (code: number | null): void => reject(new Error(`bare prober exited (${code}) before ${op}`));
      child.on("message", onMessage);
      child.once("exit", onExit);
    });
  try {
    const started = reply("started");
    child.send({ op: "start", pairs, path: DEFAULT_PROBE_PATH, periodMs: PERIOD_MS } satisfies BareProberCommand);
    await started;
    const answered = async (): Promise<number> => {
      const stats = reply("stats");
      child.send({ op: "stats" } satisfies BareProberCommand);
      const counted = await stats;
      return counted.op === "stats" ? counted.ok : 0;
    };
    await sleep(PERIOD_MS);
    const before = await answered();
    const window = await cpuWindow(child.pid ?? 0, seconds, servers);
    // 2xx answers the client saw in the window: every probe it made should be one.
    return { ...window, answered: (await answered()) - before };
  } finally {
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill();
      await exited;
    }
  }
}

export async function runProbeCpu(opts: BenchOptions): Promise<ScenarioResult> {
  const addresses = Array.from({ length: opts.smoke ? 5 : 250 }, (_, i) => `203.0.113.${i + 1}`);
  const pairs = addresses.flatMap((address) => PROBE_PORTS.map((port) => ({ address, port })));
  const seconds = opts.smoke ? 8 : 60;
  const sizes = { pairs: pairs.length, periodS: PERIOD_MS / 1000, windowS: seconds };
  const local = await localProbeRange("probe-cpu");
  if ("note" in local) {
    const { note } = local;
    writeResult(opts.out, "probe-cpu", { smoke: opts.smoke, ...sizes, ratio: null, note });
    return { result: { note }, summary: opts.smoke ? {} : { probe_cpu_ratio: null } };
  }
  const { route } = local;
  // Undone last first, whatever step failed.
  const cleanups: (() => Promise<unknown>)[] = [() => route.release()];
  try {
    const servers = await ProbeServers.start(pairs);
    cleanups.push(() => servers.stop());
    const fleet = await Fleet.start(["remote"]);
    cleanups.push(() => fleet.stop());
    progress(`probe-cpu: ${pairs.length} address:port pairs, windows of ${seconds} s`);
    await shape(fleet, addresses);
    // A × 4 pairs: each gateway has A addresses, above the default --gateway-max-addresses (32).
    const [proc, admin] = await startController(fleet, [
      "--endpoints-api",
      "endpointslices",
      "--gateway-max-addresses",
      String(addresses.length),
    ]);
    let off: Window;
    let on: Window;
    let dead: number;
    try {
      const pid = proc.child.pid ?? 0;
      await waitStatus(proc, admin, "the cluster synced", (s) => s.clusters?.[0]?.state === "synced");
      await waitStatus(proc, admin, "the writer idle", writerSettled(1));
      await sleep(SETTLE_MS);
      progress("probe-cpu: controller, probing off");
      off = await cpuWindow(pid, seconds, servers);
      await addProbePorts(fleet);
      await eventually(
        "every pair probed",
        async () => ((await servers.probed()).pairs === pairs.length ? true : undefined),
        60_000,
        500,
      );
      await sleep(PERIOD_MS);
      progress("probe-cpu: controller, probing on");
      on = await cpuWindow(pid, seconds, servers);
      // Every pair answers 200: a dead address would mean the controller fell behind.
      let counted = 0;
      await waitStatus(proc, admin, "the probe status", (s) => {
        const probes = (s.clusters ?? []).flatMap((c) => c.gateways.map((g) => g.probe));
        counted = probes.reduce((n, p) => n + (p?.dead ?? 0), 0);
        return probes.length === PROBE_PORTS.length && probes.every((p) => p !== undefined);
      });
      dead = counted;
    } finally {
      await proc.stop();
    }
    progress("probe-cpu: bare client");
    const bare = await bareWindow(pairs, seconds, servers);
    const probingCpuPerS = perSecond(on) - perSecond(off);
    const ratio = round(probingCpuPerS / perSecond(bare), 2);
    const rows = [
      { process: "controller, probing off", ...off, cpuPercentOfOneCore: round(100 * perSecond(off), 1) },
      { process: "controller, probing on", ...on, cpuPercentOfOneCore: round(100 * perSecond(on), 1) },
      { process: "bare node http client", ...bare, cpuPercentOfOneCore: round(100 * perSecond(bare), 1) },
    ];
    printTable(
      `probe-cpu (${pairs.length} pairs every ${PERIOD_MS / 1000} s; ratio = (on − off) / bare)`,
      rows.map(({ threads: _threads, ...row }) => row),
    );
    printTable(
      "probe-cpu: CPU-seconds by thread (name cut at 15 characters)",
      rows.map((r) => ({ process: r.process, ...r.threads })),
    );
    progress(`probe-cpu: ratio ${ratio}`);
    const result = {
      smoke: opts.smoke,
      ...sizes,
      entry: "dist/src/main.js run",
      windows: rows,
      probingCpuPercentOfOneCore: round(100 * probingCpuPerS, 1),
      deadAddressesAfterOn: dead,
      ratio,
    };
    writeResult(opts.out, "probe-cpu", result);
    return { result, summary: opts.smoke ? {} : { probe_cpu_ratio: ratio } };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}
