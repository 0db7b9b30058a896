/**
 * A real Kubernetes control plane on loopback: one etcd and N kube-apiservers, each
 * API server a separate "cluster" with its own `--etcd-prefix`, so they share nothing
 * but the etcd process (a cluster named in `ownEtcd` has an etcd of its own). Used by
 * the tests, the benchmarks and `fleet-mirror demo`.
 *
 * Guarantees:
 * - every process listens on 127.0.0.1 only, on free ports chosen at start; an API
 *   server keeps its port across `restartApiServer`, so clients reconnect to it;
 * - RBAC is enforced (`--authorization-mode=RBAC`); the admin kubeconfig authenticates
 *   with a client certificate in `system:masters`;
 * - a cluster named in `controllerManagers` also runs a kube-controller-manager with the
 *   built-in controllers that act on fleet-mirror's objects (see controller-manager.ts),
 *   started once its API server is ready and stopped before it;
 * - a cluster named in `kwok` also runs KWOK with one fake Node (see kwok.ts), so Pods
 *   bound to that Node become Running with an IP; started once its API server (and
 *   controller manager) is ready, stopped first;
 * - `stop()` ends every process and removes the working directory; processes also die
 *   with the Node.js process that started them (see process.ts).
 */
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AUDIT_POLICY, apiServerArgs, freePort, httpsStatus } from "./api-server.ts";
import {
  type ControlPlaneBinaries,
  ensureControllerManager,
  ensureControlPlaneBinaries,
  ensureKwok,
} from "./binaries.ts";
import { ControllerManager } from "./controller-manager.ts";
import { etcdProcess, type SandboxEtcd, waitForEtcd } from "./etcd.ts";
import { type KubeconfigAuth, renderKubeconfig } from "./kubeconfig.ts";
import { Kwok } from "./kwok.ts";
import { type CertificateFiles, createCa, issueCertificate } from "./pki.ts";
import { planeCertificates } from "./plane-pki.ts";
import { ManagedProcess, waitReady } from "./process.ts";

export interface ControlPlaneOptions {
  /** Cluster names, e.g. `["local", "east", "west"]`; each gets its own API server. */
  readonly clusters: readonly string[];
  /** Working directory; a fresh temporary one when omitted. Removed by `stop()` only when it was created here. */
  readonly dir?: string;
  /** How long to wait for each API server's /readyz. Default 120 s (a loaded 2-core machine is slow). */
  readonly readyTimeoutMs?: number;
  /** Service ClusterIP range of every API server. Default `10.96.0.0/16`. */
  readonly serviceClusterIpRange?: string;
  /** Aborts a start in progress (Ctrl-C while the demo starts): whatever started is stopped, `start` rejects. */
  readonly signal?: AbortSignal;
  /**
   * Clusters (a subset of `clusters`) that also run a kube-controller-manager, as a real
   * cluster does. Default: none. Tests, the demo and the bench name the local cluster,
   * where fleet-mirror writes.
   */
  readonly controllerManagers?: readonly string[];
  /**
   * Clusters (a subset of `clusters`) whose API server writes an audit log (see
   * `AUDIT_POLICY`) to `SandboxCluster.auditLogPath`. Default: none, so that runs that
   * never read it pay nothing.
   */
  readonly audit?: readonly string[];
  /**
   * Clusters (a subset of `clusters`) that also run KWOK with one fake Node, so the Pods
   * a test binds to it become Running with an IP (kwok.ts). Default: none. Pods of a
   * Deployment also need `controllerManagers` to name the cluster.
   */
  readonly kwok?: readonly string[];
  /**
   * Clusters (a subset of `clusters`) whose API server stores in an etcd of its own
   * (process `etcd-<cluster>`, started before it and stopped after it), so that their
   * writes load no process the others use: a benchmark's cluster on other machines.
   * Default: none.
   */
  readonly ownEtcd?: readonly string[];
}

export { AUDIT_POLICY };

