/**
 * The logger of a remote-cluster actor thread: pino's lines (src/log/json-lines.ts) on
 * the thread's one bounded destination, its `process.stdout`, which the main thread
 * relays (src/log.ts, `relayThreadOutput`). This module and what it imports load no npm
 * package, so an actor thread's bundle holds no logging library
 * (test/unit/thread-bundles.test.ts).
 */
import { JsonLineLogger, type LineLogger } from "./json-lines.ts";
import { threadDestination } from "./thread-destination.ts";

/**
 * A logger of this worker thread whose lines carry `pid` and `bindings`, as
 * `createLogger(level, bindings)` of src/log.ts would write them.
 * @throws when `level` is not a level name or `silent`.
 */
export function createThreadLogger(level: string, bindings: Record<string, unknown> = {}): LineLogger {
  const destination = threadDestination();
  return new JsonLineLogger(
    level,
    { pid: process.pid, ...bindings },
    { write: (line) => destination.write(line), now: Date.now },
  );
}
