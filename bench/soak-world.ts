/**
 * The soak's world and what happens to it (bench/soak.ts runs it): R remote API servers,
 * each behind a fault proxy and registered under K cluster names (as the other scenarios
 * share a few real API servers among many clusters); the load, remote changes at a fixed
 * rate; and the faults, one a minute in turn from the chaos repertoire.
 *
 * Each remote holds `stable` Services exported throughout (their mirrors must keep their
 * uids: a re-created one is a wrongful delete) and `toggled` ones, exported and
 * unexported in turn; both kinds get annotation touches and port changes.
 */
import { type FaultProxy, startFaultProxyFor } from "../sandbox/fault-proxy.ts";
import { renderKubeconfig } from "../sandbox/kubeconfig.ts";
import { ACTOR_FAULT_KINDS } from "../src/protocol/options.ts";
import type { Supervisor } from "../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, type Fleet } from "../test/helpers/fleet.ts";
import { GATEWAY_PORT, runPool } from "./harness.ts";

export const SOAK_NAMESPACE = "soak";

export interface SoakShape {
  readonly remotes: number;
  readonly clustersPerRemote: number;
  readonly stable: number;
  readonly toggled: number;
  /** Mirror changes per second over the fleet (one remote change is one per cluster name of its remote). */
  readonly mirrorChangesPerS: number;
  readonly faultEveryS: number;
}

export interface SoakRemote {
  readonly name: string;
  readonly clusters: readonly string[];
  readonly proxy: FaultProxy;
  readonly gatewayIp: string;
  /** Toggled Services exported now. */
  readonly exported: Set<string>;
}

export const stableName = (i: number): string => `stable-${i}`;
export const toggledName = (i: number): string => `toggled-${i}`;

/** Every remote: its gateway, Services and proxy; each cluster name's Secret through that proxy. */
export async function shapeSoak(fleet: Fleet, remoteNames: readonly string[], shape: SoakShape): Promise<SoakRemote[]> {
  const remotes: SoakRemote[] = [];
  for (const [r, name] of remoteNames.entries()) {
    const gatewayIp = `198.18.0.${40 + r}`;
    await fleet.createGateway(name, { ingress: [{ ip: gatewayIp }], port: GATEWAY_PORT });
    await fleet.ensureNamespace(name, SOAK_NAMESPACE);
    const names = [
      ...Array.from({ length: shape.stable }, (_, i) => stableName(i)),
      ...Array.from({ length: shape.toggled }, (_, i) => toggledName(i)),
    ];
    await runPool(names, 8, async (svc) => {
      await fleet.createService(name, SOAK_NAMESPACE, svc);
    });
    const proxy = await startFaultProxyFor(fleet.plane, name);
    const token = await fleet.remoteToken(name);
    const clusters = Array.from({ length: shape.clustersPerRemote }, (_, k) => `${name}c${k}`);
    await runPool(clusters, 8, async (cluster) => {
      const kubeconfig = renderKubeconfig({
        cluster,
        server: proxy.url,
        caPem: fleet.plane.cluster(name).caPem,
        user: "fleet-mirror",
        auth: { token },
      });
      await fleet.local.createNamespacedSecret({
        namespace: CONTROLLER_NAMESPACE,
        body: fleet.secretBody({ secretName: `cluster-credentials-${cluster}`, clusterName: cluster, kubeconfig }),
      });
    });
    remotes.push({ name, clusters, proxy, gatewayIp, exported: new Set(names.filter((n) => n.startsWith("toggled"))) });
  }
  return remotes;
}

/**
 * Remote changes at `mirrorChangesPerS / K` per second until `until`, in turn over the
 * remotes: an annotation touch, a port change, or (for a toggled Service) an export or
 * unexport. A change whose request fails (a fault is on) is counted, not retried.
 */
