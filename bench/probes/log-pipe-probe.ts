/**
 * How long does a stuck log pipe block the controller's threads? Runs a child process
 * whose stdout is a pipe this process stops reading for `--stuck` seconds; in the child
 * the main thread and `--threads` worker threads log through `createLogger` (src/log.ts)
 * at `--rate` lines/s each, threads made the way the supervisor makes actor threads. Each
 * thread measures the lag of a 100 ms interval timer; the child reports over IPC (not
 * through the pipe under test). Then this process reads the pipe again and counts lines:
 * well-formed JSON, malformed (split or interleaved), and the "dropped" report lines.
 *
 * Usage: node bench/probes/log-pipe-probe.ts [--threads 4] [--rate 50] [--stuck 10] [--seconds 12]
 */
import { fork } from "node:child_process";
import { once } from "node:events";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { createLogger, relayThreadOutput } from "../../src/log.ts";

interface Lag {
  readonly thread: string;
  readonly maxLagMs: number;
  readonly lines: number;
}

/** Logs `rate` lines/s (in 10 ms ticks) for `seconds`, measuring a 100 ms timer's lag. */
async function logAndMeasure(thread: string, rate: number, seconds: number): Promise<Lag> {
  const logger = createLogger("info", { actor: thread });
  let maxLagMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    maxLagMs = Math.max(maxLagMs, now - last - 100);
    last = now;
  }, 100);
  let lines = 0;
  const started = performance.now();
  const ticker = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    for (; lines < due; lines++)
      logger.info({ cluster: `cluster-${lines % 50}`, namespace: "shop", name: `svc-${lines}` }, "mirror written");
  }, 10);
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  clearInterval(ticker);
  clearInterval(timer);
  return { thread, maxLagMs: Math.round(maxLagMs), lines };
}

interface Options {
  readonly threads: number;
  readonly rate: number;
  readonly stuck: number;
  readonly seconds: number;
}

function parseOptions(argv: readonly string[]): Options {
  const value = (name: string, fallback: number): number => {
    const i = argv.indexOf(`--${name}`);
    const n = i >= 0 ? Number(argv[i + 1]) : fallback;
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name}: a number >= 0`);
    return n;
  };
  return {
    threads: value("threads", 4),
    rate: value("rate", 50),
    stuck: value("stuck", 10),
    seconds: value("seconds", 12),
  };
}

async function child(options: Options): Promise<void> {
  const workers: Promise<Lag>[] = [];
  for (let i = 0; i < options.threads; i++) {
    // As the supervisor makes actor threads (src/supervisor/supervisor.ts).
    const worker = new Worker(new URL(import.meta.url), {
      workerData: { thread: `remote-cluster/${i}`, options },
      stdout: true,
      stderr: false,
    });
    relayThreadOutput(worker);
    workers.push(once(worker, "message").then(([lag]) => lag as Lag));
  }
  const main = await logAndMeasure("supervisor", options.rate, options.seconds);
  const lags = [main, ...(await Promise.all(workers))];
  process.send?.({ lags, rssMb: Math.round(process.memoryUsage().rss / 2 ** 20) });
  process.disconnect?.();
}

async function parent(options: Options): Promise<void> {
  const proc = fork(new URL(import.meta.url).pathname, ["--child", ...process.argv.slice(2)], {
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  const stdout = proc.stdout;
  if (!stdout) throw new Error("no stdout pipe");
  // Nobody reads the pipe for `stuck` seconds: it fills (64 KiB on Linux) and stays full.
  stdout.pause();
  const result = once(proc, "message");
  await new Promise((resolve) => setTimeout(resolve, options.stuck * 1000));
  const text: string[] = [];
  stdout.setEncoding("utf8").on("data", (chunk: string) => text.push(chunk));
  stdout.resume();
  const [report] = (await result) as [{ lags: Lag[]; rssMb: number }];
  await once(proc, "exit");
  const lines = text
    .join("")
    .split("\n")
    .filter((l) => l !== "");
  let wellFormed = 0;
  let malformed = 0;
  let droppedReported = 0;
  for (const line of lines) {
    try {
      const parsed = JSON.parse(line) as { msg?: unknown; droppedLines?: unknown };
      wellFormed += 1;
      if (typeof parsed.droppedLines === "number") droppedReported += parsed.droppedLines;
    } catch {
      malformed += 1;
    }
  }
  const logged = report.lags.reduce((n, l) => n + l.lines, 0);
  const out = {
    options,
    maxLagMs: Object.fromEntries(report.lags.map((l) => [l.thread, l.maxLagMs])),
    logged,
    read: { wellFormed, malformed, droppedReported },
    childRssMb: report.rssMb,
  };
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
}

if (!isMainThread) {
  const { thread, options } = workerData as { thread: string; options: Options };
  parentPort?.postMessage(await logAndMeasure(thread, options.rate, options.seconds));
} else if (process.argv.includes("--child")) {
  await child(parseOptions(process.argv));
} else {
  await parent(parseOptions(process.argv));
}
