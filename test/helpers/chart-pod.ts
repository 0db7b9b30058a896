/**
 * The controller's image run the way the Helm chart's Pod runs it, with Docker standing in
 * for the kubelet: the chart is rendered with the pinned helm (`helm template`), and the
 * Deployment's Pod template becomes `docker run` arguments (test/helpers/pod-run-args.ts:
 * command, args, env, user, read-only root, capabilities, no privilege escalation, CPU and
 * memory limits, the emptyDir volumes, the ServiceAccount token's mount).
 *
 * A ChartPod is one Pod of that Deployment:
 * - a placeholder Pod object in the controller's namespace and a token of the chart's
 *   ServiceAccount bound to it (TokenRequest), written with the local API server's CA and
 *   the namespace where the kubelet mounts them;
 * - a sandbox container that owns the Pod's network namespace (as the kubelet's pause
 *   container), publishes the container's ports on the host's loopback (a free port each)
 *   and carries the Pod's in-cluster network: 127.0.0.1:<port> of every sandbox API server,
 *   local and remote, reached through a socket file (test/fixtures/pod-network.ts). So
 *   KUBERNETES_SERVICE_HOST is 127.0.0.1, the address the API servers' certificates name,
 *   and no packet crosses an IP network: nothing can leave this machine;
 * - the controller's container in that namespace. `kill()` and `start()` again are a
 *   container restart in the same Pod (same token, same emptyDir, as the kubelet restarts
 *   a container); `stop()` is the kubelet's stop: SIGTERM, then SIGKILL after the Pod's
 *   terminationGracePeriodSeconds.
 * Containers carry the label `fleet-mirror.chart-pod` with the test process's pid; those
 * of a test process that is gone are removed when the next ChartPod is made.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CoreV1Api, type V1PodSpec } from "@kubernetes/client-node";
import { dump, loadAll } from "js-yaml";
import { ensureHelm, ensureKubectl } from "../../sandbox/binaries.ts";
import type { ControlPlane } from "../../sandbox/control-plane.ts";
import { pipeBoth } from "../fixtures/pod-network.ts";
import { docker } from "./docker.ts";
import { CONTROLLER_NAMESPACE, type Fleet } from "./fleet.ts";
import { eventually } from "./kube.ts";
import { Kubectl, runTool, type ToolResult } from "./kubectl.ts";
import { type PodRun, type PodTemplateSpec, podRun } from "./pod-run-args.ts";
import { deletePlaceholderPod, podBoundToken } from "./pod-token.ts";

const CHART = fileURLToPath(new URL("../../charts/fleet-mirror/", import.meta.url));
const POD_NETWORK = fileURLToPath(new URL("../fixtures/pod-network.ts", import.meta.url));
const LABEL = "fleet-mirror.chart-pod";

/** The chart's objects as `helm template fleet-mirror <chart> --namespace fleet-mirror ARGS` renders them. */
export async function renderChart(args: readonly string[] = []): Promise<Record<string, unknown>[]> {
  const helm = await ensureHelm();
  const home = mkdtempSync(join(tmpdir(), "fleet-mirror-helm-"));
  try {
    const env = { ...process.env, HELM_CACHE_HOME: home, HELM_CONFIG_HOME: home, HELM_DATA_HOME: home };
    const template = ["template", "fleet-mirror", CHART, "--namespace", CONTROLLER_NAMESPACE, ...args];
    const result = await runTool(helm, template, { env });
    if (result.code !== 0) throw new Error(`helm template exited ${result.code}:\n${result.stderr}`);
    return (loadAll(result.stdout) as unknown[]).filter(
      (o): o is Record<string, unknown> => typeof o === "object" && o !== null,
    );
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * Applies a chart rendering (server-side) to the local cluster of a control plane that is
 * starting: `Fleet.start`'s `installIdentity`, so the controller's namespace, ServiceAccount
 * and RBAC are the chart's. The namespace's Pod Security (restricted) comes with it.
 */
export function installRendering(objects: readonly Record<string, unknown>[]): (plane: ControlPlane) => Promise<void> {
  return async (plane) => {
    const cache = mkdtempSync(join(tmpdir(), "fleet-mirror-kubectl-"));
    try {
      const kubectl = new Kubectl(await ensureKubectl(), cache, (c) => plane.cluster(c).adminKubeconfigPath);
      await kubectl.ok("local", ["apply", "--server-side", "-f", "-"], objects.map((o) => dump(o)).join("---\n"));
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  };
}

/** The Pod template of a rendered Deployment: its labels and spec. */
export interface RenderedPod {
  readonly labels: Readonly<Record<string, string>>;
  readonly spec: PodTemplateSpec;
}

/** The Pod template of the rendered Deployment. */
export function deploymentPod(objects: readonly Record<string, unknown>[]): RenderedPod {
  const deployment = objects.find((o) => o["kind"] === "Deployment") as
    | { spec?: { template?: { metadata?: { labels?: Record<string, string> }; spec?: PodTemplateSpec } } }
    | undefined;
  const spec = deployment?.spec?.template?.spec;
  if (!spec) throw new Error("the rendering holds no Deployment with a Pod template");
  return { labels: deployment?.spec?.template?.metadata?.labels ?? {}, spec };
}

/** Removes the containers of ChartPods whose test process is gone. */
async function removeOrphans(): Promise<void> {
  const lines = (await docker(["ps", "-a", "--filter", `label=${LABEL}`, "--format", `{{.ID}} {{.Label "${LABEL}"}}`]))
    .trim()
    .split("\n")
    .filter(Boolean);
  for (const line of lines) {
    const [id = "", pid = ""] = line.split(" ");
    let alive = false;
    try {
      process.kill(Number(pid), 0);
      alive = true;
    } catch {
      alive = false;
    }
    if (!alive) await runTool("docker", ["rm", "--force", id]);
  }
}

export class ChartPod {
  readonly name: string;
  readonly image: string;
  readonly run: PodRun;
  readonly #dir: string;
  readonly #ports: readonly number[];
  readonly #servers: Server[];
  readonly #core: CoreV1Api;

  private constructor(
    name: string,
    image: string,
    run: PodRun,
    dir: string,
    ports: number[],
    servers: Server[],
    core: CoreV1Api,
  ) {
    this.name = name;
    this.image = image;
    this.run = run;
    this.#dir = dir;
    this.#ports = ports;
    this.#servers = servers;
    this.#core = core;
  }

  /** Pod `name` of the rendered template, running `image`, on `fleet`'s clusters. Starts nothing yet. */
  static async create(fleet: Fleet, rendered: RenderedPod, name: string, image: string): Promise<ChartPod> {
    await removeOrphans();
    const core = fleet.kubeConfig("local").makeApiClient(CoreV1Api);
    // The placeholder is the Deployment's own Pod: the namespace's Pod Security admission
    // (restricted, in the chart's rendering) judges it as it would the real one.
    const pod = rendered.spec;
    const token = await podBoundToken(core, name, { labels: rendered.labels, spec: pod as V1PodSpec });
    const dir = mkdtempSync(join(tmpdir(), `fleet-mirror-pod-${name}-`));
    chmodSync(dir, 0o755);
    const serviceAccountDir = join(dir, "serviceaccount");
    mkdirSync(serviceAccountDir);
    const local = fleet.plane.cluster("local");
    writeFileSync(join(serviceAccountDir, "token"), token, { mode: 0o644 });
    writeFileSync(join(serviceAccountDir, "ca.crt"), local.caPem, { mode: 0o644 });
    writeFileSync(join(serviceAccountDir, "namespace"), CONTROLLER_NAMESPACE, { mode: 0o644 });
    for (const volume of pod.volumes ?? []) {
      // As the kubelet makes an emptyDir: world-writable, so any uid the Pod runs as can write.
      mkdirSync(join(dir, "volumes", volume.name), { recursive: true });
      chmodSync(join(dir, "volumes", volume.name), 0o777);
    }
    const network = join(dir, "network");
    mkdirSync(network);
    const ports = ["local", ...fleet.remotes].map((cluster) => fleet.plane.cluster(cluster).port);
    const servers = await Promise.all(ports.map((port) => hostEnd(join(network, `${port}.sock`), port)));
    const run = podRun(pod, {
      podName: name,
      namespace: CONTROLLER_NAMESPACE,
      image,
      apiHost: "127.0.0.1",
      apiPort: local.port,
      emptyDir: (volume) => join(dir, "volumes", volume),
      serviceAccountDir,
      sandboxContainer: `${name}-sandbox`,
      containerName: name,
    });
    return new ChartPod(name, image, run, dir, ports, servers, core);
  }

  /** Starts the Pod's sandbox (its network namespace and network), unless it runs already. */
  async startSandbox(): Promise<void> {
    if (await this.#exists(`${this.name}-sandbox`)) return;
    await docker([
      "run",
      "--detach",
      "--name",
      `${this.name}-sandbox`,
      "--label",
      `${LABEL}=${process.pid}`,
      ...this.run.sandboxArgs,
      ...["--read-only", "--cap-drop", "ALL", "--user", "65532:65532", "--entrypoint", "node"],
      ...[
        "--volume",
        `${POD_NETWORK}:/pod/pod-network.ts:ro`,
        "--volume",
        `${join(this.#dir, "network")}:/pod/network`,
      ],
      this.image,
      ...["/pod/pod-network.ts", "/pod/network", ...this.#ports.map(String)],
    ]);
    await eventually(`the Pod ${this.name}'s network`, async () => {
      const logs = await docker(["logs", `${this.name}-sandbox`]);
      return this.#ports.every((port) => logs.includes(`listening ${port}\n`)) ? true : undefined;
    });
  }

  /**
   * Starts the Pod's container (its sandbox first, when needed): a new container the first
   * time, the same one again after `kill()` or `stop()`. Resolves when Docker started it.
   */
  async start(): Promise<void> {
    await this.startSandbox();
    if (await this.#exists(this.name)) await docker(["start", this.name]);
    else await docker(["run", "--detach", "--label", `${LABEL}=${process.pid}`, ...this.run.containerArgs]);
  }

  /** The kubelet's stop: SIGTERM, SIGKILL after the grace period. Resolves with the exit code and the time it took. */
  async stop(): Promise<{ readonly exitCode: number; readonly ms: number }> {
    const started = Date.now();
    const grace = this.run.gracePeriodSeconds;
    await docker(["stop", "--time", String(grace), this.name]);
    return { exitCode: await this.exitCode(), ms: Date.now() - started };
  }

  /** SIGKILL, as a crashed container or an OOM kill. */
  async kill(): Promise<void> {
    await docker(["kill", this.name]);
    await eventually(`container ${this.name} to exit`, async () => ((await this.running()) ? undefined : true));
  }

  async running(): Promise<boolean> {
    return (await docker(["inspect", "--format", "{{.State.Running}}", this.name])).trim() === "true";
  }

  async exitCode(): Promise<number> {
    return Number((await docker(["inspect", "--format", "{{.State.ExitCode}}", this.name])).trim());
  }

  /** `http://127.0.0.1:<port>` where the sandbox publishes the container's port `name` (e.g. "admin"). */
  async url(name: string): Promise<string> {
    const port = this.run.ports.get(name);
    if (port === undefined) throw new Error(`the container has no port ${name}`);
    const published = (await docker(["port", `${this.name}-sandbox`, `${port}/tcp`])).trim().split("\n")[0] ?? "";
    return `http://${published}`;
  }

  /**
   * Resolves once GET /readyz on the published admin port answers 200 (the kubelet's
   * readiness probe); rejects after `timeoutMs` with the container's last output.
   */
  async waitForReady(timeoutMs = 180_000): Promise<void> {
    const url = `${await this.url("admin")}/readyz`;
    const ready = async (): Promise<true | undefined> => {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) }).catch(() => undefined);
      await response?.body?.cancel();
      return response?.status === 200 ? true : undefined;
    };
    try {
      await eventually(`${url} to answer 200`, ready, timeoutMs, 50);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${(await this.logs()).slice(-3_000)}`);
    }
  }

  /** The container's output so far, every run of it (stdout, then stderr). */
  async logs(): Promise<string> {
    const result = await runTool("docker", ["logs", this.name]);
    return `${result.stdout}${result.stderr}`;
  }

  /** `docker exec` in the running container (its user, environment and mounts); never rejects on a non-zero exit. */
  exec(args: readonly string[]): Promise<ToolResult> {
    return runTool("docker", ["exec", this.name, ...args]);
  }

  /** The files of emptyDir volume `name`, on the host (relative paths). */
  emptyDirPath(name: string): string {
    return join(this.#dir, "volumes", name);
  }

  /** Removes the containers, the host end of the network and the placeholder Pod. Idempotent. */
  async remove(): Promise<void> {
    await runTool("docker", ["rm", "--force", this.name, `${this.name}-sandbox`]);
    await Promise.all(this.#servers.map((server) => new Promise((resolve) => server.close(resolve))));
    await deletePlaceholderPod(this.#core, this.name);
    rmSync(this.#dir, { recursive: true, force: true });
  }

  async #exists(container: string): Promise<boolean> {
    return (await runTool("docker", ["inspect", "--format", "{{.Id}}", container])).code === 0;
  }
}

/** The host's end of one Pod port: a Unix socket at `path` whose connections go to 127.0.0.1:`port`. */
function hostEnd(path: string, port: number): Promise<Server> {
  const server = createServer((inside) => pipeBoth(inside, connect(port, "127.0.0.1")));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(path, () => {
      // The sandbox's process runs as uid 65532: it must be able to connect.
      chmodSync(path, 0o666);
      resolve(server);
    });
  });
}
