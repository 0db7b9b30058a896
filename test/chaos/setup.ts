/**
 * The chaos world before the first step: probe servers, gateways, the stable and held
 * exports, objects fleet-mirror does not own, the world of the other ways to export
 * (steps.ts: mode Services, MCS Services and the MCS API, a headless Service and its
 * hosts), a fault proxy per remote and a credentials Secret per registration (every
 * one naming the default gateway).
 */
import { startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { installMcsCrds } from "../../sandbox/mcs-crds.ts";
import { CONTROLLER_NAMESPACE } from "../helpers/fleet.ts";
import { createServiceExport } from "../helpers/mcs.ts";
import type { ChaosRun } from "./chaos-run.ts";
import { INITIAL_HOSTS, INITIAL_LABELLED, INITIAL_MEMBERS, INITIAL_SERVICE_EXPORTS } from "./mode-schedule.ts";
import { mirrorKey } from "./oracle-common.ts";
import { ChaosProbes } from "./probes.ts";
import { EXPORT_LABEL, MEMBER_LABEL } from "./remote-steps.ts";
import {
  DEFAULT_GATEWAY,
  GATEWAYS,
  HEADLESS_SERVICE,
  MCS_NAMESPACE,
  MCS_SERVICES,
  MODE_NAMESPACE,
  MODE_PORTS,
  MODE_SERVICES,
} from "./steps.ts";
import { HELD_EXPORTS, STABLE, USER_OBJECTS } from "./world.ts";

/** Sets up everything but the controllers; returns the keys held locally by objects fleet-mirror does not own. */
export async function setUpWorld(run: ChaosRun): Promise<ReadonlySet<string>> {
  const { fleet, log } = run;
  const probes = await ChaosProbes.start();
  if (probes instanceof ChaosProbes) {
    run.probes = probes;
    log(probes.describe());
  } else {
    run.unprobed = probes.unavailable;
    run.notes.push(`gateways not probed: ${probes.unavailable}`);
    log(`gateways not probed (no gateway dies in this run): ${probes.unavailable}`);
  }
  try {
    await Promise.all(["local", ...run.remotes].map((c) => installMcsCrds(fleet.kubeConfig(c))));
    run.mcs = true;
  } catch (error) {
    run.mcs = { unavailable: error instanceof Error ? error.message : String(error) };
    run.notes.push(`MCS API not installed: ${run.mcs.unavailable}`);
    log(`MCS API not installed (no ServiceExport in this run): ${run.mcs.unavailable}`);
  }
  const probeAddresses = run.probes?.addresses ?? [];
  for (const [i, cluster] of run.remotes.entries()) {
    for (const [g, gateway] of GATEWAYS.entries()) {
      const slot = i * GATEWAYS.length + g;
      await run.writer.createGateway(
        cluster,
        gateway,
        [probeAddresses[slot % Math.max(1, probeAddresses.length)] ?? `198.18.0.${10 * (i + 1) + g}`],
        4143,
        `${gateway.name}.${cluster}.identity`,
      );
    }
    for (const s of STABLE) {
      await fleet.createService(cluster, s.namespace, s.name, {
        gateway: s.gateway,
        ports: [
          { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
          { name: "dns", port: 53, protocol: "UDP" },
        ],
      });
    }
    await setUpModes(run, cluster);
  }
  for (const h of HELD_EXPORTS) await fleet.createService(h.cluster, h.namespace, h.name);
  for (const ns of ["shop", "churn"]) await fleet.ensureNamespace("local", ns);
  for (const u of USER_OBJECTS) {
    const metadata = { name: u.name, labels: { app: "user" } };
    if (u.kind === "Service") {
      await fleet.local.createNamespacedService({
        namespace: u.namespace,
        body: { metadata, spec: { ports: [{ name: "http", port: 80 }], selector: { app: "user" } } },
      });
    } else {
      await fleet.local.createNamespacedEndpoints({
        namespace: u.namespace,
        body: { metadata, subsets: [{ addresses: [{ ip: "10.1.2.3" }], ports: [{ name: "http", port: 80 }] }] },
      });
    }
  }

  for (const cluster of run.remotes) run.proxies.set(cluster, await startFaultProxyFor(fleet.plane, cluster));
  for (const { name, remote } of run.registrations) {
    const proxy = run.proxies.get(remote);
    if (!proxy) throw new Error(`no fault proxy for remote ${remote}`);
    const kubeconfig = renderKubeconfig({
      cluster: name,
      server: proxy.url,
      caPem: fleet.plane.cluster(remote).caPem,
      user: "fleet-mirror",
      auth: { token: await fleet.remoteToken(remote) },
    });
    await fleet.local.createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: fleet.secretBody({
        secretName: `cluster-credentials-${name}`,
        clusterName: name,
        kubeconfig,
        annotations: {
          "mirror.linkerd.io/gateway-name": DEFAULT_GATEWAY.name,
          "mirror.linkerd.io/gateway-ns": DEFAULT_GATEWAY.namespace,
        },
      }),
    });
  }
  return new Set(USER_OBJECTS.map((u) => mirrorKey(u.namespace, u.name)));
}

/** The world of the mode steps as mode-schedule.ts's model starts (its INITIAL_* constants). */
async function setUpModes(run: ChaosRun, cluster: string): Promise<void> {
  const ports = MODE_PORTS[0] ?? [];
  for (const name of MODE_SERVICES) {
    await run.writer.createService(cluster, MODE_NAMESPACE, name, ports, null);
    if (!INITIAL_LABELLED.includes(name) && !INITIAL_MEMBERS.includes(name)) continue;
    await run.writer.patch(cluster, MODE_NAMESPACE, name, (svc) => {
      svc.metadata = {
        ...svc.metadata,
        labels: {
          ...svc.metadata?.labels,
          ...(INITIAL_LABELLED.includes(name) ? { [EXPORT_LABEL]: "true" } : {}),
          ...(INITIAL_MEMBERS.includes(name) ? { [MEMBER_LABEL]: "member" } : {}),
        },
      };
    });
  }
  for (const name of MCS_SERVICES) await run.writer.createService(cluster, MCS_NAMESPACE, name, ports, null);
  if (run.mcs === true)
    for (const name of INITIAL_SERVICE_EXPORTS) await createServiceExport(run.fleet, cluster, MCS_NAMESPACE, name);
  const { namespace, name } = HEADLESS_SERVICE;
  await run.writer.createService(cluster, namespace, name, ports, GATEWAYS[0] ?? DEFAULT_GATEWAY, undefined, {
    clusterIP: "None",
  });
  await run.writer.setHosts(cluster, INITIAL_HOSTS);
}
