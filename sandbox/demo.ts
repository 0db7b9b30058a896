/**
 * `npm start` (`fleet-mirror-sandbox demo`): the README's first command. Starts the sandbox fleet (one local
 * and two remote API servers), shapes the remotes (a LoadBalancer gateway each, a few
 * exported Services), registers them through credentials Secrets holding
 * least-privilege tokens, runs the mirror, and shows a live table while a script
 * changes things on the remotes. Ctrl-C stops everything.
 *
 * `--script-once` runs the script a single time, checks that every step became
 * visible in the local cluster, and exits (0 on success): the demo's own test.
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { CoreV1Api, type KubeConfig, KubeConfig as KubeConfigClass, type V1Service } from "@kubernetes/client-node";
import { untilSignal } from "../src/cli/signals.ts";
import { defaultConfig } from "../src/config.ts";
import {
  CLUSTER_NAME,
  GATEWAY_NAME,
  GATEWAY_NS,
  MIRRORED_SERVICE,
  REMOTE_CLUSTER_DOMAIN,
  SECRET_TYPE,
} from "../src/core/labels.ts";
import { connectionFromKubeconfig } from "../src/kube/kubeconfig.ts";
import { mintServiceAccountToken } from "../src/kube/service-account.ts";
import { createLogger } from "../src/log.ts";
import type { FleetStatus } from "../src/supervisor/status.ts";
import { Supervisor } from "../src/supervisor/supervisor.ts";
import type { ControlPlane } from "./control-plane.ts";
import { renderKubeconfig } from "./kubeconfig.ts";
import { startSandbox } from "./sandbox.ts";

const NAMESPACE = "fleet-mirror";
const REMOTES = { east: "198.18.0.10", west: "198.51.100.20" } as const;
type Remote = keyof typeof REMOTES;

export const demoHelp = `Usage: fleet-mirror-sandbox demo [--script-once] [--step-interval 6s]

Starts a sandbox fleet on 127.0.0.1 (etcd + kube-apiservers "local", "east", "west"),
registers east and west with least-privilege credentials Secrets, mirrors their
exported Services into "local", and shows a live table while it changes things on
the remotes (export, port change, gateway IP change, unexport). Ctrl-C stops it all.

  --script-once        run the change script once, verify each step, then exit
  --step-interval <s>  pause between scripted changes (default 6s)
`;

function api(kc: KubeConfig): CoreV1Api {
  return kc.makeApiClient(CoreV1Api);
}

function kubeConfig(text: string): KubeConfig {
  const kc = new KubeConfigClass();
  kc.loadFromString(text);
  return kc;
}

async function ensureNamespace(core: CoreV1Api, name: string): Promise<void> {
  try {
    await core.createNamespace({ body: { metadata: { name } } });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
}

async function exportService(core: CoreV1Api, namespace: string, name: string, port: number): Promise<void> {
  await ensureNamespace(core, namespace);
  await core.createNamespacedService({
    namespace,
    body: {
      metadata: { name, annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gateway" } },
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

interface Step {
  readonly title: string;
  readonly run: () => Promise<void>;
  /** True once the change is visible in the local cluster. */
  readonly visible: () => Promise<boolean>;
}

async function localMirrors(
  local: CoreV1Api,
): Promise<{ key: string; cluster: string; ports: string; endpoints: string }[]> {
  const labelSelector = `${MIRRORED_SERVICE}=true`;
  const [services, endpoints] = await Promise.all([
    local.listServiceForAllNamespaces({ labelSelector }),
    local.listEndpointsForAllNamespaces({ labelSelector }),
  ]);
  const eps = new Map(endpoints.items.map((e) => [`${e.metadata?.namespace}/${e.metadata?.name}`, e]));
  return services.items
    .map((s) => {
      const key = `${s.metadata?.namespace}/${s.metadata?.name}`;
      const ep = eps.get(key);
      const addrs = (ep?.subsets ?? []).flatMap((sub) =>
        (sub.addresses ?? []).map((a) => `${a.ip}:${sub.ports?.[0]?.port ?? "?"}`),
      );
      return {
        key,
        cluster: s.metadata?.labels?.[CLUSTER_NAME] ?? "",
        ports: (s.spec?.ports ?? []).map((p) => `${p.port}/${p.protocol ?? "TCP"}`).join(","),
        endpoints: addrs.length > 0 ? addrs.join(",") : "<none>",
      };
    })
    .sort((a, b) => (a.key < b.key ? -1 : 1));
}

