/**
 * The chaos run (issue "Survive faults"): three remote clusters behind fault-injecting
 * proxies, the controller as a separate process, and a seeded schedule of remote changes
 * interleaved with faults (cut/stalled/failing watches and requests, API server restarts,
 * controller kill -9 and SIGTERM), and gateways dying and recovering: every gateway has an
 * `mc-probe` port answered by real probe servers (`probes.ts`) that steps stop, make fail
 * and restore (without CAP_NET_ADMIN the run says so and goes on unprobed). Once the
 * faults stop, it asserts:
 *
 * - the local mirrors equal the independent oracle (`oracle.ts`) within `settleMs`, each
 *   endpoint ready or not as its address's probe server answers or not — this is also
 *   the proof that no key is stuck;
 * - the mirrors of Services exported throughout the run were never deleted (same uids);
 * - objects fleet-mirror does not own were never written (same resourceVersions);
 * - the controller exited 0 on every SIGTERM.
 *
 * With `replicas` (`--replicas R`), R replicas `--leader-elect --shards 6` replace the one
 * controller (replica-faults.ts: replica kill -9, SIGTERM rolling restarts, partitions of a
 * replica's local API), every remote is registered under a second name so that every
 * replica hosts clusters, and the audit log must show no mirror write by a replica that
 * did not hold its cluster's shard.
 *
 * `runChaos` is used by `test/integration/chaos.test.ts` (short) and by `main` below:
 *
 *     npm run test:chaos -- --minutes 30 [--seed 1234] [--replicas 3]
 *
 * Every failure message starts with the seed; rerun with `--seed` to replay the schedule.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import type { CoreV1Api, V1Endpoints, V1Service, V1ServicePort } from "@kubernetes/client-node";
import { type FaultProxy, type FaultRules, startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { statusCode } from "../helpers/kube.ts";
import { type ChaosControllers, type ControllerStep, isControllerStep, SingleController } from "./controller.ts";
import { actualMirrors, diffMirrors, expectedMirrors, mirrorKey, type RemoteCluster } from "./oracle.ts";
import { ChaosProbes } from "./probes.ts";
import { CHAOS_SHARDS, ChaosReplicas, replicaNames } from "./replica-faults.ts";
import { describeStep, GATEWAYS, type GatewayRef, type PortSpec, Schedule, type Step } from "./schedule.ts";
import { HELD_EXPORTS, identityOf, ignoring, retrying, STABLE, USER_OBJECTS, uidOf } from "./world.ts";

const GATEWAY_NAME = "mirror.linkerd.io/gateway-name";
const GATEWAY_NS = "mirror.linkerd.io/gateway-ns";
const GATEWAY_IDENTITY = "mirror.linkerd.io/gateway-identity";
/** A short probe period, so that an address is dead 3 failed probes (≈ 3 s) after it dies. */
const PROBE_PERIOD = "mirror.linkerd.io/probe-period";
const MIRROR_SELECTOR = "mirror.linkerd.io/mirrored-service=true";

export const CHAOS_CLUSTERS = ["east", "west", "north"] as const;

/**
 * A sharded run registers every remote a second time under an alias, so that its six
 * cluster names fall on five of the six shards (east→2, west→0, north→2, east3→5,
 * west4→4, north1→3) and every replica hosts clusters: with the three names alone, two
 * shards would hold them all.
 */
const SHARDED_ALIASES: Readonly<Record<string, string>> = { east: "east3", west: "west4", north: "north1" };

/** A cluster name registered against a remote API server (mirrors are `<service>-<name>`). */
interface Registration {
  readonly name: string;
  readonly remote: string;
}

export interface ChaosOptions {
  readonly seed: number;
  /** Run exactly this many steps … */
  readonly steps?: number;
  /** … or generate steps until this many minutes have passed. */
  readonly minutes?: number;
  /** Bound on convergence once the faults stop. Default 90 s. */
  readonly settleMs?: number;
  /** Weight of the slow faults (restarts). Default 1. */
  readonly heavyWeight?: number;
  /** Share of faults among the steps, 0–1. Default 0.4. */
  readonly faultShare?: number;
  /**
   * Run this many replicas `--leader-elect --shards 6` (replica-faults.ts) instead of one
   * controller, with replica kills, rolling restarts and partitions among the faults.
   */
  readonly replicas?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly seed: number;
  readonly steps: readonly string[];
  readonly mirrors: number;
  readonly settledInMs: number;
  readonly controllerRestarts: number;
  /** Sharded runs, from the local API server's audit log: successful mirror writes per identity, and shard handovers. */
  readonly audit?: { readonly mirrorWrites: Readonly<Record<string, number>>; readonly shardHandovers: number };
  readonly durationMs: number;
  readonly notes: readonly string[];
}

