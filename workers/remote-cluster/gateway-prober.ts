/**
 * The probes of one cluster's gateways (SPEC §10): a loop per (gateway, address) that
 * runs the HTTP probe (http-probe.ts) on a jittered period and feeds the pure liveness
 * machine (src/core/gateway-liveness.ts). Owned by the cluster's actor, so a probe that
 * hangs or fails costs that actor only: it runs on the actor's event loop and blocks
 * nothing (a probe is a pending socket, never a wait).
 *
 * Invariants:
 * - at most one probe in flight per address; starts are at least 0.9 × period apart;
 * - at most `maxInFlight` probes in flight in all (the cluster's): a probe due while they
 *   are takes the next free slot, in the order they came due (a hung gateway costs
 *   the cluster's probes, never more sockets);
 * - `livenessChanged(gateway)` is called only when an address of that gateway becomes
 *   dead or alive again, never for a probe that confirms the current state;
 * - `set` with the same spec and addresses changes nothing (loops and liveness go on);
 *   a changed spec (port, path, period) starts every address over, alive; a removed
 *   address, a gateway no longer probed and `stop()` abort the probes in flight and
 *   cancel their timers: nothing of a stopped probe reports or keeps a socket open;
 * - counters (failures by reason, latency) are kept per gateway, also after its probing
 *   stops, for at most MAX_GATEWAY_SERIES gateways (gateway keys come from the remote, so
 *   they are bounded): a gateway needing counters beyond that takes the place of the one
 *   least recently probed that is no longer probed (whose counters are dropped, its
 *   series ends), else it is counted under OTHER_GATEWAY. A counter kept never goes back.
 */
import type { Clock, TimerHandle } from "../../src/core/clock.ts";
import {
  INITIAL_LIVENESS,
  type Liveness,
  PROBE_FAILURE_REASONS,
  type ProbeFailureReason,
  transition,
} from "../../src/core/gateway-liveness.ts";
import {
  DEFAULT_MAX_PROBES_IN_FLIGHT,
  firstProbeDelayMs,
  nextProbeDelayMs,
  type ProbeSpec,
} from "../../src/core/probe-spec.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import type { GatewayProbeCounters, GatewayProbeStatus } from "../../src/protocol/messages.ts";
import {
  MAX_GATEWAY_SERIES,
  MAX_LISTED_DEAD_ADDRESSES,
  OTHER_GATEWAY,
  WRITE_DURATION_BUCKETS,
} from "../../src/protocol/messages.ts";
import type { Probe, ProbeResult } from "./http-probe.ts";

/** The last failure's message in the status is cut to this length. */
const MAX_MESSAGE = 200;

export interface GatewayProberDeps {
  readonly clock: Clock;
  /** Uniform in [0, 1): the jitter source (Math.random in production). */
  readonly random: () => number;
  readonly probe: Probe;
  readonly userAgent: string;
  readonly log: LineLogger;
  /** Wraps the prober's callbacks (timers, probe results) in the actor's guard. */
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  /** An address of gateway `key` became dead or alive again. */
  readonly livenessChanged: (key: string) => void;
  /** A probe finished (the counters changed). */
  readonly probed: () => void;
  /** Probes in flight at most, over every gateway. Default DEFAULT_MAX_PROBES_IN_FLIGHT. */
  readonly maxInFlight?: number;
}

interface AddressProbe {
  readonly address: string;
  liveness: Liveness;
  timer: TimerHandle | undefined;
  inFlight: AbortController | undefined;
  /** Due, waiting for a free slot (`#waiting`). */
  waiting: boolean;
  lastFailure: string | undefined;
}

interface Target {
  readonly spec: ProbeSpec;
  readonly addresses: Map<string, AddressProbe>;
}

interface MutableCounters {
  readonly failures: Record<string, number>;
  readonly buckets: number[];
  sum: number;
  count: number;
}

const sameSpec = (a: ProbeSpec, b: ProbeSpec): boolean =>
  a.port === b.port &&
  a.path === b.path &&
  a.periodMs === b.periodMs &&
  a.timeoutMs === b.timeoutMs &&
  a.failureThreshold === b.failureThreshold;

export class GatewayProber {
  readonly #deps: GatewayProberDeps;
  readonly #targets = new Map<string, Target>();
  /** Counters by gateway key, least recently probed first (at most MAX_GATEWAY_SERIES, plus OTHER_GATEWAY). */
  readonly #counters = new Map<string, MutableCounters>();
  /** Probes due while `maxInFlight` were in flight, oldest first; an entry no longer waiting is skipped. */
  #waiting: { key: string; target: Target; probe: AddressProbe }[] = [];
  #inFlight = 0;
  #stopped = false;

