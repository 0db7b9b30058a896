/**
 * `npm start` (`fleet-mirror-sandbox demo`): the README's first command. Starts the sandbox
 * fleet (one local and two remote API servers), shapes and registers the remotes (see
 * demo-script.ts), runs the mirror, and shows a live table (demo-table.ts, drawn by
 * screen.ts) while a script changes things on the remotes. The gateways are real and
 * probed (demo-gateways.ts: a route on lo makes their addresses local, a probe server
 * answers on each), and the script has one die and come back; without the right to add
 * the route, the demo says so in one line and runs without probes.
 *
 * Stopping (Ctrl-C, SIGTERM, or the terminal closing): the sandbox's processes run in
 * process groups of their own (process.ts), so the signal reaches only this process,
 * which stops everything in dependency order — the controller, the probe servers and
 * their route, then the API servers, then etcd — removes the sandbox directory, and says
 * so in one line. Whatever fails after the signal (a scripted change cut short) is the
 * stop, not an error: no stack trace.
 *
 * `--script-once` runs the script a single time, checks that every step became
 * visible in the local cluster, and exits (0 on success): the demo's own test.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CustomObjectsApi } from "@kubernetes/client-node";
import { untilSignal } from "../src/cli/signals.ts";
import { defaultConfig } from "../src/config.ts";
import { connectionFromKubeconfig } from "../src/kube/kubeconfig.ts";
import { createLogger } from "../src/log.ts";
import { Supervisor } from "../src/supervisor/supervisor.ts";
import type { ControlPlane } from "./control-plane.ts";
import { DemoGateways } from "./demo-gateways.ts";
import { localMirrors } from "./demo-mirrors.ts";
import { shapeModes } from "./demo-modes.ts";
import {
  coreApi,
  demoSteps,
  discoveryApi,
  NAMESPACE,
  registerRemotes,
  resetForNextRound,
  type Step,
  shapeRemotes,
} from "./demo-script.ts";
import { MirrorActivity, renderTable } from "./demo-table.ts";
import { DEMO_TIER_SETTINGS, shapeLocalMember, TIER_PRIORITIES, TIERS_NOTE } from "./demo-tiers.ts";
import { DemoTraffic } from "./demo-traffic.ts";
import { kubeConfig } from "./kubeconfig.ts";
import { startSandbox } from "./sandbox.ts";
import { Screen } from "./screen.ts";

export const demoHelp = `Usage: fleet-mirror-sandbox demo [--script-once] [--step-interval 6s]

Starts a sandbox fleet on 127.0.0.1 (etcd + kube-apiservers "local", "east", "west"),
registers east and west with least-privilege credentials Secrets, mirrors their
exported Services into "local" (one in each way to export: annotations, label,
fleet-wide, MCS ServiceExport, headless), and shows a live table while it changes
things on the remotes (export, port change, gateway IP change, a gateway dying and
coming back, a ServiceExport deleted, unexport). The fleet-wide shop/search has
priority tiers (local 0, west 10, east 20; --failover-min-ready 2, --failback-delay
${DEMO_TIER_SETTINGS.failbackDelayMs / 1000}s): its row shows which tier serves as west's gateway dies and comes back. The gateways' addresses are made local (ip route add local 198.51.100.64/28
dev lo, removed on exit; needs root or CAP_NET_ADMIN, else no probes and no failover)
and each has a real HTTP probe server. Ctrl-C stops it all.

  --script-once        run the change script once, verify each step, then exit
  --step-interval <s>  pause between scripted changes (default 6s)
`;

/** How long the demo waits for a scripted change to show up in the local cluster. */
const VISIBLE_TIMEOUT_MS = 60_000;
/** A process of the sandbox that ignores SIGTERM this long is killed: its data is disposable. */
const STOP_GRACE_MS = 5_000;

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function parseStepInterval(text: string): number {
  const ms = Number.parseFloat(text) * (text.endsWith("ms") ? 1 : 1000);
  if (!Number.isFinite(ms) || ms <= 0)
    throw new Error(`--step-interval: ${JSON.stringify(text)} must be a duration > 0 (e.g. 6s)`);
  return ms;
}