/** A failed chaos run; the message starts with the seed and carries what is needed to diagnose it. */
export class ChaosFailure extends Error {
  override name = "ChaosFailure";
}

function toPorts(ports: readonly PortSpec[]): V1ServicePort[] {
  return ports.map((p) => ({
    ...(p.name !== undefined ? { name: p.name } : {}),
    protocol: p.protocol,
    port: p.port,
    ...(p.targetPort !== undefined ? { targetPort: p.targetPort } : {}),
  }));
}

/** Everything of one chaos run that must be torn down. */
class ChaosRun {
  readonly seed: number;
  readonly fleet: Fleet;
  readonly log: (line: string) => void;
  readonly proxies = new Map<string, FaultProxy>();
  readonly #ruleGeneration = new Map<string, number>();
  readonly #background = new Set<Promise<void>>();
  readonly #remoteRestarts = new Map<string, Promise<void>>();
  readonly #backgroundErrors: string[] = [];
  readonly problems: string[] = [];
  /** Oddities that are not failures (a SIGTERM that arrived before the controller handled signals). */
  readonly notes: string[] = [];
  readonly steps: string[] = [];
  /** The controller side: one process or the replicas of a sharded run; set once set-up is done. */
  controllers: ChaosControllers | undefined;
  /** The gateways' probe servers; undefined: the run is unprobed. */
  probes: ChaosProbes | undefined;
  /** The controllers' `--shards` (1: one controller): the oracle's shard labels. */
  shards = 1;
  readonly registrations: readonly Registration[];

  constructor(seed: number, fleet: Fleet, registrations: readonly Registration[], log: (line: string) => void) {
    this.seed = seed;
    this.fleet = fleet;
    this.registrations = registrations;
    this.log = log;
  }

  // -- faults -----------------------------------------------------------------------

  #track(what: string, promise: Promise<void>): Promise<void> {
    const tracked = promise.catch((error: unknown) => {
      this.#backgroundErrors.push(`${what}: ${error instanceof Error ? error.message : String(error)}`);
    });
    this.#background.add(tracked);
    void tracked.finally(() => this.#background.delete(tracked));
    return tracked;
  }

  /** Applies `rules` to `cluster`'s proxy for `ms`, then makes it transparent unless rules changed meanwhile. */
  #timedRules(cluster: string, rules: FaultRules, ms: number): void {
    const proxy = this.proxies.get(cluster);
    if (!proxy) return;
    const generation = (this.#ruleGeneration.get(cluster) ?? 0) + 1;
    this.#ruleGeneration.set(cluster, generation);
    proxy.setRules(rules);
    void this.#track(
      `lift rules on ${cluster}`,
      (async () => {
        await sleep(ms);
        if (this.#ruleGeneration.get(cluster) === generation) proxy.setRules({});
      })(),
    );
  }

