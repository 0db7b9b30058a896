/**
 * The demo's gateways as real, probed endpoints (SPEC §10): their addresses are made local
 * to this machine (a `local` route on `lo` for a /28 of 198.51.100.0/24, claimed for this
 * demo alone: see local-addresses.ts) and each gateway address has a real HTTP probe
 * server on it, and a traffic server on the gateway port (4143) answering with the name
 * of the cluster the gateway stands for (where the traffic path, traffic.ts, delivers a
 * mirror's connections). The script stops both and starts them again to show a gateway
 * dying and coming back. One more server stands for the local cluster's own pod of
 * `shop/search` (demo-tiers.ts), answering `local`.
 *
 * Without the right to add the route (not root, no CAP_NET_ADMIN) or with every candidate
 * /28 held by someone else, the demo runs unprobed: the same addresses, no probe servers,
 * and gateways without an `mc-probe` port — a gateway whose address is not local is never
 * probed, so nothing is ever sent off the machine.
 *
 * Invariant: a probe server listens only on an address inside the claimed route, and the
 * route is removed by stop() (which the demo calls on every way out it handles), or, if the
 * process exits without it (an uncaught exception), by a synchronous `ip route del` on
 * its `exit` event. Only SIGKILL leaves the route; the next demo then claims another /28.
 */
import { execFileSync } from "node:child_process";
import { LOCAL_POD_PORT } from "./demo-tiers.ts";
import { claimLocal, type LocalRoute } from "./local-addresses.ts";
import { ProbeServer } from "./probe-server.ts";

export type GatewayCluster = "east" | "west";

/**
 * The /28s the demo may claim, the first free one wins (a demo left running, or killed
 * with SIGKILL, holds one). Inside 198.51.100.0/24, apart from the addresses tests use
 * (.1–.63): a test holding the whole /24 and a demo holding its /28 never remove each
 * other's addresses.
 */
export const DEMO_PREFIXES = ["198.51.100.64/28", "198.51.100.80/28", "198.51.100.96/28", "198.51.100.112/28"];
/** Seconds between probes (annotation `mirror.linkerd.io/probe-period`): a dead gateway shows in about 3 s. */
export const DEMO_PROBE_PERIOD_SECONDS = 1;

