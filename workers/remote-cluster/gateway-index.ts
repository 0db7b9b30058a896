/**
 * Which Services of THIS cluster use which gateway (SPEC §4: a gateway change rewrites
 * the mirrors of its own cluster only): exported Services (SPEC §2) and members of
 * fleet-wide Services (SPEC §11). Keys are `namespace/name` of remote Services; one
 * writer, the actor, from its watcher's `change` events.
 */
import { exportedGateway } from "../../src/core/desired.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";

/** The gateway keys a Service uses (none, one, or its export's and its membership's). */
export type GatewaysOf = (service: Service) => readonly string[];

/** Only the gateway of the §2 export annotations. */
export const exportGatewayOf: GatewaysOf = (service) => {
  const gw = exportedGateway(service);
  return gw ? [objectKey(gw)] : [];
};

export class GatewayIndex {
  /** Gateway key → keys of the Services that use it. */
  readonly #users = new Map<string, Set<string>>();
  readonly #gatewaysOf: GatewaysOf;
  #exported = 0;

  constructor(gatewaysOf: GatewaysOf = exportGatewayOf) {
    this.#gatewaysOf = gatewaysOf;
  }

  /**
   * Records that Service `key` changed from `previous` to `current`; returns the keys of
   * the gateways `current` newly uses (ones it did not use before).
   */
  update(key: string, previous: Service | undefined, current: Service | undefined): string[] {
    this.#exported += (current && exportedGateway(current) ? 1 : 0) - (previous && exportedGateway(previous) ? 1 : 0);
    const before = new Set(previous ? this.#gatewaysOf(previous) : []);
    const after = new Set(current ? this.#gatewaysOf(current) : []);
    const added: string[] = [];
    for (const gatewayKey of before) {
      if (after.has(gatewayKey)) continue;
      const users = this.#users.get(gatewayKey);
      users?.delete(key);
      if (users?.size === 0) this.#users.delete(gatewayKey);
    }
    for (const gatewayKey of after) {
      if (before.has(gatewayKey)) continue;
      const users = this.#users.get(gatewayKey) ?? new Set<string>();
      this.#users.set(gatewayKey, users);
      users.add(key);
      added.push(gatewayKey);
    }
    return added;
  }

  /** The gateway keys `service` uses. */
  gatewaysOf(service: Service): readonly string[] {
    return this.#gatewaysOf(service);
  }

  /** Exported Services using gateway `gatewayKey` (empty when none). */
  usersOf(gatewayKey: string): ReadonlySet<string> {
    return this.#users.get(gatewayKey) ?? new Set();
  }

  /** Whether some exported Service uses `key` as its gateway. */
  isGateway(key: string): boolean {
    return this.#users.has(key);
  }

  /** Keys of the gateways in use. */
  gateways(): IterableIterator<string> {
    return this.#users.keys();
  }

  /** [gateway key, users] pairs. */
  entries(): IterableIterator<[string, ReadonlySet<string>]> {
    return this.#users.entries();
  }

  /** Exported Services that name a gateway (SPEC §2). */
  get exportedCount(): number {
    return this.#exported;
  }
}
