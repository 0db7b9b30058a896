/**
 * Gateway failover (SPEC §10, §11): how long after a gateway stops answering every one of
 * its endpoints is not ready everywhere, in its mirrors' EndpointSlices AND the fleet-wide
 * Services' slices; and how long after it answers again they are all ready.
 *
 * World: R remote API servers (each registered once), G probed gateways per remote
 * (`gateway/gw-<i>`, an `mc-probe` port, the default probe period 3 s, one ingress
 * address each in 203.0.113.0/24 made local for the run), one exported Service
 * `bench/svc-<i>` per gateway; the even ones are also fleet-wide members
 * (`mirror.linkerd.io/federated: member`), so `svc-<i>-federated` holds the gateway
 * addresses of every remote. Every pair is answered by a real HTTP server in a child
 * process (probe-servers.ts). The controller runs in-process in its default
 * `endpointslices` mode.
 *
 * Once every address is ready in every slice holding it (and every pair was probed),
 * F gateways spread over the remotes stop (their servers close: connections refused) at
 * one recorded instant, taken just before the command goes out (an upper bound). A local
 * watch on the slices (not polling) records when each of them is not ready in every
 * slice holding it: per gateway p50/max; `failover_s` = the max. Then they answer again:
 * the same until ready everywhere (recovery). Then F other gateways hang (accept, never
 * answer), timed the same way: each failed probe then lasts its timeout (= the period),
 * so expect about one period more. Every endpoint of a healthy gateway that turned not
 * ready meanwhile is counted (expected 0).
 *
 * Needs CAP_NET_ADMIN (the route); without it the scenario records null with the reason.
 */
import type { V1ServicePort } from "@kubernetes/client-node";
import { FEDERATED_LABEL } from "../src/core/federated.ts";
import {
  GATEWAY_NAME,
  GATEWAY_NS,
  GATEWAY_PORT_NAME,
  MANAGED_BY_FLEET_MIRROR,
  MANAGED_BY_LABEL,
} from "../src/core/labels.ts";
import type { EndpointSlice } from "../src/core/objects.ts";
import { PROBE_PORT_NAME } from "../src/core/probe-spec.ts";
import type { Watcher } from "../src/kube/watcher.ts";
import type { Fleet } from "../test/helpers/fleet.ts";
import { EndpointReadiness, latencySummary, whenEach } from "./endpoint-readiness.ts";
import {
  type BenchOptions,
  GATEWAY_PORT,
  MIRROR_SELECTOR,
  printTable,
  progress,
  runPool,
  type ScenarioResult,
  waitAllSynced,
  waitWriterIdle,
  writeResult,
} from "./harness.ts";
import { ProbeWorld } from "./probe-world.ts";

const NAMESPACE = "bench";
const GATEWAY_NAMESPACE = "gateway";
/** Apart from the ports the tests' probe servers use, so a bench next to a test never collides. */
const PROBE_PORT = 4281;
/** The default probe period (no annotation): the target is 3 × period + 1 s. */
const PERIOD_S = 3;
const WAIT_MS = 60_000;

interface Gateway {
  readonly cluster: string;
  readonly name: string;
  readonly address: string;
  /** Its Service is a fleet-wide member: its address is in two slices (mirror and fleet-wide). */
  readonly member: boolean;
}

/** Gateway i of remote r: 203.0.113.(100 r + i + 1), so at most 2 × 100 fit the range. */
function gatewaysOf(remotes: readonly string[], perRemote: number): Gateway[] {
  return remotes.flatMap((cluster, r) =>
    Array.from({ length: perRemote }, (_, i) => ({
      cluster,
      name: `gw-${i}`,
      address: `203.0.113.${100 * r + i + 1}`,
      member: i % 2 === 0,
    })),
  );
}

/** `count` gateways taken round-robin over the remotes, members and non-members alike. */
function spread(gateways: readonly Gateway[], remotes: readonly string[], count: number): Gateway[] {
  const picked: Gateway[] = [];
  for (let i = 0; picked.length < count; i++)
    for (const cluster of remotes) {
      const gateway = gateways.filter((g) => g.cluster === cluster)[i];
      if (gateway && picked.length < count) picked.push(gateway);
    }
  return picked;
}

async function shape(fleet: Fleet, gateways: readonly Gateway[]): Promise<void> {
  for (const remote of fleet.remotes) {
    await fleet.ensureNamespace(remote, GATEWAY_NAMESPACE);
    await fleet.ensureNamespace(remote, NAMESPACE);
  }
  const ports: V1ServicePort[] = [
    { name: GATEWAY_PORT_NAME, port: GATEWAY_PORT, protocol: "TCP" },
    { name: PROBE_PORT_NAME, port: PROBE_PORT, protocol: "TCP" },
  ];
  await runPool(gateways, 8, async (g) => {
    const api = fleet.api(g.cluster);
    await api.createNamespacedService({
      namespace: GATEWAY_NAMESPACE,
      body: { metadata: { name: g.name }, spec: { type: "LoadBalancer", ports } },
    });
    await fleet.setGatewayIngress(g.cluster, [{ ip: g.address }], { namespace: GATEWAY_NAMESPACE, name: g.name });
    await api.createNamespacedService({
      namespace: NAMESPACE,
      body: {
        metadata: {
          name: `svc-${g.name.slice(3)}`,
          annotations: { [GATEWAY_NAME]: g.name, [GATEWAY_NS]: GATEWAY_NAMESPACE },
          ...(g.member ? { labels: { [FEDERATED_LABEL]: "member" } } : {}),
        },
        spec: { ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }], selector: { app: "web" } },
      },
    });
  });
  for (const remote of fleet.remotes) await fleet.register(remote);
}

