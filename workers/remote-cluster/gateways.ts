/**
 * The gateways of one cluster as the actor keeps them current: which Services use which
 * gateway (gateway-index.ts), their hostnames' addresses (hostnames.ts, SPEC §2), and
 * their health (gateway-health.ts, SPEC §10). It tells the actor which remote keys must
 * be recomputed when a gateway, its use, an address or a liveness changes.
 *
 * Invariants:
 * - a gateway is probed exactly while a Service of this cluster uses it (`#syncProbe`);
 * - a gateway newly in use has its hostnames resolved at once, not at the next period
 *   (its users would wait a whole period for addresses);
 * - a change of a gateway only ever marks users of THIS cluster (SPEC §4): the index is
 *   per cluster;
 * - a new address policy (the local cluster's ranges changed) re-checks every gateway in
 *   use: its users are recomputed and its probes follow.
 */

import {
  type AddressPolicy,
  type AddressPolicySettings,
  addressPolicy,
  DEFAULT_ADDRESS_POLICY_SETTINGS,
  type LocalRanges,
} from "../../src/core/address-policy.ts";
import { ingressHostnames } from "../../src/core/desired.ts";
import type { ExportSettings } from "../../src/core/export.ts";
import type { MemberSelector } from "../../src/core/federated.ts";
import type { Service } from "../../src/core/objects.ts";
import { partitionState } from "../../src/core/partition.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import type { GatewayPolicyOptions } from "../../src/protocol/messages.ts";
import { GatewayHealth, type GatewayHealthDeps } from "./gateway-health.ts";
import { clusterGatewayIndex, type GatewayIndex } from "./gateway-index.ts";
import type { GatewayProberDeps } from "./gateway-prober.ts";
import { HostnameCache } from "./hostnames.ts";
import type { Resolver } from "./resolver.ts";

export interface ClusterGatewaysDeps {
  readonly settings: ExportSettings;
  readonly memberSelector: MemberSelector;
  /** The remote Services as watched (gateways are Services). */
  readonly services: { get(key: string): Service | undefined };
  readonly resolve: Resolver;
  /** How long a hostname keeps its last good addresses through transient resolver failures (hostnames.ts). */
  readonly hostnameMaxStaleMs: number;
  readonly prober: Omit<GatewayProberDeps, "log" | "guard" | "livenessChanged">;
  /** The probe of a gateway that is not read from its Service (a Link's, SPEC §15); undefined: from the Service. */
  readonly probeSpecOf?: GatewayHealthDeps["probeSpecOf"] | undefined;
  /** The operator's address policy and caps (the `--gateway-*` flags); absent: the defaults. */
  readonly gatewayPolicy?: GatewayPolicyOptions;
  /** The local cluster's ranges as known at start (`setLocalRanges` brings newer ones). */
  readonly localRanges?: LocalRanges;
  readonly log: LineLogger;
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  readonly track: (promise: Promise<void>) => void;
  /** Remote key `key` must be recomputed. */
  readonly markDirty: (key: string) => void;
  /** Some keys were marked: the sender may flush. */
  readonly flush: () => void;
  /** Something the status shows changed (export counts, liveness, probe problems). */
  readonly statusChanged: () => void;
}

export class ClusterGateways {
  readonly index: GatewayIndex;
  readonly health: GatewayHealth;
  readonly #hostnames: HostnameCache;
  readonly #deps: ClusterGatewaysDeps;
  readonly #settings: AddressPolicySettings;
  #policy: AddressPolicy;
  /** Since when the remote API server has been unreachable (ms); undefined: reachable. */
  #unreachableSince: number | undefined;
  #partitioned = false;
  #partitionTimer: NodeJS.Timeout | undefined;

  constructor(deps: ClusterGatewaysDeps) {
    this.#deps = deps;
    const gp = deps.gatewayPolicy;
    this.#settings = gp
      ? { cidrAllow: gp.cidrAllow, cidrDeny: gp.cidrDeny, maxAddresses: gp.maxAddresses }
      : DEFAULT_ADDRESS_POLICY_SETTINGS;
    this.#policy = addressPolicy(this.#settings, deps.localRanges);
    this.index = clusterGatewayIndex(deps.settings, deps.memberSelector);
    this.#hostnames = new HostnameCache(
      deps.resolve,
      deps.log,
      (hostname) => deps.guard(() => this.#hostnameChanged(hostname))(),
      { maxStaleMs: deps.hostnameMaxStaleMs },
    );
    this.health = new GatewayHealth({
      ...deps.prober,
      ...(gp ? { maxInFlight: gp.maxProbesInFlight, maxProbed: gp.maxProbed } : {}),
      log: deps.log,
      lookupHostname: this.#hostnames.lookup,
      guard: deps.guard,
      livenessChanged: (gatewayKey) => this.#livenessChanged(gatewayKey),
      problemsChanged: deps.statusChanged,
      policy: () => this.#policy,
      gatewayOf: (key) => (this.index.isGateway(key) ? deps.services.get(key) : undefined),
      ...(deps.probeSpecOf ? { probeSpecOf: deps.probeSpecOf } : {}),
    });
  }

  /** The address policy gateway views use now (core/address-policy.ts). */
  get policy(): AddressPolicy {
    return this.#policy;
  }

