/**
 * Gateway health of one cluster (SPEC §10): which gateways are probed, with what, and
 * their bad annotations. Wraps the prober (gateway-prober.ts) with what the actor asks:
 * `sync(key, gateway)` when a gateway or its use changed, the dead addresses for the
 * desired state, and the per-gateway status and counters.
 *
 * Invariants: a gateway is probed exactly while `sync` was last given it (an exported
 * Service uses it) with a valid `mc-probe` port and at least one address the address
 * policy accepts (core/address-policy.ts: never an address it refuses), and while at
 * most `maxProbed` gateways are (a gateway beyond the cap is probed once another stops);
 * its problems and its refused addresses are logged once per change, never per probe.
 */
import { type AddressPolicy, DEFAULT_ADDRESS_POLICY, type Refusal } from "../../src/core/address-policy.ts";
import { type GatewayView, type HostnameLookup, viewGateway } from "../../src/core/desired.ts";
import type { Service } from "../../src/core/objects.ts";
import { DEFAULT_MAX_PROBED_GATEWAYS, type ProbeSpecOutcome, probeSpecOf } from "../../src/core/probe-spec.ts";
import type { GatewayProbeCounters, GatewayProbeStatus, GatewayStatus } from "../../src/protocol/messages.ts";
import { MAX_LISTED_REFUSED } from "../../src/protocol/status.ts";
import { GatewayProber, type GatewayProberDeps } from "./gateway-prober.ts";

/** At most this many problems per gateway, each cut to MAX_PROBLEM characters, go into the status. */
const MAX_PROBLEMS = 4;
const MAX_PROBLEM = 512;

export interface GatewayHealthDeps extends GatewayProberDeps {
  readonly lookupHostname: HostnameLookup;
  /** The set of probe problems of some gateway changed. */
  readonly problemsChanged: () => void;
  /** The address policy now (it changes with the local ranges). Default: the built-in one. */
  readonly policy?: () => AddressPolicy;
  /** Gateways probed at most. Default DEFAULT_MAX_PROBED_GATEWAYS. */
  readonly maxProbed?: number;
  /** Gateway `key` as `sync` would be given it now (to probe one the cap held back once room frees). */
  readonly gatewayOf?: (key: string) => Service | undefined;
  /** The probe of gateway `key`; default: from the gateway Service (`probeSpecOf`). A Link's gateway has its own (SPEC §15). */
  readonly probeSpecOf?: (key: string, gateway: Service) => ProbeSpecOutcome;
}

const refusedText = (r: Refusal): string => `${r.address} (${r.why})`;

export class GatewayHealth {
  readonly #deps: GatewayHealthDeps;
  readonly #prober: GatewayProber;
  /** Bad probe annotations per gateway key, as last reported. */
  readonly #problems = new Map<string, readonly string[]>();
  /** Refused addresses per gateway key (`address (why)`, sorted), as last logged. */
  readonly #refused = new Map<string, string>();
  /** Gateways that would be probed but for the cap, in the order they were held back. */
  readonly #held = new Set<string>();

  constructor(deps: GatewayHealthDeps) {
    this.#deps = deps;
    this.#prober = new GatewayProber(deps);
  }

