/**
 * The demo's traffic line: a client Pod of the local cluster (the sandbox's traffic path,
 * traffic.ts: a network namespace, CoreDNS, kube-proxy in nftables mode) calls the
 * fleet-wide Service `search-federated` a few times a second, and the table shows who
 * answered over the last few seconds, e.g.
 *
 *   traffic: search-federated, last 3 s: local 6, west 6 (4 requests/s from a client Pod via CoreDNS and kube-proxy)
 *
 * so a person watches west's share drop to zero when its gateway dies (after a few
 * refusals) while east, the next priority tier (demo-tiers.ts), takes over, and west's
 * come back after the failback delay.
 *
 * Without root, without probed gateways, or while another sandbox's traffic path holds
 * this machine (traffic-host.ts's lock; the demo does not wait for it), the demo runs
 * without the line and says why in one line.
 */
import type { ControlPlane } from "./control-plane.ts";
import type { DemoGateways } from "./demo-gateways.ts";
import { type Outcome, TrafficPath, trafficUnavailable } from "./traffic.ts";
import { describeTally, tally } from "./traffic-rounds.ts";

export const TRAFFIC_NAME = "search-federated";
const PORT = 80;
const PER_SECOND = 4;
const WINDOW_MS = 3_000;

export class DemoTraffic {
  readonly #path: TrafficPath;
  readonly #seen: Array<{ readonly at: number; readonly outcome: Outcome }> = [];
  #timer: NodeJS.Timeout | undefined;
  #inFlight = false;

  private constructor(path: TrafficPath) {
    this.#path = path;
  }

  /** The traffic line's sender, or undefined and why not (the demo's one line). */
  static async start(
    plane: ControlPlane,
    gateways: DemoGateways,
  ): Promise<{ readonly traffic?: DemoTraffic; readonly note: string }> {
    const skipped = (why: string) => ({ note: `No traffic line (real requests through the mirrors): ${why}.` });
    // Probed gateways are those with a local route: the Pod's only destinations besides the Service CIDR.
    const localPrefix = gateways.route;
    if (localPrefix === undefined) return skipped("the gateways' addresses are not local (see the line above)");
    const why = await trafficUnavailable();
    if (why) return skipped(why);
    const path = await TrafficPath.start({
      plane,
      nodeAddress: gateways.nodeAddress,
      localPrefix,
      namespace: "shop",
      waitMs: 0,
    });
    if (!path) return skipped("another sandbox's traffic path runs on this machine (one kube-proxy at a time)");
    const traffic = new DemoTraffic(path);
    traffic.#timer = setInterval(() => traffic.#send(), 1_000 / PER_SECOND);
    return {
      traffic,
      note: `A client Pod calls ${TRAFFIC_NAME} ${PER_SECOND} times a second (traffic line): ${path.note}.`,
    };
  }

  #send(): void {
    // One request at a time: a slow one (a timeout) lowers the rate, never piles up.
    if (this.#inFlight) return;
    this.#inFlight = true;
    void this.#path
      .send(TRAFFIC_NAME, PORT, 1, 2_000)
      .then((outcomes) => {
        const at = Date.now();
        for (const outcome of outcomes) this.#seen.push({ at, outcome });
        while ((this.#seen[0]?.at ?? at) < at - WINDOW_MS) this.#seen.shift();
      })
      .catch(() => undefined)
      .finally(() => {
        this.#inFlight = false;
      });
  }

  #recent(now: number, windowMs: number): Outcome[] {
    return this.#seen.filter((s) => s.at >= now - windowMs).map((s) => s.outcome);
  }

  /** The clusters that answered in the last `windowMs`, sorted (the script's check). */
  answeredBy(windowMs = WINDOW_MS, now = Date.now()): string[] {
    return Object.keys(tally(this.#recent(now, windowMs)).answers).sort();
  }

  /**
   * The table's line: with counts (a terminal's redraw), or only who answered (the
   * content a pipe gets a new table for: it changes when a cluster's share drops to zero
   * or comes back, not every second).
   */
  line(withCounts: boolean, now = Date.now()): string {
    if (!withCounts)
      return `traffic: ${TRAFFIC_NAME} answered by ${this.answeredBy(WINDOW_MS, now).join(", ") || "no one"}`;
    const counts = describeTally(tally(this.#recent(now, WINDOW_MS)));
    return `traffic: ${TRAFFIC_NAME}, last ${WINDOW_MS / 1000} s: ${counts} (${PER_SECOND} requests/s from a client Pod via CoreDNS and kube-proxy)`;
  }

  /** Stops sending, then removes the traffic path; says what it did. */
  async stop(): Promise<string> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    try {
      await this.#path.stop();
      return "traffic path removed (kube-proxy and its tables, CoreDNS, the client Pod's netns, the Service CIDR's route)";
    } catch (error) {
      return (error as Error).message;
    }
  }
}
