/**
 * The chaos schedule: a seeded, reproducible list of steps — changes to the remote
 * clusters interleaved with faults. Pure: the same seed always yields the same steps, so
 * a failing run is replayed with its seed.
 *
 * Step types and the world's fixed names are in steps.ts. With `modes`, every third step
 * is a change to the other ways of exporting (mode-schedule.ts), drawn from a stream of
 * its own, so the other steps of a seed are exactly those it drew before.
 *
 * The generator keeps an approximate model of the remote state only to pick sensible
 * steps (unexport something exported, restore an ingress that was removed, …). The
 * oracle never uses this model: it reads the remote clusters as they finally are.
 */

import { Draw, mulberry32 } from "./draw.ts";
import { ModeSchedule } from "./mode-schedule.ts";
import {
  type FaultStep,
  GATEWAYS,
  type GatewayRef,
  MISSING_GATEWAY,
  type PortSpec,
  PROBE_FAILURES,
  type RemoteStep,
  type Step,
} from "./steps.ts";

/**
 * The seed of the short chaos run in `npm test`: a constant, so the suite's input is the
 * same on every run and every day (a failure there is a regression, not a new schedule).
 * New schedules come from `npm run test:chaos`, which draws a random seed each run.
 * Chosen because its 20 steps (30 with the mode steps interleaved), when probed, have gateway addresses die in each of the
 * three ways and some recover.
 */
export const NPM_TEST_SEED = 20261221;

interface ModelService {
  namespace: string;
  name: string;
  exported: boolean;
}

interface ModelGateway {
  exists: boolean;
  hasIngress: boolean;
}

/** Separates the mode steps' stream from the main one (any constant would do). */
const MODE_STREAM = 0x6d6f6465;

export interface ScheduleOptions {
  readonly seed: number;
  readonly clusters: readonly string[];
  /** Allow faults that need the fault proxy. */
  readonly proxies: boolean;
  /** Relative weight of faults against remote changes, 0–1. Default 0.4. */
  readonly faultShare?: number;
  /** Weight of the slow faults (API server restarts, controller restarts). Default 1. */
  readonly heavyWeight?: number;
  /**
   * Gateway addresses with a probe server (SPEC §10): when given, every gateway IP is
   * drawn from them and the schedule has addresses die and recover. Empty or absent:
   * no probing (the IPs are arbitrary documentation addresses).
   */
  readonly probeAddresses?: readonly string[];
  /**
   * The replicas of a sharded run: when given, the controller faults are replica faults
   * (`ReplicaStep`) instead of `kill-controller`/`term-controller`. Absent: one controller.
   */
  readonly replicas?: readonly string[];
  /**
   * Interleave changes to the other ways of exporting (mode-schedule.ts), one step in
   * three; `mcs`: the remotes serve ServiceExports. Absent: none (the schedule as it was).
   */
  readonly modes?: { readonly mcs: boolean };
}

/**
 * An endless generator of steps. `next()` is deterministic for a given seed and
 * options; `take(n)` returns the next n steps.
 */
export class Schedule {
  readonly seed: number;
  readonly #draw: Draw;
  readonly #options: ScheduleOptions;
  readonly #services = new Map<string, ModelService[]>();
  readonly #gateways = new Map<string, ModelGateway>();
  /** Probe addresses whose server is made to fail (the model; the oracle reads the servers). */
  readonly #deadAddresses = new Set<string>();
  /** Replicas killed and not started again yet (the model; `ReplicaStep`). */
  readonly #deadReplicas = new Set<string>();
  #counter = 0;
  readonly #modes: ModeSchedule | undefined;
  #drawn = 0;

  constructor(options: ScheduleOptions) {
    this.seed = options.seed;
    this.#options = options;
    this.#draw = new Draw(mulberry32(options.seed));
    this.#modes = options.modes
      ? new ModeSchedule({
          random: mulberry32(options.seed ^ MODE_STREAM),
          clusters: options.clusters,
          mcs: options.modes.mcs,
        })
      : undefined;
    for (const cluster of options.clusters) {
      this.#services.set(cluster, []);
      for (const gw of GATEWAYS) this.#gateways.set(`${cluster}/${gw.name}`, { exists: true, hasIngress: true });
    }
  }

  take(count: number): Step[] {
    const steps: Step[] = [];
    for (let i = 0; i < count; i++) steps.push(this.next());
    return steps;
  }

