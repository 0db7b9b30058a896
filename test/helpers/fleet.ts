/**
 * A fleet for end-to-end tests: a real control plane (one local + N remote API servers),
 * helpers to shape remote clusters (gateways, exported Services) and to register them
 * through least-privilege credentials Secrets, and the controller itself — in-process
 * (a Supervisor with real worker threads) or as a separate `fleet-mirror run` process.
 *
 * The controller runs least-privilege, as in production: it authenticates to the local
 * API server with a token of ServiceAccount fleet-mirror/fleet-mirror, bound only by
 * `deploy/rbac/local.yaml`; remote credentials Secrets carry a token of
 * fleet-mirror-remote/fleet-mirror-reader, bound only by `deploy/rbac/remote.yaml`.
 * The test's own reads and edits use the admin identity.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import {
  CoreV1Api,
  type CoreV1Event,
  type KubeConfig,
  type V1Secret,
  type V1Service,
  type V1ServicePort,
} from "@kubernetes/client-node";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { applyRbacYaml, controllerToken, rbacManifestPath, serviceAccountToken } from "../../sandbox/rbac.ts";
import { PROCESS_ENV, PROCESS_NODE_FLAGS } from "../../src/cli/process-flags.ts";
import { type Config, defaultConfig } from "../../src/config.ts";
import type { ConnectionSpec } from "../../src/core/connection.ts";
import {
  CLUSTER_NAME,
  GATEWAY_IDENTITY,
  GATEWAY_NAME,
  GATEWAY_NS,
  REMOTE_CLUSTER_DOMAIN,
  SECRET_TYPE,
} from "../../src/core/labels.ts";
import { silentLogger } from "../../src/log.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { adminConnection } from "./connection.ts";
import { adminKubeConfig, eventually, objectIdentity, statusCode } from "./kube.ts";

export const CONTROLLER_NAMESPACE = "fleet-mirror";
/** The remote reader identity of `deploy/rbac/remote.yaml`. */
export const REMOTE_READER_NAMESPACE = "fleet-mirror-remote";
export const REMOTE_READER_SERVICE_ACCOUNT = "fleet-mirror-reader";
/** The rules of ClusterRole fleet-mirror-remote-reader in `deploy/rbac/remote.yaml`. */
export const REMOTE_READER_RULES = [
  { apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] },
  { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["get", "list", "watch"] },
  { apiGroups: ["multicluster.x-k8s.io"], resources: ["serviceexports"], verbs: ["get", "list", "watch"] },
];

export class Fleet {
  readonly plane: ControlPlane;
  readonly remotes: readonly string[];
  readonly #apis = new Map<string, CoreV1Api>();
  readonly #tokens = new Map<string, string>();
  readonly #remoteRbac = new Map<string, Promise<unknown>>();
  #controllerToken = "";

  private constructor(plane: ControlPlane, remotes: readonly string[]) {
    this.plane = plane;
    this.remotes = remotes;
  }

  /**
   * Starts the control plane, applies `deploy/rbac/local.yaml` to the local cluster
   * (which creates the controller's namespace and ServiceAccount) and mints the
   * controller's token.
   */
  static async start(
    remotes: readonly string[] = ["east", "west"],
    options: {
      /** The local API server writes an audit log (read it with test/helpers/audit.ts). Default false. */
      readonly audit?: boolean;
      /**
       * Installs the controller's namespace, ServiceAccount fleet-mirror and RBAC on the
       * local cluster in place of `deploy/rbac/local.yaml` (the Helm chart's test installs
       * the chart's rendering). Default: apply `deploy/rbac/local.yaml`.
       */
      readonly installIdentity?: (plane: ControlPlane) => Promise<void>;
      /** The Service ClusterIP range of every API server (the local cluster's Service CIDR). Default `10.96.0.0/16`. */
      readonly serviceClusterIpRange?: string;
      /** Remotes whose API server stores in an etcd of its own (ControlPlaneOptions.ownEtcd). Default: none. */
      readonly ownEtcd?: readonly string[];
    } = {},
  ): Promise<Fleet> {
    // The local cluster runs the built-in controllers that act on mirrors (EndpointSlice
    // mirroring, namespace, garbage collector), as a real cluster does.
    const plane = await ControlPlane.start({
      clusters: ["local", ...remotes],
      controllerManagers: ["local"],
      ...(options.audit ? { audit: ["local"] } : {}),
      ...(options.serviceClusterIpRange ? { serviceClusterIpRange: options.serviceClusterIpRange } : {}),
      ...(options.ownEtcd ? { ownEtcd: options.ownEtcd } : {}),
    });
    const fleet = new Fleet(plane, remotes);
    try {
      const admin = fleet.kubeConfig("local");
      if (options.installIdentity) await options.installIdentity(plane);
      else await applyRbacYaml(admin, rbacManifestPath("local"));
      fleet.#controllerToken = await controllerToken(admin, CONTROLLER_NAMESPACE);
    } catch (error) {
      await plane.stop();
      throw error;
    }
    return fleet;
  }

