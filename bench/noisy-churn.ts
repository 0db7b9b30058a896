/**
 * The noisy neighbour of bench/noisy-neighbour.ts as another machine would be: the
 * noisy remote's API server and the client that churns it run in processes of their
 * own (noisy-churn-child.ts for the client), kept to one CPU at a lower priority
 * (nice 10). On a real fleet the noisy cluster's API server runs on that cluster's
 * machines and takes no CPU from the controller's node; on the bench's machine every
 * API server shares the controller's CPUs, and without this the figure would weigh the
 * machine's cost of the neighbour's own API server rather than what the controller
 * lets one cluster do to the others. The noisy API server's etcd is one of its own
 * (bench/noisy-neighbour.ts starts it so), confined with it: on the shared etcd its
 * 200 writes a second would load the store every other cluster's API server uses.
 */
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { setPriority } from "node:os";
import { ChildRpc } from "./child-rpc.ts";
import { cpuSplit, pin } from "./cpu-affinity.ts";

export type ChurnCommand =
  | { readonly id: number; readonly op: "connect"; readonly kubeconfig: string }
  | {
      readonly id: number;
      readonly op: "churn";
      readonly namespace: string;
      readonly services: number;
      readonly perS: number;
      readonly durationMs: number;
    };

export type ChurnReply =
  | { readonly id: number; readonly ok: true; readonly touches: number }
  | { readonly id: number; readonly ok: false; readonly error: string };

/** The CPU the noisy side may use, and its nice value. */
export const NOISY_CPU = "0";
export const NOISY_NICE = 10;

export class ChurnProcess {
  readonly #rpc: ChildRpc<ChurnCommand, ChurnReply>;

  private constructor(rpc: ChildRpc<ChurnCommand, ChurnReply>) {
    this.#rpc = rpc;
  }

  /** Forks the churn process, connected to the API server of `kubeconfig` (admin, inline credentials). */
  static async start(kubeconfig: string): Promise<ChurnProcess> {
    const rpc = await ChildRpc.open<ChurnCommand, ChurnReply>(
      new URL("./noisy-churn-child.ts", import.meta.url).pathname,
      "noisy churn",
      { op: "connect", kubeconfig },
    );
    return new ChurnProcess(rpc);
  }

  get pid(): number | undefined {
    return this.#rpc.pid;
  }

  /** Touches for `durationMs`; resolves with the touches made. */
  async churn(namespace: string, services: number, perS: number, durationMs: number): Promise<number> {
    const reply = await this.#rpc.send({ op: "churn", namespace, services, perS, durationMs });
    return reply.ok ? reply.touches : 0;
  }

  async stop(): Promise<void> {
    await this.#rpc.stop();
  }
}

/**
 * Keeps every thread of `pids` to NOISY_CPU at nice NOISY_NICE (threads made later
 * inherit both). False, with nothing changed, when the machine has one CPU or `taskset`
 * is missing: the caller records that the noisy side shared the CPUs.
 */
export function confineNoisySide(pids: readonly number[]): boolean {
  if (cpuSplit() === undefined) return false;
  try {
    execFileSync("taskset", ["--version"], { stdio: "ignore" });
  } catch {
    return false;
  }
  pin(pids, NOISY_CPU);
  for (const pid of pids) {
    for (const task of readdirSync(`/proc/${pid}/task`)) setPriority(Number(task), NOISY_NICE);
  }
  return true;
}
