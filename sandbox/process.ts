/**
 * A long-running child process (etcd, kube-apiserver) that can be stopped, killed
 * and restarted with the same arguments, and that never outlives its parent.
 *
 * Invariant: every child is started through `setpriv --pdeathsig SIGKILL` when that
 * tool exists (util-linux, on every Debian machine), so the kernel kills it when the
 * Node.js process that started it dies for any reason: a failed test, Ctrl-C, or
 * `kill -9` of the test runner. A process `exit` hook covers the orderly paths too.
 *
 * Invariant: every child runs in a process group of its own (`detached`), so a signal a
 * terminal sends to its foreground group (Ctrl-C, hang-up) reaches only the Node.js
 * process, which then stops its children itself, in the order it chooses (the demo:
 * controller, then API servers, then etcd). Were they in the terminal's group, etcd
 * would die at the same moment as the API servers and the controller still using it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants, createWriteStream, type WriteStream } from "node:fs";

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    for (const child of live) child.kill("SIGKILL");
  });
}

function hasSetpriv(): boolean {
  try {
    accessSync("/usr/bin/setpriv", constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
const setpriv = hasSetpriv();

export class ManagedProcess {
  #child: ChildProcess | undefined;
  #exited: Promise<void> = Promise.resolve();
  #log: WriteStream | undefined;

  readonly name: string;
  readonly binary: string;
  readonly args: readonly string[];
  /** stdout and stderr are appended here, across restarts. */
  readonly logPath: string;

  constructor(name: string, binary: string, args: readonly string[], logPath: string) {
    this.name = name;
    this.binary = binary;
    this.args = args;
    this.logPath = logPath;
  }

  get running(): boolean {
    return this.#child !== undefined;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Starts the process; rejects if it cannot be spawned. Idempotent while running. */
  async start(): Promise<void> {
    if (this.#child) return;
    installExitHook();
    this.#log ??= createWriteStream(this.logPath, { flags: "a" });
    const [command, argv] = setpriv
      ? ["/usr/bin/setpriv", ["--pdeathsig", "SIGKILL", "--", this.binary, ...this.args]]
      : [this.binary, [...this.args]];
    const child = spawn(command, argv, { stdio: ["ignore", "pipe", "pipe"], detached: true });
    child.stdout?.pipe(this.#log, { end: false });
    child.stderr?.pipe(this.#log, { end: false });
    this.#child = child;
    live.add(child);
    this.#exited = new Promise((resolve) => {
      child.once("exit", () => {
        live.delete(child);
        if (this.#child === child) this.#child = undefined;
        resolve();
      });
    });
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", (error) => reject(new Error(`${this.name}: cannot start ${this.binary}: ${error.message}`)));
    });
  }

  /** Resolves once the process has exited; SIGKILL after `graceMs` if it ignores `signal`. */
  async stop(signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000): Promise<void> {
    const child = this.#child;
    if (!child) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await this.#exited;
    clearTimeout(timer);
  }

  /** Hard crash: SIGKILL, as `kill -9` would. */
  async kill(): Promise<void> {
    await this.stop("SIGKILL", 0);
  }

  /** Stops the process (SIGKILL after `graceMs`), then closes the log file; call once it will not be started again. */
  async close(graceMs = 10_000): Promise<void> {
    await this.stop("SIGTERM", graceMs);
    const log = this.#log;
    this.#log = undefined;
    if (log) await new Promise<void>((resolve) => log.end(resolve));
  }
}

export interface WaitReadyOptions {
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  /** The word for the state waited for, in the timeout's message. Default "ready". */
  readonly state?: string;
  /** How often to probe. Default 100 ms. */
  readonly intervalMs?: number;
}

/**
 * The start-up wait every sandbox process shares: resolves once `probe` returns true; any
 * other answer is kept as the last one seen. Rejects, naming the process's log file and
 * that answer, when `process` exits first, `signal` aborts or `timeoutMs` passes.
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
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 100)); // polls an observable state
  }
}

/** Resolves once `url` answers 2xx (see `waitReady`). */
export async function waitForHttpOk(
  process: ManagedProcess,
  url: string,
  timeoutMs: number,
  intervalMs = 100,
): Promise<void> {
  await waitReady(
    process,
    async () => {
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
        return response.ok || `${response.status} ${(await response.text()).trim().slice(0, 200)}`;
      } catch (error) {
        return (error as Error).message;
      }
    },
    { timeoutMs, intervalMs },
  );
}