  #restartRemote(cluster: string): void {
    const previous = this.#remoteRestarts.get(cluster) ?? Promise.resolve();
    const next = this.#track(
      `restart ${cluster} API server`,
      previous.then(() => this.fleet.plane.restartApiServer(cluster, { kill: true })),
    );
    this.#remoteRestarts.set(cluster, next);
  }

  /** Ends every fault: proxies transparent, every API server up, every controller process running and healed. */
  async quiesce(): Promise<void> {
    for (const [cluster, proxy] of this.proxies) {
      this.#ruleGeneration.set(cluster, (this.#ruleGeneration.get(cluster) ?? 0) + 1);
      proxy.setRules({});
    }
    while (this.#background.size > 0) await Promise.all([...this.#background]);
    for (const proxy of this.proxies.values()) proxy.setRules({});
    for (const cluster of ["local", ...CHAOS_CLUSTERS]) {
      if (!this.fleet.plane.apiServerProcess(cluster).running) {
        this.problems.push(`API server ${cluster} was down after the schedule; started again`);
        await this.fleet.plane.startApiServer(cluster);
      }
    }
    if (this.#backgroundErrors.length > 0) this.problems.push(...this.#backgroundErrors);
    await this.controllers?.quiesce();
  }

  // -- steps ------------------------------------------------------------------------

  async run(step: Step): Promise<void> {
    const line = describeStep(step);
    this.steps.push(line);
    this.log(`step ${this.steps.length}: ${line}`);
    if (isControllerStep(step)) {
      if (!this.controllers) throw new Error("a controller step before the controllers were started");
      await this.controllers.apply(step);
    } else await this.#apply(step);
    await sleep(step.pauseMs);
  }

  async #apply(step: Exclude<Step, ControllerStep>): Promise<void> {
    switch (step.kind) {
      case "export-new":
        await this.#createService(step.cluster, step.namespace, step.name, step.ports, step.gateway);
        return;
      case "recreate-service": {
        const api = this.fleet.api(step.cluster);
        const { namespace, name } = step;
        const before = await retrying(`read ${step.cluster}:${namespace}/${name}`, () =>
          ignoring([404], () => api.readNamespacedService({ namespace, name })),
        );
        await retrying(`delete ${step.cluster}:${namespace}/${name}`, () =>
          ignoring([404], () => api.deleteNamespacedService({ namespace, name })),
        );
        await this.#createService(step.cluster, namespace, name, step.ports, step.gateway, before?.metadata?.uid);
        return;
      }
      case "unexport":
        await this.#patch(step.cluster, step.namespace, step.name, (svc) => {
          const annotations = { ...(svc.metadata?.annotations ?? {}) };
          if (step.half) delete annotations[GATEWAY_NS];
          else {
            delete annotations[GATEWAY_NAME];
            delete annotations[GATEWAY_NS];
          }
          if (svc.metadata) svc.metadata.annotations = annotations;
        });
        return;
      case "re-export":
        await this.#patch(step.cluster, step.namespace, step.name, (svc) => {
          if (svc.metadata)
            svc.metadata.annotations = {
              ...(svc.metadata.annotations ?? {}),
              [GATEWAY_NAME]: step.gateway.name,
              [GATEWAY_NS]: step.gateway.namespace,
            };
        });
        return;
      case "change-ports":
        await this.#patch(step.cluster, step.namespace, step.name, (svc) => {
          if (svc.spec) svc.spec.ports = toPorts(step.ports);
        });
        return;
      case "delete-service":
        await retrying(`delete ${step.cluster}:${step.namespace}/${step.name}`, () =>
          ignoring([404], () =>
            this.fleet.api(step.cluster).deleteNamespacedService({ namespace: step.namespace, name: step.name }),
          ),
        );
        return;
      case "tamper-local":
        await this.#tamper(step.namespace, `${step.name}-${step.cluster}`, step.action);
        return;
      case "gateway-ips":
        await this.#setIngress(step.cluster, step.gateway, step.ips);
        return;
      case "gateway-remove-ingress":
        await this.#setIngress(step.cluster, step.gateway, []);
        return;
      case "gateway-identity":
        await this.#patch(step.cluster, step.gateway.namespace, step.gateway.name, (svc) => {
          const annotations = { ...(svc.metadata?.annotations ?? {}) };
          if (step.identity) annotations[GATEWAY_IDENTITY] = step.identity;
          else delete annotations[GATEWAY_IDENTITY];
          if (svc.metadata) svc.metadata.annotations = annotations;
        });
        return;
      case "gateway-port":
        await this.#patch(step.cluster, step.gateway.namespace, step.gateway.name, (svc) => {
          const probe = svc.spec?.ports?.find((p) => p.name === "mc-probe");
          if (svc.spec)
            svc.spec.ports = [{ name: step.portName, port: step.port, protocol: "TCP" }, ...(probe ? [probe] : [])];
        });
        return;
      case "probe-fail":
        await this.probes?.fail(step.address, step.how);
        return;
      case "probe-recover":
        await this.probes?.recover(step.address);
        return;
      case "gateway-delete":
        await retrying(`delete gateway ${step.cluster}:${step.gateway.name}`, () =>
          ignoring([404], () =>
            this.fleet
              .api(step.cluster)
              .deleteNamespacedService({ namespace: step.gateway.namespace, name: step.gateway.name }),
          ),
        );
        return;
      case "gateway-create":
        await this.createGateway(step.cluster, step.gateway, step.ips, step.port, step.identity);
        return;
      case "cut-watches":
        this.proxies.get(step.cluster)?.cutWatches();
        return;
      case "cut-all":
        this.proxies.get(step.cluster)?.cutAll();
        return;
      case "stall":
        this.#timedRules(step.cluster, { stall: true }, step.ms);
        return;
      case "refuse":
        this.#timedRules(step.cluster, { refuse: true }, step.ms);
        this.proxies.get(step.cluster)?.cutAll();
        return;
      case "latency":
        this.#timedRules(step.cluster, { latencyMs: step.latencyMs }, step.ms);
        return;
      case "corrupt-watch":
        this.#timedRules(step.cluster, { corruptWatch: step.mode }, step.ms);
        this.proxies.get(step.cluster)?.cutWatches();
        return;
      case "errors":
        this.#timedRules(
          step.cluster,
          {
            errorRate: step.errorRate,
            errorStatus: step.status,
            ...(step.retryAfterSeconds !== undefined ? { retryAfterSeconds: step.retryAfterSeconds } : {}),
          },
          step.ms,
        );
        // Errors hit only new requests: cut the watches so the controller has to relist through them.
        this.proxies.get(step.cluster)?.cutWatches();
        return;
      case "restart-remote-api":
        this.#restartRemote(step.cluster);
        return;
      case "restart-local-api":
        await this.fleet.plane.restartApiServer("local", { kill: true });
        return;
      default: {
        const never: never = step;
        throw new Error(`unknown step ${JSON.stringify(never)}`);
      }
    }
  }

  /** Creates an exported Service; with `replacing`, an AlreadyExists from that old uid is retried. */
  async #createService(
    cluster: string,
    namespace: string,
    name: string,
    ports: readonly PortSpec[],
    gateway: GatewayRef,
    replacing?: string,
  ): Promise<void> {
    const api = this.fleet.api(cluster);
    await retrying(`namespace ${namespace} in ${cluster}`, () => this.fleet.ensureNamespace(cluster, namespace));
    await retrying(`create ${cluster}:${namespace}/${name}`, async () => {
      try {
        await api.createNamespacedService({
          namespace,
          body: {
            metadata: { name, annotations: { [GATEWAY_NAME]: gateway.name, [GATEWAY_NS]: gateway.namespace } },
            spec: { ports: toPorts(ports), selector: { app: name } },
          },
        });
      } catch (error) {
        if (statusCode(error) !== 409) throw error;
        // Created by an earlier attempt whose answer was lost — unless it is the old one, still being deleted.
        const current = await ignoring([404], () => api.readNamespacedService({ namespace, name }));
        if (!current || (replacing !== undefined && current.metadata?.uid === replacing)) throw error;
      }
    });
  }

  async #patch(cluster: string, namespace: string, name: string, mutate: (svc: V1Service) => void): Promise<void> {
    const api = this.fleet.api(cluster);
    await retrying(`update ${cluster}:${namespace}/${name}`, async () => {
      const svc = await ignoring([404], () => api.readNamespacedService({ namespace, name }));
      if (!svc) {
        this.log(`  (${cluster}:${namespace}/${name} does not exist; skipped)`);
        return;
      }
      mutate(svc);
      await api.replaceNamespacedService({ namespace, name, body: svc });
    });
  }

  /** Edits a mirror by hand in the local cluster (the controller must restore it); absent → skipped. */
  async #tamper(
    namespace: string,
    name: string,
    action: "delete-service" | "delete-endpoints" | "edit-ports" | "clear-endpoints",
  ): Promise<void> {
    const local = this.fleet.local;
    const skipped = () => this.log(`  (local ${namespace}/${name} does not exist; skipped)`);
    await retrying(`tamper with local ${namespace}/${name}`, async () => {
      switch (action) {
        case "delete-service":
          if (!(await ignoring([404], () => local.deleteNamespacedService({ namespace, name })))) skipped();
          return;
        case "delete-endpoints":
          if (!(await ignoring([404], () => local.deleteNamespacedEndpoints({ namespace, name })))) skipped();
          return;
        case "edit-ports": {
          const svc = await ignoring([404], () => local.readNamespacedService({ namespace, name }));
          if (!svc?.spec) return skipped();
          svc.spec.ports = [{ name: "tampered", port: 1, protocol: "TCP" }];
          await local.replaceNamespacedService({ namespace, name, body: svc });
          return;
        }
        case "clear-endpoints": {
          const ep = await ignoring([404], () => local.readNamespacedEndpoints({ namespace, name }));
          if (!ep) return skipped();
          ep.subsets = [{ addresses: [{ ip: "10.9.9.9" }], ports: [{ name: "tampered", port: 1 }] }];
          await local.replaceNamespacedEndpoints({ namespace, name, body: ep });
          return;
        }
        default: {
          const never: never = action;
          throw new Error(`unknown tamper action ${String(never)}`);
        }
      }
    });
  }

  async #setIngress(cluster: string, gateway: GatewayRef, ips: readonly string[]): Promise<void> {
    const api = this.fleet.api(cluster);
    await retrying(`ingress of ${cluster}:${gateway.name}`, async () => {
      const svc = await ignoring([404], () =>
        api.readNamespacedServiceStatus({ namespace: gateway.namespace, name: gateway.name }),
      );
      if (!svc) {
        this.log(`  (gateway ${cluster}:${gateway.name} does not exist; skipped)`);
        return;
      }
      svc.status = { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } };
      await api.replaceNamespacedServiceStatus({ namespace: gateway.namespace, name: gateway.name, body: svc });
    });
  }

  async createGateway(
    cluster: string,
    gateway: GatewayRef,
    ips: readonly string[],
    port: number,
    identity: string,
  ): Promise<void> {
    await retrying(`namespace ${gateway.namespace} in ${cluster}`, () =>
      this.fleet.ensureNamespace(cluster, gateway.namespace),
    );
    await retrying(`create gateway ${cluster}:${gateway.name}`, () =>
      ignoring([409], () =>
        this.fleet.api(cluster).createNamespacedService({
          namespace: gateway.namespace,
          body: {
            metadata: {
              name: gateway.name,
              annotations: {
                ...(identity ? { [GATEWAY_IDENTITY]: identity } : {}),
                ...(this.probes ? { [PROBE_PERIOD]: "1" } : {}),
              },
            },
            spec: {
              type: "LoadBalancer",
              ports: [
                { name: "incoming-port", port, protocol: "TCP" },
                ...(this.probes ? [{ name: "mc-probe", port: this.probes.port, protocol: "TCP" }] : []),
              ],
            },
          },
        }),
      ),
    );
    await this.#setIngress(cluster, gateway, ips);
  }

  // -- observation ------------------------------------------------------------------

  async remoteState(): Promise<RemoteCluster[]> {
    const byRemote = new Map<string, V1Service[]>(
      await Promise.all(
        CHAOS_CLUSTERS.map(async (remote) => {
          const list = await retrying(`list ${remote}`, () => this.fleet.api(remote).listServiceForAllNamespaces());
          return [remote, list.items] as const;
        }),
      ),
    );
    return this.registrations.map(({ name, remote }) => ({
      name,
      domain: "cluster.local",
      services: byRemote.get(remote) ?? [],
    }));
  }

  async localState(): Promise<{ services: V1Service[]; endpoints: V1Endpoints[] }> {
    const local: CoreV1Api = this.fleet.local;
    const [services, endpoints] = await Promise.all([
      retrying("list local services", () => local.listServiceForAllNamespaces({ labelSelector: MIRROR_SELECTOR })),
      retrying("list local endpoints", () => local.listEndpointsForAllNamespaces({ labelSelector: MIRROR_SELECTOR })),
    ]);
    return { services: services.items, endpoints: endpoints.items };
  }

  /** The oracle's diff against the local state now (empty = equal). */
  async diff(userHeld: ReadonlySet<string>): Promise<{ lines: string[]; mirrors: number; notReady: number }> {
    const deadAddresses = this.probes?.deadAddresses() ?? new Set<string>();
    const expected = expectedMirrors(await this.remoteState(), { userHeld, deadAddresses, shards: this.shards });
    const local = await this.localState();
    // Endpoints the oracle expects not ready: how much of gateway health the check covered.
    let notReady = 0;
    for (const mirror of expected.values())
      for (const subset of mirror.endpoints?.subsets ?? [])
        notReady += subset.addresses.filter((a) => a.startsWith("notReady:")).length;
    return {
      lines: diffMirrors(expected, actualMirrors(local.services, local.endpoints)),
      mirrors: expected.size,
      notReady,
    };
  }

  async stopAll(): Promise<void> {
    await this.controllers?.stop();
    for (const proxy of this.proxies.values()) await proxy.stop().catch(() => undefined);
    await this.probes?.stop().catch(() => undefined);
  }
}

