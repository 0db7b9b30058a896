/**
 * Gateways' probe endpoints for the bench: real HTTP servers, one per address:port pair,
 * in a child process of their own (probe-servers-child.ts), so that their CPU is never
 * counted with the process being measured. The addresses must be local already (see
 * sandbox/local-addresses.ts); nothing leaves the machine.
 *
 * A pair answers `ok` (200) from the start; `setMode` switches addresses to `stopped`
 * (connections refused: the gateway is gone), `hang` (accepts, never answers) or back
 * to `ok`, and resolves once the child has done it.
 */
import { type LocalRoute, makeLocal } from "../sandbox/local-addresses.ts";
import { ChildRpc } from "./child-rpc.ts";
import { progress } from "./harness.ts";

export interface ProbePair {
  readonly address: string;
  readonly port: number;
}

export type PairMode = "ok" | "stopped" | "hang";

export type ProbeServersCommand =
  | { readonly id: number; readonly op: "listen"; readonly pairs: readonly ProbePair[] }
  | { readonly id: number; readonly op: "mode"; readonly addresses: readonly string[]; readonly mode: PairMode }
  | { readonly id: number; readonly op: "probed" };

export type ProbeServersReply =
  | { readonly id: number; readonly ok: true; readonly probed?: number; readonly received?: number }
  | { readonly id: number; readonly ok: false; readonly error: string };

export class ProbeServers {
  readonly #rpc: ChildRpc<ProbeServersCommand, ProbeServersReply>;

  private constructor(rpc: ChildRpc<ProbeServersCommand, ProbeServersReply>) {
    this.#rpc = rpc;
  }

  /** Forks the child and has every pair listening (answering 200) before resolving. */
  static async start(pairs: readonly ProbePair[]): Promise<ProbeServers> {
    const rpc = await ChildRpc.open<ProbeServersCommand, ProbeServersReply>(
      new URL("./probe-servers-child.ts", import.meta.url).pathname,
      "probe servers",
      { op: "listen", pairs },
    );
    return new ProbeServers(rpc);
  }

  /** Switches every pair of `addresses`; resolves once done. */
  async setMode(addresses: readonly string[], mode: PairMode): Promise<void> {
    await this.#rpc.send({ op: "mode", addresses, mode });
  }

  /** How many pairs have received at least one probe, and how many requests all pairs received so far. */
  async probed(): Promise<{ pairs: number; requests: number }> {
    const reply = await this.#rpc.send({ op: "probed" });
    return reply.ok ? { pairs: reply.probed ?? 0, requests: reply.received ?? 0 } : { pairs: 0, requests: 0 };
  }

  async stop(): Promise<void> {
    await this.#rpc.stop();
  }
}

/**
 * 203.0.113.0/24 made local for a scenario's probe servers; without the right to add the
 * route (CAP_NET_ADMIN), the note the scenario records with its null figures instead.
 */
export async function localProbeRange(scenario: string): Promise<{ route: LocalRoute } | { note: string }> {
  try {
    return { route: await makeLocal("203.0.113.0/24") };
  } catch (error) {
    const note = `not measured: ${(error as Error).message} (needs CAP_NET_ADMIN)`;
    progress(`${scenario}: ${note}`);
    return { note };
  }
}
