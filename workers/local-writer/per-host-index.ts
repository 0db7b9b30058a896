/**
 * fleet-mirror's per-host mirror Services (SPEC §12) by the headless mirror they belong
 * to (their `mirror.linkerd.io/headless-mirror-svc-name` label), kept from the Service
 * store's change events.
 *
 * Why: whether a per-host mirror nobody wants is collected depends on its headless
 * mirror's desired state (kept as observed while that cluster's hosts are unknown,
 * collected once they are known without it). A change of the headless mirror's desired
 * state therefore re-checks its observed per-host mirrors, and only this index finds
 * them without scanning every held Service.
 *
 * Invariant: after every change event, `of(key)` holds exactly the held Services whose
 * headless mirror's key is `key` (the store emits a change for every key a relist changed).
 */
import { HEADLESS_MIRROR_LABEL } from "../../src/core/headless.ts";
import { KeySets } from "../../src/core/key-sets.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";

/**
 * The key of the headless mirror a per-host mirror Service belongs to (its
 * `headless-mirror-svc-name` label, SPEC §12): that mirror's addresses include this
 * Service's cluster IP. Undefined for any other Service.
 */
export function headlessMirrorKey(service: Service | undefined): string | undefined {
  const headless = service?.metadata.labels?.[HEADLESS_MIRROR_LABEL];
  return service && headless ? objectKey({ namespace: service.metadata.namespace, name: headless }) : undefined;
}

/** The Service store as the index reads it. */
export interface ServiceSource {
  on(
    event: "change",
    listener: (key: string, previous: Service | undefined, current: Service | undefined) => void,
  ): unknown;
}

export class PerHostIndex {
  /** Headless mirror key → keys of its observed per-host Services. */
  readonly #byHeadless = new KeySets();

  constructor(source: ServiceSource) {
    source.on("change", (key, previous, current) => {
      const before = headlessMirrorKey(previous);
      const after = headlessMirrorKey(current);
      if (before !== undefined && before !== after) this.#byHeadless.delete(before, key);
      if (after !== undefined) this.#byHeadless.add(after, key);
    });
  }

  /** The keys of the held per-host Services of headless mirror `headlessKey`. */
  of(headlessKey: string): ReadonlySet<string> {
    return this.#byHeadless.of(headlessKey);
  }
}
