/**
 * The chaos schedule: a seeded, reproducible list of steps — changes to the remote
 * clusters interleaved with faults. Pure: the same seed always yields the same steps, so
 * a failing run is replayed with its seed.
 *
 * The generator keeps an approximate model of the remote state only to pick sensible
 * steps (unexport something exported, restore an ingress that was removed, …). The
 * oracle never uses this model: it reads the remote clusters as they finally are.
 */

/** mulberry32: a tiny 32-bit PRNG, good enough to shuffle a test and fully determined by its seed. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * The seed of the short chaos run in `npm test`: a constant, so the suite's input is the
 * same on every run and every day (a failure there is a regression, not a new schedule).
 * New schedules come from `npm run test:chaos`, which draws a random seed each run.
 * Chosen because its 20 steps, when probed, have gateway addresses die in each of the
 * three ways and some recover.
 */
export const NPM_TEST_SEED = 20261221;

export interface PortSpec {
  readonly name?: string;
  readonly protocol: "TCP" | "UDP";
  readonly port: number;
  readonly targetPort?: number;
}

export interface GatewayRef {
  readonly namespace: string;
  readonly name: string;
}

/** Gateways the schedule creates in every remote; `missing` is referenced but never created. */
export const GATEWAYS: readonly GatewayRef[] = [
  { namespace: "gateway", name: "gateway" },
  { namespace: "gateway", name: "gw2" },
];
export const MISSING_GATEWAY: GatewayRef = { namespace: "gateway", name: "missing" };

/** Namespaces the schedule's Services live in (kube-system is excluded from mirroring). */
export const CHURN_NAMESPACES = ["shop", "churn", "kube-system"] as const;

export type RemoteStep =
  | {
      readonly kind: "export-new";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly ports: readonly PortSpec[];
      readonly gateway: GatewayRef;
    }
  /** `half`: drop one of the two annotations only, which also means "not exported". */
  | {
      readonly kind: "unexport";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly half: boolean;
    }
  | {
      readonly kind: "re-export";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly gateway: GatewayRef;
    }
  | {
      readonly kind: "change-ports";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly ports: readonly PortSpec[];
    }
  | { readonly kind: "delete-service"; readonly cluster: string; readonly namespace: string; readonly name: string }
  /** Deleted and created again at once under the same name (a new uid), with new ports. */
  | {
      readonly kind: "recreate-service";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly ports: readonly PortSpec[];
      readonly gateway: GatewayRef;
    }
  /** A hand edit of a (churn) mirror in the local cluster, which must be undone (SPEC §4). */
  | {
      readonly kind: "tamper-local";
      readonly cluster: string;
      readonly namespace: string;
      readonly name: string;
      readonly action: "delete-service" | "delete-endpoints" | "edit-ports" | "clear-endpoints";
    }
  | { readonly kind: "gateway-ips"; readonly cluster: string; readonly gateway: GatewayRef; readonly ips: string[] }
  | { readonly kind: "gateway-remove-ingress"; readonly cluster: string; readonly gateway: GatewayRef }
  | {
      readonly kind: "gateway-identity";
      readonly cluster: string;
      readonly gateway: GatewayRef;
      readonly identity: string;
    }
  /** Changes the incoming-port number, or renames the port so the gateway is unusable (`portName`). */
  | {
      readonly kind: "gateway-port";
      readonly cluster: string;
      readonly gateway: GatewayRef;
      readonly port: number;
      readonly portName: string;
    }
  | { readonly kind: "gateway-delete"; readonly cluster: string; readonly gateway: GatewayRef }
  /**
   * A gateway address dies (probes on): its probe server stops (refused), answers 503
   * or accepts and never answers; every gateway at that address is affected.
   */
  | { readonly kind: "probe-fail"; readonly address: string; readonly how: ProbeFailure }
  /** A dead gateway address answers its probes again. */
  | { readonly kind: "probe-recover"; readonly address: string }
  | {
      readonly kind: "gateway-create";
      readonly cluster: string;
      readonly gateway: GatewayRef;
      readonly ips: string[];
      readonly port: number;
      readonly identity: string;
    };

export const PROBE_FAILURES = ["stop", "unavailable", "hang"] as const;
export type ProbeFailure = (typeof PROBE_FAILURES)[number];

export type FaultStep =
  | { readonly kind: "cut-watches"; readonly cluster: string }
  | { readonly kind: "cut-all"; readonly cluster: string }
  | { readonly kind: "stall"; readonly cluster: string; readonly ms: number }
  | { readonly kind: "refuse"; readonly cluster: string; readonly ms: number }
  | { readonly kind: "latency"; readonly cluster: string; readonly latencyMs: number; readonly ms: number }
  | {
      readonly kind: "corrupt-watch";
      readonly cluster: string;
      readonly mode: "invalid-json" | "wrong-kind";
      readonly ms: number;
    }
  | {
      readonly kind: "errors";
      readonly cluster: string;
      readonly status: 409 | 429 | 500 | 503;
      readonly errorRate: number;
      readonly retryAfterSeconds?: number;
      readonly ms: number;
    }
  | { readonly kind: "restart-remote-api"; readonly cluster: string }
  | { readonly kind: "restart-local-api" }
  | { readonly kind: "kill-controller" }
  | { readonly kind: "term-controller" }
  | ReplicaStep;