  /**
   * The local cluster's ranges changed: newer ones (by `seq`) make a new address policy,
   * and every gateway in use is checked again (its users recomputed, its probes synced).
   */
  setLocalRanges(ranges: LocalRanges): void {
    if (ranges.seq <= this.#policy.local.seq) return;
    this.#policy = addressPolicy(this.#settings, ranges);
    for (const [gatewayKey, users] of this.index.entries()) {
      for (const user of users) this.#deps.markDirty(user);
      this.#syncProbe(gatewayKey);
    }
    this.#deps.statusChanged();
    this.#deps.flush();
  }

  /** The addresses of a gateway hostname, undefined while it has not resolved. */
  get lookupHostname(): (hostname: string) => readonly string[] | undefined {
    return this.#hostnames.lookup;
  }

  /**
   * Remote Service `key` changed from `previous` to `current`: the users of the gateway it
   * is are marked, the index follows it, and probes and hostnames follow the gateways in use.
   */
  serviceChanged(key: string, previous: Service | undefined, current: Service | undefined): void {
    for (const user of this.index.usersOf(key)) this.#deps.markDirty(user);
    const countsBefore = this.index.countsVersion;
    const newGateways = this.index.update(key, previous, current);
    // Export counts are in the status: a Service declining its export changes nothing
    // else the status would otherwise publish.
    if (this.index.countsVersion !== countsBefore) this.#deps.statusChanged();
    if (current && this.index.isGateway(key)) this.#resolveHostnames(current);
    // Probes follow the gateways in use: this one changed, or a Service started or stopped using one.
    const touched = new Set<string>([key]);
    for (const service of [previous, current]) {
      if (service) for (const gatewayKey of this.index.gatewaysOf(service)) touched.add(gatewayKey);
    }
    this.#usesChanged(touched, newGateways);
  }

  /** Remote key `key`'s MCS export now uses `uses` (the default gateway, or none; SPEC §12). */
  exportUsesChanged(key: string, uses: readonly string[], gatewayKey: string): void {
    this.#usesChanged(new Set([gatewayKey]), this.index.setExportUses(key, uses));
  }

  /** After a complete list: every gateway probed or in use is synced and resolved. */
  listed(): void {
    const inUse = [...this.index.gateways()];
    this.#usesChanged(new Set([...this.health.keys(), ...inUse]), inUse);
  }

  /** Resolves every hostname in use again (the periodic refresh, SPEC §2). */
  refreshHostnames(): Promise<void> {
    const gateways = [...this.index.gateways()].map((key) => this.#deps.services.get(key));
    return this.#hostnames.refresh(new Set(gateways.flatMap((g) => (g ? ingressHostnames(g) : []))));
  }

  /** Partitioned (SPEC §14 `--stale-after`): unprobed gateways' addresses are written not ready. */
  get partitioned(): boolean {
    return this.#partitioned;
  }

  /** The remote API server failed (unreachable since the first failure) or answered, at `now`. */
  reachability(reachable: boolean, now: number): void {
    if (reachable) this.#unreachableSince = undefined;
    else this.#unreachableSince ??= now;
    this.#evaluatePartition(now);
  }

  stop(): void {
    clearTimeout(this.#partitionTimer);
    this.#hostnames.stop();
    this.health.stop();
  }

  /** Probes follow `touched`; `newGateways`' hostnames resolve now. */
  #usesChanged(touched: ReadonlySet<string>, newGateways: readonly string[]): void {
    for (const gatewayKey of touched) this.#syncProbe(gatewayKey);
    for (const gatewayKey of newGateways) {
      const gateway = this.#deps.services.get(gatewayKey);
      if (gateway) this.#resolveHostnames(gateway);
    }
  }

  #resolveHostnames(gateway: Service): void {
    for (const lookup of this.#hostnames.track(ingressHostnames(gateway))) this.#deps.track(lookup);
  }

  /** A hostname's addresses changed: the users of every gateway naming it are recomputed. */
  #hostnameChanged(hostname: string): void {
    for (const [gatewayKey, users] of this.index.entries()) {
      const gateway = this.#deps.services.get(gatewayKey);
      if (gateway && ingressHostnames(gateway).includes(hostname)) {
        for (const u of users) this.#deps.markDirty(u);
        this.#syncProbe(gatewayKey);
      }
    }
    this.#deps.flush();
  }

  /** Probes gateway `key` as it now stands while a Service uses it, not at all otherwise. */
  #syncProbe(key: string): void {
    this.health.sync(key, this.index.isGateway(key) ? this.#deps.services.get(key) : undefined);
  }

  /** Partitioned or not now; a change recomputes every key that uses a gateway. */
  #evaluatePartition(now: number): void {
    clearTimeout(this.#partitionTimer);
    this.#partitionTimer = undefined;
    const { partitioned, at } = partitionState(
      this.#deps.gatewayPolicy?.staleAfterMs ?? 0,
      this.#unreachableSince,
      now,
    );
    if (at !== undefined)
      this.#partitionTimer = setTimeout(
        this.#deps.guard(() => this.#evaluatePartition(Date.now())),
        at - now,
      );
    if (partitioned === this.#partitioned) return;
    this.#partitioned = partitioned;
    if (partitioned)
      this.#deps.log.warn(
        { staleAfterMs: this.#deps.gatewayPolicy?.staleAfterMs },
        "remote API server unreachable for --stale-after: endpoints of unprobed gateways turn not ready",
      );
    else this.#deps.log.info({}, "remote API server reachable again: endpoints follow their gateways again");
    for (const [, users] of this.index.entries()) for (const user of users) this.#deps.markDirty(user);
    this.#deps.statusChanged();
    this.#deps.flush();
  }

  /** An address of gateway `key` became dead or alive: the keys using it are recomputed. */
  #livenessChanged(key: string): void {
    for (const user of this.index.usersOf(key)) this.#deps.markDirty(user);
    this.#deps.statusChanged();
    this.#deps.flush();
  }
}
