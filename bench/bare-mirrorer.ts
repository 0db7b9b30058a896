/**
 * The bare client of the steady-latency scenario: the least a mirroring program can do
 * for the same offered load. One list/watch per remote API server; on every event it
 * computes each cluster name's mirror with the same pure function as fleet-mirror
 * (`desiredMirrorFor`, the gateway read once) and writes it at once — create, update
 * over the object its own last write returned, or delete — with no queue, no batching,
 * no thread hop, no rate limit and no reconcile read. Its objects go into their own
 * namespace and carry a label of their own, so nothing of fleet-mirror ever sees them.
 *
 * p99(fleet-mirror) / p99(this) in the same run is `steady_p99_ratio`: what the
 * controller's machinery (queueing, batching between threads, the writer's plan) adds
 * to a watch-then-write path that the API servers alone already take.
 */
import { type ClusterSettings, desiredMirrorFor, type GatewayView } from "../src/core/desired.ts";
import { desiredSliceContents, sliceBody } from "../src/core/endpoint-slices.ts";
import type { Service } from "../src/core/objects.ts";
import { endpointsBody, serviceBody } from "../src/core/plan.ts";
import type { KubeClient } from "../src/kube/client.ts";
import { KubeApiError, KubeTransportError } from "../src/kube/errors.ts";
import { Watcher } from "../src/kube/watcher.ts";
import type { Fleet } from "../test/helpers/fleet.ts";
import { GATEWAY_PORT, runPool, sleep } from "./harness.ts";

/** Tries of one request that the API server turned away for load (429, 5xx) or a broken connection. */
const MAX_TRIES = 20;

/** The label every bare mirror carries (the observer selects on it). */
export const BARE_MIRROR_LABEL = "bench.fleet-mirror.io/bare-mirror";

export interface BareRemote {
  /** The remote API server's name in the fleet. */
  readonly remote: string;
  /** The cluster names registered for it: each remote Service has one mirror per name. */
  readonly clusters: readonly string[];
  readonly gatewayIp: string;
}

interface Written {
  readonly service: Service;
  readonly addressNames: readonly string[];
}

export class BareMirrorer {
  readonly #local: KubeClient;
  readonly #namespace: string;
  readonly #mode: "endpointslices" | "endpoints";
  readonly #concurrency: number;
  readonly #watchers: Watcher<Service>[] = [];
  /** Mirror name → what the last write returned; absent: not written (or deleted). */
  readonly #written = new Map<string, Written>();
  /** Mirror name → the tail of its chain of writes: writes of one mirror never overlap. */
  readonly #chains = new Map<string, Promise<void>>();
  failures = 0;
  writes = 0;
  /** Requests sent again after a 429, a 5xx or a broken connection, as any client must. */
  retries = 0;
  /** The first failures by message, for the report. */
  readonly failureSamples: string[] = [];

  constructor(opts: {
    local: KubeClient;
    namespace: string;
    mode: "endpointslices" | "endpoints";
    concurrency: number;
  }) {
    this.#local = opts.local;
    this.#namespace = opts.namespace;
    this.#mode = opts.mode;
    this.#concurrency = opts.concurrency;
  }