function renderTable(
  status: FleetStatus,
  mirrors: Awaited<ReturnType<typeof localMirrors>>,
  lastStep: string,
  kubeconfigPath: string,
): string {
  const ago = (t: number | undefined) =>
    t === undefined ? "-" : `${Math.max(0, Math.round((Date.now() - t) / 1000))}s ago`;
  const lines = [
    `fleet-mirror demo — local cluster kubeconfig: ${kubeconfigPath}`,
    "",
    `${"CLUSTER".padEnd(8)} ${"STATE".padEnd(10)} ${"MIRRORS".padEnd(8)} ${"LAST SYNC".padEnd(10)} ${"RESTARTS".padEnd(8)} GATEWAYS`,
    ...status.clusters.map(
      (c) =>
        `${c.cluster.padEnd(8)} ${c.state.padEnd(10)} ${String(c.mirrors).padEnd(8)} ${ago(c.lastSyncedAt).padEnd(10)} ${String(c.restarts).padEnd(8)} ${c.gateways.map((g) => `${g.key}:${g.usable ? "usable" : (g.reason ?? "unusable")}`).join(" ")}`,
    ),
    "",
    `${"MIRROR (local namespace/name)".padEnd(32)} ${"CLUSTER".padEnd(8)} ${"PORTS".padEnd(14)} ENDPOINTS`,
    ...mirrors.map((m) => `${m.key.padEnd(32)} ${m.cluster.padEnd(8)} ${m.ports.padEnd(14)} ${m.endpoints}`),
    "",
    `last change on a remote: ${lastStep}`,
    `writer: ${status.writer ? `ready=${status.writer.ready} queue=${status.writer.queueDepth} writes=${Object.values(status.writer.writes).reduce((a, b) => a + b, 0)}` : "starting"}`,
    "Ctrl-C stops the demo (mirrors, clusters and all processes are removed).",
  ];
  return lines.join("\n");
}

