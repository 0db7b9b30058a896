/**
 * The demo's priority tiers (SPEC §14) of the fleet-wide Service `shop/search-federated`:
 *
 * - the local cluster's own Service `shop/search` is a member (the local member), at
 *   `--local-priority` 0: a selector-less Service labelled as a member, with a user's
 *   EndpointSlice of one ready pod (at an address of the demo's /28, where a server
 *   answers `local` when the gateways are probed);
 * - west at priority 10, east at 20 (their credentials Secrets' `mirror.linkerd.io/priority`);
 * - `--failover-min-ready 2`: the local pod alone is not enough, so local and west serve
 *   while east stands by; when west's gateway dies, east serves at once; when it comes
 *   back, traffic returns to west only after `--failback-delay` (10 s here, 30 s by default).
 *
 * The table's tier line under the fleet-wide row (`tierLine`) is read from the
 * controller's status, the same tiers `fleet-mirror status` shows.
 */
import type { CoreV1Api, DiscoveryV1Api } from "@kubernetes/client-node";
import type { Config } from "../src/config.ts";
import { FEDERATED_LABEL } from "../src/core/federated.ts";
import { MANAGED_BY_LABEL, SERVICE_NAME_LABEL } from "../src/core/labels.ts";
import { reaches } from "../src/core/tiers.ts";
import type { FederatedServiceStatus } from "../src/protocol/status.ts";
import type { FleetStatus } from "../src/status/fleet-view.ts";

/** The local row of the fleet-wide Service the demo shows (SPEC §11): `shop/search` of both remotes and of the local cluster. */
export const FLEET_WIDE_KEY = "shop/search-federated";

/** Each member cluster's priority (lower preferred); `local` is `--cluster-name`'s default. */
export const TIER_PRIORITIES = { local: 0, west: 10, east: 20 } as const;
export type TierCluster = keyof typeof TIER_PRIORITIES;

/** The controller's tier settings in the demo (and in the traffic world that proves them). */
export const DEMO_TIER_SETTINGS = {
  localPriority: TIER_PRIORITIES.local,
  failoverMinReady: 2,
  failbackDelayMs: 10_000,
} as const satisfies Partial<Config>;

/** The port the local member's pod listens on (its EndpointSlice's `http` port). */
export const LOCAL_POD_PORT = 8080;

const seconds = (ms: number): string => `${ms / 1000}s`;

/** The demo's one line on screen about its tiers. */
export const TIERS_NOTE = `Priority tiers of shop/search-federated (SPEC §14): local ${TIER_PRIORITIES.local} (its own Service shop/search, 1 pod), west ${TIER_PRIORITIES.west}, east ${TIER_PRIORITIES.east}; --failover-min-ready ${DEMO_TIER_SETTINGS.failoverMinReady}, --failback-delay ${seconds(DEMO_TIER_SETTINGS.failbackDelayMs)} (a short delay for the demo; the default is 30s).`;

/**
 * The local member: Service `shop/search` in the local cluster (selector-less, labelled
 * as a member, the remotes' ports) and its user-managed EndpointSlice, one ready pod at
 * `address`.
 */
export async function shapeLocalMember(local: CoreV1Api, discovery: DiscoveryV1Api, address: string): Promise<void> {
  const namespace = "shop";
  try {
    await local.createNamespace({ body: { metadata: { name: namespace } } });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
  await local.createNamespacedService({
    namespace,
    body: {
      metadata: { name: "search", labels: { [FEDERATED_LABEL]: "member" } },
      spec: { ports: [{ name: "http", port: 80, targetPort: LOCAL_POD_PORT, protocol: "TCP" }] },
    },
  });
  await discovery.createNamespacedEndpointSlice({
    namespace,
    body: {
      metadata: { name: "search-pods", labels: { [SERVICE_NAME_LABEL]: "search", [MANAGED_BY_LABEL]: "demo" } },
      addressType: "IPv4",
      endpoints: [{ addresses: [address], hostname: "search-0", conditions: { ready: true, serving: true } }],
      ports: [{ name: "http", port: LOCAL_POD_PORT, protocol: "TCP" }],
    },
  });
}

/** The fleet-wide Service's entry in the controller's status. */
export function searchStatus(status: FleetStatus): FederatedServiceStatus | undefined {
  return status.writer?.federated?.find((f) => f.key === FLEET_WIDE_KEY);
}

/** The worst priority that serves, as the controller's status says (undefined: no tiers yet). */
export function servingPriority(status: FleetStatus): number | undefined {
  return searchStatus(status)?.servingPriority;
}

/** The ready endpoints of `cluster`'s tier, as the controller's status says. */
export function tierReady(status: FleetStatus, cluster: TierCluster): number | undefined {
  return searchStatus(status)?.tiers?.find((t) => t.priority === TIER_PRIORITIES[cluster])?.ready;
}

function clockTime(iso: string): string {
  return new Date(iso).toTimeString().slice(0, 8);
}

/**
 * The tier line shown under the fleet-wide row, e.g.
 * `  tiers: 0 local serving (1 ready), 10 west serving (1 ready), 20 east standby (1 ready) since 13:45:01`
 * (the format of `fleet-mirror status`'s TIERS, with the clusters of each tier); while a
 * better prefix of tiers holds enough ready endpoints again, it adds
 * `; failback to 10 pending (--failback-delay 10s)`. Undefined: no tiers (yet).
 */
export function tierLine(entry: FederatedServiceStatus | undefined): string | undefined {
  if (entry?.tiers === undefined || entry.servingPriority === undefined) return undefined;
  const names = (priority: number): string =>
    Object.entries(TIER_PRIORITIES)
      .filter(([, p]) => p === priority)
      .map(([name]) => name)
      .join("+") || "?";
  const tiers = entry.tiers.map(
    (t) => `${t.priority} ${names(t.priority)} ${t.serving ? "serving" : "standby"} (${t.ready} ready)`,
  );
  const since = entry.servingSince ? ` since ${clockTime(entry.servingSince)}` : "";
  const better = entry.tiers.find(
    (t) =>
      t.priority < (entry.servingPriority ?? 0) &&
      reaches(entry.tiers ?? [], t.priority, DEMO_TIER_SETTINGS.failoverMinReady),
  );
  const pending = better
    ? `; failback to ${better.priority} pending (--failback-delay ${seconds(DEMO_TIER_SETTINGS.failbackDelayMs)})`
    : "";
  return `  tiers: ${tiers.join(", ")}${since}${pending}`;
}
