/**
 * What one actor thread costs to start and to keep, without API servers: N remote-cluster
 * threads made the way the supervisor makes them (`spawnWorker`, the supervisor's heap
 * limits), each sent one `actor.init` whose remote is a closed loopback port over plain
 * HTTP (so the actor loads and starts everything it runs, then waits in its reconnect
 * backoff; no TLS context, whose size depends on the CA a kubeconfig carries).
 *
 * Per thread, started one after another: wall time and process CPU time (every thread
 * of the process) from `new Worker` to `actor.ready`. Then all N are held at once and
 * the process RSS (VmRSS) is read after a settle; per thread = (RSS − RSS before the
 * first thread) / N. Quoted in bench/HISTORY.md (cheaper threads).
 *
 *   node bench/probes/thread-start-probe.ts [--entry source|dist] [--threads 20] [--young-mb 4]
 *
 * `--entry dist` runs the built entries (`npm run build` first): what the image runs.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { Worker } from "node:worker_threads";
import { MessageChannel } from "node:worker_threads";
import type { ToRemoteActor } from "../../src/protocol/messages.ts";

const { values } = parseArgs({
  options: {
    entry: { type: "string", default: "source" },
    threads: { type: "string", default: "20" },
    settle: { type: "string", default: "3000" },
    /** The young generation of each thread (default: the supervisor's). */
    "young-mb": { type: "string" },
  },
});
const threads = Number(values.threads);
const settleMs = Number(values.settle);
type EntryModule = typeof import("../../src/supervisor/worker-entry.ts");
type RunnerModule = typeof import("../../src/supervisor/actor-runner.ts");
const base = values.entry === "dist" ? "../../dist/src/supervisor/" : "../../src/supervisor/";
const extension = values.entry === "dist" ? "js" : "ts";
const { spawnWorker } = (await import(`${base}worker-entry.${extension}`)) as EntryModule;
const { ACTOR_YOUNG_GENERATION_MB } = (await import(`${base}actor-runner.${extension}`)) as RunnerModule;

function rssBytes(): number {
  const status = readFileSync("/proc/self/status", "utf8");
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? Number.NaN) * 1024;
}

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

function init(cluster: string): { message: ToRemoteActor; transfer: MessageChannel } {
  const channel = new MessageChannel();
  return {
    message: {
      type: "actor.init",
      cluster: {
        name: cluster,
        domain: "cluster.local",
        excludedNamespaces: [],
        defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
      },
      epoch: 1,
      connection: { server: "http://127.0.0.1:1", auth: { kind: "anonymous" } },
      options: {
        resolvePeriodMs: 60_000,
        maxInFlight: 2,
        batchDelayMs: 50,
        logLevel: "silent",
        memberSelector: { key: "mirror.linkerd.io/federated", value: "member" },
      },
      writerPort: channel.port1,
    },
    transfer: channel,
  };
}

/** Starts one thread and its actor; resolves once the actor answered `actor.ready`. */
function start(index: number): Promise<Worker> {
  const worker = spawnWorker("remote-cluster", `remote-cluster/c${index}`, undefined, {
    maxOldGenerationSizeMb: 64,
    maxYoungGenerationSizeMb: Number(values["young-mb"] ?? ACTOR_YOUNG_GENERATION_MB),
  });
  worker.stdout.resume();
  const { message, transfer } = init(`c${index}`);
  worker.postMessage(message, [transfer.port1]);
  return new Promise((resolve, reject) => {
    worker.on("message", (m: { type?: string; error?: unknown }) => {
      if (m.type === "actor.ready") resolve(worker);
      if (m.type === "actor.failed") reject(new Error(JSON.stringify(m.error)));
    });
    worker.once("error", reject);
  });
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
const round = (x: number): number => Math.round(x * 10) / 10;

// One warm-up thread, ended before the baseline: the main thread's own first-use costs
// (loading worker_threads' internals) are not a thread's.
await (await start(-1)).terminate();
await new Promise((r) => setTimeout(r, 500));
const baseline = rssBytes();
const workers: Worker[] = [];
const wall: number[] = [];
const cpu: number[] = [];
for (let i = 0; i < threads; i++) {
  const t0 = performance.now();
  const c0 = cpuMs();
  workers.push(await start(i));
  wall.push(performance.now() - t0);
  cpu.push(cpuMs() - c0);
}
await new Promise((r) => setTimeout(r, settleMs));
const rss = rssBytes();
const result = {
  entry: values.entry,
  youngMb: values["young-mb"] ?? ACTOR_YOUNG_GENERATION_MB,
  threads,
  startMsMedian: round(median(wall)),
  startCpuMsMedian: round(median(cpu)),
  rssPerThreadMb: Math.round(((rss - baseline) / threads / 2 ** 20) * 100) / 100,
  baselineRssMb: round(baseline / 2 ** 20),
  rssMb: round(rss / 2 ** 20),
};
process.stdout.write(`${JSON.stringify(result)}\n`);
await Promise.all(workers.map((w) => w.terminate()));