export async function demoCommand(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      "script-once": { type: "boolean", default: false },
      "step-interval": { type: "string", default: "6s" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(demoHelp);
    return 0;
  }
  const once = values["script-once"] === true;
  const stepMs = parseStepInterval(values["step-interval"] ?? "6s");
  const stop = new AbortController();
  let signalledAt: number | undefined;
  void untilSignal().then(() => {
    signalledAt = Date.now();
    stop.abort();
  });
  const screen = new Screen(process.stdout, { interactive: !once });
  let plane: ControlPlane | undefined;
  let gateways: DemoGateways | undefined;
  let traffic: DemoTraffic | undefined;
  let supervisor: Supervisor | undefined;
  let failed = false;
  try {
    plane = await startSandbox(screen, stop.signal);
    gateways = await DemoGateways.start();
    screen.write(`${gateways.note}\n`);
    // Before any mirror exists, so the cluster DNS Service gets its usual address.
    const started = await DemoTraffic.start(plane, gateways).catch((error: unknown) => ({
      traffic: undefined,
      note: `No traffic line (real requests through the mirrors): ${(error as Error).message}.`,
    }));
    traffic = started.traffic;
    screen.write(`${started.note}\n`);
    failed = await runDemo(plane, gateways, traffic, screen, stop.signal, once, stepMs, (s) => {
      supervisor = s;
    });
  } catch (error) {
    // After a signal, whatever was cut short fails; that is the stop, not an error.
    if (!stop.signal.aborted) throw error;
  } finally {
    const stopping = Date.now();
    const done = await stopAll(supervisor, traffic, gateways, plane);
    const took =
      signalledAt === undefined
        ? `in ${seconds(Date.now() - stopping)}`
        : `${seconds(Date.now() - signalledAt)} after the signal (stopping took ${seconds(Date.now() - stopping)})`;
    screen.release();
    // With the stdout reader gone (`| tee`, killed by the same Ctrl-C), it goes to stderr: the terminal.
    await screen.finalLine(`Stopped ${took}: ${done}.`, process.stderr);
  }
  return failed ? 1 : 0;
}

/**
 * Stops the controller, the traffic path, the probe servers and their route, then
 * kube-controller-manager, the API servers and etcd (ControlPlane.stop's order); says what
 * it did, with timings.
 */
async function stopAll(
  supervisor: Supervisor | undefined,
  traffic: DemoTraffic | undefined,
  gateways: DemoGateways | undefined,
  plane: ControlPlane | undefined,
): Promise<string> {
  const started = Date.now();
  const parts: string[] = [];
  try {
    if (supervisor) {
      await supervisor.stop();
      parts.push(`controller ${seconds(Date.now() - started)}`);
    }
  } catch (error) {
    parts.push(`controller failed to stop (${(error as Error).message})`);
  }
  // Before the gateways: its CoreDNS listens on their route's node address.
  if (traffic) parts.push(await traffic.stop());
  // After the controller: no probe is in flight when the servers go.
  const gatewaysDone = (await gateways?.stop()) ?? "";
  if (gatewaysDone !== "") parts.push(gatewaysDone);
  if (plane) {
    const planeStarted = Date.now();
    await plane.stop({ graceMs: STOP_GRACE_MS });
    parts.push(`kube-controller-manager, API servers and etcd ${seconds(Date.now() - planeStarted)}`);
    parts.push(`${plane.dir} removed`);
  } else {
    parts.push("start-up cut short (what had started is stopped, its directory removed)");
  }
  return parts.join(", ");
}