/**
 * Faults of one replica of a sharded Deployment (`ScheduleOptions.replicas`): kill -9
 * (it stays down until a `start-replica` step or the end of the schedule), a SIGTERM
 * rolling restart (it must exit 0 and is started again at once), and a partition of its
 * local API for `ms` (its proxy stalls every request and stream, then lets them through).
 */
export type ReplicaStep =
  | { readonly kind: "kill-replica"; readonly replica: string }
  | { readonly kind: "start-replica"; readonly replica: string }
  | { readonly kind: "term-replica"; readonly replica: string }
  | { readonly kind: "partition-replica"; readonly replica: string; readonly ms: number };

export type Step = (RemoteStep | FaultStep) & { readonly pauseMs: number };

/** Whether the step needs the fault proxy (the others work on direct registrations too). */
export function needsProxy(step: Step): boolean {
  return ["cut-watches", "cut-all", "stall", "refuse", "latency", "corrupt-watch", "errors"].includes(step.kind);
}

export function describeStep(step: Step): string {
  const { kind, pauseMs, ...rest } = step;
  const fields = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
    .join(" ");
  return `${kind} ${fields} (then ${pauseMs} ms)`;
}

interface ModelService {
  namespace: string;
  name: string;
  exported: boolean;
}

interface ModelGateway {
  exists: boolean;
  hasIngress: boolean;
}

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
}

/**
 * An endless generator of steps. `next()` is deterministic for a given seed and
 * options; `take(n)` returns the next n steps.
 */
export class Schedule {
  readonly seed: number;
  readonly #random: () => number;
  readonly #options: ScheduleOptions;
  readonly #services = new Map<string, ModelService[]>();
  readonly #gateways = new Map<string, ModelGateway>();
  /** Probe addresses whose server is made to fail (the model; the oracle reads the servers). */
  readonly #deadAddresses = new Set<string>();
  /** Replicas killed and not started again yet (the model; `ReplicaStep`). */
  readonly #deadReplicas = new Set<string>();
  #counter = 0;

  constructor(options: ScheduleOptions) {
    this.seed = options.seed;
    this.#options = options;
    this.#random = mulberry32(options.seed);
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
    const faultShare = this.#options.faultShare ?? 0.4;
    const step = this.#random() < faultShare ? this.#fault() : this.#remoteChange();
    return { ...step, pauseMs: this.#int(100, 1_500) };
  }

  #int(min: number, max: number): number {
    return min + Math.floor(this.#random() * (max - min + 1));
  }

  #pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.#random() * items.length)];
    if (item === undefined) throw new Error("pick from an empty list");
    return item;
  }