  constructor(deps: GatewayProberDeps) {
    this.#deps = deps;
  }

  /**
   * Gateway `key` is probed with `spec` at `addresses` from now on; `spec` undefined
   * stops its probes (its addresses then count alive).
   */
  set(key: string, spec: ProbeSpec | undefined, addresses: readonly string[]): void {
    if (this.#stopped) return;
    const current = this.#targets.get(key);
    if (!spec || addresses.length === 0) {
      if (current) this.#drop(key, current);
      return;
    }
    if (current && !sameSpec(current.spec, spec)) this.#drop(key, current);
    let target = this.#targets.get(key);
    if (!target) {
      target = { spec, addresses: new Map() };
      this.#targets.set(key, target);
      this.#deps.log.info(
        { gateway: key, port: spec.port, path: spec.path, periodMs: spec.periodMs },
        `probing gateway ${key} at port ${spec.port}, path ${spec.path}, every ${spec.periodMs / 1000} s`,
      );
    }
    const wanted = new Set(addresses);
    for (const [address, probe] of target.addresses) {
      if (!wanted.has(address)) {
        this.#cancel(probe);
        target.addresses.delete(address);
      }
    }
    for (const address of wanted) {
      if (target.addresses.has(address)) continue;
      const probe: AddressProbe = {
        address,
        liveness: INITIAL_LIVENESS,
        timer: undefined,
        inFlight: undefined,
        waiting: false,
        lastFailure: undefined,
      };
      target.addresses.set(address, probe);
      this.#schedule(key, target, probe, firstProbeDelayMs(spec.periodMs, this.#deps.random()));
    }
  }

  /** Gateways being probed. */
  keys(): IterableIterator<string> {
    return this.#targets.keys();
  }

  /** Whether gateway `key` is probed. */
  has(key: string): boolean {
    return this.#targets.has(key);
  }

  /** How many gateways are probed. */
  get size(): number {
    return this.#targets.size;
  }

  /** The probed addresses of `key` that are dead (undefined: not probed). */
  deadAddresses(key: string): ReadonlySet<string> | undefined {
    const target = this.#targets.get(key);
    if (!target) return undefined;
    const dead = new Set<string>();
    for (const probe of target.addresses.values()) if (!probe.liveness.alive) dead.add(probe.address);
    return dead;
  }

  /** How gateway `key`'s probes stand (undefined: not probed). */
  status(key: string): GatewayProbeStatus | undefined {
    const target = this.#targets.get(key);
    if (!target) return undefined;
    const dead = [...target.addresses.values()]
      .filter((p) => !p.liveness.alive)
      .sort((a, b) => compare(a.address, b.address));
    const lastFailure = dead[0]?.lastFailure;
    return {
      port: target.spec.port,
      path: target.spec.path,
      // A whole number of seconds, at least 1 (a Link's period may be shorter; SPEC §15).
      periodSeconds: Math.max(1, Math.round(target.spec.periodMs / 1000)),
      alive: target.addresses.size - dead.length,
      dead: dead.length,
      deadAddresses: dead.slice(0, MAX_LISTED_DEAD_ADDRESSES).map((p) => p.address),
      ...(lastFailure ? { lastFailure: lastFailure.slice(0, MAX_MESSAGE) } : {}),
    };
  }

  /** Counters of the gateways probed since the actor started (bounded: see the invariants). */
  counters(): Record<string, GatewayProbeCounters> {
    const out: Record<string, GatewayProbeCounters> = {};
    for (const [key, c] of this.#counters) {
      out[key] = { failures: { ...c.failures }, latency: { buckets: [...c.buckets], sum: c.sum, count: c.count } };
    }
    return out;
  }

  /** Aborts every probe and timer; nothing is reported afterwards. Idempotent. */
  stop(): void {
    this.#stopped = true;
    this.#waiting = [];
    for (const [key, target] of this.#targets) this.#drop(key, target);
  }

  #drop(key: string, target: Target): void {
    for (const probe of target.addresses.values()) this.#cancel(probe);
    this.#targets.delete(key);
  }

