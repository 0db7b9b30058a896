/**
 * Real traffic through the mirrors: a client Pod of the sandbox's local cluster calls a
 * Service by name, and the connection reaches the gateway of the cluster the mirror
 * points at, through the pieces a real node has:
 *
 *   client in the Pod's network namespace (pod-netns.ts, traffic-client.ts)
 *     -> its resolv.conf: `nameserver 10.96.0.10`, the `kube-dns` Service
 *     -> kube-proxy's DNAT (kube-proxy.ts) -> CoreDNS on the node address (coredns.ts;
 *        `clusterset.local` from the ServiceImports: clusterset-dns.ts)
 *   client connects to the mirror's cluster IP
 *     -> kube-proxy's DNAT, in the host's netfilter, for a packet arriving from the veth
 *     -> one ready endpoint of the mirror: a gateway address and port (made local on lo
 *        by demo-gateways.ts), where a server answers with its cluster's name.
 *
 * Safety (traffic-host.ts): one traffic path per machine at a time (a lock), the Service
 * CIDR routed to a blackhole and the guard table (nothing forwarded from a Pod's veth,
 * nothing rewritten from a Service address to a non-local one leaves) loaded before
 * kube-proxy starts and until it has stopped and its tables are gone, the Pod's /30
 * link-local with routes to the Service CIDR and the gateways' local prefix only, every
 * other address local: nothing leaves the machine. `stop` undoes everything in reverse order, each step tried even if one
 * before it failed; the next start sweeps what a killed run left.
 */
import type { ChildProcess } from "node:child_process";
import { access, constants, readFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { CoreV1Api, DiscoveryV1Api } from "@kubernetes/client-node";
import { ClustersetDns } from "./clusterset-dns.ts";
import type { ControlPlane } from "./control-plane.ts";
import { CoreDns } from "./coredns.ts";
import { KubeProxy } from "./kube-proxy.ts";
import { kubeConfig } from "./kubeconfig.ts";
import { PodNetns } from "./pod-netns.ts";
import type { Outcome, TrafficBatch, TrafficResult } from "./traffic-client.ts";
import { acquireTrafficHost, TRAFFIC_LOCK, type TrafficHost } from "./traffic-host.ts";

export type { Outcome } from "./traffic-client.ts";

/** The sandbox API server's default `--service-cluster-ip-range` (control-plane.ts). */
export const SERVICE_CIDR = "10.96.0.0/16";
/** The cluster DNS Service's address, as kubeadm gives it: the Pods' nameserver. */
export const KUBE_DNS_IP = "10.96.0.10";

const CAP_NET_ADMIN = 12;
const CAP_SYS_ADMIN = 21;

/** Why the traffic path cannot run here (no privilege, a tool missing), or undefined when it can. */
export async function trafficUnavailable(): Promise<string | undefined> {
  const status = await readFile("/proc/self/status", "utf8").catch(() => "");
  const eff = BigInt(`0x${/^CapEff:\s*([0-9a-f]+)/m.exec(status)?.[1] ?? "0"}`);
  const has = (cap: number): boolean => ((eff >> BigInt(cap)) & 1n) === 1n;
  if (!has(CAP_NET_ADMIN) || !has(CAP_SYS_ADMIN))
    return "it needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: a network namespace, a veth, routes and kube-proxy's nftables rules)";
  for (const [tool, install] of [
    ["/usr/sbin/nft", "apt-get install nftables"],
    ["/usr/bin/flock", "apt-get install util-linux"],
    ["/usr/bin/setpriv", "apt-get install util-linux"],
  ] as const) {
    const found = await access(tool, constants.X_OK).then(
      () => true,
      () => false,
    );
    if (!found) return `${tool} is missing (${install})`;
  }
  return undefined;
}

export interface TrafficPathOptions {
  readonly plane: ControlPlane;
  /** A local address no one else uses (demo-gateways.ts's node address): kube-proxy's node IP, CoreDNS's. */
  readonly nodeAddress: string;
  /**
   * The prefix made local for the gateways (demo-gateways.ts's route; it holds
   * `nodeAddress`): with SERVICE_CIDR, the only destinations the client Pod has a route to.
   */
  readonly localPrefix: string;
  /** The client Pod's namespace (its first search domain). */
  readonly namespace: string;
  /** How long to wait for another sandbox's traffic path to end. */
  readonly waitMs: number;
}

/** Pending batches of the client, by id. */
type Pending = Map<number, (outcomes: readonly Outcome[]) => void>;

export class TrafficPath {
  readonly #undo: Array<[string, () => Promise<unknown>]> = [];
  readonly #pending: Pending = new Map();
  #client: ChildProcess | undefined;
  #nextId = 1;
  /** What the start found and did, for a log line. */
  note = "";

  /**
   * Starts the whole path and resolves once the client resolves names through it.
   * @returns undefined when another traffic path holds the machine past `waitMs`.
   * @throws on any failure, after undoing what it did.
   */
  static async start(options: TrafficPathOptions): Promise<TrafficPath | undefined> {
    const host: TrafficHost | undefined = await acquireTrafficHost(SERVICE_CIDR, options.waitMs);
    if (!host) return undefined;
    const path = new TrafficPath();
    path.#undo.push([`route ${SERVICE_CIDR} and lock ${TRAFFIC_LOCK}`, () => host.release()]);
    try {
      await path.#startRest(options);
      path.note = `kube-proxy (nftables) and CoreDNS for local; a client Pod in netns; ${SERVICE_CIDR} routed to a blackhole${host.swept ? `; swept a dead run's ${host.swept}` : ""}`;
    } catch (error) {
      await path.stop().catch(() => undefined);
      throw error;
    }
    return path;
  }

  async #startRest(options: TrafficPathOptions): Promise<void> {
    const { plane, nodeAddress } = options;
    const proxy = await KubeProxy.start(plane, "local", nodeAddress);
    this.#undo.push(["kube-proxy and its tables", () => proxy.stop()]);
    const admin = kubeConfig(plane.cluster("local").adminKubeconfig);
    const clusterset = await ClustersetDns.start(admin, join(plane.dir, "clusterset.hosts"));
    this.#undo.push(["clusterset names", async () => clusterset.stop()]);
    const dns = await CoreDns.start(plane, {
      cluster: "local",
      admin,
      bind: [nodeAddress],
      clustersetHosts: clusterset.path,
    });
    this.#undo.push(["CoreDNS", () => dns.stop()]);
    await exposeDns(admin, nodeAddress, dns.port);
    const netns = await PodNetns.create({ nameserver: KUBE_DNS_IP, namespace: options.namespace, domain: dns.domain }, [
      SERVICE_CIDR,
      options.localPrefix,
    ]);
    this.#undo.push([`netns ${netns.name}`, () => netns.delete()]);
    this.#client = await startClient(netns, this.#pending);
    // The DNS path works (kube-proxy's rules for kube-dns are in place) once a Service's
    // name resolves to its cluster IP.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const [outcome] = await this.lookup("kube-dns.kube-system");
      if (outcome && "answer" in outcome && outcome.answer === KUBE_DNS_IP) return;
      if (Date.now() > deadline)
        throw new Error(`the client Pod cannot resolve through CoreDNS (last: ${JSON.stringify(outcome)})`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** `count` requests at once to `http://host:port/` from the client Pod; one outcome each. */
  send(host: string, port: number, count: number, timeoutMs = 2_000): Promise<readonly Outcome[]> {
    return this.#batch({ host, port, count, timeoutMs });
  }

  /** A lookup of `host` in the client Pod (its resolv.conf); the answer is the addresses, comma-joined. */
  lookup(host: string): Promise<readonly Outcome[]> {
    return this.#batch({ host, port: 0, count: 1, timeoutMs: 0, lookup: true });
  }

  #batch(batch: Omit<TrafficBatch, "id">): Promise<readonly Outcome[]> {
    const client = this.#client;
    if (!client?.stdin) return Promise.reject(new Error("the traffic path's client is not running"));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, resolve);
      client.stdin?.write(`${JSON.stringify({ id, ...batch })}\n`, (error) => {
        if (error) {
          this.#pending.delete(id);
          reject(error);
        }
      });
    });
  }

  /** Undoes everything, last first; every step is tried; says what it did. */
  async stop(): Promise<string> {
    const failures: string[] = [];
    const done: string[] = [];
    for (const [what, undo] of this.#undo.splice(0).reverse()) {
      try {
        await undo();
        done.push(what);
      } catch (error) {
        failures.push(`${what}: ${(error as Error).message}`);
      }
    }
    this.#client = undefined;
    if (failures.length > 0) throw new Error(`traffic path not fully removed: ${failures.join("; ")}`);
    return `removed ${done.join(", ")}`;
  }
}

