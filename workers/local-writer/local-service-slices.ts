/**
 * Local Services followed with their own EndpointSlices (a fleet-wide Service's local
 * member, planned; SPEC §16's local exporter of an MCS import): for each followed key
 * `<ns>/<svc>`, a watch of that Service alone (field selector on its name) and one of its
 * slices alone (label `kubernetes.io/service-name: <svc>` in `<ns>`, whoever manages
 * them), never every Service or slice of the cluster. `follow` sets the keys; a key no
 * longer followed stops its watches. Reads only.
 *
 * Invariants:
 * - `get(key)` is undefined until both watches of the key have listed (what is not listed
 *   is not known, which is not "no endpoints"), and then the Service (or none) and its
 *   slices as the watches hold them;
 * - `changed(key)` is called whenever what `get(key)` returns may have changed: a watch
 *   event, a first list, the key followed or dropped.
 */
import type { EndpointSlice, Service } from "../../src/core/objects.ts";
import { splitKey } from "../../src/core/objects.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { Watcher } from "../../src/kube/watcher.ts";

export interface LocalServiceSlicesDeps {
  readonly client: KubeClient;
  readonly changed: (key: string) => void;
  readonly log: { warn(fields: object, message: string): void };
  readonly inactivityTimeoutMs?: number;
}

/** One followed Service as observed: undefined `service` when it does not exist. */
export interface FollowedService {
  readonly service: Service | undefined;
  readonly slices: readonly EndpointSlice[];
}

interface Followed {
  readonly service: Watcher<Service>;
  readonly slices: Watcher<EndpointSlice>;
}

export class LocalServiceSlices {
  readonly #deps: LocalServiceSlicesDeps;
  readonly #followed = new Map<string, Followed>();
  #stopped = false;

  constructor(deps: LocalServiceSlicesDeps) {
    this.#deps = deps;
  }

  /** Follows exactly `keys` from now on. */
  follow(keys: Iterable<string>): void {
    if (this.#stopped) return;
    const wanted = new Set(keys);
    for (const [key, followed] of [...this.#followed]) {
      if (wanted.has(key)) continue;
      this.#followed.delete(key);
      void Promise.all([followed.service.stop(), followed.slices.stop()]).catch((error: unknown) =>
        this.#deps.log.warn({ key, error: String(error) }, "local Service watch: stop failed"),
      );
      this.#deps.changed(key);
    }
    for (const key of wanted) if (!this.#followed.has(key)) this.#start(key);
  }

  /** The followed Service `key` and its slices, once both are listed (see the invariants). */
  get(key: string): FollowedService | undefined {
    const followed = this.#followed.get(key);
    if (!followed?.service.hasSynced || !followed.slices.hasSynced) return undefined;
    const { name } = splitKey(key);
    const service = [...followed.service.values()].find((s) => s.metadata.name === name);
    return { service, slices: [...followed.slices.values()] };
  }

  /** The keys followed now. */
  keys(): IterableIterator<string> {
    return this.#followed.keys();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const all = [...this.#followed.values()];
    this.#followed.clear();
    await Promise.all(all.flatMap((f) => [f.service.stop(), f.slices.stop()]));
  }

  #start(key: string): void {
    const { namespace = "", name } = splitKey(key);
    const ns = encodeURIComponent(namespace);
    const common = {
      client: this.#deps.client,
      ...(this.#deps.inactivityTimeoutMs ? { inactivityTimeoutMs: this.#deps.inactivityTimeoutMs } : {}),
    };
    const followed: Followed = {
      service: new Watcher<Service>({
        ...common,
        path: `/api/v1/namespaces/${ns}/services`,
        fieldSelector: `metadata.name=${name}`,
        expectedKind: "Service",
      }),
      slices: new Watcher<EndpointSlice>({
        ...common,
        path: `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`,
        labelSelector: `kubernetes.io/service-name=${name}`,
        expectedKind: "EndpointSlice",
      }),
    };
    this.#followed.set(key, followed);
    for (const watcher of [followed.service, followed.slices] as const) {
      const report = (): void => {
        if (this.#followed.get(key) === followed) this.#deps.changed(key);
      };
      watcher.on("change", report);
      watcher.on("listed", report);
      watcher.start();
    }
  }
}