export async function demoCommand(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      "script-once": { type: "boolean", default: false },
      "step-interval": { type: "string", default: "6s" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    process.stdout.write(demoHelp);
    return 0;
  }
  const once = values["script-once"] === true;
  const stepMs =
    Number.parseFloat(values["step-interval"] ?? "6") * (String(values["step-interval"]).endsWith("ms") ? 1 : 1000);
  const out = process.stdout;
  const plane: ControlPlane = await startSandbox(out);
  let supervisor: Supervisor | undefined;
  try {
    const local = api(kubeConfig(plane.cluster("local").adminKubeconfig));
    const remotes = {
      east: api(kubeConfig(plane.cluster("east").adminKubeconfig)),
      west: api(kubeConfig(plane.cluster("west").adminKubeconfig)),
    } satisfies Record<Remote, CoreV1Api>;

    out.write("\nShaping the remotes: a gateway and exported Services in each...\n");
    for (const [name, ip] of Object.entries(REMOTES) as [Remote, string][]) {
      const core = remotes[name];
      await ensureNamespace(core, "gateway");
      await core.createNamespacedService({
        namespace: "gateway",
        body: {
          metadata: { name: "gateway" },
          spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143 }] },
        },
      });
      await setGatewayIp(core, ip);
    }
    await exportService(remotes.east, "shop", "web", 80);
    await exportService(remotes.east, "shop", "cart", 8080);
    await exportService(remotes.west, "shop", "web", 80);
    await exportService(remotes.west, "billing", "invoices", 443);

    out.write("Registering east and west with least-privilege tokens (get/list/watch services)...\n");
    await ensureNamespace(local, NAMESPACE);
    for (const name of Object.keys(REMOTES) as Remote[]) {
      const c = plane.cluster(name);
      const token = await mintServiceAccountToken(kubeConfig(c.adminKubeconfig), {
        namespace: "fleet-mirror-remote",
        serviceAccount: "fleet-mirror-reader",
        role: {
          kind: "ClusterRole",
          name: "fleet-mirror-remote-reader",
          rules: [{ apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] }],
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
            annotations: { [CLUSTER_NAME]: name, [REMOTE_CLUSTER_DOMAIN]: "cluster.local" },
          },
          type: SECRET_TYPE,
          data: { kubeconfig: Buffer.from(kubeconfig).toString("base64") },
        },
      });
    }

    const logFile = join(plane.dir, "fleet-mirror.log");
    out.write(`Starting fleet-mirror (logs: ${logFile})...\n`);
    const config = defaultConfig({ namespace: NAMESPACE, logFile, logLevel: "info", gatewayResolvePeriodMs: 10_000 });
    supervisor = new Supervisor({
      config,
      localConnection: connectionFromKubeconfig(plane.cluster("local").adminKubeconfig, { allowFilePaths: false }),
      logger: createLogger("info", { actor: "supervisor" }, logFile),
    });
    supervisor.start();

    const mirrorsNow = () => localMirrors(local);
    const has = async (
      key: string,
      predicate: (m: Awaited<ReturnType<typeof localMirrors>>[number]) => boolean = () => true,
    ) => (await mirrorsNow()).some((m) => m.key === key && predicate(m));
    let eastIp = 10;
    const steps: Step[] = [
      {
        title: "initial sync",
        run: async () => {},
        visible: async () =>
          (await has("shop/web-east")) && (await has("billing/invoices-west")) && (await has("shop/cart-east")),
      },
      {
        title: "east exports shop/checkout",
        run: () => exportService(remotes.east, "shop", "checkout", 9000),
        visible: () => has("shop/checkout-east", (m) => m.endpoints.includes("198.18.0.")),
      },
      {
        title: "west changes shop/web's port 80 → 8081",
        run: () =>
          updateService(remotes.west, "shop", "web", (s) => {
            const port = s.spec?.ports?.[0];
            if (port) port.port = port.port === 80 ? 8081 : 80;
          }),
        visible: async () => has("shop/web-west", (m) => m.ports.startsWith("8081")),
      },
      {
        title: "east's gateway IP changes",
        run: () => {
          eastIp += 1;
          return setGatewayIp(remotes.east, `198.18.0.${eastIp}`);
        },
        visible: async () =>
          (await mirrorsNow())
            .filter((m) => m.cluster === "east")
            .every((m) => m.endpoints.startsWith(`198.18.0.${eastIp}:`)),
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

    const kubeconfigPath = plane.cluster("local").adminKubeconfigPath;
    const interactive = process.stdout.isTTY === true && !once;
    let lastStep = "(none yet)";
    let stopRequested = false;
    const signal = untilSignal().then(() => {
      stopRequested = true;
    });
    const render = async () => {
      if (!supervisor) return;
      const table = renderTable(supervisor.status(), await mirrorsNow(), lastStep, kubeconfigPath);
      out.write(interactive ? `\x1b[2J\x1b[H${table}\n` : `\n${table}\n`);
    };
    const timer = interactive ? setInterval(() => void render().catch(() => {}), 1000) : undefined;

    const waitVisible = async (step: Step): Promise<boolean> => {
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline && !stopRequested) {
        if (await step.visible()) return true;
        await new Promise((r) => setTimeout(r, 200));
      }
      return false;
    };
    let failed = false;
    try {
      for (let round = 0; !stopRequested; round++) {
        for (const [i, step] of steps.entries()) {
          if (round > 0 && i === 0) continue;
          if (stopRequested) break;
          const started = Date.now();
          await step.run();
          const ok = await waitVisible(step);
          lastStep = `${step.title} — ${ok ? `mirrored in ${Date.now() - started} ms` : "NOT mirrored within 60 s"}`;
          if (!interactive) out.write(`[demo] ${lastStep}\n`);
          if (!ok) failed = true;
          if (!interactive || once) await render();
          if (once) continue;
          await Promise.race([signal, new Promise((r) => setTimeout(r, stepMs))]);
        }
        if (once) break;
        // Next round: re-export shop/cart so unexport can run again.
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
    } finally {
      if (timer) clearInterval(timer);
    }
    out.write(
      `\n${once ? (failed ? "demo script FAILED" : "demo script passed: every change was mirrored") : "Stopping"}...\n`,
    );
    return failed ? 1 : 0;
  } finally {
    await supervisor?.stop();
    await plane.stop();
  }
}
