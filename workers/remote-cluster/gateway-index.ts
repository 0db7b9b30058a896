/**
 * Which exported Services of THIS cluster use which gateway (SPEC §4: a gateway change
 * rewrites the mirrors of its own cluster only). Keys are `namespace/name` of remote
 * Services; one writer, the actor, from its watcher's `change` events.
 */
import { exportedGateway } from "../../src/core/desired.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";

export class GatewayIndex {
  /** Gateway key → keys of the exported Services that name it. */
  readonly #users = new Map<string, Set<string>>();

  /**
   * Records that Service `key` changed from `previous` to `current`; returns the key of
   * the gateway `current` newly uses (a gateway it did not use before), if any.
   */
  update(key: string, previous: Service | undefined, current: Service | undefined): string | undefined {
    const before = previous ? exportedGateway(previous) : undefined;
    const after = current ? exportedGateway(current) : undefined;
    const beforeKey = before ? objectKey(before) : undefined;
    const afterKey = after ? objectKey(after) : undefined;
    if (beforeKey === afterKey) return undefined;
    if (beforeKey) {
      const users = this.#users.get(beforeKey);
      users?.delete(key);
      if (users?.size === 0) this.#users.delete(beforeKey);
    }
    if (afterKey) {
      const users = this.#users.get(afterKey) ?? new Set<string>();
      this.#users.set(afterKey, users);
      users.add(key);
    }
    return afterKey;
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

  /** Exported Services that name a gateway. */
  get exportedCount(): number {
    let n = 0;
    for (const users of this.#users.values()) n += users.size;
    return n;
  }
}