  next(): Step {
    this.#drawn++;
    if (this.#modes && this.#drawn % 3 === 0) return this.#modes.next();
    const faultShare = this.#options.faultShare ?? 0.4;
    const step = this.#draw.random() < faultShare ? this.#fault() : this.#remoteChange();
    return { ...step, pauseMs: this.#draw.int(100, 1_500) };
  }

  #ips(): string[] {
    const count = this.#draw.int(1, 3);
    const ips = new Set<string>();
    const pool = this.#options.probeAddresses ?? [];
    if (pool.length > 0) {
      while (ips.size < Math.min(count, pool.length)) ips.add(this.#draw.pick(pool));
      return [...ips];
    }
    const prefixes = ["198.18.0", "198.51.100", "203.0.113"];
    while (ips.size < count) ips.add(`${this.#draw.pick(prefixes)}.${this.#draw.int(1, 254)}`);
    return [...ips];
  }

  #ports(): PortSpec[] {
    const count = this.#draw.int(1, 3);
    if (count === 1 && this.#draw.random() < 0.3) {
      // A single unnamed port, sometimes UDP, sometimes with targetPort defaulted.
      const port = this.#draw.int(1, 9000);
      return [
        {
          protocol: this.#draw.random() < 0.2 ? "UDP" : "TCP",
          port,
          ...(this.#draw.random() < 0.5 ? { targetPort: this.#draw.int(1, 9000) } : {}),
        },
      ];
    }
    const names = ["http", "grpc", "metrics", "admin", "dns"];
    const used = new Set<number>();
    const ports: PortSpec[] = [];
    for (let i = 0; i < count; i++) {
      let port = this.#draw.int(1, 9000);
      while (used.has(port)) port = this.#draw.int(1, 9000);
      used.add(port);
      ports.push({
        name: names[i] ?? `p${i}`,
        protocol: this.#draw.random() < 0.15 ? "UDP" : "TCP",
        port,
        ...(this.#draw.random() < 0.6 ? { targetPort: this.#draw.int(1, 9000) } : {}),
      });
    }
    return ports;
  }

  #gatewayRef(): GatewayRef {
    return this.#draw.weighted<GatewayRef>([
      [8, GATEWAYS[0] ?? MISSING_GATEWAY],
      [3, GATEWAYS[1] ?? MISSING_GATEWAY],
      [1, MISSING_GATEWAY],
    ]);
  }

  #remoteChange(): RemoteStep {
    const cluster = this.#draw.pick(this.#options.clusters);
    const services = this.#services.get(cluster) ?? [];
    const exported = services.filter((s) => s.exported);
    const unexported = services.filter((s) => !s.exported);
    const alive = (this.#options.probeAddresses ?? []).filter((a) => !this.#deadAddresses.has(a));
    const kind = this.#draw.weighted<RemoteStep["kind"]>([
      [services.length < 4 ? 6 : 2, "export-new"],
      [exported.length > 0 ? 2 : 0, "unexport"],
      [unexported.length > 0 ? 2 : 0, "re-export"],
      [services.length > 0 ? 3 : 0, "change-ports"],
      [services.length > 0 ? 2 : 0, "delete-service"],
      [exported.length > 0 ? 1 : 0, "tamper-local"],
      [services.length > 0 ? 1 : 0, "recreate-service"],
      [2, "gateway-ips"],
      [1, "gateway-remove-ingress"],
      [1, "gateway-identity"],
      [1, "gateway-port"],
      [0.5, "gateway-delete"],
      // Last, so that a run without probes draws exactly the steps it drew before they existed.
      [alive.length > 0 ? 3 : 0, "probe-fail"],
      [this.#deadAddresses.size > 0 ? 2 : 0, "probe-recover"],
    ]);
    switch (kind) {
      case "export-new": {
        const namespace = this.#draw.weighted<string>([
          [5, "shop"],
          [4, "churn"],
          [1, "kube-system"],
        ]);
        const name = `svc-${this.#counter++}`;
        services.push({ namespace, name, exported: true });
        this.#services.set(cluster, services);
        return { kind, cluster, namespace, name, ports: this.#ports(), gateway: this.#gatewayRef() };
      }
      case "unexport": {
        const s = this.#draw.pick(exported);
        s.exported = false;
        return { kind, cluster, namespace: s.namespace, name: s.name, half: this.#draw.random() < 0.3 };
      }
      case "re-export": {
        const s = this.#draw.pick(unexported);
        s.exported = true;
        return { kind, cluster, namespace: s.namespace, name: s.name, gateway: this.#gatewayRef() };
      }
      case "change-ports": {
        const s = this.#draw.pick(services);
        return { kind, cluster, namespace: s.namespace, name: s.name, ports: this.#ports() };
      }
      case "delete-service": {
        const s = this.#draw.pick(services);
        services.splice(services.indexOf(s), 1);
        return { kind, cluster, namespace: s.namespace, name: s.name };
      }
      case "recreate-service": {
        const s = this.#draw.pick(services);
        s.exported = true;
        return {
          kind,
          cluster,
          namespace: s.namespace,
          name: s.name,
          ports: this.#ports(),
          gateway: this.#gatewayRef(),
        };
      }
      case "probe-fail": {
        const address = this.#draw.pick(alive);
        this.#deadAddresses.add(address);
        return { kind, address, how: this.#draw.pick(PROBE_FAILURES) };
      }
      case "probe-recover": {
        const address = this.#draw.pick([...this.#deadAddresses].sort());
        this.#deadAddresses.delete(address);
        return { kind, address };
      }
      case "tamper-local": {
        const s = this.#draw.pick(exported);
        const action = this.#draw.pick([
          "delete-service",
          "delete-endpoints",
          "edit-ports",
          "clear-endpoints",
        ] as const);
        return { kind, cluster, namespace: s.namespace, name: s.name, action };
      }
      default:
        return this.#gatewayChange(cluster, kind);
    }
  }