  #cancel(probe: AddressProbe): void {
    if (probe.timer) this.#deps.clock.clearTimeout(probe.timer);
    probe.timer = undefined;
    probe.waiting = false;
    probe.inFlight?.abort();
    probe.inFlight = undefined;
  }

  /** Whether `probe` is still the live loop of `address` in `key` (not dropped or replaced). */
  #current(key: string, target: Target, probe: AddressProbe): boolean {
    return !this.#stopped && this.#targets.get(key) === target && target.addresses.get(probe.address) === probe;
  }

  #schedule(key: string, target: Target, probe: AddressProbe, delayMs: number): void {
    probe.timer = this.#deps.clock.setTimeout(
      this.#deps.guard(() => {
        probe.timer = undefined;
        if (this.#current(key, target, probe)) this.#due(key, target, probe);
      }),
      delayMs,
    );
  }

  /** Starts the probe now, or when a slot frees. */
  #due(key: string, target: Target, probe: AddressProbe): void {
    if (this.#inFlight < (this.#deps.maxInFlight ?? DEFAULT_MAX_PROBES_IN_FLIGHT)) {
      this.#start(key, target, probe);
      return;
    }
    probe.waiting = true;
    this.#waiting.push({ key, target, probe });
  }

  /** A slot freed: the oldest probe still waiting starts. */
  #startWaiting(): void {
    while (this.#waiting.length > 0) {
      const next = this.#waiting.shift();
      if (!next?.probe.waiting) continue;
      next.probe.waiting = false;
      if (!this.#current(next.key, next.target, next.probe)) continue;
      this.#start(next.key, next.target, next.probe);
      return;
    }
  }

  #start(key: string, target: Target, probe: AddressProbe): void {
    const abort = new AbortController();
    probe.inFlight = abort;
    this.#inFlight += 1;
    const startedAt = this.#deps.clock.now();
    const result = this.#deps.probe({
      address: probe.address,
      port: target.spec.port,
      path: target.spec.path,
      timeoutMs: target.spec.timeoutMs ?? target.spec.periodMs,
      userAgent: this.#deps.userAgent,
      signal: abort.signal,
    });
    const done = this.#deps.guard((outcome: ProbeResult) => {
      if (probe.inFlight === abort) probe.inFlight = undefined;
      this.#inFlight -= 1;
      if (!this.#stopped) this.#startWaiting();
      if (!this.#current(key, target, probe)) return;
      this.#record(key, target, probe, outcome);
      const elapsed = this.#deps.clock.now() - startedAt;
      this.#schedule(key, target, probe, nextProbeDelayMs(target.spec.periodMs, elapsed, this.#deps.random()));
    });
    result.then(done, (error: unknown) =>
      done({ ok: false, reason: "error", message: (error as Error)?.message ?? String(error), latencyMs: 0 }),
    );
  }

  #record(key: string, target: Target, probe: AddressProbe, outcome: ProbeResult): void {
    const counters = this.#countersOf(key);
    if (outcome.ok || outcome.reason === "status") {
      // Latency of probes that got an answer: a timeout says nothing about latency.
      const seconds = outcome.latencyMs / 1000;
      WRITE_DURATION_BUCKETS.forEach((le, i) => {
        if (seconds <= le) counters.buckets[i] = (counters.buckets[i] ?? 0) + 1;
      });
      counters.sum += seconds;
      counters.count += 1;
    }
    if (!outcome.ok) {
      counters.failures[outcome.reason] = (counters.failures[outcome.reason] ?? 0) + 1;
      probe.lastFailure = outcome.message;
    }
    const step = transition(
      probe.liveness,
      outcome.ok ? { kind: "succeeded" } : { kind: "failed", reason: outcome.reason },
      target.spec.failureThreshold,
    );
    probe.liveness = step.state;
    this.#deps.probed();
    for (const effect of step.effects) {
      if (effect.alive) {
        this.#deps.log.info(
          { gateway: key, address: probe.address },
          `gateway ${key} address ${probe.address} is alive again`,
        );
      } else {
        this.#deps.log.warn(
          { gateway: key, address: probe.address, path: target.spec.path, port: target.spec.port },
          `gateway ${key} address ${probe.address} is dead after consecutive failed probes: ${probe.lastFailure ?? ""}`,
        );
      }
      this.#deps.livenessChanged(key);
    }
  }

  #countersOf(key: string): MutableCounters {
    const kept = this.#counters.get(key);
    if (kept) {
      // Most recently probed last: the first entries are the ones to drop.
      this.#counters.delete(key);
      this.#counters.set(key, kept);
      return kept;
    }
    const own = this.#counters.size - (this.#counters.has(OTHER_GATEWAY) ? 1 : 0);
    if (key !== OTHER_GATEWAY && own >= MAX_GATEWAY_SERIES) {
      let idle: string | undefined;
      for (const k of this.#counters.keys()) {
        if (k !== OTHER_GATEWAY && !this.#targets.has(k)) {
          idle = k;
          break;
        }
      }
      if (idle === undefined) return this.#countersOf(OTHER_GATEWAY);
      this.#counters.delete(idle);
    }
    const failures: Record<string, number> = {};
    for (const reason of PROBE_FAILURE_REASONS) failures[reason satisfies ProbeFailureReason] = 0;
    const fresh = { failures, buckets: WRITE_DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 };
    this.#counters.set(key, fresh);
    return fresh;
  }
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
