/**
 * Where an actor's thread entry lives, and the one place a worker thread is created.
 * The supervisor runs from TypeScript sources (tests, Node's type stripping) or from
 * compiled JavaScript (dist/, the image); the entry has the same extension as this
 * module in both cases.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type ResourceLimits, Worker } from "node:worker_threads";
import { relayThreadOutput } from "../log.ts";

export type ActorKind = "remote-cluster" | "local-writer";

export function workerEntry(kind: ActorKind): URL {
  const extension = import.meta.url.endsWith(".ts") ? "ts" : "js";
  const url = new URL(`../../workers/${kind}/entry.${extension}`, import.meta.url);
  if (!existsSync(fileURLToPath(url))) throw new Error(`worker entry not found: ${fileURLToPath(url)}`);
  return url;
}

/**
 * Starts a thread running `kind`'s entry. `name` shows in heap snapshots and
 * diagnostics. Every thread of the process is created here. The thread's log lines
 * (its `process.stdout`) are relayed to the main thread's one log destination
 * (`logFile`, or standard output), so no thread ever writes the log's fd itself.
 */
export function spawnWorker(
  kind: ActorKind,
  name: string,
  logFile: string | undefined,
  resourceLimits?: ResourceLimits,
): Worker {
  const worker = new Worker(workerEntry(kind), {
    name,
    ...(resourceLimits ? { resourceLimits } : {}),
    stdout: true,
    stderr: false,
  });
  relayThreadOutput(worker, logFile);
  return worker;
}