export async function offerSoakLoad(
  fleet: Fleet,
  remotes: readonly SoakRemote[],
  shape: SoakShape,
  until: () => boolean,
): Promise<{ changes: number; failed: number }> {
  const perS = shape.mirrorChangesPerS / shape.clustersPerRemote;
  const started = Date.now();
  let changes = 0;
  let failed = 0;
  const inFlight = new Set<Promise<void>>();
  for (let i = 0; !until(); i++) {
    const wait = started + (i * 1000) / perS - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 1_000)));
    if (until()) break;
    if (wait > 1_000) {
      i--;
      continue;
    }
    const remote = remotes[i % remotes.length];
    if (!remote) continue;
    const round = Math.floor(i / remotes.length);
    const op = round % 4;
    const change =
      op === 3
        ? toggle(fleet, remote, toggledName(Math.floor(round / 4) % shape.toggled))
        : fleet.patchService(remote.name, SOAK_NAMESPACE, stableName(round % shape.stable), (svc) => {
            if (op === 2) {
              const port = svc.spec?.ports?.[0];
              if (port) port.port = 1000 + (round % 5000);
            } else svc.metadata = { ...svc.metadata, annotations: { ...svc.metadata?.annotations, touch: `${i}` } };
          });
    const tracked: Promise<void> = change.then(
      () => {
        changes++;
      },
      () => {
        failed++;
      },
    );
    inFlight.add(tracked);
    void tracked.finally(() => inFlight.delete(tracked));
  }
  await Promise.all([...inFlight]);
  return { changes, failed };
}

async function toggle(fleet: Fleet, remote: SoakRemote, name: string): Promise<void> {
  if (remote.exported.has(name)) {
    await fleet.unexport(remote.name, SOAK_NAMESPACE, name);
    remote.exported.delete(name);
    return;
  }
  await fleet.patchService(remote.name, SOAK_NAMESPACE, name, (svc) => {
    svc.metadata = {
      ...svc.metadata,
      annotations: {
        ...svc.metadata?.annotations,
        "mirror.linkerd.io/gateway-name": "gateway",
        "mirror.linkerd.io/gateway-ns": "gateway",
      },
    };
  });
  remote.exported.add(name);
}

export const FAULT_KINDS = ["watch-cut", "remote-restart", "gateway-dies", "actor-crash"] as const;
export type SoakFaultKind = (typeof FAULT_KINDS)[number];

export interface SoakFault {
  readonly atS: number;
  readonly kind: SoakFaultKind;
  readonly target: string;
  readonly ok: boolean;
  readonly error?: string;
}

/**
 * The n-th fault, in turn: a cut of every watch through a remote's proxy; a remote API
 * server killed and started again; a gateway losing its address for `downS` and
 * getting it back (its mirrors' endpoints empty meanwhile); an actor crash (in turn:
 * throw, reject, exit, out of memory). Resolves when the fault is over.
 */
export async function applyFault(
  n: number,
  ctx: {
    readonly fleet: Fleet;
    readonly remotes: readonly SoakRemote[];
    readonly supervisor: Supervisor;
    readonly startedAt: number;
    readonly downS: number;
  },
): Promise<SoakFault> {
  const kind = FAULT_KINDS[n % FAULT_KINDS.length] ?? "watch-cut";
  const remote = ctx.remotes[Math.floor(n / FAULT_KINDS.length) % ctx.remotes.length];
  const atS = Math.round((Date.now() - ctx.startedAt) / 1000);
  if (!remote) return { atS, kind, target: "none", ok: false, error: "no remote" };
  let target = remote.name;
  try {
    switch (kind) {
      case "watch-cut":
        remote.proxy.cutWatches();
        break;
      case "remote-restart":
        await ctx.fleet.plane.restartApiServer(remote.name, { kill: true });
        break;
      case "gateway-dies":
        await ctx.fleet.setGatewayIngress(remote.name, []);
        await new Promise((resolve) => setTimeout(resolve, ctx.downS * 1000));
        await ctx.fleet.setGatewayIngress(remote.name, [{ ip: remote.gatewayIp }]);
        break;
      case "actor-crash": {
        const cluster = remote.clusters[n % remote.clusters.length] ?? remote.clusters[0] ?? "";
        const how = ACTOR_FAULT_KINDS[Math.floor(n / FAULT_KINDS.length) % ACTOR_FAULT_KINDS.length] ?? "throw";
        target = `${cluster} (${how})`;
        ctx.supervisor.injectActorFault(cluster, how);
        break;
      }
    }
    return { atS, kind, target, ok: true };
  } catch (error) {
    return { atS, kind, target, ok: false, error: error instanceof Error ? error.message : String(error) };
  }
}
