/**
 * Gateway health of one cluster (SPEC §10): which gateways are probed, with what, and
 * their bad annotations. Wraps the prober (gateway-prober.ts) with what the actor asks:
 * `sync(key, gateway)` when a gateway or its use changed, the dead addresses for the
 * desired state, and the per-gateway status and counters.
 *
 * Invariants: a gateway is probed exactly while `sync` was last given it (an exported
 * Service uses it) with a valid `mc-probe` port and at least one address; its problems
 * are logged once per change of the problem set, never per probe.
 */
import { type HostnameLookup, viewGateway } from "../../src/core/desired.ts";
import type { Service } from "../../src/core/objects.ts";
import { probeSpecOf } from "../../src/core/probe-spec.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import type { GatewayProbeCounters, GatewayProbeStatus, GatewayStatus } from "../../src/protocol/messages.ts";
import { GatewayProber, type GatewayProberDeps } from "./gateway-prober.ts";

/** At most this many problems per gateway, each cut to MAX_PROBLEM characters, go into the status. */
const MAX_PROBLEMS = 4;
const MAX_PROBLEM = 512;

export interface GatewayHealthDeps extends GatewayProberDeps {
  readonly lookupHostname: HostnameLookup;
  /** The set of probe problems of some gateway changed. */
  readonly problemsChanged: () => void;
}

export class GatewayHealth {
  readonly #prober: GatewayProber;
  readonly #log: LineLogger;
  readonly #lookup: HostnameLookup;
  readonly #problemsChanged: () => void;
  /** Bad probe annotations per gateway key, as last reported. */
  readonly #problems = new Map<string, readonly string[]>();

  constructor(deps: GatewayHealthDeps) {
    this.#prober = new GatewayProber(deps);
    this.#log = deps.log;
    this.#lookup = deps.lookupHostname;
    this.#problemsChanged = deps.problemsChanged;
  }

  /**
   * Probes gateway `key` as `gateway` now stands (undefined: missing, or no exported
   * Service uses it: not probed). Reports its bad annotations when they change.
   */
  sync(key: string, gateway: Service | undefined): void {
    const outcome = gateway ? probeSpecOf(gateway) : { problems: [] };
    const addresses = gateway && outcome.spec ? viewGateway(gateway, this.#lookup).addresses : [];
    this.#prober.set(key, outcome.spec, addresses);
    const previous = this.#problems.get(key) ?? [];
    if (JSON.stringify(previous) === JSON.stringify(outcome.problems)) return;
    this.#problemsChanged();
    if (outcome.problems.length > 0) {
      this.#problems.set(key, outcome.problems);
      this.#log.warn({ gateway: key, problems: outcome.problems }, `gateway ${key}: ${outcome.problems.join("; ")}`);
    } else {
      this.#problems.delete(key);
      if (gateway) this.#log.info({ gateway: key }, `gateway ${key} no longer has probe problems`);
    }
  }

  /** Gateways probed or with problems (what a full re-sync must visit besides the gateways in use). */
  keys(): Set<string> {
    return new Set([...this.#prober.keys(), ...this.#problems.keys()]);
  }

  /** The dead addresses of gateway `key`; undefined when it is not probed. */
  deadAddresses(key: string): ReadonlySet<string> | undefined {
    return this.#prober.deadAddresses(key);
  }

  /** The status fields of gateway `key`: its probe and its problems, when it has them. */
  status(key: string): { probe?: GatewayProbeStatus; probeProblems?: string[] } {
    const probe = this.#prober.status(key);
    const problems = this.#problems.get(key);
    return {
      ...(probe ? { probe } : {}),
      ...(problems ? { probeProblems: problems.slice(0, MAX_PROBLEMS).map((p) => p.slice(0, MAX_PROBLEM)) } : {}),
    };
  }

  /** The status rows of gateways `keys` (sorted): usable or why not, and their probe (`get`: the gateway Service). */
  rows(keys: Iterable<string>, get: (key: string) => Service | undefined): GatewayStatus[] {
    return [...keys].sort().map((key) => {
      const view = viewGateway(get(key), this.#lookup);
      return {
        key,
        usable: view.addresses.length > 0 && view.incomingPort !== undefined,
        ...(view.unusable ? { reason: view.unusable } : {}),
        ...this.status(key),
      };
    });
  }

  counters(): Record<string, GatewayProbeCounters> {
    return this.#prober.counters();
  }

  stop(): void {
    this.#prober.stop();
  }
}