/** Service kube-system/kube-dns at KUBE_DNS_IP:53 (UDP and TCP), its endpoint CoreDNS at `address:port`. */
async function exposeDns(admin: ReturnType<typeof kubeConfig>, address: string, port: number): Promise<void> {
  const namespace = "kube-system";
  await admin.makeApiClient(CoreV1Api).createNamespacedService({
    namespace,
    body: {
      metadata: { name: "kube-dns" },
      spec: {
        clusterIP: KUBE_DNS_IP,
        ports: [
          { name: "dns", port: 53, protocol: "UDP", targetPort: port },
          { name: "dns-tcp", port: 53, protocol: "TCP", targetPort: port },
        ],
      },
    },
  });
  await admin.makeApiClient(DiscoveryV1Api).createNamespacedEndpointSlice({
    namespace,
    body: {
      metadata: {
        name: "kube-dns-sandbox",
        labels: {
          "kubernetes.io/service-name": "kube-dns",
          "endpointslice.kubernetes.io/managed-by": "fleet-mirror-sandbox",
        },
      },
      addressType: "IPv4",
      ports: [
        { name: "dns", port, protocol: "UDP" },
        { name: "dns-tcp", port, protocol: "TCP" },
      ],
      endpoints: [{ addresses: [address], conditions: { ready: true } }],
    },
  });
}

/** Starts traffic-client in `netns` and resolves once it says it is ready; its answers settle `pending`. */
async function startClient(netns: PodNetns, pending: Pending): Promise<ChildProcess> {
  const self = new URL(import.meta.url);
  const program = new URL(`./traffic-client${self.pathname.endsWith(".ts") ? ".ts" : ".js"}`, self).pathname;
  const child = netns.spawn(process.execPath, [program]);
  let stderr = "";
  // A write after the client has exited (a Ctrl-C reaches the whole process group, the
  // client first) fails with EPIPE: that write's callback rejects its batch and the exit
  // handler below settles the others, so the stream's own error event only needs a
  // listener (without one it would end the demo with an unhandled 'error').
  child.stdin?.on("error", () => undefined);
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = `${stderr}${chunk.toString()}`.slice(-2_000);
  });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on("line", (line) => {
      const message = JSON.parse(line) as Partial<TrafficResult> & { ready?: boolean };
      if (message.ready) resolve(child);
      else if (message.id !== undefined && message.outcomes) {
        pending.get(message.id)?.(message.outcomes);
        pending.delete(message.id);
      }
    });
    child.once("exit", (code, signal) => {
      reject(new Error(`traffic client exited (${code ?? signal}): ${stderr.trim()}`));
      for (const settle of pending.values()) settle([{ error: "CLIENT_EXITED" }]);
      pending.clear();
    });
  });
}
