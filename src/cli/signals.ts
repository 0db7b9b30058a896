/**
 * SIGTERM/SIGINT/SIGHUP handling that starts before anything heavy is loaded.
 *
 * Invariant: imported first by main.ts, which loads every command dynamically
 * afterwards, so a signal that arrives while modules load or config is parsed is
 * recorded (not fatal), and `untilSignal()` then resolves at once: the command stops
 * cleanly and exits 0 instead of being killed by the signal.
 *
 * SIGHUP (the terminal closed) is a request to stop like the other two: no command
 * re-reads its configuration on it, and being killed by it would skip the orderly stop.
 */
const waiters = new Set<(signal: NodeJS.Signals) => void>();
let received: NodeJS.Signals | undefined;

function onSignal(signal: NodeJS.Signals): void {
  received ??= signal;
  for (const wake of waiters) wake(signal);
  waiters.clear();
}

process.on("SIGTERM", onSignal);
process.on("SIGINT", onSignal);
process.on("SIGHUP", onSignal);

/** Resolves with the first SIGTERM/SIGINT/SIGHUP received, whether before or after the call. */
export function untilSignal(): Promise<NodeJS.Signals> {
  if (received) return Promise.resolve(received);
  return new Promise((resolve) => waiters.add(resolve));
}