  /** Lists every remote and writes every mirror; resolves once the initial writes are done. */
  async start(fleet: Fleet, remotes: readonly BareRemote[], clientFor: (remote: string) => KubeClient): Promise<void> {
    await this.#local
      .request("POST", "/api/v1/namespaces", { body: { metadata: { name: this.#namespace } } })
      .catch(tolerate(409));
    const initial: Promise<void>[] = [];
    for (const r of remotes) {
      // The one gateway `shapeRemote` creates, which every exported Service names.
      const gateway = await fleet.api(r.remote).readNamespacedService({ namespace: "gateway", name: "gateway" });
      const view: GatewayView = {
        exists: true,
        resourceVersion: gateway.metadata?.resourceVersion ?? "",
        addresses: [r.gatewayIp],
        incomingPort: GATEWAY_PORT,
      };
      const watcher = new Watcher<Service>({ client: clientFor(r.remote), path: "/api/v1/namespaces/bench/services" });
      let listed = false;
      watcher.on("change", (_key, previous, current) => {
        const service = current ?? previous;
        if (!service) return;
        const work = this.#onChange(r, view, current, service);
        if (!listed) initial.push(work);
      });
      const ready = new Promise<void>((resolve) => watcher.once("listed", () => resolve()));
      watcher.start();
      await ready;
      listed = true;
      this.#watchers.push(watcher);
    }
    await Promise.all(initial);
  }

  async stop(): Promise<void> {
    await Promise.all(this.#watchers.map((w) => w.stop()));
    await Promise.all(this.#chains.values());
  }

  /** One remote event: every cluster name's mirror written now, at most `concurrency` at once. */
  #onChange(r: BareRemote, gateway: GatewayView, current: Service | undefined, service: Service): Promise<void> {
    return runPool(r.clusters, this.#concurrency, async (cluster) => {
      const settings: ClusterSettings = {
        name: cluster,
        domain: "cluster.local",
        excludedNamespaces: [],
        defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
      };
      const outcome = current ? desiredMirrorFor(settings, current, gateway) : { kind: "not-exported" as const };
      const name = `${service.metadata.name}-${cluster}`;
      const previous = this.#chains.get(name) ?? Promise.resolve();
      const next = previous.then(() =>
        (outcome.kind === "mirror" ? this.#write(outcome.mirror) : this.#delete(name)).catch((error: unknown) => {
          this.failures++;
          if (this.failureSamples.length < 5) this.failureSamples.push(String(error));
        }),
      );
      this.#chains.set(name, next);
      await next;
    });
  }

  async #write(mirror: Parameters<typeof serviceBody>[0]): Promise<void> {
    const desired = {
      ...mirror,
      namespace: this.#namespace,
      labels: { ...mirror.labels, [BARE_MIRROR_LABEL]: "true" },
    };
    const before = this.#written.get(desired.name);
    const base = `/api/v1/namespaces/${this.#namespace}/services`;
    this.writes++;
    const service = before
      ? await this.#request<Service>("PUT", `${base}/${desired.name}`, {
          body: serviceBody(desired, before.service),
        })
      : await this.#request<Service>("POST", base, { body: serviceBody(desired) });
    if (before) {
      this.#written.set(desired.name, { ...before, service });
      return;
    }
    const addressNames: string[] = [];
    if (this.#mode === "endpoints") {
      this.writes++;
      await this.#request("POST", `/api/v1/namespaces/${this.#namespace}/endpoints`, {
        body: endpointsBody(desired),
      });
      addressNames.push(`endpoints/${desired.name}`);
    } else {
      for (const content of desiredSliceContents(desired)) {
        this.writes++;
        await this.#request("POST", `/apis/discovery.k8s.io/v1/namespaces/${this.#namespace}/endpointslices`, {
          body: sliceBody(desired, content, service.metadata.uid ?? ""),
        });
        addressNames.push(`endpointslices/${content.name}`);
      }
    }
    this.#written.set(desired.name, { service, addressNames });
  }

  /** One request, sent again while the API server sheds load or the connection breaks. */
  async #request<T>(method: "POST" | "PUT" | "DELETE", path: string, options: { body?: object } = {}): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#local.request<T>(method, path, options);
      } catch (error) {
        const transient =
          error instanceof KubeTransportError ||
          (error instanceof KubeApiError && (error.status === 429 || error.status >= 500));
        if (!transient || attempt >= MAX_TRIES) throw error;
        this.retries++;
        const after = error instanceof KubeApiError ? error.retryAfterSeconds : undefined;
        await sleep(after !== undefined ? after * 1000 : 50 * attempt);
      }
    }
  }

  async #delete(name: string): Promise<void> {
    const before = this.#written.get(name);
    if (!before) return;
    this.#written.delete(name);
    this.writes++;
    await this.#request("DELETE", `/api/v1/namespaces/${this.#namespace}/services/${name}`);
    for (const address of before.addressNames) {
      const path = address.startsWith("endpointslices/")
        ? `/apis/discovery.k8s.io/v1/namespaces/${this.#namespace}/${address}`
        : `/api/v1/namespaces/${this.#namespace}/${address}`;
      this.writes++;
      // The garbage collector may have deleted the owned slice first.
      await this.#request("DELETE", path).catch(tolerate(404));
    }
  }
}

/** A rejection handler that accepts one HTTP status (e.g. AlreadyExists) and rethrows anything else. */
function tolerate(status: number): (error: unknown) => void {
  return (error) => {
    if (error instanceof KubeApiError && error.status === status) return;
    throw error;
  };
}
