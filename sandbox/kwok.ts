/**
 * The sandbox's fake kubelet: KWOK (sigs.k8s.io/kwok, pinned, built by
 * scripts/control-plane/build.sh) with one Node per cluster that asks for it, so the Pods
 * a test creates on that Node become Running with an IP, without any container runtime.
 * With kube-controller-manager's EndpointSlice controller running (controller-manager.ts),
 * a selector Service over such Pods gets the EndpointSlices a real cluster would write.
 *
 * Guarantees:
 * - one Node per cluster, `kwok-<cluster>` (`kwokNode`), created here if absent, labelled
 *   `topology.kubernetes.io/zone: zone-<cluster>` (what the EndpointSlice controller
 *   copies into an endpoint's `zone`) and annotated `kwok.x-k8s.io/node: fake`; KWOK
 *   manages that Node alone (`--manage-single-node`), never any other;
 * - KWOK runs the module's own "fast" Stages, as kwokctl's clusters do: the Node Ready at
 *   once; a Pod bound to it (`spec.nodeName`: the sandbox runs no scheduler) Running and
 *   Ready with an IP at once; a deleted Pod removed at once. Nothing else changes a Pod
 *   later: a test may set its Ready condition False through the status subresource and it
 *   stays so;
 * - Pod IPs come from the Node's `podCIDR`, `198.51.100.<128 + 16 × index>/28` for the
 *   cluster at `index` (0..6) among the plane's clusters, so no two clusters' Pods share
 *   an address, and the Node's InternalIP is `198.51.100.<240 + index>`. That is a
 *   documentation range (never routed on any network; local-addresses.ts can make it
 *   local to the machine): the Pods have no network, only addresses in objects, and
 *   nothing here sends to them. The API server accepts them in endpoints, where it
 *   refuses loopback. A test that ever sends traffic to a Pod makes its range local first;
 * - KWOK opens no port (no `--server-address`, no `--node-port`: no exec, logs or
 *   port-forward) and takes no Lease (`--node-lease-duration-seconds=0`: no node
 *   lifecycle controller runs here to read one);
 * - it authenticates with the cluster's admin kubeconfig: it stands in for a kubelet, and
 *   the sandbox's API servers run RBAC only, without the Node authorizer a kubelet's
 *   rights come from;
 * - `start` resolves once the Node is Ready (KWOK's first act), so a Pod created after it
 *   becomes Running; it rejects if KWOK exits first, `signal` aborts or the time runs out.
 */
import { BlockList, isIPv4 } from "node:net";
import { CoreV1Api, KubeConfig, type V1Node } from "@kubernetes/client-node";
import { ManagedProcess, waitReady } from "./process.ts";

/** The annotation KWOK's own tooling marks its fake Nodes with. */
export const KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node";

/** The Node of `cluster` that KWOK manages. */
export const kwokNode = (cluster: string): string => `kwok-${cluster}`;

/** The zone of that Node (`topology.kubernetes.io/zone`), which endpoints on it carry. */
export const kwokZone = (cluster: string): string => `zone-${cluster}`;

/** How many clusters of one plane can run KWOK: the /28 Pod ranges that fit in 198.51.100.128/25 below the Nodes'. */
export const KWOK_MAX_CLUSTERS = 7;

function checkIndex(index: number): number {
  if (!Number.isInteger(index) || index < 0 || index >= KWOK_MAX_CLUSTERS)
    throw new Error(`KWOK cluster index ${index} is outside 0..${KWOK_MAX_CLUSTERS - 1}`);
  return index;
}

/** The Pod address range of the cluster at `index` among the plane's clusters (14 Pods). */
export const kwokPodCidr = (index: number): string => `198.51.100.${128 + 16 * checkIndex(index)}/28`;

/** Whether `address` lies in the Pod range of the cluster at `index`. */
export function inKwokPodCidr(index: number, address: string): boolean {
  const [net = "", bits = ""] = kwokPodCidr(index).split("/");
  const list = new BlockList();
  list.addSubnet(net, Number(bits), "ipv4");
  return isIPv4(address) && list.check(address, "ipv4");
}

/** The InternalIP of that cluster's Node (a Pod's `hostIP`). */
export const kwokNodeIp = (index: number): string => `198.51.100.${240 + checkIndex(index)}`;

export interface KwokOptions {
  readonly cluster: string;
  /** The cluster's position among the plane's clusters (its Pod range, its Node's address). */
  readonly index: number;
  readonly binary: string;
  /** The Stage manifests KWOK runs (sandbox/binaries.ts `ensureKwok`). */
  readonly stages: readonly string[];
  /** The cluster's admin kubeconfig: as YAML (to create the Node) and on disk (for KWOK). */
  readonly adminKubeconfig: string;
  readonly adminKubeconfigPath: string;
  readonly logPath: string;
}

const statusCode = (error: unknown): number | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "number"
    ? error.code
    : undefined;

export class Kwok {
  readonly cluster: string;
  readonly node: string;
  readonly podCidr: string;
  readonly process: ManagedProcess;
  readonly #core: CoreV1Api;
  readonly #index: number;

  constructor(options: KwokOptions) {
    this.cluster = options.cluster;
    this.node = kwokNode(options.cluster);
    this.podCidr = kwokPodCidr(options.index);
    this.#index = options.index;
    const kc = new KubeConfig();
    kc.loadFromString(options.adminKubeconfig);
    this.#core = kc.makeApiClient(CoreV1Api);
    this.process = new ManagedProcess(
      `kwok-${options.cluster}`,
      options.binary,
      [
        `--kubeconfig=${options.adminKubeconfigPath}`,
        ...options.stages.map((path) => `--config=${path}`),
        `--manage-single-node=${this.node}`,
        `--node-ip=${this.nodeIp}`,
        `--cidr=${this.podCidr}`,
        "--node-lease-duration-seconds=0",
      ],
      options.logPath,
    );
  }

  /** The Node's InternalIP (a Pod's `hostIP`). */
  get nodeIp(): string {
    return kwokNodeIp(this.#index);
  }

  /** Creates the Node (if absent), starts KWOK and waits for the Node to be Ready. */
  async start(timeoutMs: number, signal: AbortSignal): Promise<void> {
    await this.#createNode();
    await this.process.start();
    await waitReady(
      this.process,
      async () => {
        try {
          const node = await this.#core.readNode({ name: this.node });
          const ready = node.status?.conditions?.find((c) => c.type === "Ready");
          return ready?.status === "True" || `Node ${this.node} Ready=${ready?.status ?? "unset"}`;
        } catch (error) {
          return (error as Error).message;
        }
      },
      { timeoutMs, signal },
    );
  }

  async #createNode(): Promise<void> {
    const body: V1Node = {
      metadata: {
        name: this.node,
        labels: {
          "kubernetes.io/hostname": this.node,
          "kubernetes.io/os": "linux",
          "kubernetes.io/arch": "amd64",
          "topology.kubernetes.io/zone": kwokZone(this.cluster),
          type: "kwok",
        },
        annotations: { [KWOK_NODE_ANNOTATION]: "fake" },
      },
      spec: { podCIDR: this.podCidr, podCIDRs: [this.podCidr] },
    };
    try {
      await this.#core.createNode({ body });
    } catch (error) {
      if (statusCode(error) !== 409) throw error;
    }
  }
}
