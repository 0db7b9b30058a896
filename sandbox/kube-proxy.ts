/**
 * kube-proxy for a sandbox cluster, in nftables mode, as on a node of a real cluster: it
 * reads the cluster's Services and EndpointSlices and writes DNAT rules (table `ip
 * kube-proxy`) that send a connection to a cluster IP to one of the Service's ready
 * endpoints, chosen per connection.
 *
 * Guarantees:
 * - it runs as user `system:kube-proxy` (a client certificate of the sandbox CA), which
 *   the API server's bootstrap policy binds to ClusterRole `system:node-proxier`: the
 *   rights it has in a real cluster, no more;
 * - it has a Node object of its own (NODE_NAME, created here with the caller's `nodeIp`
 *   as its InternalIP, as a kubelet would report it: kube-proxy reads its node's
 *   addresses and labels), since the sandbox runs no kubelet;
 * - host-wide settings are left as they are: conntrack limits and timeouts are 0 ("do not
 *   change") in its configuration, its health and metrics servers listen on 127.0.0.1;
 * - the caller holds the traffic host (traffic-host.ts: the lock, and the Service CIDR
 *   routed to a blackhole) for as long as it runs; `stop` ends the process, then deletes
 *   the tables it wrote, so no rule outlives it. It dies with the Node.js process (see
 *   process.ts); the next traffic host's sweep then removes its tables.
 */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { freePort } from "./api-server.ts";
import { ensureKubeProxy } from "./binaries.ts";
import type { ControlPlane } from "./control-plane.ts";
import { kubeConfig, writeClientKubeconfig } from "./kubeconfig.ts";
import { ManagedProcess, waitForHttpOk } from "./process.ts";

const run = promisify(execFile);

export const KUBE_PROXY_USER = "system:kube-proxy";
/** The sandbox's one node: kube-proxy's `hostnameOverride`. */
export const NODE_NAME = "fleet-mirror-sandbox-node";

/** Deletes kube-proxy's tables (both families); a table that is not there is fine. */
export async function deleteKubeProxyTables(): Promise<void> {
  for (const family of ["ip", "ip6"]) {
    await run("nft", ["delete", "table", family, "kube-proxy"]).catch((error: { stderr?: string }) => {
      if (!/No such file or directory/.test(String(error.stderr ?? ""))) throw error;
    });
  }
}

export class KubeProxy {
  readonly process: ManagedProcess;

  private constructor(process: ManagedProcess) {
    this.process = process;
  }

  /**
   * Creates the Node, writes the configuration, starts kube-proxy and resolves once its
   * /healthz answers 200 (it has synced its rules once). The caller must hold the traffic
   * host. On failure the process is stopped and its tables deleted.
   */
  static async start(
    plane: ControlPlane,
    cluster: string,
    nodeIp: string,
    readyTimeoutMs = 60_000,
  ): Promise<KubeProxy> {
    const binary = await ensureKubeProxy();
    const c = plane.cluster(cluster);
    const core = kubeConfig(c.adminKubeconfig).makeApiClient(CoreV1Api);
    await core
      .createNode({ body: { metadata: { name: NODE_NAME, labels: { "kubernetes.io/hostname": NODE_NAME } } } })
      .catch((error: { code?: number }) => {
        if (error.code !== 409) throw error;
      });
    // As a kubelet reports it: kube-proxy waits (30 s) for its node's addresses, and
    // accepts NodePorts only there (`nodePortAddresses: [primary]`).
    const node = await core.readNodeStatus({ name: NODE_NAME });
    node.status = { ...node.status, addresses: [{ type: "InternalIP", address: nodeIp }] };
    await core.replaceNodeStatus({ name: NODE_NAME, body: node });
    const kubeconfigPath = await writeClientKubeconfig(
      join(plane.dir, `${cluster}-kube-proxy.kubeconfig`),
      c,
      KUBE_PROXY_USER,
      await plane.issueClientCertificate(KUBE_PROXY_USER),
    );
    const [healthzPort, metricsPort] = [await freePort(), await freePort()];
    const configPath = join(plane.dir, `${cluster}-kube-proxy.yaml`);
    await writeFile(
      configPath,
      [
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1",
        "kind: KubeProxyConfiguration",
        "mode: nftables",
        `hostnameOverride: ${NODE_NAME}`,
        "clientConnection:",
        `  kubeconfig: ${kubeconfigPath}`,
        `healthzBindAddress: 127.0.0.1:${healthzPort}`,
        `metricsBindAddress: 127.0.0.1:${metricsPort}`,
        'nodePortAddresses: ["primary"]',
        // A test's helper, not a node's guardian: the kernel may pick it like any process.
        "oomScoreAdj: 0",
        // 0: leave the host's conntrack table size and timeouts as they are.
        "conntrack:",
        "  maxPerCore: 0",
        "  min: 0",
        "  tcpEstablishedTimeout: 0s",
        "  tcpCloseWaitTimeout: 0s",
        "",
      ].join("\n"),
    );
    const child = new ManagedProcess(
      `kube-proxy-${cluster}`,
      binary,
      [`--config=${configPath}`, "--v=1"],
      join(plane.dir, "logs", `kube-proxy-${cluster}.log`),
    );
    const proxy = new KubeProxy(child);
    try {
      await child.start();
      await waitForHttpOk(child, `http://127.0.0.1:${healthzPort}/healthz`, readyTimeoutMs, 200);
    } catch (error) {
      await proxy.stop();
      throw error;
    }
    return proxy;
  }

  /** Stops kube-proxy, then deletes its tables. Idempotent. */
  async stop(): Promise<void> {
    await this.process.close(5_000);
    await deleteKubeProxyTables();
  }
}
