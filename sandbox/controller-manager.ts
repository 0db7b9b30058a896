/**
 * The sandbox's kube-controller-manager: the built-in controllers a real cluster runs next
 * to fleet-mirror, cut to the ones that act on what fleet-mirror writes.
 *
 * Guarantees:
 * - it runs exactly `SANDBOX_CONTROLLERS`: EndpointSlice (slices for Services with a
 *   selector), EndpointSliceMirroring (slices for selector-less Services' Endpoints, which
 *   is what a mirror is), namespace (finishes namespace deletion) and garbage collector
 *   (owner references), and deployment and replicaset (a Deployment's Pods, for clusters
 *   that run KWOK's fake Node, kwok.ts; idle elsewhere). Nothing else: no node, pod
 *   lifecycle or token controllers, and no scheduler: a test's Pods name their Node;
 * - it authenticates as `system:kube-controller-manager` (a client certificate) and runs
 *   each controller under its own ServiceAccount in kube-system
 *   (`--use-service-account-credentials`), bound by the API server's bootstrap RBAC: the
 *   controllers get exactly the permissions they have in a real cluster, so a test that
 *   passes here does not lean on admin rights;
 * - leader election is off (one instance per cluster); its secure port listens on
 *   127.0.0.1 only, serving /healthz with a certificate of the sandbox CA. No
 *   authentication or authorization kubeconfig is given (its log warns so): /healthz is
 *   always allowed, and nothing else on that port is used.
 */
import { join } from "node:path";
import { freePort, httpsStatus } from "./api-server.ts";
import { writeClientKubeconfig } from "./kubeconfig.ts";
import type { CertificateFiles } from "./pki.ts";
import { ManagedProcess, waitReady } from "./process.ts";

/** The controllers the sandbox runs, by their kube-controller-manager names. */
export const SANDBOX_CONTROLLERS = [
  "endpointslice-controller",
  "endpointslice-mirroring-controller",
  "namespace-controller",
  "garbage-collector-controller",
  "deployment-controller",
  "replicaset-controller",
] as const;

/** The user name kube-controller-manager's bootstrap ClusterRole and binding are for. */
export const CONTROLLER_MANAGER_USER = "system:kube-controller-manager";

export interface ControllerManagerOptions {
  readonly cluster: string;
  readonly binary: string;
  /** A kubeconfig authenticating as `CONTROLLER_MANAGER_USER`. */
  readonly kubeconfigPath: string;
  /** A serving certificate for 127.0.0.1, signed by `caPem`. */
  readonly serving: CertificateFiles;
  readonly caPem: string;
  readonly port: number;
  readonly logPath: string;
}

export class ControllerManager {
  readonly cluster: string;
  readonly process: ManagedProcess;
  readonly #healthz: string;
  readonly #caPem: string;

  constructor(options: ControllerManagerOptions) {
    this.cluster = options.cluster;
    this.#healthz = `https://127.0.0.1:${options.port}/healthz`;
    this.#caPem = options.caPem;
    this.process = new ManagedProcess(
      `kube-controller-manager-${options.cluster}`,
      options.binary,
      [
        `--kubeconfig=${options.kubeconfigPath}`,
        `--controllers=${SANDBOX_CONTROLLERS.join(",")}`,
        "--use-service-account-credentials=true",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        `--secure-port=${options.port}`,
        `--tls-cert-file=${options.serving.certPath}`,
        `--tls-private-key-file=${options.serving.keyPath}`,
        "--v=1",
      ],
      options.logPath,
    );
  }

  /**
   * The controller manager of the control plane's cluster `cluster` (API server at
   * `server`), not started: its kubeconfig (client certificate `client`) written into
   * `dir`, its log into `dir/logs`, its secure port a free one. Its /healthz is read by
   * the sandbox only, so the API server's loopback serving certificate (`serving`, same
   * CA) serves it as well as a new one would.
   */
  static async forCluster(o: {
    readonly cluster: string;
    readonly server: string;
    readonly dir: string;
    readonly binary: string;
    readonly client: CertificateFiles;
    readonly serving: CertificateFiles;
    readonly caPem: string;
  }): Promise<ControllerManager> {
    const kubeconfigPath = await writeClientKubeconfig(
      join(o.dir, `${o.cluster}-controller-manager.kubeconfig`),
      { name: o.cluster, server: o.server, caPem: o.caPem },
      CONTROLLER_MANAGER_USER,
      o.client,
    );
    return new ControllerManager({
      cluster: o.cluster,
      binary: o.binary,
      kubeconfigPath,
      serving: o.serving,
      caPem: o.caPem,
      port: await freePort(),
      logPath: join(o.dir, "logs", `kube-controller-manager-${o.cluster}.log`),
    });
  }

  /**
   * Starts the process and resolves once /healthz answers 200. Throws when the process
   * exits first, `signal` aborts, or `timeoutMs` passes; the caller stops it then.
   */
  async start(timeoutMs: number, signal: AbortSignal): Promise<void> {
    await this.process.start();
    await waitReady(
      this.process,
      async () => {
        const status = await httpsStatus(this.#healthz, { ca: this.#caPem, signal });
        return status === 200 || String(status);
      },
      { timeoutMs, signal, state: "healthy" },
    );
  }
}