  /** The controller's bearer token for the local API server (ServiceAccount fleet-mirror/fleet-mirror). */
  get controllerToken(): string {
    return this.#controllerToken;
  }

  /** How the controller reaches the local API server: least-privilege token, never admin. */
  controllerConnection(): ConnectionSpec {
    const local = this.plane.cluster("local");
    return { server: local.server, caPem: local.caPem, auth: { kind: "token", token: this.#controllerToken } };
  }

  /** The same as a kubeconfig (for `fleet-mirror run --kubeconfig`). */
  controllerKubeconfig(): string {
    const local = this.plane.cluster("local");
    return renderKubeconfig({
      cluster: "local",
      server: local.server,
      caPem: local.caPem,
      user: "fleet-mirror",
      auth: { token: this.#controllerToken },
    });
  }

  kubeConfig(cluster: string): KubeConfig {
    return adminKubeConfig(this.plane.cluster(cluster));
  }

  api(cluster: string): CoreV1Api {
    let api = this.#apis.get(cluster);
    if (!api) {
      api = this.kubeConfig(cluster).makeApiClient(CoreV1Api);
      this.#apis.set(cluster, api);
    }
    return api;
  }

  get local(): CoreV1Api {
    return this.api("local");
  }

  async stop(): Promise<void> {
    await this.plane.stop();
  }

  // -- remote shaping --------------------------------------------------------------

  async ensureNamespace(cluster: string, name: string): Promise<void> {
    try {
      await this.api(cluster).createNamespace({ body: { metadata: { name } } });
    } catch (error) {
      if (statusCode(error) !== 409) throw error;
    }
  }

  /** A LoadBalancer gateway Service whose ingress is set through the status subresource. */
  async createGateway(
    cluster: string,
    opts: {
      namespace?: string;
      name?: string;
      ingress?: { ip?: string; hostname?: string }[];
      port?: number;
      identity?: string;
      portName?: string;
      /** A port named `mc-probe` with this number: the gateway is probed (SPEC §10). */
      probePort?: number;
      annotations?: Record<string, string>;
    },
  ): Promise<V1Service> {
    const namespace = opts.namespace ?? "gateway";
    const name = opts.name ?? "gateway";
    await this.ensureNamespace(cluster, namespace);
    const annotations = { ...(opts.identity ? { [GATEWAY_IDENTITY]: opts.identity } : {}), ...opts.annotations };
    const created = await this.api(cluster).createNamespacedService({
      namespace,
      body: {
        metadata: { name, ...(Object.keys(annotations).length > 0 ? { annotations } : {}) },
        spec: {
          type: "LoadBalancer",
          ports: [
            { name: opts.portName ?? "incoming-port", port: opts.port ?? 4143, protocol: "TCP" },
            ...(opts.probePort ? [{ name: "mc-probe", port: opts.probePort, protocol: "TCP" }] : []),
          ],
        },
      },
    });
    if (opts.ingress) return this.setGatewayIngress(cluster, opts.ingress, { namespace, name });
    return created;
  }

  async setGatewayIngress(
    cluster: string,
    ingress: { ip?: string; hostname?: string }[],
    gw: { namespace?: string; name?: string } = {},
  ): Promise<V1Service> {
    const namespace = gw.namespace ?? "gateway";
    const name = gw.name ?? "gateway";
    const api = this.api(cluster);
    const current = await api.readNamespacedServiceStatus({ name, namespace });
    current.status = { loadBalancer: { ingress } };
    return api.replaceNamespacedServiceStatus({ name, namespace, body: current });
  }

  async createService(
    cluster: string,
    namespace: string,
    name: string,
    opts: {
      ports?: V1ServicePort[];
      gateway?: { name: string; namespace: string } | false;
      annotations?: Record<string, string>;
      labels?: Record<string, string>;
    } = {},
  ): Promise<V1Service> {
    await this.ensureNamespace(cluster, namespace);
    const gateway = opts.gateway === undefined ? { name: "gateway", namespace: "gateway" } : opts.gateway;
    return this.api(cluster).createNamespacedService({
      namespace,
      body: {
        metadata: {
          name,
          ...(opts.labels ? { labels: opts.labels } : {}),
          annotations: {
            ...(gateway ? { [GATEWAY_NAME]: gateway.name, [GATEWAY_NS]: gateway.namespace } : {}),
            ...(opts.annotations ?? {}),
          },
        },
        spec: {
          ports: opts.ports ?? [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
          selector: { app: name },
        },
      },
    });
  }

  async patchService(
    cluster: string,
    namespace: string,
    name: string,
    mutate: (svc: V1Service) => void,
  ): Promise<V1Service> {
    const api = this.api(cluster);
    for (let attempt = 0; ; attempt++) {
      const svc = await api.readNamespacedService({ name, namespace });
      mutate(svc);
      try {
        return await api.replaceNamespacedService({ name, namespace, body: svc });
      } catch (error) {
        if (statusCode(error) !== 409 || attempt > 5) throw error;
      }
    }
  }

  async unexport(cluster: string, namespace: string, name: string): Promise<void> {
    await this.patchService(cluster, namespace, name, (svc) => {
      const annotations = { ...(svc.metadata?.annotations ?? {}) };
      delete annotations[GATEWAY_NAME];
      delete annotations[GATEWAY_NS];
      if (svc.metadata) svc.metadata.annotations = annotations;
    });
  }

  async deleteService(cluster: string, namespace: string, name: string): Promise<void> {
    await this.api(cluster).deleteNamespacedService({ name, namespace });
  }

  // -- registration ----------------------------------------------------------------

  /** A read-only token for `remote` (get/list/watch services, cluster-wide), minted once. */
  async remoteToken(remote: string): Promise<string> {
    let token = this.#tokens.get(remote);
    if (!token) {
      token = await this.mintRemoteToken(remote);
      this.#tokens.set(remote, token);
    }
    return token;
  }

  /**
   * A NEW read-only token for `remote` on every call (TokenRequest for the reader
   * ServiceAccount of `deploy/rbac/remote.yaml`, applied once per remote).
   */
  async mintRemoteToken(remote: string): Promise<string> {
    const kc = this.kubeConfig(remote);
    let applied = this.#remoteRbac.get(remote);
    if (!applied) {
      applied = applyRbacYaml(kc, rbacManifestPath("remote"));
      this.#remoteRbac.set(remote, applied);
      applied.catch(() => this.#remoteRbac.delete(remote));
    }
    await applied;
    return serviceAccountToken(kc, REMOTE_READER_NAMESPACE, REMOTE_READER_SERVICE_ACCOUNT);
  }

  /** A kubeconfig for `remote` with the reader token; `token` defaults to `remoteToken(remote)`. */
  async remoteKubeconfig(remote: string, token?: string): Promise<string> {
    const c = this.plane.cluster(remote);
    return renderKubeconfig({
      cluster: remote,
      server: c.server,
      caPem: c.caPem,
      user: "fleet-mirror",
      auth: { token: token ?? (await this.remoteToken(remote)) },
    });
  }

  /**
   * Registers cluster `clusterName`: `remote` reached at `server` (a fault proxy in front
   * of it), with the reader token and `remote`'s CA. Returns the Secret's name.
   */
  async registerThrough(clusterName: string, remote: string, server: string): Promise<string> {
    const secretName = `cluster-credentials-${clusterName}`;
    await this.local.createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: this.secretBody({
        secretName,
        clusterName,
        kubeconfig: renderKubeconfig({
          cluster: clusterName,
          server,
          caPem: this.plane.cluster(remote).caPem,
          user: "fleet-mirror",
          auth: { token: await this.remoteToken(remote) },
        }),
      }),
    });
    return secretName;
  }

  secretBody(opts: {
    secretName: string;
    clusterName: string;
    kubeconfig: string;
    domain?: string;
    annotations?: Record<string, string>;
  }): object {
    return {
      metadata: {
        name: opts.secretName,
        namespace: CONTROLLER_NAMESPACE,
        annotations: {
          ...opts.annotations,
          [CLUSTER_NAME]: opts.clusterName,
          [REMOTE_CLUSTER_DOMAIN]: opts.domain ?? "cluster.local",
        },
      },
      type: SECRET_TYPE,
      data: { kubeconfig: Buffer.from(opts.kubeconfig).toString("base64") },
    };
  }

  /** Registers `remote` under `clusterName` (default: the remote's own name). */
  async createSecret(body: V1Secret): Promise<void> {
    await this.local.createNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, body });
  }

  /**
   * Edits credentials Secret `name` in place (read, `mutate`, replace), again on a 409:
   * a changed kubeconfig is a credentials rotation (SPEC §1).
   */
  async editSecret(name: string, mutate: (secret: V1Secret) => void): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const secret = await this.local.readNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name });
      mutate(secret);
      try {
        await this.local.replaceNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name, body: secret });
        return;
      } catch (error) {
        if (statusCode(error) !== 409 || attempt > 5) throw error;
      }
    }
  }

  /** Events with `reason` recorded on credentials Secret `secretName`. */
  async secretEvents(secretName: string, reason: string): Promise<CoreV1Event[]> {
    const list = await this.local.listNamespacedEvent({ namespace: CONTROLLER_NAMESPACE });
    return list.items.filter(
      (e) => e.involvedObject.kind === "Secret" && e.involvedObject.name === secretName && e.reason === reason,
    );
  }

  async waitForSecretEvent(
    secretName: string,
    reason: string,
    check: (e: CoreV1Event) => boolean = () => true,
  ): Promise<CoreV1Event> {
    return eventually(`Event ${reason} on Secret ${secretName}`, async () =>
      (await this.secretEvents(secretName, reason)).find(check),
    );
  }

  /** `annotations`: more Secret annotations, e.g. the cluster's default gateway (SPEC §12). */
  async register(
    remote: string,
    opts: { clusterName?: string; secretName?: string; domain?: string; annotations?: Record<string, string> } = {},
  ): Promise<string> {
    const clusterName = opts.clusterName ?? remote;
    const secretName = opts.secretName ?? `cluster-credentials-${clusterName}`;
    await this.local.createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: this.secretBody({
        secretName,
        clusterName,
        kubeconfig: await this.remoteKubeconfig(remote),
        ...(opts.domain ? { domain: opts.domain } : {}),
        ...(opts.annotations ? { annotations: opts.annotations } : {}),
      }),
    });
    return secretName;
  }

  // -- the controller --------------------------------------------------------------

  /**
   * The controller's config for a test. `endpointsApi` is `endpoints` unless overridden:
   * these suites observe a mirror's addresses through its Endpoints (SPEC §3), while
   * the default mode, EndpointSlices (SPEC §9), has its own suite
   * (test/integration/endpointslices.test.ts).
   */
  config(overrides: Partial<Config> = {}): Config {
    return defaultConfig({
      namespace: CONTROLLER_NAMESPACE,
      logLevel: "silent",
      blockedRecheckMs: 2_000,
      endpointsApi: "endpoints",
      ...overrides,
    });
  }

  /** The controller in this process: a Supervisor with real worker threads, least-privilege. */
  startInProcess(
    overrides: Partial<Config> = {},
    extra: {
      watchInactivityTimeoutMs?: number;
      writeFence?: boolean;
      deniedRetryMs?: number;
      mcsRecheckMs?: number;
      gatewayDnsServers?: readonly string[];
    } = {},
  ): Supervisor {
    const supervisor = new Supervisor({
      config: this.config(overrides),
      localConnection: this.controllerConnection(),
      logger: silentLogger(),
      ...extra,
    });
    supervisor.start();
    return supervisor;
  }

  /**
   * The controller as a separate OS process (`fleet-mirror run`, least-privilege), for
   * crash/restart tests. Its admin server listens on a free loopback port (see
   * `ControllerProcess.adminUrl`) unless `args` gives another `--admin-addr`.
   */
  async startProcess(
    args: readonly string[] = [],
    options: {
      /** "dist": the compiled build (`npm run build`), as in production; default: the TS sources. */
      readonly entry?: "src" | "dist";
      /** Another build's entry (an absolute path), for side-by-side probes of two builds; wins over `entry`. */
      readonly main?: string;
      readonly execArgv?: readonly string[];
      /** Added to the environment after PROCESS_ENV (a value here wins: a probe compares without it). */
      readonly env?: Readonly<Record<string, string>>;
    } = {},
  ): Promise<ControllerProcess> {
    const kubeconfig = join(this.plane.dir, "controller.kubeconfig");
    writeFileSync(kubeconfig, this.controllerKubeconfig(), { mode: 0o600 });
    const main =
      options.main ??
      new URL(options.entry === "dist" ? "../../dist/src/main.js" : "../../src/main.ts", import.meta.url).pathname;
    if (!existsSync(main)) throw new Error(`${main} does not exist: run \`npm run build\` first`);
    const child = spawn(
      process.execPath,
      [
        // As the image starts it (src/cli/process-flags.ts).
        ...PROCESS_NODE_FLAGS,
        ...(options.execArgv ?? []),
        main,
        "run",
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        CONTROLLER_NAMESPACE,
        "--log-level",
        "info",
        "--admin-addr",
        "127.0.0.1:0",
        // As `config()`: the §3 suites observe Endpoints (a later flag in `args` wins).
        "--endpoints-api",
        "endpoints",
        ...args,
      ],
      {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, ...PROCESS_ENV, ...options.env },
      },
    );
    return new ControllerProcess(child);
  }

  // -- local expectations ----------------------------------------------------------

  async localService(namespace: string, name: string): Promise<V1Service | undefined> {
    try {
      return await this.local.readNamespacedService({ namespace, name });
    } catch (error) {
      if (statusCode(error) === 404) return undefined;
      throw error;
    }
  }

  async waitForMirror(
    namespace: string,
    name: string,
    check: (svc: V1Service) => boolean = () => true,
    timeoutMs = 30_000,
  ): Promise<V1Service> {
    return eventually(
      `mirror ${namespace}/${name}`,
      async () => {
        const svc = await this.localService(namespace, name);
        return svc && check(svc) ? svc : undefined;
      },
      timeoutMs,
    );
  }

  async waitForNoMirror(namespace: string, name: string, timeoutMs = 30_000): Promise<void> {
    await eventually(
      `mirror ${namespace}/${name} to be gone`,
      async () => ((await this.localService(namespace, name)) ? undefined : true),
      timeoutMs,
    );
  }

  async waitForEndpoints(
    namespace: string,
    name: string,
    check: (ep: import("@kubernetes/client-node").V1Endpoints) => boolean,
    timeoutMs = 30_000,
  ) {
    return eventually(
      `endpoints ${namespace}/${name}`,
      async () => {
        try {
          const ep = await this.local.readNamespacedEndpoints({ namespace, name });
          return check(ep) ? ep : undefined;
        } catch (error) {
          if (statusCode(error) === 404) return undefined;
          throw error;
        }
      },
      timeoutMs,
    );
  }

  /** Write requests the local API server has served so far, from its own metrics. */
  /**
   * uid@resourceVersion of a mirror's Service and Endpoints, once the Endpoints are
   * filled: equal identities later mean neither was written in between.
   */
  async mirrorIdentity(namespace: string, name: string, timeoutMs = 60_000): Promise<string> {
    const service = await this.waitForMirror(namespace, name, () => true, timeoutMs);
    const endpoints = await this.waitForEndpoints(namespace, name, (e) => (e.subsets?.length ?? 0) > 0, timeoutMs);
    return `${objectIdentity(service)} ${objectIdentity(endpoints)}`;
  }

  /** The same identity, read now (both objects must exist). */
  async currentMirrorIdentity(namespace: string, name: string): Promise<string> {
    const service = await this.local.readNamespacedService({ namespace, name });
    const endpoints = await this.local.readNamespacedEndpoints({ namespace, name });
    return `${objectIdentity(service)} ${objectIdentity(endpoints)}`;
  }

  async localWriteCount(): Promise<number> {
    const text = await this.localMetrics();
    let total = 0;
    for (const line of text.split("\n")) {
      if (!line.startsWith("apiserver_request_total{")) continue;
      const verb = /verb="([A-Z]+)"/.exec(line)?.[1];
      if (!verb || !["POST", "PUT", "PATCH", "DELETE"].includes(verb)) continue;
      if (!/resource="(services|endpoints|namespaces)"/.test(line)) continue;
      total += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
    return total;
  }

  async localMetrics(): Promise<string> {
    const conn = adminConnection(this.plane.cluster("local"));
    return new Promise<string>((resolve, reject) => {
      const options = {
        ...(conn.caPem ? { ca: conn.caPem } : {}),
        ...(conn.auth.kind === "client-certificate" ? { cert: conn.auth.certPem, key: conn.auth.keyPem } : {}),
      };
      const req = httpsRequest(`${conn.server}/metrics`, options, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          body += chunk;
        });
        res.on("end", () => resolve(body));
      });
      req.on("error", reject);
      req.end();
    });
  }
}

