/**
 * Logging: pino, JSON lines on stdout. Worker threads log through their own pino
 * instance with a `cluster` (or `actor`) binding on every line; lines are written
 * synchronously so a thread that crashes does not lose its last words.
 */
import { type Logger, pino } from "pino";

export type { Logger };

export function createLogger(level: string, bindings: Record<string, unknown> = {}, file?: string): Logger {
  const destination = file
    ? pino.destination({ dest: file, sync: true, append: true, mkdir: true })
    : pino.destination({ dest: 1, sync: true });
  return pino({ level, base: { pid: process.pid, ...bindings } }, destination);
}

/** A logger that discards everything (for in-process tests that do not look at logs). */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