  #gatewayChange(cluster: string, kind: RemoteStep["kind"]): RemoteStep {
    const gateway = this.#draw.weighted<GatewayRef>([
      [3, GATEWAYS[0] ?? MISSING_GATEWAY],
      [1, GATEWAYS[1] ?? MISSING_GATEWAY],
    ]);
    const model = this.#gateways.get(`${cluster}/${gateway.name}`) ?? { exists: true, hasIngress: true };
    this.#gateways.set(`${cluster}/${gateway.name}`, model);
    // A deleted gateway comes back before anything else is done to it.
    if (!model.exists) {
      model.exists = true;
      model.hasIngress = true;
      return {
        kind: "gateway-create",
        cluster,
        gateway,
        ips: this.#ips(),
        port: this.#draw.int(4000, 4999),
        identity: this.#draw.random() < 0.5 ? `${gateway.name}.${cluster}.identity` : "",
      };
    }
    switch (kind) {
      case "gateway-remove-ingress":
        if (!model.hasIngress) {
          model.hasIngress = true;
          return { kind: "gateway-ips", cluster, gateway, ips: this.#ips() };
        }
        model.hasIngress = false;
        return { kind, cluster, gateway };
      case "gateway-identity":
        return {
          kind,
          cluster,
          gateway,
          identity: this.#draw.random() < 0.2 ? "" : `${gateway.name}-${this.#draw.int(1, 99)}.${cluster}.identity`,
        };
      case "gateway-port":
        return {
          kind,
          cluster,
          gateway,
          port: this.#draw.int(4000, 4999),
          portName: this.#draw.random() < 0.2 ? "not-incoming" : "incoming-port",
        };
      case "gateway-delete":
        model.exists = false;
        return { kind, cluster, gateway };
      default:
        model.hasIngress = true;
        return { kind: "gateway-ips", cluster, gateway, ips: this.#ips() };
    }
  }

  #fault(): FaultStep {
    const cluster = this.#draw.pick(this.#options.clusters);
    const proxy = this.#options.proxies ? 1 : 0;
    const heavy = this.#options.heavyWeight ?? 1;
    const replicas = this.#options.replicas ?? [];
    const single = replicas.length > 0 ? 0 : 1;
    const live = replicas.filter((r) => !this.#deadReplicas.has(r));
    const kind = this.#draw.weighted<FaultStep["kind"]>([
      [3 * proxy, "cut-watches"],
      [1 * proxy, "cut-all"],
      [2 * proxy, "stall"],
      [1 * proxy, "refuse"],
      [1 * proxy, "latency"],
      [1 * proxy, "corrupt-watch"],
      [4 * proxy, "errors"],
      [1.5 * heavy, "restart-remote-api"],
      [0.7 * heavy, "restart-local-api"],
      [1.2 * heavy * single, "kill-controller"],
      [0.8 * heavy * single, "term-controller"],
      // Last, with weight 0 in a single-controller run, so that such a run draws exactly
      // the steps it drew before replicas existed. One replica at least stays up.
      [live.length >= 2 ? 1.2 * heavy : 0, "kill-replica"],
      [this.#deadReplicas.size > 0 ? 1.5 * heavy : 0, "start-replica"],
      [live.length > 0 ? 0.8 * heavy : 0, "term-replica"],
      [live.length > 0 ? 1.2 * heavy : 0, "partition-replica"],
    ]);
    const ms = this.#draw.int(1_000, 5_000);
    switch (kind) {
      case "cut-watches":
      case "cut-all":
      case "restart-remote-api":
        return { kind, cluster };
      case "stall":
      case "refuse":
        return { kind, cluster, ms };
      case "corrupt-watch":
        return { kind, cluster, ms, mode: this.#draw.random() < 0.5 ? "invalid-json" : "wrong-kind" };
      case "latency":
        return { kind, cluster, ms, latencyMs: this.#draw.int(50, 1_500) };
      case "errors": {
        const status = this.#draw.pick([409, 429, 500, 503] as const);
        const errorRate = Math.round((0.3 + this.#draw.random() * 0.7) * 100) / 100;
        return {
          kind,
          cluster,
          ms,
          status,
          errorRate,
          ...(status === 429 || status === 503 ? { retryAfterSeconds: this.#draw.int(0, 2) } : {}),
        };
      }
      case "restart-local-api":
      case "kill-controller":
      case "term-controller":
        return { kind };
      case "kill-replica": {
        const replica = this.#draw.pick(live);
        this.#deadReplicas.add(replica);
        return { kind, replica };
      }
      case "start-replica": {
        const replica = this.#draw.pick([...this.#deadReplicas].sort());
        this.#deadReplicas.delete(replica);
        return { kind, replica };
      }
      case "term-replica":
        return { kind, replica: this.#draw.pick(live) };
      case "partition-replica":
        // From shorter than the renew deadline (the replica keeps its shards) to well past
        // the Lease duration (the others take them over) of the sharded run's timings.
        return { kind, replica: this.#draw.pick(live), ms: this.#draw.int(2_000, 20_000) };
      default:
        return { kind: "cut-watches", cluster };
    }
  }
}
