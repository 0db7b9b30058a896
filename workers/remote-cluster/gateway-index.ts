/**
 * Which Services of THIS cluster use which gateway (SPEC §4: a gateway change rewrites
 * the mirrors of its own cluster only): exported Services (SPEC §2) and members of
 * fleet-wide Services (SPEC §11). Keys are `namespace/name` of remote Services; one
 * writer, the actor, from its watcher's `change` events.
 */
import { type ExportDecision, type ExportMode, type ExportSettings, exportOf } from "../../src/core/export.ts";
import { isMember, type MemberSelector, memberGateway } from "../../src/core/federated.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";

/** The gateway keys a Service uses (none, one, or its export's and its membership's). */
export type GatewaysOf = (service: Service) => readonly string[];

/** How a Service is exported, as the index counts it (SPEC §2, §12). */
export type ExportOf = (service: Service) => ExportDecision;

/** Exported Services by mode, and Services whose export label declines (SPEC §12). */
export type ExportCounts = Readonly<Record<ExportMode | "declined", number>>;

/** Only the gateway of the Service's export (§2 annotations, else label export's default gateway). */
export function exportGatewayOf(settings: ExportSettings): GatewaysOf {
  return (service) => {
    const decision = exportOf(settings, service);
    return decision.kind === "exported" ? [objectKey(decision.gateway)] : [];
  };
}

/**
 * The index of a cluster's actor: a Service uses its export's gateway (SPEC §2, §12)
 * and, as a fleet-wide member, its member gateway (SPEC §11); a change of either
 * recomputes it.
 */
export function clusterGatewayIndex(settings: ExportSettings, selector: MemberSelector): GatewayIndex {
  const exportGateway = exportGatewayOf(settings);
  return new GatewayIndex(
    (service) => exportOf(settings, service),
    (service) => {
      const keys = exportGateway(service);
      return isMember(selector, service) ? [...new Set([...keys, objectKey(memberGateway(settings, service))])] : keys;
    },
  );
}

const countKey = (decision: ExportDecision): ExportMode | "declined" | undefined =>
  decision.kind === "exported" ? decision.mode : decision.kind === "declined" ? "declined" : undefined;

export class GatewayIndex {
  /** Gateway key → keys of the Services that use it. */
  readonly #users = new Map<string, Set<string>>();
  /** Gateway key → keys of the ServiceExports that use it (SPEC §12). */
  readonly #exportUsers = new Map<string, Set<string>>();
  /** ServiceExport key → the gateways it uses. */
  readonly #exportGateways = new Map<string, readonly string[]>();
  readonly #gatewaysOf: GatewaysOf;
  readonly #exportOf: ExportOf;
  readonly #counts: Record<ExportMode | "declined", number> = { annotation: 0, label: 0, declined: 0 };
  #countsVersion = 0;

  constructor(exportOf: ExportOf, gatewaysOf: GatewaysOf) {
    this.#exportOf = exportOf;
    this.#gatewaysOf = gatewaysOf;
  }

  /**
   * Records that Service `key` changed from `previous` to `current`; returns the keys of
   * the gateways `current` newly uses (ones it did not use before).
   */
  update(key: string, previous: Service | undefined, current: Service | undefined): string[] {
    const was = previous ? countKey(this.#exportOf(previous)) : undefined;
    const now = current ? countKey(this.#exportOf(current)) : undefined;
    if (was !== now) {
      if (was) this.#counts[was] -= 1;
      if (now) this.#counts[now] += 1;
      this.#countsVersion += 1;
    }
    return moveUses(
      this.#users,
      key,
      previous ? this.#gatewaysOf(previous) : [],
      current ? this.#gatewaysOf(current) : [],
    );
  }

  /**
   * Records that ServiceExport `key` (SPEC §12: it exports the Service of its key through
   * the default gateway) now uses `gateways` (none once it is gone or does not export);
   * returns the gateways newly used. Kept apart from the Services' uses: a Service and
   * its ServiceExport share a key and may use different gateways.
   */
  setExportUses(key: string, gateways: readonly string[]): string[] {
    const added = moveUses(this.#exportUsers, key, this.#exportGateways.get(key) ?? [], gateways);
    if (gateways.length > 0) this.#exportGateways.set(key, gateways);
    else this.#exportGateways.delete(key);
    return added;
  }

  /** The gateway keys `service` uses. */
  gatewaysOf(service: Service): readonly string[] {
    return this.#gatewaysOf(service);
  }

  /** Keys of the exported Services and ServiceExports using gateway `gatewayKey` (empty when none). */
  usersOf(gatewayKey: string): ReadonlySet<string> {
    const services = this.#users.get(gatewayKey);
    const exports = this.#exportUsers.get(gatewayKey);
    if (!exports) return services ?? new Set();
    return services ? new Set([...services, ...exports]) : exports;
  }

  /** Whether some exported Service or ServiceExport uses `key` as its gateway. */
  isGateway(key: string): boolean {
    return this.#users.has(key) || this.#exportUsers.has(key);
  }

  /** Keys of the gateways in use. */
  gateways(): IterableIterator<string> {
    return new Set([...this.#users.keys(), ...this.#exportUsers.keys()]).values();
  }

  /** [gateway key, users] pairs. */
  *entries(): IterableIterator<[string, ReadonlySet<string>]> {
    for (const key of this.gateways()) yield [key, this.usersOf(key)];
  }

  /** Exported Services, by any mode (SPEC §2, §12). */
  get exportedCount(): number {
    return this.#counts.annotation + this.#counts.label;
  }

  /** Changes whenever `exportCounts` changes (the status shows them). */
  get countsVersion(): number {
    return this.#countsVersion;
  }

  /** Exported Services by mode, and those whose export label declines. */
  get exportCounts(): ExportCounts {
    return { ...this.#counts };
  }
}

/** Moves user `key` in `users` from the gateways `before` to `after`; returns the gateways newly used. */
function moveUses(
  users: Map<string, Set<string>>,
  key: string,
  before: readonly string[],
  after: readonly string[],
): string[] {
  const was = new Set(before);
  const now = new Set(after);
  const added: string[] = [];
  for (const gatewayKey of was) {
    if (now.has(gatewayKey)) continue;
    const set = users.get(gatewayKey);
    set?.delete(key);
    if (set?.size === 0) users.delete(gatewayKey);
  }
  for (const gatewayKey of now) {
    if (was.has(gatewayKey)) continue;
    const set = users.get(gatewayKey) ?? new Set<string>();
    users.set(gatewayKey, set);
    set.add(key);
    added.push(gatewayKey);
  }
  return added;
}