/** Offsets in the /28: east starts at .1 and moves among its pool, west stays at .2. */
const EAST_POOL = [1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
const WEST_OFFSET = 2;
/** The local cluster's own pod of `shop/search` (demo-tiers.ts), no gateway's. */
const LOCAL_POD_OFFSET = 14;
/** The sandbox node's address (.15, no gateway's): kube-proxy's node IP, where its CoreDNS listens too. */
const NODE_OFFSET = 15;
/** The gateway port (the gateways' `incoming-port`): mirrors' endpoints carry it. */
export const GATEWAY_PORT = 4143;

function addressIn(prefix: string, offset: number): string {
  const [net = ""] = prefix.split("/");
  const octets = net.split(".").map(Number);
  return [...octets.slice(0, 3), (octets[3] ?? 0) + offset].join(".");
}

export class DemoGateways {
  readonly #prefix: string;
  readonly #route: LocalRoute | undefined;
  readonly #addresses: Record<GatewayCluster, string>;
  /** The server answering each gateway's current address (probed only). */
  readonly #servers = new Map<GatewayCluster, ProbeServer>();
  /** The traffic server on each gateway's current address and GATEWAY_PORT (probed only). */
  readonly #traffic = new Map<GatewayCluster, ProbeServer>();
  /** The local pod's server (probed only): it answers `local` on LOCAL_POD_PORT. */
  #localPod: ProbeServer | undefined;
  /** Servers of addresses a gateway left: stopped at its next move, once no probe can still reach them. */
  readonly #retired: ProbeServer[] = [];
  #eastMoves = 0;
  /** The `exit` safety net, present while the route is held. */
  #onExit: (() => void) | undefined;
  /** What start() found, in one line for the demo's output. */
  readonly note: string;

  private constructor(prefix: string, route: LocalRoute | undefined, note: string) {
    this.#prefix = prefix;
    this.#route = route;
    this.note = note;
    this.#addresses = { east: addressIn(prefix, EAST_POOL[0] ?? 1), west: addressIn(prefix, WEST_OFFSET) };
  }

  /**
   * Claims a /28 and starts a probe server per gateway address; or, when no route can be
   * added, gateways that are not probed (never throws for that: `note` says why).
   * @throws when a probe server cannot listen (its route is removed first).
   */
  static async start(): Promise<DemoGateways> {
    let route: LocalRoute | undefined;
    let why: string;
    try {
      route = await claimLocal(DEMO_PREFIXES);
      why = `every one of ${DEMO_PREFIXES.join(", ")} is held already (another demo running, or one killed?)`;
    } catch (error) {
      why = `${(error as Error).message}${/not permitted/i.test((error as Error).message) ? " (needs root or CAP_NET_ADMIN)" : ""}`;
    }
    if (!route) {
      const prefix = DEMO_PREFIXES[0] ?? "198.51.100.64/28";
      return new DemoGateways(prefix, undefined, `Gateways are not probed and the failover steps are skipped: ${why}.`);
    }
    const gateways = new DemoGateways(
      route.range,
      route,
      `Gateway addresses ${route.range} made local (a route on lo, removed on exit); a probe server answers on each gateway address.`,
    );
    const held = route.range;
    gateways.#onExit = () => {
      try {
        execFileSync("ip", ["-4", "route", "del", "local", held, "dev", "lo"], { stdio: "ignore" });
      } catch (error) {
        process.stderr.write(
          `demo: route ${held} NOT removed (${(error as Error).message}); remove it with: ip route del local ${held} dev lo\n`,
        );
      }
    };
    process.once("exit", gateways.#onExit);
    try {
      for (const cluster of ["east", "west"] as const) {
        gateways.#servers.set(cluster, await ProbeServer.start(gateways.#addresses[cluster]));
        gateways.#traffic.set(cluster, await ProbeServer.start(gateways.#addresses[cluster], GATEWAY_PORT, cluster));
      }
      gateways.#localPod = await ProbeServer.start(gateways.localPodAddress, LOCAL_POD_PORT, "local");
    } catch (error) {
      await gateways.stop();
      throw error;
    }
    return gateways;
  }

  /** True when the gateways have probe servers (and so `mc-probe` ports). */
  get probed(): boolean {
    return this.#route !== undefined;
  }

  /** The prefix made local, if any. */
  get route(): string | undefined {
    return this.#route?.range;
  }

  address(cluster: GatewayCluster): string {
    return this.#addresses[cluster];
  }

  /** The address the sandbox's node stands at (local while the route is held); no gateway's. */
  get nodeAddress(): string {
    return addressIn(this.#prefix, NODE_OFFSET);
  }

  /** The address of the local cluster's own pod of `shop/search` (local while the route is held); no gateway's. */
  get localPodAddress(): string {
    return addressIn(this.#prefix, LOCAL_POD_OFFSET);
  }

  /** The gateway's `mc-probe` port; undefined when not probed. */
  probePort(cluster: GatewayCluster): number | undefined {
    return this.#servers.get(cluster)?.port;
  }

  /**
   * East's next address, with its probe server already listening there on the same port
   * (the gateway's `mc-probe` port does not change). The server of the address before is
   * kept until the next move: the controller probes the old address until it sees the change.
   */
  async moveEast(): Promise<string> {
    for (const old of this.#retired.splice(0)) await old.stop();
    this.#eastMoves += 1;
    const next = addressIn(this.#prefix, EAST_POOL[this.#eastMoves % EAST_POOL.length] ?? 1);
    const current = this.#servers.get("east");
    if (current) {
      this.#servers.set("east", await ProbeServer.start(next, current.port));
      this.#retired.push(current);
    }
    const traffic = this.#traffic.get("east");
    if (traffic) {
      this.#traffic.set("east", await ProbeServer.start(next, GATEWAY_PORT, "east"));
      this.#retired.push(traffic);
    }
    this.#addresses.east = next;
    return next;
  }

  /** The gateway dies: its probe and traffic servers stop (probes and connections are refused). */
  async stopAnswering(cluster: GatewayCluster): Promise<void> {
    await Promise.all([this.#servers.get(cluster)?.stop(), this.#traffic.get(cluster)?.stop()]);
  }

  /** The gateway comes back: its servers listen again on the same address and ports. */
  async answerAgain(cluster: GatewayCluster): Promise<void> {
    await Promise.all([this.#servers.get(cluster)?.restart(), this.#traffic.get(cluster)?.restart()]);
  }

  /**
   * Stops every probe server, then removes the route; says what it did. Idempotent.
   * A route that cannot be removed is said, not thrown: the stop goes on.
   */
  async stop(): Promise<string> {
    const servers = [
      ...this.#servers.values(),
      ...this.#traffic.values(),
      ...this.#retired.splice(0),
      ...(this.#localPod ? [this.#localPod] : []),
    ];
    this.#servers.clear();
    this.#traffic.clear();
    this.#localPod = undefined;
    await Promise.all(servers.map((s) => s.stop()));
    if (!this.#route) return "";
    if (this.#onExit) process.removeListener("exit", this.#onExit);
    this.#onExit = undefined;
    try {
      await this.#route.release();
      return `probe servers stopped, route ${this.#route.range} removed`;
    } catch (error) {
      return `route ${this.#route.range} NOT removed (${(error as Error).message}; remove it with: ip route del local ${this.#route.range} dev lo)`;
    }
  }
}