export interface SandboxCluster {
  readonly name: string;
  /** `https://127.0.0.1:<port>` */
  readonly server: string;
  readonly port: number;
  /** PEM of the CA that signed the API server's serving certificate. */
  readonly caPem: string;
  /** An admin kubeconfig (client certificate in `system:masters`), as YAML text. */
  readonly adminKubeconfig: string;
  /** The same kubeconfig written to disk, for kubectl and `--kubeconfig`. */
  readonly adminKubeconfigPath: string;
  readonly etcdPrefix: string;
  /** The API server's audit log (JSON lines), when the cluster is named in `ControlPlaneOptions.audit`. */
  readonly auditLogPath?: string;
}

interface ClusterRuntime {
  readonly cluster: SandboxCluster;
  readonly process: ManagedProcess;
  readonly admin: CertificateFiles;
}

export class ControlPlane {
  readonly #runtimes = new Map<string, ClusterRuntime>();
  readonly #controllerManagers = new Map<string, ControllerManager>();
  readonly #kwoks = new Map<string, Kwok>();
  /** The etcds of the clusters named in `ownEtcd`, by cluster. */
  readonly #ownEtcds = new Map<string, SandboxEtcd>();
  #stopped = false;
  /** Aborts the waits of a start in progress: the caller's signal, or the first failure of a parallel start. */
  readonly #abort: AbortSignal;

  readonly dir: string;
  readonly binaries: ControlPlaneBinaries;
  readonly ca: CertificateFiles;
  readonly etcd: ManagedProcess;
  readonly etcdUrl: string;
  readonly readyTimeoutMs: number;
  readonly ownsDir: boolean;

  private constructor(fields: {
    dir: string;
    binaries: ControlPlaneBinaries;
    ca: CertificateFiles;
    etcd: ManagedProcess;
    etcdUrl: string;
    readyTimeoutMs: number;
    ownsDir: boolean;
    abort: AbortSignal;
  }) {
    this.dir = fields.dir;
    this.binaries = fields.binaries;
    this.ca = fields.ca;
    this.etcd = fields.etcd;
    this.etcdUrl = fields.etcdUrl;
    this.readyTimeoutMs = fields.readyTimeoutMs;
    this.ownsDir = fields.ownsDir;
    this.#abort = fields.abort;
  }

  /**
   * Builds the binaries if needed, then starts etcd and every API server in parallel
   * and resolves once all of them answer /readyz. On any failure, whatever was
   * started is stopped before the error is thrown.
   */
  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    const names = new Set(options.clusters);
    if (names.size !== options.clusters.length || names.size === 0) {
      throw new Error(`cluster names must be distinct and non-empty: ${options.clusters.join(",")}`);
    }
    const subset = (option: string, list: readonly string[] | undefined): Set<string> => {
      for (const name of list ?? [])
        if (!names.has(name)) throw new Error(`${option} names ${name}, which is not among the clusters`);
      return new Set(list ?? []);
    };
    const managed = subset("controllerManagers", options.controllerManagers);
    const audited = subset("audit", options.audit);
    const faked = subset("kwok", options.kwok);
    const ownEtcd = subset("ownEtcd", options.ownEtcd);
    const binaries = await ensureControlPlaneBinaries();
    const controllerManagerBinary = managed.size > 0 ? await ensureControllerManager() : undefined;
    const kwokFiles = faked.size > 0 ? await ensureKwok() : undefined;
    const ownsDir = options.dir === undefined;
    const dir = options.dir ?? (await mkdtemp(join(tmpdir(), "fleet-mirror-cp-")));
    const pki = join(dir, "pki");
    await mkdir(pki, { recursive: true });
    await mkdir(join(dir, "logs"), { recursive: true });

    const [ca, shared] = await Promise.all([createCa(pki, "ca"), etcdProcess(binaries.etcd, dir, "etcd")]);
    const { servingCert, admin, controllerManagerClient, saPrivate, saPublic } = await planeCertificates(ca, pki, {
      controllerManager: managed.size > 0,
    });
    const auditPolicyPath = join(dir, "audit-policy.yaml");
    if (audited.size > 0) await writeFile(auditPolicyPath, AUDIT_POLICY);