  /**
   * Probes gateway `key` as `gateway` now stands (undefined: missing, or no exported
   * Service uses it: not probed). Reports its bad annotations and refused addresses when
   * they change.
   */
  sync(key: string, gateway: Service | undefined): void {
    const outcome = gateway ? (this.#deps.probeSpecOf?.(key, gateway) ?? probeSpecOf(gateway)) : { problems: [] };
    const view = this.#view(gateway);
    this.#reportRefused(key, gateway, view.refused);
    const addresses = gateway && outcome.spec ? view.addresses : [];
    const wasProbed = this.#prober.has(key);
    const room = wasProbed || this.#prober.size < (this.#deps.maxProbed ?? DEFAULT_MAX_PROBED_GATEWAYS);
    if (addresses.length > 0 && !room) this.#held.add(key);
    else this.#held.delete(key);
    this.#prober.set(key, room ? outcome.spec : undefined, room ? addresses : []);
    if (wasProbed && !this.#prober.has(key)) this.#probeHeld();
    this.#reportProblems(key, gateway, outcome.problems);
  }

  /** Gateways probed or with problems (what a full re-sync must visit besides the gateways in use). */
  keys(): Set<string> {
    return new Set([...this.#prober.keys(), ...this.#problems.keys(), ...this.#held, ...this.#refused.keys()]);
  }

  /** The dead addresses of gateway `key`; undefined when it is not probed. */
  deadAddresses(key: string): ReadonlySet<string> | undefined {
    return this.#prober.deadAddresses(key);
  }

  /** The status fields of gateway `key`: its probe and its problems, when it has them. */
  status(key: string): { probe?: GatewayProbeStatus; probeProblems?: string[]; unprobed?: string } {
    const probe = this.#prober.status(key);
    const problems = this.#problems.get(key);
    const max = this.#deps.maxProbed ?? DEFAULT_MAX_PROBED_GATEWAYS;
    return {
      ...(probe ? { probe } : {}),
      ...(problems ? { probeProblems: problems.slice(0, MAX_PROBLEMS).map((p) => p.slice(0, MAX_PROBLEM)) } : {}),
      ...(this.#held.has(key)
        ? { unprobed: `not probed: over the cap of ${max} probed gateways per cluster (--gateway-max-probed)` }
        : {}),
    };
  }

  /** The status rows of gateways `keys` (sorted): usable or why not, and their probe (`get`: the gateway Service). */
  rows(keys: Iterable<string>, get: (key: string) => Service | undefined): GatewayStatus[] {
    return [...keys].sort().map((key) => {
      const view = this.#view(get(key));
      const refused = view.refused ?? [];
      const byReason: Record<string, number> = {};
      for (const r of refused) byReason[r.reason] = (byReason[r.reason] ?? 0) + 1;
      return {
        key,
        usable: view.addresses.length > 0 && view.incomingPort !== undefined,
        ...(view.unusable ? { reason: view.unusable } : {}),
        ...(refused.length > 0
          ? {
              refused: {
                total: refused.length,
                byReason,
                addresses: refused.slice(0, MAX_LISTED_REFUSED).map((r) => refusedText(r).slice(0, 256)),
              },
            }
          : {}),
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

  #view(gateway: Service | undefined): GatewayView {
    return viewGateway(gateway, this.#deps.lookupHostname, undefined, this.#deps.policy?.() ?? DEFAULT_ADDRESS_POLICY);
  }

  /** A probed gateway stopped: the gateways the cap held back are synced again, first held first. */
  #probeHeld(): void {
    const gatewayOf = this.#deps.gatewayOf;
    if (!gatewayOf) return;
    for (const key of [...this.#held]) {
      if (this.#prober.size >= (this.#deps.maxProbed ?? DEFAULT_MAX_PROBED_GATEWAYS)) return;
      this.sync(key, gatewayOf(key));
    }
  }

  #reportProblems(key: string, gateway: Service | undefined, problems: readonly string[]): void {
    const previous = this.#problems.get(key) ?? [];
    if (JSON.stringify(previous) === JSON.stringify(problems)) return;
    this.#deps.problemsChanged();
    if (problems.length > 0) {
      this.#problems.set(key, problems);
      this.#deps.log.warn({ gateway: key, problems }, `gateway ${key}: ${problems.join("; ")}`);
    } else {
      this.#problems.delete(key);
      if (gateway) this.#deps.log.info({ gateway: key }, `gateway ${key} no longer has probe problems`);
    }
  }

  /** Logs the gateway's refused addresses when they change (the status shows them at every report). */
  #reportRefused(key: string, gateway: Service | undefined, refused: readonly Refusal[] | undefined): void {
    const texts = gateway ? (refused ?? []).map(refusedText) : [];
    const digest = texts.join("\n");
    if ((this.#refused.get(key) ?? "") === digest) return;
    this.#deps.problemsChanged();
    if (texts.length === 0) {
      this.#refused.delete(key);
      if (gateway) this.#deps.log.info({ gateway: key }, `gateway ${key}: no address refused any more`);
      return;
    }
    this.#refused.set(key, digest);
    const shown = texts.slice(0, MAX_LISTED_REFUSED);
    this.#deps.log.warn(
      { gateway: key, refused: shown, total: texts.length },
      `gateway ${key}: ${texts.length} ingress address(es) refused, neither probed nor written as endpoints: ${shown.join(", ")}${texts.length > shown.length ? ", …" : ""}`,
    );
  }
}