export class ControllerProcess {
  readonly child: ChildProcess;
  output = "";

  constructor(child: ChildProcess) {
    this.child = child;
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      this.output += chunk;
    });
    child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.output += chunk;
    });
  }

  /**
   * The admin server's URL, from the process's "admin server listening" log line.
   * @throws when the process exits, or logs no such line within `timeoutMs`.
   */
  async adminUrl(timeoutMs = 15_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // Complete lines only: the last piece may be a line still arriving.
      for (const line of this.output.split("\n").slice(0, -1)) {
        if (!line.includes('"admin server listening"')) continue;
        const url: unknown = JSON.parse(line).url;
        if (typeof url === "string") return url;
      }
      if (this.child.exitCode !== null || this.child.signalCode !== null)
        throw new Error(`controller exited before its admin server listened:\n${this.output}`);
      if (Date.now() > deadline)
        throw new Error(`no "admin server listening" line in ${timeoutMs} ms:\n${this.output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** The messages of the process's complete pino JSON log lines so far. */
  logMessages(): string[] {
    const messages: string[] = [];
    for (const line of this.output.split("\n")) {
      if (!line.startsWith("{")) continue;
      try {
        const parsed = JSON.parse(line) as { msg?: unknown };
        if (typeof parsed.msg === "string") messages.push(parsed.msg);
      } catch {
        // a partial line: the rest has not arrived yet
      }
    }
    return messages;
  }

  /** Resolves once a log line with exactly `message` was written. */
  async waitForLog(message: string, timeoutMs = 60_000): Promise<void> {
    await eventually(
      `log line "${message}"`,
      () => (this.logMessages().includes(message) ? true : undefined),
      timeoutMs,
    );
  }

  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    this.child.kill(signal);
    const [code] = (await once(this.child, "exit")) as [number | null];
    return code;
  }
}
