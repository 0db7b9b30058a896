/**
 * What the demo does to the sandbox: shapes the remotes (a LoadBalancer gateway each, at
 * an address of demo-gateways.ts, probed when that address is local; a few exported
 * Services), registers them through credentials Secrets holding least-privilege tokens,
 * and the scripted changes whose effect the demo then waits to see in the local cluster.
 */
import { CoreV1Api, DiscoveryV1Api, type V1Service } from "@kubernetes/client-node";
import { EXPORTED_LABEL } from "../src/core/export.ts";
import { FEDERATED_LABEL } from "../src/core/federated.ts";
import { CLUSTER_NAME, GATEWAY_NAME, GATEWAY_NS, REMOTE_CLUSTER_DOMAIN, SECRET_TYPE } from "../src/core/labels.ts";
import { PROBE_PERIOD, PROBE_PORT_NAME } from "../src/core/probe-spec.ts";
import { PRIORITY_ANNOTATION } from "../src/core/tiers.ts";
import { mintServiceAccountToken } from "../src/kube/service-account.ts";
import type { FleetStatus } from "../src/status/fleet-view.ts";
import type { ControlPlane } from "./control-plane.ts";
import { DEMO_PROBE_PERIOD_SECONDS, type DemoGateways, GATEWAY_PORT } from "./demo-gateways.ts";
import type { MirrorRow } from "./demo-mirrors.ts";
import { HEADLESS_HOSTS, HEADLESS_KEY, MCS_IMPORT_KEY, REMOTE_READER_RULES, type WestExport } from "./demo-modes.ts";
import {
  DEMO_TIER_SETTINGS,
  FLEET_WIDE_KEY,
  searchStatus,
  servingPriority,
  TIER_PRIORITIES,
  tierReady,
} from "./demo-tiers.ts";
import type { DemoTraffic } from "./demo-traffic.ts";
import { kubeConfig, renderKubeconfig } from "./kubeconfig.ts";

export const NAMESPACE = "fleet-mirror";
const REMOTES = ["east", "west"] as const;
export type Remote = (typeof REMOTES)[number];
export type Remotes = Readonly<Record<Remote, CoreV1Api>>;

export function coreApi(kubeconfigText: string): CoreV1Api {
  return kubeConfig(kubeconfigText).makeApiClient(CoreV1Api);
}

export function discoveryApi(kubeconfigText: string): DiscoveryV1Api {
  return kubeConfig(kubeconfigText).makeApiClient(DiscoveryV1Api);
}

