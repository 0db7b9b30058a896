/**
 * What the benchmarks read and copy of mirror objects: whether a mirror Service, its
 * Endpoints or EndpointSlice point at a gateway, a watch counting writes per object,
 * copies of remote objects for a bare client to create, and the collection paths of
 * each `--endpoints-api` mode.
 */
import { sliceName } from "../src/core/endpoint-slices.ts";
import { MANAGED_BY_FLEET_MIRROR, MANAGED_BY_LABEL } from "../src/core/labels.ts";
import type { EndpointSlice, Endpoints, KubeObject, Service } from "../src/core/objects.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { Watcher } from "../src/kube/watcher.ts";
import { type BenchMode, GATEWAY_PORT, MIRROR_SELECTOR } from "./harness.ts";

/** Whether a mirror Service carries the remote's ports (`port` of the first one). */
export function serviceHasPort(svc: Service | undefined, port: number): boolean {
  return svc?.spec?.ports?.[0]?.port === port;
}

/** Whether mirror Endpoints point at exactly `ip`:GATEWAY_PORT. */
export function endpointsPointAt(ep: Endpoints | undefined, ip: string): boolean {
  const subset = ep?.subsets?.[0];
  return (
    ep?.subsets?.length === 1 &&
    subset?.addresses?.length === 1 &&
    subset.addresses[0]?.ip === ip &&
    subset.ports?.some((p) => p.port === GATEWAY_PORT) === true
  );
}

/**
 * Whether `slice` is the right IPv4 slice of mirror `mirror` (SPEC §9): fleet-mirror's
 * `managed-by`, one ready endpoint at exactly `ip`, GATEWAY_PORT among its ports.
 */
export function slicePointsAt(slice: EndpointSlice | undefined, mirror: string, ip: string): boolean {
  const endpoint = slice?.endpoints?.[0];
  return (
    slice?.metadata.name === sliceName(mirror, "ipv4") &&
    slice.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_FLEET_MIRROR &&
    slice.addressType === "IPv4" &&
    slice.endpoints?.length === 1 &&
    endpoint?.addresses.length === 1 &&
    endpoint.addresses[0] === ip &&
    endpoint.conditions?.ready === true &&
    slice.ports?.some((p) => p.port === GATEWAY_PORT) === true
  );
}

/** The mirror a slice belongs to: its `<mirror>-ipv4` name less the suffix. */
export function sliceMirror(slice: EndpointSlice): string {
  return slice.metadata.name.replace(/-ipv[46]$/, "");
}

/**
 * Whether a mirror's address object (Endpoints, or its IPv4 slice) points at exactly
 * `ip`:GATEWAY_PORT, in the mode that wrote it.
 */
export function addressesPointAt(mode: BenchMode, obj: KubeObject | undefined, ip: string): boolean {
  return mode === "endpoints"
    ? endpointsPointAt(obj as Endpoints | undefined, ip)
    : obj !== undefined && slicePointsAt(obj as EndpointSlice, sliceMirror(obj as EndpointSlice), ip);
}

/**
 * A label-selected watch on a local collection that counts the objects satisfying
 * `done`, and resolves `until(n)` as soon as n of them do (checked on every event).
 */
export class CountingWatch<T extends KubeObject> {
  readonly watcher: Watcher<T>;
  readonly #satisfied = new Set<string>();
  #done: (obj: T) => boolean;
  #waiter: { n: number; resolve: () => void } | undefined;

  constructor(client: KubeClient, path: string, done: (obj: T) => boolean) {
    this.#done = done;
    this.watcher = new Watcher<T>({ client, path, labelSelector: MIRROR_SELECTOR, pageSize: 5000 });
    this.watcher.on("change", (key, _prev, current) => {
      if (current && this.#done(current)) this.#satisfied.add(key);
      else this.#satisfied.delete(key);
      this.#check();
    });
  }

  async start(): Promise<void> {
    const listed = new Promise<void>((resolve) => this.watcher.once("listed", () => resolve()));
    this.watcher.start();
    await listed;
  }

  /** Changes the predicate and re-evaluates the whole store. */
  expect(done: (obj: T) => boolean): void {
    this.#done = done;
    this.#satisfied.clear();
    for (const obj of this.watcher.values()) {
      if (done(obj)) this.#satisfied.add(`${obj.metadata.namespace}/${obj.metadata.name}`);
    }
  }

  get count(): number {
    return this.#satisfied.size;
  }

  until(n: number, timeoutMs = 900_000): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out waiting for ${n} objects (have ${this.count})`)),
        timeoutMs,
      );
      this.#waiter = {
        n,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.#check();
    });
  }

  #check(): void {
    if (this.#waiter && this.#satisfied.size >= this.#waiter.n) {
      const { resolve } = this.#waiter;
      this.#waiter = undefined;
      resolve();
    }
  }

  async stop(): Promise<void> {
    await this.watcher.stop();
  }
}

/** A copy of a mirror object fit for a POST into `namespace` (server-set fields dropped). */
export function copyForCreate<T extends KubeObject>(obj: T, namespace: string): Record<string, unknown> {
  const { metadata, ...rest } = obj as T & { spec?: Record<string, unknown>; status?: unknown };
  const copy: Record<string, unknown> = {
    ...rest,
    metadata: {
      name: metadata.name,
      namespace,
      ...(metadata.labels ? { labels: metadata.labels } : {}),
      ...(metadata.annotations ? { annotations: metadata.annotations } : {}),
    },
  };
  delete copy["status"];
  const spec = copy["spec"];
  if (spec && typeof spec === "object") {
    const { clusterIP: _ip, clusterIPs: _ips, ...specRest } = spec as Record<string, unknown>;
    copy["spec"] = specRest;
  }
  return copy;
}

/**
 * A copy of a mirror's address object (`mode`'s Endpoints or slice) fit for a POST into
 * `namespace`, next to the copy of its Service whose uid is `serviceUid`: a slice is
 * owned by its Service, as the controller writes it (SPEC §9).
 */
export function copyAddressesForCreate(
  mode: BenchMode,
  obj: KubeObject,
  namespace: string,
  service: { name: string; uid: string | undefined },
): Record<string, unknown> {
  const copy = copyForCreate(obj, namespace);
  if (mode === "endpoints") return copy;
  const owner = { apiVersion: "v1", kind: "Service", name: service.name, uid: service.uid, controller: true };
  return { ...copy, metadata: { ...(copy["metadata"] as object), ownerReferences: [owner] } };
}

export function ensureLocalNamespace(client: KubeClient, name: string): Promise<unknown> {
  return client.request("POST", "/api/v1/namespaces", { body: { metadata: { name } } });
}

export function collectionPath(kind: "services" | "endpoints" | "endpointslices", namespace: string): string {
  return kind === "endpointslices"
    ? `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices`
    : `/api/v1/namespaces/${namespace}/${kind}`;
}

/** The cluster-wide collection of a mirror's address objects in `mode`. */
export function addressesPath(mode: BenchMode): string {
  return mode === "endpoints" ? "/api/v1/endpoints" : "/apis/discovery.k8s.io/v1/endpointslices";
}