  #weighted<T>(choices: readonly (readonly [number, T])[]): T {
    const total = choices.reduce((sum, [w]) => sum + w, 0);
    let r = this.#random() * total;
    for (const [w, value] of choices) {
      r -= w;
      if (r < 0) return value;
    }
    const last = choices[choices.length - 1];
    if (!last) throw new Error("weighted pick from an empty list");
    return last[1];
  }

  #ips(): string[] {
    const count = this.#int(1, 3);
    const ips = new Set<string>();
    const pool = this.#options.probeAddresses ?? [];
    if (pool.length > 0) {
      while (ips.size < Math.min(count, pool.length)) ips.add(this.#pick(pool));
      return [...ips];
    }
    const prefixes = ["198.18.0", "198.51.100", "203.0.113"];
    while (ips.size < count) ips.add(`${this.#pick(prefixes)}.${this.#int(1, 254)}`);
    return [...ips];
  }

  #ports(): PortSpec[] {
    const count = this.#int(1, 3);
    if (count === 1 && this.#random() < 0.3) {
      // A single unnamed port, sometimes UDP, sometimes with targetPort defaulted.
      const port = this.#int(1, 9000);
      return [
        {
          protocol: this.#random() < 0.2 ? "UDP" : "TCP",
          port,
          ...(this.#random() < 0.5 ? { targetPort: this.#int(1, 9000) } : {}),
        },
      ];
    }
    const names = ["http", "grpc", "metrics", "admin", "dns"];
    const used = new Set<number>();
    const ports: PortSpec[] = [];
    for (let i = 0; i < count; i++) {
      let port = this.#int(1, 9000);
      while (used.has(port)) port = this.#int(1, 9000);
      used.add(port);
      ports.push({
        name: names[i] ?? `p${i}`,
        protocol: this.#random() < 0.15 ? "UDP" : "TCP",
        port,
        ...(this.#random() < 0.6 ? { targetPort: this.#int(1, 9000) } : {}),
      });
    }
    return ports;
  }

  #gatewayRef(): GatewayRef {
    return this.#weighted<GatewayRef>([
      [8, GATEWAYS[0] ?? MISSING_GATEWAY],
      [3, GATEWAYS[1] ?? MISSING_GATEWAY],
      [1, MISSING_GATEWAY],
    ]);
  }

  #remoteChange(): RemoteStep {
    const cluster = this.#pick(this.#options.clusters);
    const services = this.#services.get(cluster) ?? [];
    const exported = services.filter((s) => s.exported);
    const unexported = services.filter((s) => !s.exported);
    const alive = (this.#options.probeAddresses ?? []).filter((a) => !this.#deadAddresses.has(a));
    const kind = this.#weighted<RemoteStep["kind"]>([
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
        const namespace = this.#weighted<string>([
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
        const s = this.#pick(exported);
        s.exported = false;
        return { kind, cluster, namespace: s.namespace, name: s.name, half: this.#random() < 0.3 };
      }
      case "re-export": {
        const s = this.#pick(unexported);
        s.exported = true;
        return { kind, cluster, namespace: s.namespace, name: s.name, gateway: this.#gatewayRef() };
      }
      case "change-ports": {
        const s = this.#pick(services);
        return { kind, cluster, namespace: s.namespace, name: s.name, ports: this.#ports() };
      }
      case "delete-service": {
        const s = this.#pick(services);
        services.splice(services.indexOf(s), 1);
        return { kind, cluster, namespace: s.namespace, name: s.name };
      }
      case "recreate-service": {
        const s = this.#pick(services);
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
        const address = this.#pick(alive);
        this.#deadAddresses.add(address);
        return { kind, address, how: this.#pick(PROBE_FAILURES) };
      }
      case "probe-recover": {
        const address = this.#pick([...this.#deadAddresses].sort());
        this.#deadAddresses.delete(address);
        return { kind, address };
      }
      case "tamper-local": {
        const s = this.#pick(exported);
        const action = this.#pick(["delete-service", "delete-endpoints", "edit-ports", "clear-endpoints"] as const);
        return { kind, cluster, namespace: s.namespace, name: s.name, action };
      }
      default:
        return this.#gatewayChange(cluster, kind);
    }
  }

  #gatewayChange(cluster: string, kind: RemoteStep["kind"]): RemoteStep {
    const gateway = this.#weighted<GatewayRef>([
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
        port: this.#int(4000, 4999),
        identity: this.#random() < 0.5 ? `${gateway.name}.${cluster}.identity` : "",
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
          identity: this.#random() < 0.2 ? "" : `${gateway.name}-${this.#int(1, 99)}.${cluster}.identity`,
        };
      case "gateway-port":
        return {
          kind,
          cluster,
          gateway,
          port: this.#int(4000, 4999),
          portName: this.#random() < 0.2 ? "not-incoming" : "incoming-port",
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
    const cluster = this.#pick(this.#options.clusters);
    const proxy = this.#options.proxies ? 1 : 0;
    const heavy = this.#options.heavyWeight ?? 1;
    const replicas = this.#options.replicas ?? [];
    const single = replicas.length > 0 ? 0 : 1;
    const live = replicas.filter((r) => !this.#deadReplicas.has(r));
    const kind = this.#weighted<FaultStep["kind"]>([
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
    const ms = this.#int(1_000, 5_000);
    switch (kind) {
      case "cut-watches":
      case "cut-all":
      case "restart-remote-api":
        return { kind, cluster };
      case "stall":
      case "refuse":
        return { kind, cluster, ms };
      case "corrupt-watch":
        return { kind, cluster, ms, mode: this.#random() < 0.5 ? "invalid-json" : "wrong-kind" };
      case "latency":
        return { kind, cluster, ms, latencyMs: this.#int(50, 1_500) };
      case "errors": {
        const status = this.#pick([409, 429, 500, 503] as const);
        const errorRate = Math.round((0.3 + this.#random() * 0.7) * 100) / 100;
        return {
          kind,
          cluster,
          ms,
          status,
          errorRate,
          ...(status === 429 || status === 503 ? { retryAfterSeconds: this.#int(0, 2) } : {}),
        };
      }
      case "restart-local-api":
      case "kill-controller":
      case "term-controller":
        return { kind };
      case "kill-replica": {
        const replica = this.#pick(live);
        this.#deadReplicas.add(replica);
        return { kind, replica };
      }
      case "start-replica": {
        const replica = this.#pick([...this.#deadReplicas].sort());
        this.#deadReplicas.delete(replica);
        return { kind, replica };
      }
      case "term-replica":
        return { kind, replica: this.#pick(live) };
      case "partition-replica":
        // From shorter than the renew deadline (the replica keeps its shards) to well past
        // the Lease duration (the others take them over) of the sharded run's timings.
        return { kind, replica: this.#pick(live), ms: this.#int(2_000, 20_000) };
      default:
        return { kind: "cut-watches", cluster };
    }
  }
}