/** When each gateway's address became ready (or not ready) in every slice holding it (as many as it should have). */
function whenEverywhere(
  watcher: Watcher<EndpointSlice>,
  readiness: EndpointReadiness,
  gateways: readonly Gateway[],
  ready: boolean,
  timeoutMs: number,
): Promise<Map<string, number | undefined>> {
  const holders = new Map(gateways.map((g) => [g.address, g.member ? 2 : 1]));
  return whenEach(
    watcher,
    gateways.map((g) => g.address),
    (address) => readiness.everywhere(address, ready, holders.get(address)),
    timeoutMs,
  );
}

export async function runFailover(opts: BenchOptions): Promise<ScenarioResult> {
  const remotes = ["east", "west"];
  const perRemote = opts.smoke ? 5 : 100;
  const failing = opts.smoke ? 2 : 10;
  const gateways = gatewaysOf(remotes, perRemote);
  const sizes = { gateways: gateways.length, clusters: remotes.length, failing, periodS: PERIOD_S };
  const world = await ProbeWorld.open("failover", {
    pairs: gateways.map((g) => ({ address: g.address, port: PROBE_PORT })),
    remotes,
    // 100 probed gateways per cluster: above the default cap (--gateway-max-probed 64).
    controller: { endpointsApi: "endpointslices", gatewayMaxProbed: perRemote },
  });
  if ("note" in world) {
    const { note } = world;
    writeResult(opts.out, "failover", { smoke: opts.smoke, ...sizes, failoverS: null, note });
    return { result: { note }, summary: opts.smoke ? {} : { failover_s: null } };
  }
  try {
    const { fleet, controller, servers } = world;
    progress(`failover: ${gateways.length} probed gateways over ${remotes.length} clusters`);
    await shape(fleet, gateways);
    const readiness = new EndpointReadiness();
    const down = new Set<string>();
    let healthyTurnedNotReady = 0;
    const watcher = await world.watch<EndpointSlice>(
      `/apis/discovery.k8s.io/v1/namespaces/${NAMESPACE}/endpointslices`,
      `${MIRROR_SELECTOR},${MANAGED_BY_LABEL}=${MANAGED_BY_FLEET_MIRROR}`,
      (key, _previous, current) => {
        for (const address of readiness.update(key, current ? (current.endpoints ?? null) : undefined))
          if (!down.has(address)) healthyTurnedNotReady += 1;
      },
    );
    await waitAllSynced(controller, remotes.length);
    await waitWriterIdle(controller);
    const ready = await whenEverywhere(watcher, readiness, gateways, true, 300_000);
    const unready = gateways.filter((g) => ready.get(g.address) === undefined).map((g) => g.address);
    if (unready.length > 0) throw new Error(`never ready everywhere: ${unready.join(", ")}`);
    await world.allProbed();
    const slices = watcher.size;
    const spreadOut = spread(gateways, remotes, 2 * failing);
    /** `victims` stop answering the way `mode` says, then answer again; both timed from a local watch. */
    const phase = async (mode: "stopped" | "hang", victims: readonly Gateway[]) => {
      for (const g of victims) down.add(g.address);
      const addresses = victims.map((g) => g.address);
      progress(`failover: ${victims.length} gateways ${mode}`);
      const failoverWait = whenEverywhere(watcher, readiness, victims, false, WAIT_MS);
      const stoppedAt = Date.now();
      await servers.setMode(addresses, mode);
      const failedOver = await failoverWait;
      progress("failover: answering again");
      const recoveryWait = whenEverywhere(watcher, readiness, victims, true, WAIT_MS);
      const restartedAt = Date.now();
      await servers.setMode(addresses, "ok");
      const recovered = await recoveryWait;
      const seconds = (at: number | undefined, from: number) => (at === undefined ? null : (at - from) / 1000);
      return {
        mode,
        // When the gateways answered again, from the fault: the start of the recovery.
        answeredAgainAfterS: (restartedAt - stoppedAt) / 1000,
        failover: latencySummary(stoppedAt, failedOver),
        recovery: latencySummary(restartedAt, recovered),
        perGateway: victims.map((g) => ({
          cluster: g.cluster,
          gateway: g.name,
          address: g.address,
          member: g.member,
          failoverS: seconds(failedOver.get(g.address), stoppedAt),
          recoveryS: seconds(recovered.get(g.address), restartedAt),
        })),
      };
    };
    // Connections refused first (the gateway is gone: failover_s), then gateways that
    // accept and never answer (every probe waits out its timeout, which equals the period).
    const stopped = await phase("stopped", spreadOut.slice(0, failing));
    const hung = await phase("hang", spreadOut.slice(failing));
    printTable(`failover (${failing} of ${gateways.length} gateways at a time; period ${PERIOD_S} s; local watch)`, [
      { phase: "refused → not ready everywhere", ...stopped.failover },
      { phase: "answer → ready everywhere", ...stopped.recovery },
      { phase: "hang → not ready everywhere", ...hung.failover },
      { phase: "answer → ready everywhere", ...hung.recovery },
    ]);
    progress(`failover: ${healthyTurnedNotReady} endpoints of healthy gateways turned not ready`);
    const failoverS = stopped.failover.missing === 0 ? stopped.failover.maxS : null;
    const missing = stopped.failover.missing + hung.failover.missing;
    const result = {
      smoke: opts.smoke,
      ...sizes,
      slices,
      targetS: 3 * PERIOD_S + 1,
      failoverS,
      healthyTurnedNotReady,
      phases: [stopped, hung],
      ...(missing > 0 ? { note: `${missing} gateways not failed over within ${WAIT_MS} ms` } : {}),
    };
    writeResult(opts.out, "failover", result);
    return { result, summary: opts.smoke ? {} : { failover_s: failoverS } };
  } finally {
    await world.close();
  }
}
