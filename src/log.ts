/**
 * Logging: pino, JSON lines on stdout (or `--log-file`), one line per event, and no
 * thread ever waits for the log's reader.
 *
 * One writer per destination: the main thread. Its loggers write into one
 * `BoundedDestination` per target (standard output, or a file) shared by every logger of
 * the process; worker threads log to their own `process.stdout`, which Node forwards to
 * the main thread as a stream, and `relayThreadOutput` feeds that stream, line by line,
 * into the same destination. A destination queues at most 4 MiB: when the pipe does not
 * drain, further lines are dropped whole, counted (`droppedLogLines()`, the metric
 * `fleet_mirror_log_lines_dropped_total`) and reported by one line in the stream once
 * there is room again. Lines are never split or interleaved: each is handed to the one
 * writer whole. A thread's own output is bounded too (1 MiB the main thread has not read
 * yet, `ThreadDestination`); its drops are reported by a line that the relay counts.
 *
 * What reaches the destination: a worker thread's lines written before it ends, however
 * it ends (exception, `process.exit`, `terminate()`, out of memory): Node delivers a
 * thread's forwarded output before its 'exit' event. At process exit (`process.exit`,
 * an uncaught exception) what is queued is written synchronously as far as the
 * destination takes it without waiting; a worker's lines still on their way to the main
 * thread are lost then, and so is everything on SIGKILL.
 */
import { mkdirSync, openSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { isMainThread, type Worker } from "node:worker_threads";
import { type Logger, pino } from "pino";
import { fdBackend, stdoutBackend } from "./log/backends.ts";
import { BoundedDestination } from "./log/bounded-destination.ts";
import { reportedDrops, threadDestination } from "./log/thread-destination.ts";

export type { Logger };

/** A thread's unterminated output is cut off (dropped, counted) beyond this many characters. */
const MAX_PARTIAL_LINE = 1024 * 1024;

/** This process's destinations, by target ("stdout" or an absolute file path). */
const destinations = new Map<string, BoundedDestination>();
/** Lines worker threads dropped before they reached the main thread (from their report lines). */
let droppedInThreads = 0;

function destinationFor(file: string | undefined): BoundedDestination {
  const target = file === undefined ? "stdout" : resolve(file);
  let destination = destinations.get(target);
  if (destination) return destination;
  let backend: ReturnType<typeof stdoutBackend>;
  if (file === undefined) backend = stdoutBackend();
  else {
    mkdirSync(dirname(target), { recursive: true });
    backend = fdBackend(openSync(target, "a"));
  }
  destination = new BoundedDestination({
    backend,
    onError: (error) =>
      process.stderr.write(
        `fleet-mirror: writing the log to ${target} failed (${error.message}); lines are dropped until it works again\n`,
      ),
  });
  if (destinations.size === 0) process.once("exit", flushDestinations);
  destinations.set(target, destination);
  return destination;
}

function flushDestinations(): void {
  for (const destination of destinations.values()) destination.flushSync();
}

/**
 * A logger whose lines carry `pid` and `bindings`. On the main thread it writes into the
 * process's destination for `file` (standard output when undefined); on a worker thread
 * it writes to the thread's `process.stdout`, and the main thread decides where that goes
 * (`relayThreadOutput`): `file` is not used there.
 * @throws when `file` cannot be opened for appending.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, file?: string): Logger {
  const destination = isMainThread ? destinationFor(file) : threadDestination();
  return pino({ level, base: { pid: process.pid, ...bindings } }, destination);
}

/**
 * Feeds the output of `worker` (created with `stdout: true`) into this process's
 * destination for `file` (standard output when undefined), whole lines only. Reads as
 * fast as the thread writes, so the thread never waits for the log either; the bound is
 * the destination's.
 */
export function relayThreadOutput(worker: Worker, file?: string): void {
  let partial = "";
  const stream = worker.stdout.setEncoding("utf8");
  stream.on("data", (chunk: string) => {
    const text = partial + chunk;
    const end = text.lastIndexOf("\n") + 1;
    partial = text.slice(end);
    if (end > 0) {
      const lines = end === text.length ? text : text.slice(0, end);
      if (lines.includes('"droppedLines":'))
        for (const line of lines.split("\n")) droppedInThreads += reportedDrops(line);
      destinationFor(file).write(lines);
    }
    if (partial.length > MAX_PARTIAL_LINE) {
      destinationFor(file).discard(1);
      partial = "";
    }
  });
  stream.on("end", () => {
    if (partial !== "") destinationFor(file).write(`${partial}\n`);
    partial = "";
  });
}

/** Log lines this process dropped because a destination did not take them in time (never decreases). */
export function droppedLogLines(): number {
  let n = droppedInThreads;
  for (const destination of destinations.values()) n += destination.dropped;
  return n;
}

/** A logger that discards everything (for in-process tests that do not look at logs). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