async function ensureNamespace(core: CoreV1Api, name: string): Promise<void> {
  try {
    await core.createNamespace({ body: { metadata: { name } } });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
}

/**
 * Exports a Service: by the §2 annotations naming the demo's gateway, or (`mode: "label"`)
 * by the export label of SPEC §12, through the cluster's default gateway, which the
 * demo's Secrets name (`registerRemotes`). `member` also makes it a member of its
 * fleet-wide Service (SPEC §11).
 */
async function exportService(
  core: CoreV1Api,
  namespace: string,
  name: string,
  port: number,
  options: { member?: boolean; mode?: "annotation" | "label" } = {},
): Promise<void> {
  await ensureNamespace(core, namespace);
  const labels = {
    ...(options.member ? { [FEDERATED_LABEL]: "member" } : {}),
    ...(options.mode === "label" ? { [EXPORTED_LABEL]: "true" } : {}),
  };
  await core.createNamespacedService({
    namespace,
    body: {
      metadata: {
        name,
        ...(options.mode === "label" ? {} : { annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gateway" } }),
        ...(Object.keys(labels).length > 0 ? { labels } : {}),
      },
      spec: { selector: { app: name }, ports: [{ name: "http", port, targetPort: 8080 }] },
    },
  });
}

async function setGatewayIp(core: CoreV1Api, ip: string): Promise<void> {
  const gw = await core.readNamespacedServiceStatus({ namespace: "gateway", name: "gateway" });
  gw.status = { loadBalancer: { ingress: [{ ip }] } };
  await core.replaceNamespacedServiceStatus({ namespace: "gateway", name: "gateway", body: gw });
}

async function updateService(
  core: CoreV1Api,
  namespace: string,
  name: string,
  mutate: (svc: V1Service) => void,
): Promise<void> {
  const svc = await core.readNamespacedService({ namespace, name });
  mutate(svc);
  await core.replaceNamespacedService({ namespace, name, body: svc });
}

/**
 * A gateway with an IP on each remote (with an `mc-probe` port, probed every second, when
 * its address has a probe server), and the exported Services the demo starts with.
 */
export async function shapeRemotes(remotes: Remotes, gateways: DemoGateways): Promise<void> {
  for (const name of REMOTES) {
    const core = remotes[name];
    const probePort = gateways.probePort(name);
    await ensureNamespace(core, "gateway");
    await core.createNamespacedService({
      namespace: "gateway",
      body: {
        metadata: {
          name: "gateway",
          ...(probePort === undefined ? {} : { annotations: { [PROBE_PERIOD]: String(DEMO_PROBE_PERIOD_SECONDS) } }),
        },
        spec: {
          type: "LoadBalancer",
          ports: [
            { name: "incoming-port", port: GATEWAY_PORT },
            ...(probePort === undefined ? [] : [{ name: PROBE_PORT_NAME, port: probePort }]),
          ],
        },
      },
    });
    await setGatewayIp(core, gateways.address(name));
  }
  await exportService(remotes.east, "shop", "web", 80);
  await exportService(remotes.east, "shop", "cart", 8080);
  await exportService(remotes.west, "shop", "web", 80);
  // Exported as linkerd's link does it: a label, through the cluster's default gateway.
  await exportService(remotes.west, "billing", "invoices", 443, { mode: "label" });
  // One name for shop/search in every cluster: its endpoints are both gateways (and the
  // local cluster's own pod: demo-tiers.ts), by priority tier; traffic fails over when a
  // serving gateway dies.
  await exportService(remotes.east, "shop", "search", 80, { member: true });
  await exportService(remotes.west, "shop", "search", 80, { member: true });
}

/**
 * A least-privilege token per remote, in a credentials Secret in the local cluster: the
 * role of deploy/rbac/remote.yaml, get/list/watch on Services, EndpointSlices and
 * ServiceExports (what the export modes read), nothing else. With `priorities`, each
 * Secret carries its cluster's priority (SPEC §14).
 */
export async function registerRemotes(
  plane: ControlPlane,
  local: CoreV1Api,
  priorities?: Readonly<Record<Remote, number>>,
): Promise<void> {
  await ensureNamespace(local, NAMESPACE);
  for (const name of REMOTES) {
    const c = plane.cluster(name);
    const token = await mintServiceAccountToken(kubeConfig(c.adminKubeconfig), {
      namespace: "fleet-mirror-remote",
      serviceAccount: "fleet-mirror-reader",
      role: {
        kind: "ClusterRole",
        name: "fleet-mirror-remote-reader",
        rules: REMOTE_READER_RULES,
      },
    });
    const kubeconfig = renderKubeconfig({
      cluster: name,
      server: c.server,
      caPem: c.caPem,
      user: "fleet-mirror",
      auth: { token },
    });
    await local.createNamespacedSecret({
      namespace: NAMESPACE,
      body: {
        metadata: {
          name: `cluster-credentials-${name}`,
          annotations: {
            [CLUSTER_NAME]: name,
            [REMOTE_CLUSTER_DOMAIN]: "cluster.local",
            // The cluster's default gateway (SPEC §12): label exports and fleet-wide members use it.
            [GATEWAY_NAME]: "gateway",
            [GATEWAY_NS]: "gateway",
            ...(priorities ? { [PRIORITY_ANNOTATION]: String(priorities[name]) } : {}),
          },
        },
        type: SECRET_TYPE,
        data: { kubeconfig: Buffer.from(kubeconfig).toString("base64") },
      },
    });
  }
}

export interface Step {
  readonly title: string;
  readonly run: () => Promise<void>;
  /** True once the change is visible in the local cluster. */
  readonly visible: () => Promise<boolean>;
}

/**
 * The scripted changes; the first ("initial sync") runs in the first round only. A
 * gateway dying and coming back is in the script only when the gateways are probed; it
 * is visible once both the mirrors' endpoints and the controller's status (the table's
 * two parts) say so.
 */
export function demoSteps(
  remotes: Remotes,
  mirrorsNow: () => Promise<readonly MirrorRow[]>,
  statusNow: () => FleetStatus,
  gateways: DemoGateways,
  westExport: WestExport,
  traffic?: DemoTraffic,
): Step[] {
  const has = async (key: string, predicate: (m: MirrorRow) => boolean = () => true) =>
    (await mirrorsNow()).some((m) => m.key === key && predicate(m));
  /** True when the cluster has mirrors and every one of them has addresses, all `ready` or all not. */
  const allReady = async (cluster: Remote, ready: boolean) => {
    const rows = (await mirrorsNow()).filter((m) => m.cluster === cluster);
    return rows.length > 0 && rows.every((m) => m.addresses.length > 0 && m.addresses.every((a) => a.ready === ready));
  };
  /**
   * True when the fleet-wide row has the local pod and both gateways, each gateway's
   * address ready as `ready` says (a standby's is not), the local pod's ready.
   */
  const fleetWide = async (ready: Readonly<Record<Remote, boolean>>) => {
    const row = (await mirrorsNow()).find((m) => m.key === FLEET_WIDE_KEY);
    const expected = (address: string) =>
      REMOTES.map((c) => (address.startsWith(`${gateways.address(c)}:`) ? ready[c] : undefined)).find(
        (r) => r !== undefined,
      ) ?? true;
    return (
      row !== undefined &&
      row.addresses.length === REMOTES.length + 1 &&
      row.addresses.every((a) => a.ready === expected(a.address))
    );
  };
  /** True when the controller's status says tiers up to `priority` serve shop/search-federated. */
  const serving = (priority: number) => servingPriority(statusNow()) === priority;
  /** True when the controller's status says the cluster's probed gateway has `dead` dead addresses. */
  const probedDead = (cluster: Remote, dead: number) =>
    statusNow()
      .clusters.find((c) => c.cluster === cluster)
      ?.gateways.some((g) => g.probe !== undefined && g.probe.dead === dead) === true;
  let westPort = 80;
  /** With the traffic line: the fleet-wide name answered by exactly `clusters` over the line's window. */
  const answeredBy = (clusters: string) => !traffic || traffic.answeredBy().join(",") === clusters;
  /** With the traffic line: `cluster` among those that answered over the line's window. */
  const answeredAlsoBy = (cluster: string) => !traffic || traffic.answeredBy().includes(cluster);
  const delay = `--failback-delay ${DEMO_TIER_SETTINGS.failbackDelayMs / 1000}s`;
  let revivedAt: number | undefined;
  let failedBackAfterMs: number | undefined;
  const failover: Step[] = [
    {
      title: `west's gateway dies (its probe and traffic servers stop); shop/search fails over to east (priority ${TIER_PRIORITIES.east}) at once`,
      run: () => gateways.stopAnswering("west"),
      visible: async () =>
        probedDead("west", 1) &&
        (await allReady("west", false)) &&
        serving(TIER_PRIORITIES.east) &&
        (await fleetWide({ west: false, east: true })) &&
        answeredBy("east,local"),
    },
    {
      title: `west's gateway comes back; shop/search stays on east until west has been ready for ${delay}`,
      run: async () => {
        await gateways.answerAgain("west");
        revivedAt = Date.now();
        failedBackAfterMs = undefined;
      },
      visible: async () =>
        probedDead("west", 0) &&
        (await allReady("west", true)) &&
        tierReady(statusNow(), "west") === 1 &&
        (await fleetWide({ west: true, east: true })) &&
        answeredAlsoBy("west"),
    },
    {
      // Nothing to do: the controller fails back on its own once the delay has passed.
      get title() {
        return failedBackAfterMs === undefined
          ? `shop/search fails back to west after ${delay}`
          : `shop/search fails back to west ${(failedBackAfterMs / 1000).toFixed(1)} s after its gateway came back (${delay})`;
      },
      run: async () => {},
      visible: async () => {
        const ok =
          serving(TIER_PRIORITIES.west) && (await fleetWide({ west: true, east: false })) && answeredBy("local,west");
        const since = searchStatus(statusNow())?.servingSince;
        if (ok && since !== undefined && revivedAt !== undefined) failedBackAfterMs = Date.parse(since) - revivedAt;
        return ok;
      },
    },
  ];
  return [
    {
      title: "initial sync",
      run: async () => {},
      visible: async () =>
        (await has("shop/web-east")) &&
        (await has("billing/invoices-west")) &&
        (await has("shop/cart-east")) &&
        // The best tiers serve: local and west, east standing by. The first reduction may
        // come while only east's member is known (east's tier then serves with the local
        // pod's), and traffic returns to west only after --failback-delay: the first step
        // takes that long more.
        serving(TIER_PRIORITIES.west) &&
        (await fleetWide({ west: true, east: false })) &&
        (await has(
          MCS_IMPORT_KEY,
          (m) => m.clusters?.length === REMOTES.length && m.addresses.length === REMOTES.length,
        )) &&
        (await has(HEADLESS_KEY, (m) => m.hosts?.length === HEADLESS_HOSTS.length && m.addresses.length > 0)),
    },
    {
      title: "east exports shop/checkout",
      run: () => exportService(remotes.east, "shop", "checkout", 9000),
      visible: () => has("shop/checkout-east", (m) => m.endpoints.startsWith(`${gateways.address("east")}:`)),
    },
    {
      // Toggles 80 ↔ 8081, so every round changes the port (and waits for the port it set).
      get title() {
        return `west changes shop/web's port ${westPort === 8081 ? "80 → 8081" : "8081 → 80"}`;
      },
      run: () => {
        westPort = westPort === 80 ? 8081 : 80;
        return updateService(remotes.west, "shop", "web", (s) => {
          const port = s.spec?.ports?.[0];
          if (port) port.port = westPort;
        });
      },
      visible: async () => has("shop/web-west", (m) => m.ports.startsWith(`${westPort}/`)),
    },
    {
      title: "east's gateway IP changes",
      run: async () => setGatewayIp(remotes.east, await gateways.moveEast()),
      // Every address of every east row (a headless row's: its hosts' gateway) is the new one.
      visible: async () =>
        (await mirrorsNow())
          .filter((m) => m.cluster === "east")
          .every(
            (m) =>
              m.addresses.length > 0 && m.addresses.every((a) => a.address.startsWith(`${gateways.address("east")}:`)),
          ),
    },
    ...(gateways.probed ? failover : []),
    {
      // The import stays, with east alone: its status and its derived Service's slices.
      title: `west deletes its ServiceExport of ${MCS_IMPORT_KEY}`,
      run: () => westExport.withdraw(),
      visible: () =>
        has(
          MCS_IMPORT_KEY,
          (m) =>
            m.clusters?.join(",") === "east" &&
            m.addresses.length === 1 &&
            m.addresses[0]?.address.startsWith(`${gateways.address("east")}:`) === true,
        ),
    },
    {
      title: "east unexports shop/cart",
      run: () =>
        updateService(remotes.east, "shop", "cart", (s) => {
          const annotations = { ...(s.metadata?.annotations ?? {}) };
          delete annotations[GATEWAY_NAME];
          delete annotations[GATEWAY_NS];
          if (s.metadata) s.metadata.annotations = annotations;
        }),
      visible: async () => !(await has("shop/cart-east")),
    },
  ];
}

/**
 * Before the next round: re-export shop/cart, delete shop/checkout and create west's
 * ServiceExport again, so every step can run again.
 */
export async function resetForNextRound(remotes: Remotes, westExport: WestExport): Promise<void> {
  await westExport.restore();
  await updateService(remotes.east, "shop", "cart", (s) => {
    if (s.metadata)
      s.metadata.annotations = {
        ...(s.metadata.annotations ?? {}),
        [GATEWAY_NAME]: "gateway",
        [GATEWAY_NS]: "gateway",
      };
  });
  await remotes.east.deleteNamespacedService({ namespace: "shop", name: "checkout" });
}
