/**
 * The start-up wait every sandbox process shares: poll a probe every 100 ms until it says
 * ready, failing as soon as the process has exited, the signal aborts, or the time runs
 * out, with the probe's last answer and the process's log in the message.
 */
import type { ManagedProcess } from "./process.ts";

export interface WaitReadyOptions {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** The word for the state waited for, in the timeout's message: "ready", "healthy". */
  readonly state?: string;
}

/**
 * Resolves once `probe` returns true; any other answer is kept as the last one seen.
 * Rejects when `process` is not running, `signal` aborts or `timeoutMs` passes.
 */
export async function waitReady(
  process: ManagedProcess,
  probe: () => Promise<true | string>,
  options: WaitReadyOptions,
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let last = "no answer";
  for (;;) {
    const answer = await probe();
    if (answer === true) return;
    last = answer;
    options.signal?.throwIfAborted();
    if (!process.running) throw new Error(`${process.name} exited during start-up; see ${process.logPath}`);
    if (Date.now() > deadline)
      throw new Error(
        `${process.name} not ${options.state ?? "ready"} after ${options.timeoutMs} ms (last: ${last}); see ${process.logPath}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100)); // polls an observable state
  }
}
