/**
 * The chaos run's gateway probe servers (SPEC §10): one real HTTP server per address of
 * a /28 made local for the run (sandbox/local-addresses.ts), all on one port, which every
 * gateway of the run names as its `mc-probe` port. Schedule steps make an address die
 * (server stopped: refused; 503; or accepting and never answering) and recover; the
 * oracle reads `deadAddresses()` as they finally are.
 *
 * Without CAP_NET_ADMIN (no route can be added) or when every /28 is held by another
 * run, `start` returns the reason instead, and the run goes on unprobed.
 */
import { claimLocal, type LocalRoute } from "../../sandbox/local-addresses.ts";
import { ProbeServer } from "../../sandbox/probe-server.ts";
import type { ProbeFailure } from "./steps.ts";

/** /28s a chaos run may claim, first free one wins (two runs at once get different ones). */
const PREFIXES = ["203.0.113.240/28", "203.0.113.224/28", "203.0.113.208/28"];
/** Addresses per run: few enough that a dying address often hits a gateway in use. */
const ADDRESSES = 6;

export class ChaosProbes {
  readonly #route: LocalRoute;
  readonly #servers: Map<string, ProbeServer>;
  /** Addresses made to fail, and how. */
  readonly #failing = new Map<string, ProbeFailure>();

  private constructor(route: LocalRoute, servers: Map<string, ProbeServer>) {
    this.#route = route;
    this.#servers = servers;
  }

  /** The probe servers, or why there are none. */
  static async start(): Promise<ChaosProbes | { readonly unavailable: string }> {
    let route: LocalRoute | undefined;
    try {
      route = await claimLocal(PREFIXES);
    } catch (error) {
      return { unavailable: error instanceof Error ? error.message : String(error) };
    }
    if (!route) return { unavailable: `every one of ${PREFIXES.join(", ")} is held by another run` };
    const [a, b, c, d] = (route.range.split("/")[0] ?? "").split(".").map(Number);
    const servers = new Map<string, ProbeServer>();
    try {
      let port = 0;
      for (let i = 1; i <= ADDRESSES; i++) {
        const server = await ProbeServer.start(`${a}.${b}.${c}.${(d ?? 0) + i}`, port);
        port = server.port; // the first server's free port, then the same on every address
        servers.set(server.address, server);
      }
    } catch (error) {
      for (const server of servers.values()) await server.stop();
      await route.release();
      throw error;
    }
    return new ChaosProbes(route, servers);
  }

  /** The addresses with a probe server, in order. */
  get addresses(): string[] {
    return [...this.#servers.keys()];
  }

  /** The port every probe server listens on (the gateways' `mc-probe` port). */
  get port(): number {
    return [...this.#servers.values()][0]?.port ?? 0;
  }

  async fail(address: string, how: ProbeFailure): Promise<void> {
    const server = this.#servers.get(address);
    if (!server) throw new Error(`no probe server at ${address}`);
    await this.recover(address);
    this.#failing.set(address, how);
    if (how === "stop") await server.stop();
    else server.mode = how;
  }

  async recover(address: string): Promise<void> {
    const server = this.#servers.get(address);
    if (!server) throw new Error(`no probe server at ${address}`);
    this.#failing.delete(address);
    server.mode = "ok";
    await server.restart();
  }

  /** Addresses whose probes fail now. */
  deadAddresses(): Set<string> {
    return new Set(this.#failing.keys());
  }

  describe(): string {
    return `probing gateways at ${this.#route.range} (${this.addresses.length} addresses, port ${this.port})`;
  }

  async stop(): Promise<void> {
    for (const server of this.#servers.values()) await server.stop();
    await this.#route.release();
  }
}