    const startFailed = new AbortController();
    const plane = new ControlPlane({
      dir,
      binaries,
      ca,
      etcd: shared.process,
      etcdUrl: shared.url,
      readyTimeoutMs: options.readyTimeoutMs ?? 120_000,
      ownsDir,
      abort: options.signal ? AbortSignal.any([options.signal, startFailed.signal]) : startFailed.signal,
    });
    try {
      await shared.process.start();
      await plane.#waitForEtcd();
      // Every API server's start settles before the catch below stops the plane: a start
      // still under way then would launch its process after the stop, unowned.
      const started = await Promise.allSettled(
        options.clusters
          .map(async (name) => {
            const port = await freePort();
            const server = `https://127.0.0.1:${port}`;
            const auth: KubeconfigAuth = { clientCertPem: admin.certPem, clientKeyPem: admin.keyPem };
            const adminKubeconfig = renderKubeconfig({ cluster: name, server, caPem: ca.certPem, user: "admin", auth });
            const adminKubeconfigPath = join(dir, `${name}.kubeconfig`);
            await writeFile(adminKubeconfigPath, adminKubeconfig, { mode: 0o600 });
            const etcdPrefix = `/clusters/${name}`;
            const auditLogPath = audited.has(name) ? join(dir, "logs", `audit-${name}.log`) : undefined;
            const own = ownEtcd.has(name) ? await etcdProcess(binaries.etcd, dir, `etcd-${name}`) : undefined;
            if (own) {
              plane.#abort.throwIfAborted();
              plane.#ownEtcds.set(name, own);
              await own.process.start();
              await waitForEtcd(own, { timeoutMs: plane.readyTimeoutMs, signal: plane.#abort });
            }
            const process = new ManagedProcess(
              `kube-apiserver-${name}`,
              binaries.kubeApiserver,
              apiServerArgs({
                name,
                port,
                etcdUrl: own?.url ?? shared.url,
                etcdPrefix,
                dir,
                servingCert,
                caPath: ca.certPath,
                saPublic,
                saPrivate,
                serviceClusterIpRange: options.serviceClusterIpRange ?? "10.96.0.0/16",
                ...(auditLogPath ? { audit: { policyPath: auditPolicyPath, logPath: auditLogPath } } : {}),
              }),
              join(dir, "logs", `kube-apiserver-${name}.log`),
            );
            const cluster: SandboxCluster = {
              name,
              server,
              port,
              caPem: ca.certPem,
              adminKubeconfig,
              adminKubeconfigPath,
              etcdPrefix,
              ...(auditLogPath ? { auditLogPath } : {}),
            };
            plane.#abort.throwIfAborted();
            plane.#runtimes.set(name, { cluster, process, admin });
            await process.start();
            await plane.#waitForApiServer(name);
            if (controllerManagerBinary && controllerManagerClient && managed.has(name)) {
              const controllerManager = await ControllerManager.forCluster({
                cluster: name,
                server,
                dir,
                binary: controllerManagerBinary,
                client: controllerManagerClient,
                serving: servingCert,
                caPem: ca.certPem,
              });
              plane.#abort.throwIfAborted();
              plane.#controllerManagers.set(name, controllerManager);
              await controllerManager.start(plane.readyTimeoutMs, plane.#abort);
            }
            if (kwokFiles && faked.has(name)) {
              const kwok = new Kwok({
                cluster: name,
                index: options.clusters.indexOf(name),
                binary: kwokFiles.binary,
                stages: kwokFiles.stages,
                adminKubeconfig,
                adminKubeconfigPath,
                logPath: join(dir, "logs", `kwok-${name}.log`),
              });
              plane.#abort.throwIfAborted();
              plane.#kwoks.set(name, kwok);
              await kwok.start(plane.readyTimeoutMs, plane.#abort);
            }
          })
          .map((start) =>
            start.catch((error: unknown) => {
              // One failure ends the others' waits: the start fails as a whole.
              startFailed.abort();
              throw error;
            }),
          ),
      );
      const failed = started.find((r) => r.status === "rejected");
      if (failed) throw failed.reason;
    } catch (error) {
      // Processes that never became ready hold nothing worth a graceful stop.
      await plane.stop({ graceMs: 2_000 });
      throw error;
    }
    return plane;
  }

  get clusterNames(): string[] {
    return [...this.#runtimes.keys()];
  }

  cluster(name: string): SandboxCluster {
    return this.#runtime(name).cluster;
  }

  /** The API server process of one cluster (its pid, for fault injection). */
  apiServerProcess(name: string): ManagedProcess {
    return this.#runtime(name).process;
  }

  /** The etcd process of its own that one cluster runs (`ownEtcd`), if it runs one (for its pid). */
  ownEtcdProcess(name: string): ManagedProcess | undefined {
    return this.#ownEtcds.get(name)?.process;
  }

  /** The kube-controller-manager process of one cluster, if it runs one (for its pid and log). */
  controllerManagerProcess(name: string): ManagedProcess | undefined {
    return this.#controllerManagers.get(name)?.process;
  }

  /** The KWOK of one cluster, if it runs one: its Node, Pod range and process. */
  kwok(name: string): Kwok | undefined {
    return this.#kwoks.get(name);
  }

  /** Stops one API server (SIGTERM, or SIGKILL with `{ kill: true }`); its data stays in etcd. */
  async stopApiServer(name: string, options: { kill?: boolean } = {}): Promise<void> {
    const { process } = this.#runtime(name);
    if (options.kill) await process.kill();
    else await process.stop();
  }

  /** Starts a stopped API server on the same port and waits for /readyz. */
  async startApiServer(name: string): Promise<void> {
    await this.#runtime(name).process.start();
    await this.#waitForApiServer(name);
  }

  async restartApiServer(name: string, options: { kill?: boolean } = {}): Promise<void> {
    await this.stopApiServer(name, options);
    await this.startApiServer(name);
  }

  async stopEtcd(options: { kill?: boolean } = {}): Promise<void> {
    if (options.kill) await this.etcd.kill();
    else await this.etcd.stop();
  }

  async startEtcd(): Promise<void> {
    await this.etcd.start();
    await this.#waitForEtcd();
  }

  /** A client certificate signed by the cluster CA, for a user and groups of your choice. */
  async issueClientCertificate(user: string, groups: readonly string[] = []): Promise<CertificateFiles> {
    const name = `client-${user.replace(/[^a-zA-Z0-9-]/g, "_")}-${randomBytes(3).toString("hex")}`;
    return issueCertificate(this.ca, join(this.dir, "pki"), name, {
      commonName: user,
      organizations: groups,
      usage: "client",
    });
  }

  /**
   * Stops every process and removes the working directory (if created here). Idempotent.
   * Order: KWOK and the controller managers, then the API servers they use (each in
   * parallel), then etcd the API servers depend on, then the directory;
   * a process that ignores SIGTERM for `graceMs` is killed.
   */
  async stop(options: { readonly graceMs?: number } = {}): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    const graceMs = options.graceMs ?? 10_000;
    await Promise.all(
      [...this.#kwoks.values(), ...this.#controllerManagers.values()].map((c) => c.process.close(graceMs)),
    );
    await Promise.all([...this.#runtimes.values()].map((r) => r.process.close(graceMs)));
    await Promise.all([this.etcd, ...[...this.#ownEtcds.values()].map((e) => e.process)].map((e) => e.close(graceMs)));
    if (this.ownsDir) await rm(this.dir, { recursive: true, force: true });
  }

  #runtime(name: string): ClusterRuntime {
    const runtime = this.#runtimes.get(name);
    if (!runtime) throw new Error(`no sandbox cluster named ${name} (have: ${this.clusterNames.join(", ")})`);
    return runtime;
  }

  async #waitForEtcd(): Promise<void> {
    await waitForEtcd(
      { process: this.etcd, url: this.etcdUrl },
      { timeoutMs: this.readyTimeoutMs, signal: this.#abort },
    );
  }

  async #waitForApiServer(name: string): Promise<void> {
    const { cluster, process, admin } = this.#runtime(name);
    await waitReady(
      process,
      async () => {
        const status = await httpsStatus(`${cluster.server}/readyz`, {
          ca: cluster.caPem,
          cert: admin.certPem,
          key: admin.keyPem,
          signal: this.#abort,
        });
        return status === 200 || String(status);
      },
      { timeoutMs: this.readyTimeoutMs, signal: this.#abort },
    );
  }
}
