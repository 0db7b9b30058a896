/**
 * The world of the traffic tests and the traffic bench: the demo's fleet (local, east,
 * west; demo-script.ts and demo-modes.ts shape the remotes: probed gateways, a Service
 * in each export mode), fleet-mirror in this process with least privilege and its
 * default EndpointSlices mode, and the sandbox's traffic path (sandbox/traffic.ts): a
 * client Pod in a network namespace whose requests go through CoreDNS and kube-proxy to
 * the gateways' servers, which answer with their cluster's name.
 *
 * Needs root (see trafficUnavailable); under CI (`CI=true`, as .ci/run runs) a missing
 * privilege or tool is a failure, elsewhere a visible skip with the reason.
 */
import { DemoGateways } from "../../sandbox/demo-gateways.ts";
import { shapeModes, type WestExport } from "../../sandbox/demo-modes.ts";
import { discoveryApi, registerRemotes, shapeRemotes } from "../../sandbox/demo-script.ts";
import { DEMO_TIER_SETTINGS, shapeLocalMember, TIER_PRIORITIES } from "../../sandbox/demo-tiers.ts";
import { kubeConfig } from "../../sandbox/kubeconfig.ts";
import { type Outcome, TrafficPath, trafficUnavailable } from "../../sandbox/traffic.ts";
import { allAnsweredBy, describeTally, type Tally, tally } from "../../sandbox/traffic-rounds.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "./fleet.ts";
import { eventually } from "./kube.ts";

/** How long a start waits for another traffic path on this machine (a parallel test file, a demo) to end. */
const LOCK_WAIT_MS = 15 * 60_000;

/**
 * Undefined when the traffic path can run here; else why not, as the skip's reason.
 * @throws under CI, where a skip would hide that the traffic tests did not run.
 */
export async function trafficSkipReason(): Promise<string | undefined> {
  const why = await trafficUnavailable();
  if (why === undefined) return undefined;
  if (process.env["CI"] === "true") throw new Error(`the traffic tests must run under CI, but ${why}`);
  return `real traffic is not tested here: ${why}`;
}

export interface TrafficWorld {
  readonly fleet: Fleet;
  readonly gateways: DemoGateways;
  readonly traffic: TrafficPath;
  readonly controller: Supervisor;
  readonly westExport: WestExport;
  /** `count` requests at once from the client Pod. */
  send(host: string, port: number, count: number, timeoutMs?: number): Promise<readonly Outcome[]>;
  /** Stops the controller, the traffic path, the gateways' servers and route, and the fleet; every step is tried. */
  stop(): Promise<void>;
}

/**
 * Starts the world; on failure, whatever started is stopped before the error is thrown.
 * `tiers`: the demo's priority tiers of `search-federated` too (sandbox/demo-tiers.ts: the
 * local cluster's own `shop/search` at priority 0, west 10, east 20, and the controller's
 * tier settings); without it every member serves (SPEC §11).
 */
export async function startTrafficWorld(options: { readonly tiers?: boolean } = {}): Promise<TrafficWorld> {
  const undo: Array<() => Promise<unknown>> = [];
  const stop = async (): Promise<void> => {
    const errors: unknown[] = [];
    for (const step of undo.splice(0).reverse()) await step().catch((error: unknown) => errors.push(error));
    if (errors.length > 0) throw new AggregateError(errors, "the traffic world did not stop cleanly");
  };
  try {
    const fleet = await Fleet.start(["east", "west"]);
    undo.push(() => fleet.stop());
    const gateways = await DemoGateways.start();
    undo.push(() => gateways.stop());
    const localPrefix = gateways.route;
    if (localPrefix === undefined) throw new Error(`the gateways are not local: ${gateways.note}`);
    await shapeRemotes({ east: fleet.api("east"), west: fleet.api("west") }, gateways);
    const westExport = await shapeModes(fleet.plane, kubeConfig);
    if (options.tiers)
      await shapeLocalMember(
        fleet.local,
        discoveryApi(fleet.plane.cluster("local").adminKubeconfig),
        gateways.localPodAddress,
      );
    await registerRemotes(fleet.plane, fleet.local, options.tiers ? TIER_PRIORITIES : undefined);
    const traffic = await TrafficPath.start({
      plane: fleet.plane,
      nodeAddress: gateways.nodeAddress,
      localPrefix,
      namespace: "shop",
      waitMs: LOCK_WAIT_MS,
    });
    if (!traffic) throw new Error(`another traffic path held this machine for ${LOCK_WAIT_MS / 60_000} minutes`);
    undo.push(() => traffic.stop());
    const controller = fleet.startInProcess({
      endpointsApi: "endpointslices",
      ...(options.tiers ? DEMO_TIER_SETTINGS : {}),
    });
    undo.push(() => controller.stop());
    await eventually("east and west synced", () => {
      const states = controller.status().clusters.map((c) => c.state);
      return controller.writerReady && states.length === 2 && states.every((s) => s === "synced") ? true : undefined;
    });
    return {
      fleet,
      gateways,
      traffic,
      controller,
      westExport,
      send: (host, port, count, timeoutMs) => traffic.send(host, port, count, timeoutMs),
      stop,
    };
  } catch (error) {
    await stop().catch(() => undefined);
    throw error;
  }
}

/**
 * Waits until a round of 10 requests to `host:port` is answered by exactly `clusters`
 * (each at least once, none by another and no error), then sends `n` more and returns
 * their tally.
 */
export async function countedAnswers(
  world: TrafficWorld,
  host: string,
  port: number,
  clusters: readonly string[],
  n: number,
): Promise<Tally> {
  let last = "nothing yet";
  await eventually(
    () => `${host} answered by ${clusters.join(" and ")} (last round: ${last})`,
    async () => {
      const outcomes = await world.send(host, port, 10);
      const t = tally(outcomes);
      last = describeTally(t);
      return allAnsweredBy(outcomes, clusters) && clusters.every((c) => (t.answers[c] ?? 0) > 0) ? true : undefined;
    },
    60_000,
    200,
  );
  const t = tally(await world.send(host, port, n));
  if (t.total !== n) throw new Error(`${n} requests to ${host} gave ${t.total} outcomes, not one each`);
  return t;
}
