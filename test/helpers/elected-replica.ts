/**
 * A `fleet-mirror run --leader-elect` process started by a test (test/helpers/fleet.ts's
 * `startProcess`), with its identity and how it ended, and questions about its log: for
 * leader-election.test.ts. (test/helpers/replicas.ts runs replicas as Pods with tokens of
 * their own, for the audited tests.)
 */
import type { ControllerProcess } from "./fleet.ts";
import { eventually } from "./kube.ts";

const TIMEOUT_MS = 60_000;

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** Date.now() when the test saw the exit. */
  readonly at: number;
}

/** A controller replica: its identity, process, and how it ended (recorded from the start). */
export interface Replica {
  readonly identity: string;
  readonly process: ControllerProcess;
  readonly exit: Promise<Exit>;
  exited?: Exit;
}

/** The message of one pino JSON log line; undefined for anything else (e.g. a line still arriving). */
function logMessage(line: string): string | undefined {
  try {
    const msg: unknown = line.startsWith("{") ? (JSON.parse(line) as { msg?: unknown }).msg : undefined;
    return typeof msg === "string" ? msg : undefined;
  } catch {
    return undefined;
  }
}

export function hasLog(replica: Replica, pattern: RegExp): boolean {
  return replica.process.output.split("\n").some((line) => pattern.test(logMessage(line) ?? ""));
}

export async function waitForLog(replica: Replica, pattern: RegExp, timeoutMs = TIMEOUT_MS): Promise<void> {
  await eventually(
    `log line ${pattern} from ${replica.identity}`,
    () => (hasLog(replica, pattern) ? true : undefined),
    timeoutMs,
  );
}

/** The last log lines of a replica, for a failure's diagnostics. */
export function tail(replica: Replica, lines = 40): string {
  const out = replica.process.output.trimEnd().split("\n").slice(-lines).join("\n");
  return `--- ${replica.identity} (exit ${JSON.stringify(replica.exited ?? "none")}) ---\n${out}`;
}
