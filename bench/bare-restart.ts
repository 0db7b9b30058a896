/**
 * The bare client of `restart_cpu_ratio`: the least a restarting controller can do over
 * an intact world, as a Node process of its own. Like fleet-mirror after a restart it
 * lists, for every registered cluster, that cluster's remote Services (a connection per
 * cluster, as K clusters are K API servers), lists the local mirror Services and
 * fleet-mirror's EndpointSlices once, computes each cluster's mirrors with the same pure
 * function as the controller (`desiredMirrorFor`, the gateway viewed by `viewGateway`)
 * and compares them with what is there with the same pure plan (`planMirror`), then
 * exits. No threads, no watches, no queue, no status, no decoding beyond `JSON.parse`,
 * node:https alone.
 *
 * Its CPU-seconds (user + system, every thread, `process.resourceUsage()`, so its Node
 * start-up counts as the controller's does) go out on standard output as JSON with the
 * mirrors it compared and how many would need a write (0 on an intact world).
 *
 * The bench runs it bundled into one plain JavaScript file (`bareRestartCpu`), as
 * fleet-mirror runs from its bundles: Node's type stripping and module resolution are not
 * what is measured.
 *
 *   node bench/bare-restart.ts <config.json>        (the child; config: BareRestartConfig)
 */
import { readFileSync } from "node:fs";
import type { Agent as HttpsAgent, RequestOptions } from "node:https";
import { type ClusterSettings, desiredMirrorFor, viewGateway } from "../src/core/desired.ts";
import { sliceMirrorName } from "../src/core/endpoint-slices.ts";
import { MANAGED_BY_FLEET_MIRROR, MANAGED_BY_LABEL, MIRRORED_SERVICE } from "../src/core/labels.ts";
import type { ObservedObject } from "../src/core/mirror-kinds.ts";
import type { EndpointSlice, KubeObject, Service } from "../src/core/objects.ts";
import { planMirror } from "../src/core/plan.ts";

/** How the child reaches one API server: a bearer token and the server's CA. */
export interface BareConnection {
  readonly server: string;
  readonly caPem: string;
  readonly token: string;
}

export interface BareRestartConfig {
  readonly local: BareConnection;
  /** Every registered cluster's name and its remote API server. */
  readonly clusters: readonly { readonly name: string; readonly remote: BareConnection }[];
  /** Remote namespace of the gateway Service `gateway` every exported Service names. */
  readonly gatewayNamespace: string;
}

export interface BareRestartResult {
  readonly cpuSeconds: number;
  readonly wallMs: number;
  readonly mirrorsCompared: number;
  /** Mirrors whose plan has an action: 0 on an intact world. */
  readonly mirrorsDiffering: number;
}

const https = process.getBuiltinModule("node:https");

/** GET `path` as JSON over `agent` (a connection of its own per cluster). */
function getJson<T>(connection: BareConnection, agent: HttpsAgent, path: string): Promise<T> {
  const url = new URL(path, connection.server);
  const options: RequestOptions = {
    agent,
    ca: connection.caPem,
    headers: { authorization: `Bearer ${connection.token}`, accept: "application/json" },
  };
  return new Promise((resolve, reject) => {
    const req = https.get(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        if (res.statusCode !== 200) reject(new Error(`GET ${url.pathname}: ${res.statusCode} ${text.slice(0, 200)}`));
        else resolve(JSON.parse(text) as T);
      });
    });
    req.on("error", reject);
  });
}

type List<T> = { readonly items: T[] };

async function compare(config: BareRestartConfig): Promise<Omit<BareRestartResult, "cpuSeconds" | "wallMs">> {
  const localAgent = new https.Agent({ keepAlive: true });
  const selector = encodeURIComponent(`${MIRRORED_SERVICE}=true`);
  const sliceSelector = encodeURIComponent(`${MIRRORED_SERVICE}=true,${MANAGED_BY_LABEL}=${MANAGED_BY_FLEET_MIRROR}`);
  const [services, slices, ...remotes] = await Promise.all([
    getJson<List<Service>>(config.local, localAgent, `/api/v1/services?labelSelector=${selector}`),
    getJson<List<EndpointSlice>>(
      config.local,
      localAgent,
      `/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${sliceSelector}`,
    ),
    ...config.clusters.map(async (cluster) => {
      const agent = new https.Agent({ keepAlive: false });
      return { cluster, list: await getJson<List<Service>>(cluster.remote, agent, "/api/v1/services") };
    }),
  ]);
  const observed = new Map<string, ObservedObject[]>();
  const add = (key: string, object: ObservedObject): void => {
    const list = observed.get(key);
    if (list) list.push(object);
    else observed.set(key, [object]);
  };
  for (const service of services.items)
    add(`${service.metadata.namespace}/${service.metadata.name}`, { kind: "Service", object: service });
  for (const slice of slices.items)
    add(`${slice.metadata.namespace}/${sliceMirrorName(slice)}`, {
      kind: "EndpointSlice",
      object: slice as KubeObject,
    });
  let mirrorsCompared = 0;
  let mirrorsDiffering = 0;
  for (const { cluster, list } of remotes) {
    const settings: ClusterSettings = {
      name: cluster.name,
      domain: "cluster.local",
      excludedNamespaces: [],
      defaultGateway: { name: "gateway", namespace: config.gatewayNamespace },
    };
    const gatewayService = list.items.find(
      (s) => s.metadata.namespace === config.gatewayNamespace && s.metadata.name === "gateway",
    );
    const gateway = viewGateway(gatewayService, () => undefined);
    for (const service of list.items) {
      const outcome = desiredMirrorFor(settings, service, gateway);
      if (outcome.kind !== "mirror") continue;
      const key = `${outcome.mirror.namespace}/${outcome.mirror.name}`;
      const plan = planMirror({
        key,
        desired: outcome.mirror,
        observed: observed.get(key) ?? [],
        endpointsApi: "endpointslices",
        namespaceExists: true,
        createNamespaces: true,
        excludedNamespaces: [],
        gcAllowed: () => false,
      });
      mirrorsCompared++;
      if (plan.actions.length > 0 || plan.blocked) mirrorsDiffering++;
    }
  }
  localAgent.destroy();
  return { mirrorsCompared, mirrorsDiffering };
}

if (import.meta.main) {
  const started = performance.now();
  const config = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")) as BareRestartConfig;
  const counts = await compare(config);
  const usage = process.resourceUsage();
  const result: BareRestartResult = {
    cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6,
    wallMs: Math.round(performance.now() - started),
    ...counts,
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