/**
 * Runs one chaos run end to end: control plane, setup, schedule, faults off, assertions.
 * Throws `ChaosFailure` (message starting with the seed) when an assertion fails.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  try {
    return await runSeeded(options);
  } catch (error) {
    if (error instanceof ChaosFailure) throw error;
    // Anything else (the control plane would not start, a setup call failed): labelled
    // with the seed too, so every failure can be replayed.
    throw new ChaosFailure(
      `chaos seed ${options.seed}: ${error instanceof Error ? error.message : String(error)}\n-- replay: npm run test:chaos -- ${replayArgs(options).join(" ")}`,
      { cause: error },
    );
  }
}

/** The command-line arguments that replay a run with these options. */
function replayArgs(options: ChaosOptions): string[] {
  return [
    `--seed ${options.seed}`,
    options.minutes !== undefined ? `--minutes ${options.minutes}` : "",
    options.steps !== undefined ? `--steps ${options.steps}` : "",
    options.heavyWeight !== undefined ? `--heavy-weight ${options.heavyWeight}` : "",
    options.faultShare !== undefined ? `--fault-share ${options.faultShare}` : "",
    options.replicas !== undefined ? `--replicas ${options.replicas}` : "",
  ].filter(Boolean);
}

async function runSeeded(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const seed = options.seed;
  const started = Date.now();
  const settleMs = options.settleMs ?? 90_000;
  const replay = replayArgs(options);
  log(`chaos seed ${seed} (replay: npm run test:chaos -- ${replay.join(" ")})`);

  const sharded = options.replicas !== undefined && options.replicas > 0;
  const registrations: Registration[] = CHAOS_CLUSTERS.map((remote) => ({ name: remote, remote }));
  if (sharded)
    for (const remote of CHAOS_CLUSTERS) registrations.push({ name: SHARDED_ALIASES[remote] ?? `${remote}2`, remote });
  // A sharded run is judged by the local API server's audit log too (replica-faults.ts).
  const fleet = await Fleet.start([...CHAOS_CLUSTERS], sharded ? { audit: true } : {});
  const run = new ChaosRun(seed, fleet, registrations, log);
  const fail = (what: string, details: string): never => {
    throw new ChaosFailure(
      [
        `chaos seed ${seed}: ${what}`,
        details,
        `-- replay: npm run test:chaos -- ${[...replay.filter((r) => !/^--(minutes|steps)/.test(r)), `--steps ${run.steps.length}`].join(" ")}`,
        `-- steps (${run.steps.length}) --`,
        ...run.steps.map((s, i) => `${i + 1}. ${s}`),
        run.problems.length > 0 ? `-- problems --\n${run.problems.join("\n")}` : "",
        run.controllers?.diagnostics() ?? "",
      ].join("\n"),
    );
  };

  try {
    // -- setup: probe servers, gateways, stable and held exports, user objects, proxies, the controller --
    const probes = await ChaosProbes.start();
    if (probes instanceof ChaosProbes) {
      run.probes = probes;
      log(probes.describe());
    } else {
      run.notes.push(`gateways not probed: ${probes.unavailable}`);
      log(`gateways not probed (no gateway dies in this run): ${probes.unavailable}`);
    }
    const probeAddresses = run.probes?.addresses ?? [];
    for (const [i, cluster] of CHAOS_CLUSTERS.entries()) {
      for (const [g, gateway] of GATEWAYS.entries()) {
        const slot = i * GATEWAYS.length + g;
        await run.createGateway(
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
    const userHeld = new Set(USER_OBJECTS.map((u) => mirrorKey(u.namespace, u.name)));

    for (const cluster of CHAOS_CLUSTERS) run.proxies.set(cluster, await startFaultProxyFor(fleet.plane, cluster));
    for (const { name, remote } of registrations) {
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
        body: fleet.secretBody({ secretName: `cluster-credentials-${name}`, clusterName: name, kubeconfig }),
      });
    }
    const findings = { problems: run.problems, notes: run.notes };
    if (sharded) {
      const replicas = await ChaosReplicas.create({
        fleet,
        findings,
        count: options.replicas ?? 0,
        clusters: registrations.map((r) => r.name),
        log,
      });
      log(replicas.describe());
      run.controllers = replicas;
      run.shards = CHAOS_SHARDS;
    } else run.controllers = new SingleController(fleet, findings);
    await run.controllers.start();

    const initialStart = Date.now();
    let initial = await run.diff(userHeld);
    while (initial.lines.length > 0 && Date.now() - initialStart < settleMs) {
      await sleep(500);
      initial = await run.diff(userHeld);
    }
    if (initial.lines.length > 0) fail("the initial mirrors never matched the oracle", initial.lines.join("\n"));
    log(`initial ${initial.mirrors} mirrors in place after ${Date.now() - initialStart} ms`);

    const stableUids = new Map<string, string>();
    for (const { name: cluster } of registrations) {
      for (const s of STABLE) {
        for (const kind of ["Service", "Endpoints"] as const) {
          const key = `${kind} ${s.namespace}/${s.name}-${cluster}`;
          stableUids.set(key, await uidOf(fleet.local, kind, s.namespace, `${s.name}-${cluster}`));
        }
      }
    }
    const userIdentities = new Map<string, string>();
    for (const u of USER_OBJECTS) {
      userIdentities.set(
        `${u.kind} ${u.namespace}/${u.name}`,
        await identityOf(fleet.local, u.kind, u.namespace, u.name),
      );
    }

    // -- the schedule ---------------------------------------------------------------
    const schedule = new Schedule({
      seed,
      clusters: CHAOS_CLUSTERS,
      proxies: true,
      probeAddresses,
      ...(sharded ? { replicas: replicaNames(options.replicas ?? 0) } : {}),
      ...(options.heavyWeight !== undefined ? { heavyWeight: options.heavyWeight } : {}),
      ...(options.faultShare !== undefined ? { faultShare: options.faultShare } : {}),
    });
    const until = options.minutes !== undefined ? Date.now() + options.minutes * 60_000 : Number.POSITIVE_INFINITY;
    const maxSteps = options.steps ?? Number.POSITIVE_INFINITY;
    while (run.steps.length < maxSteps && Date.now() < until) {
      try {
        await run.run(schedule.next());
      } catch (error) {
        fail(
          "a step could not be applied",
          error instanceof Error ? `${error.message}\n${String(error.cause)}` : String(error),
        );
      }
    }

    // -- faults off, then the assertions --------------------------------------------
    log("faults off; waiting for convergence");
    await run.quiesce();
    const settleStart = Date.now();
    let final = await run.diff(userHeld);
    while (final.lines.length > 0 && Date.now() - settleStart < settleMs) {
      await sleep(500);
      final = await run.diff(userHeld);
    }
    const settledInMs = Date.now() - settleStart;
    if (final.lines.length > 0) {
      fail(`local state did not equal the oracle within ${settleMs} ms`, `-- diff --\n${final.lines.join("\n")}`);
    }
    log(`converged to ${final.mirrors} mirrors (${final.notReady} endpoints not ready) in ${settledInMs} ms`);

    const deleted: string[] = [];
    for (const [key, uid] of stableUids) {
      const [kind, path] = key.split(" ") as ["Service" | "Endpoints", string];
      const [namespace = "", name = ""] = path.split("/");
      const now = await uidOf(fleet.local, kind, namespace, name);
      if (now !== uid) deleted.push(`${key}: ${uid} → ${now}`);
    }
    if (deleted.length > 0) fail("mirrors of Services exported throughout the run were deleted", deleted.join("\n"));

    const written: string[] = [];
    for (const u of USER_OBJECTS) {
      const key = `${u.kind} ${u.namespace}/${u.name}`;
      const now = await identityOf(fleet.local, u.kind, u.namespace, u.name).catch(
        (e: unknown) => `gone (${String(e)})`,
      );
      if (now !== userIdentities.get(key)) written.push(`${key}: ${userIdentities.get(key)} → ${now}`);
    }
    if (written.length > 0) fail("objects fleet-mirror does not own were written", written.join("\n"));

    if (run.problems.length > 0) fail("problems during the run", run.problems.join("\n"));
    const failures = await run.controllers.verify();
    if (failures.length > 0) fail(sharded ? "the replicas' checks failed" : "the controller died", failures.join("\n"));
    return {
      seed,
      steps: run.steps,
      mirrors: final.mirrors,
      settledInMs,
      controllerRestarts: run.controllers.restarts,
      ...(run.controllers instanceof ChaosReplicas ? { audit: run.controllers.auditSummary() } : {}),
      durationMs: Date.now() - started,
      notes: run.notes,
    };
  } finally {
    await run.stopAll();
    await fleet.stop();
  }
}

/**
 * `node test/chaos/run.ts --minutes N [--seed S]` (or `--steps N`); also `--settle-seconds N`
 * (default 90), `--heavy-weight W` (restarts, default 1), `--fault-share F` (0–1, default 0.4),
 * `--replicas R` (a sharded run: R replicas, 6 shards; replica-faults.ts).
 * Exit code 0 on success, 1 on a failed assertion (the message starts with the seed), 2 on usage.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      minutes: { type: "string" },
      seed: { type: "string" },
      steps: { type: "string" },
      "settle-seconds": { type: "string" },
      "heavy-weight": { type: "string" },
      "fault-share": { type: "string" },
      replicas: { type: "string" },
    },
    allowPositionals: false,
  });
  const seed = values.seed !== undefined ? Number(values.seed) : (Date.now() % 2_147_483_647) >>> 0;
  if (!Number.isInteger(seed)) throw new Error(`--seed: ${values.seed} is not an integer`);
  const minutes = values.minutes !== undefined ? Number(values.minutes) : undefined;
  const steps = values.steps !== undefined ? Number(values.steps) : undefined;
  const replicas = values.replicas !== undefined ? Number(values.replicas) : undefined;
  if (replicas !== undefined && !(Number.isInteger(replicas) && replicas >= 1)) {
    process.stderr.write(`--replicas: ${values.replicas} is not a positive integer\n`);
    return 2;
  }
  if (minutes === undefined && steps === undefined) {
    process.stderr.write("usage: node test/chaos/run.ts --minutes N [--seed S]  (or --steps N)\n");
    return 2;
  }
  try {
    const report = await runChaos({
      seed,
      ...(minutes !== undefined ? { minutes } : {}),
      ...(steps !== undefined ? { steps } : {}),
      ...(values["settle-seconds"] !== undefined ? { settleMs: Number(values["settle-seconds"]) * 1_000 } : {}),
      ...(values["heavy-weight"] !== undefined ? { heavyWeight: Number(values["heavy-weight"]) } : {}),
      ...(values["fault-share"] !== undefined ? { faultShare: Number(values["fault-share"]) } : {}),
      ...(replicas !== undefined ? { replicas } : {}),
    });
    for (const note of report.notes) process.stdout.write(`note: ${note}\n`);
    process.stdout.write(
      `chaos seed ${report.seed}: PASS — ${report.steps.length} steps, ${report.controllerRestarts} controller restarts, ` +
        `${report.mirrors} mirrors, converged in ${report.settledInMs} ms, ${Math.round(report.durationMs / 1000)} s in all\n`,
    );
    if (report.audit)
      process.stdout.write(
        `${report.audit.shardHandovers} shard handovers; mirror writes by identity: ${JSON.stringify(report.audit.mirrorWrites)}\n`,
      );
    return 0;
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

if (import.meta.main) process.exitCode = await main(process.argv.slice(2));
