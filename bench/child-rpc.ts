/**
 * A bench helper process driven over IPC: the parent forks an entry file and sends it
 * numbered commands; the child answers each with a reply carrying the same id (`ok:
 * false` with the error's message when its handler threw). Used where a bench must keep
 * some work off the process it measures (the probe servers, the noisy neighbour's churn).
 */
import { type ChildProcess, fork } from "node:child_process";

/** What every command and reply carries. */
export interface Numbered {
  readonly id: number;
}
export type Reply = Numbered & ({ readonly ok: true } | { readonly ok: false; readonly error: string });

/** A command before the handle numbers it (each member of a union less its id). */
export type Unsent<C> = C extends Numbered ? Omit<C, "id"> : never;

export class ChildRpc<C extends Numbered, R extends Reply> {
  readonly #child: ChildProcess;
  readonly #waiting = new Map<number, { resolve: (r: R) => void; reject: (e: Error) => void }>();
  #nextId = 1;

  /** Forks `entry` (a path) with an IPC channel; `name` says which helper in errors. */
  constructor(entry: string, name: string) {
    this.#child = fork(entry, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    this.#child.on("message", (reply: R) => {
      const waiter = this.#waiting.get(reply.id);
      this.#waiting.delete(reply.id);
      if (!waiter) return;
      if (reply.ok) waiter.resolve(reply);
      else waiter.reject(new Error(`${name}: ${reply.error}`));
    });
    this.#child.on("exit", (code, signal) => {
      for (const waiter of this.#waiting.values())
        waiter.reject(new Error(`${name} exited (${code ?? signal}) before answering`));
      this.#waiting.clear();
    });
  }

  /** Forks `entry` and sends it `first` (its set-up); the child is stopped again if that fails. */
  static async open<C extends Numbered, R extends Reply>(
    entry: string,
    name: string,
    first: Unsent<C>,
  ): Promise<ChildRpc<C, R>> {
    const rpc = new ChildRpc<C, R>(entry, name);
    try {
      await rpc.send(first);
    } catch (error) {
      await rpc.stop();
      throw error;
    }
    return rpc;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Sends `command` with the next id; resolves with its reply (rejects on `ok: false` or the child's exit). */
  send(command: Unsent<C>): Promise<R> {
    const id = this.#nextId++;
    return new Promise<R>((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      this.#child.send({ ...command, id });
    });
  }

  /** Ends the child (SIGTERM) and resolves once it has exited. */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.#child.once("exit", () => resolve()));
    this.#child.kill();
    await exited;
  }
}

/**
 * The child's side: each command goes to `handle`, whose reply (or thrown error, as `ok:
 * false`) is sent back with the command's id. The parent's exit closes the IPC channel,
 * and the child leaves with it (after `onDisconnect`), never orphaned.
 */
export function serveCommands<C extends Numbered>(
  handle: (command: C) => Promise<Reply>,
  onDisconnect = () => {},
): void {
  process.on("message", (command: C) => {
    handle(command).then(
      (reply) => process.send?.(reply),
      (error: unknown) =>
        process.send?.({ id: command.id, ok: false, error: error instanceof Error ? error.message : String(error) }),
    );
  });
  process.on("disconnect", () => {
    onDisconnect();
    process.exit(0);
  });
}