/** Shapes, registers, mirrors and runs the script until `signal`; true if a step was not mirrored in time. */
async function runDemo(
  plane: ControlPlane,
  gateways: DemoGateways,
  traffic: DemoTraffic | undefined,
  screen: Screen,
  signal: AbortSignal,
  once: boolean,
  stepMs: number,
  started: (supervisor: Supervisor) => void,
): Promise<boolean> {
  const local = coreApi(plane.cluster("local").adminKubeconfig);
  const remotes = {
    east: coreApi(plane.cluster("east").adminKubeconfig),
    west: coreApi(plane.cluster("west").adminKubeconfig),
  };
  screen.write(
    `\nShaping the remotes: a gateway (${gateways.probed ? "probed" : "not probed"}) and exported Services in each...\n`,
  );
  await shapeRemotes(remotes, gateways);
  signal.throwIfAborted();
  screen.write(
    "Installing the MCS CRDs; exporting shop/orders by ServiceExport (east, west) and headless shop/db (east)...\n",
  );
  const westExport = await shapeModes(plane, kubeConfig);
  signal.throwIfAborted();
  const discovery = discoveryApi(plane.cluster("local").adminKubeconfig);
  await shapeLocalMember(local, discovery, gateways.localPodAddress);
  screen.write(`${TIERS_NOTE}\n`);
  screen.write(
    "Registering east and west with least-privilege tokens (get/list/watch services, endpointslices, serviceexports)...\n",
  );
  await registerRemotes(plane, local, TIER_PRIORITIES);
  signal.throwIfAborted();

  const logFile = join(plane.dir, "fleet-mirror.log");
  screen.write(`Starting fleet-mirror (logs: ${logFile})...\n`);
  const config = defaultConfig({
    namespace: NAMESPACE,
    logFile,
    logLevel: "info",
    gatewayResolvePeriodMs: 10_000,
    ...DEMO_TIER_SETTINGS,
  });
  const supervisor = new Supervisor({
    config,
    localConnection: connectionFromKubeconfig(plane.cluster("local").adminKubeconfig, { allowFilePaths: false }),
    logger: createLogger("info", { actor: "supervisor" }, logFile),
  });
  started(supervisor);
  supervisor.start();

  const objects = kubeConfig(plane.cluster("local").adminKubeconfig).makeApiClient(CustomObjectsApi);
  const mirrorsNow = () => localMirrors(local, discovery, objects);
  const steps = demoSteps(remotes, mirrorsNow, () => supervisor.status(), gateways, westExport, traffic);
  const kubeconfigPath = plane.cluster("local").adminKubeconfigPath;
  const activity = new MirrorActivity();
  let lastStep = "(none yet)";
  const drawOnce = async (force: boolean): Promise<void> => {
    try {
      const mirrors = await mirrorsNow();
      const now = Date.now();
      activity.observe(mirrors, now);
      screen.show(
        renderTable({ status: supervisor.status(), mirrors, activity, lastStep, kubeconfigPath, now, traffic }),
        {
          force,
        },
      );
    } catch (error) {
      if (!signal.aborted) screen.write(`[demo] could not read the local cluster: ${(error as Error).message}\n`);
    }
  };
  // One drawing at a time; a request during one draws again after it, so the table
  // shown after a step always includes that step. `force` (after a step): a pipe gets
  // that table even when a timer's drawing already printed the same content before the
  // step's line, so every step's line is followed by the table it made.
  let drawing: Promise<void> | undefined;
  let again = false;
  let forceNext = false;
  const draw = (force = false): Promise<void> => {
    forceNext ||= force;
    if (drawing) {
      again = true;
      return drawing;
    }
    drawing = (async () => {
      do {
        again = false;
        const forced = forceNext;
        forceNext = false;
        if (!signal.aborted) await drawOnce(forced);
      } while (again);
    })().finally(() => {
      drawing = undefined;
    });
    return drawing;
  };
  const timer = setInterval(() => void draw(), 1_000);

  // A read of the local cluster that fails is "not visible yet", not the demo's end: a
  // ServiceImport list right after its CRD was installed was refused once (429 "storage
  // is (re)initializing"). The last such error goes into the step's line if it times out.
  let readError: string | undefined;
  const waitVisible = async (step: Step): Promise<boolean> => {
    const deadline = Date.now() + VISIBLE_TIMEOUT_MS;
    readError = undefined;
    while (Date.now() < deadline && !signal.aborted) {
      try {
        if (await step.visible()) return true;
      } catch (error) {
        readError = (error as Error).message.split("\n")[0];
      }
      await pause(200, signal);
    }
    return false;
  };
  let failed = false;
  try {
    for (let round = 0; !signal.aborted; round++) {
      for (const [i, step] of steps.entries()) {
        if (round > 0 && i === 0) continue;
        if (signal.aborted) break;
        const stepStarted = Date.now();
        await step.run();
        const ok = await waitVisible(step);
        if (signal.aborted) break;
        lastStep = `${step.title} — ${ok ? `mirrored in ${Date.now() - stepStarted} ms` : `NOT mirrored within ${VISIBLE_TIMEOUT_MS / 1000} s${readError ? ` (last read of the local cluster failed: ${readError})` : ""}`}`;
        if (!ok) failed = true;
        screen.write(`[demo] ${lastStep}\n`);
        await draw(true);
        if (!once) await pause(stepMs, signal);
      }
      if (once || signal.aborted) break;
      await resetForNextRound(remotes, westExport);
    }
  } finally {
    clearInterval(timer);
  }
  if (once) screen.write(`\n${failed ? "demo script FAILED" : "demo script passed: every change was mirrored"}\n`);
  return failed;
}
