/**
 * The local cluster's own Services that are members of fleet-wide Services (SPEC §14,
 * "local first"): a watch of the local Services the member selector matches (label-
 * selected: never every Service), each followed with its own EndpointSlices
 * (local-service-slices.ts). Reads only; the fleet-wide reconciler writes.
 *
 * Invariants (what `memberOf` answers for fleet-wide key `<ns>/<svc>-federated`):
 * - `unknown` until the matching Services are listed, and while a matching Service's
 *   own slices are not listed yet: the local part is then kept as written, never
 *   deleted for it (not listed is not "no endpoints");
 * - `none`: listed, and no matching Service `<ns>/<svc>` (or one that is no member:
 *   ExternalName, no ports);
 * - otherwise the local member (local-member.ts).
 * Every change of a matching Service or of its slices enqueues its fleet-wide key.
 */
import { type FederatedMember, federatedName, type MemberSelector } from "../../src/core/federated.ts";
import { localMemberFor } from "../../src/core/local-member.ts";
import { objectKey, type Service, splitKey } from "../../src/core/objects.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { Watcher } from "../../src/kube/watcher.ts";
import { LocalServiceSlices } from "./local-service-slices.ts";

export type LocalMemberAnswer =
  | { readonly kind: "unknown" }
  | { readonly kind: "none" }
  | { readonly kind: "member"; readonly member: FederatedMember };

export interface LocalMembersDeps {
  readonly client: KubeClient;
  /** The local cluster's name (`--cluster-name`): its part is `<svc>-federated-<cluster>-…`. */
  readonly cluster: string;
  readonly selector: MemberSelector;
  /** `--local-priority`. */
  readonly priority: number;
  readonly log: { warn(fields: object, message: string): void };
  /** The fleet-wide key whose local member may have changed. */
  readonly changed: (key: string) => void;
}

const fleetKeyOf = (serviceKey: string): string => {
  const { namespace = "", name } = splitKey(serviceKey);
  return objectKey({ namespace, name: federatedName(name) });
};

export class LocalMembers {
  readonly #deps: LocalMembersDeps;
  readonly #watch: Watcher<Service>;
  readonly #services: LocalServiceSlices;

  constructor(deps: LocalMembersDeps) {
    this.#deps = deps;
    this.#services = new LocalServiceSlices({
      client: deps.client,
      log: deps.log,
      changed: (key) => deps.changed(fleetKeyOf(key)),
    });
    this.#watch = new Watcher<Service>({
      client: deps.client,
      path: "/api/v1/services",
      expectedKind: "Service",
      labelSelector: `${deps.selector.key}=${deps.selector.value}`,
    });
    this.#watch.on("change", (key) => {
      this.#services.follow(this.#watch.keys());
      deps.changed(fleetKeyOf(key));
    });
    this.#watch.on("listed", () => {
      this.#services.follow(this.#watch.keys());
      for (const key of this.#watch.keys()) deps.changed(fleetKeyOf(key));
    });
  }

  get cluster(): string {
    return this.#deps.cluster;
  }

  get priority(): number {
    return this.#deps.priority;
  }

  start(): void {
    this.#watch.start();
  }

  async stop(): Promise<void> {
    await Promise.all([this.#watch.stop(), this.#services.stop()]);
  }

  /** The fleet-wide key of every matching local Service. */
  *fleetKeys(): Generator<string> {
    for (const key of this.#watch.keys()) yield fleetKeyOf(key);
  }

  /** The local member of fleet-wide key `key` (see the invariants). */
  memberOf(key: string): LocalMemberAnswer {
    if (!this.#watch.hasSynced) return { kind: "unknown" };
    const { namespace = "", name } = splitKey(key);
    if (!name.endsWith("-federated")) return { kind: "none" };
    const serviceKey = objectKey({ namespace, name: name.slice(0, -"-federated".length) });
    if (!this.#watch.get(serviceKey)) return { kind: "none" };
    const followed = this.#services.get(serviceKey);
    if (!followed) return { kind: "unknown" };
    if (!followed.service) return { kind: "none" };
    const member = localMemberFor(this.#deps.cluster, this.#deps.selector, followed.service, followed.slices);
    return member ? { kind: "member", member } : { kind: "none" };
  }
}
