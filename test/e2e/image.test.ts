/**
 * The controller's image, built from the repository's Dockerfile and run the way the Helm
 * chart's Pod runs it (test/helpers/chart-pod.ts: `helm template`, then the Deployment's
 * Pod template as `docker run`), against real API servers with the chart's RBAC.
 *
 * Docker comes from scripts/image/docker.sh (Debian's docker.io, installed and started
 * when missing; stopped afterwards if this run started it); the image's base is the local
 * stand-in for node:24-bookworm-slim (scripts/image/base.sh), the one build argument that
 * differs from a user's build. No daemon, no image: the suite fails, it is never skipped.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { AuditLog, describeWrites, MIRROR_RESOURCES } from "../helpers/audit.ts";
import { ChartPod, deploymentPod, installRendering, type RenderedPod, renderChart } from "../helpers/chart-pod.ts";
import {
  acquireDocker,
  baseImage,
  buildImage,
  docker,
  imageBytes,
  megabytes,
  releaseDocker,
} from "../helpers/docker.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { runTool } from "../helpers/kubectl.ts";
import { waitForControllerIdle } from "../helpers/settle.ts";

const REMOTES = ["east", "west"] as const;
const POD_NAME = "fleet-mirror-5c8d7f9b4-image";
const CACHE_WARNING = /V8 compile cache off/;
/** The bound on the project's own layers. */
const APP_MB_LIMIT = 60;

/** GET `url`: its status and body (a refused connection rejects). */
async function get(url: string): Promise<{ readonly status: number; readonly body: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: response.status, body: await response.text() };
}

describe("the image: built from the Dockerfile, run as the chart's Pod", () => {
  let image = "";
  let pod: RenderedPod;
  let fleet: Fleet;
  let chartPod: ChartPod | undefined;
  let audit: AuditLog;
  let adminUrl = "";
  let dockerHeld = false;

  before(
    async () => {
      await acquireDocker();
      dockerHeld = true;
      image = await buildImage();
      const objects = await renderChart(["--set", "namespace.create=true"]);
      pod = deploymentPod(objects);
      // The controller's namespace, ServiceAccount and RBAC come from the chart's rendering.
      fleet = await Fleet.start([...REMOTES], { audit: true, installIdentity: installRendering(objects) });
      const auditPath = fleet.plane.cluster("local").auditLogPath;
      assert.ok(auditPath, "the local API server writes an audit log");
      audit = new AuditLog(auditPath, fleet.kubeConfig("local"));
      await fleet.ensureNamespace("local", "shop");
      for (const [i, remote] of REMOTES.entries()) {
        await fleet.createGateway(remote, { ingress: [{ ip: `198.18.0.${i + 1}` }] });
        await fleet.createService(remote, "shop", "web");
        await fleet.register(remote);
      }
    },
    // A cold machine builds the base (debootstrap) and the image first: minutes.
    { timeout: 3_600_000 },
  );
  after(async () => {
    await chartPod?.remove();
    await fleet?.stop();
    if (dockerHeld) await releaseDocker();
  });

  it("is the Dockerfile's build on the local base, adding at most 60 MB to it and no node_modules", async (t) => {
    const dockerfile = readFileSync(new URL("../../Dockerfile", import.meta.url), "utf8");
    // A user's build uses the official base; only --build-arg NODE_IMAGE differs here.
    assert.match(dockerfile, /^ARG NODE_IMAGE=node:24-bookworm-slim$/m);
    const base = await baseImage();
    const total = await imageBytes(image);
    const app = total - (await imageBytes(base));
    t.diagnostic(`image ${image}: ${megabytes(total)} MB, of which the project's layers ${megabytes(app)} MB`);
    assert.ok(megabytes(app) <= APP_MB_LIMIT, `the project's layers take ${megabytes(app)} MB`);
    const app_dir = await docker(["run", "--rm", "--entrypoint", "ls", image, "-A", "/app"]);
    assert.deepEqual(app_dir.trim().split("\n"), ["deploy", "dist", "package.json"]);
    const node = await docker(["run", "--rm", "--entrypoint", "node", image, "--version"]);
    const pinned = JSON.parse(readFileSync(new URL("../../package-lock.json", import.meta.url), "utf8")) as {
      packages: Record<string, { version?: string }>;
    };
    assert.equal(node.trim(), `v${pinned.packages["node_modules/node"]?.version}`);
  });

  it("loads every command in the image: each prints its help, the bare image its usage", async () => {
    const usage = await runTool("docker", ["run", "--rm", "--tmpfs", "/tmp", image, "help"]);
    assert.match(usage.stdout, /^fleet-mirror — mirrors Services/);
    // The other commands through the image's own ENTRYPOINT, in one container (a
    // container's start costs seconds on a loaded machine; a command's, a fraction).
    const entrypoint = JSON.parse(
      await docker(["image", "inspect", "--format", "{{json .Config.Entrypoint}}", image]),
    ) as string[];
    const container = `fleet-mirror-commands-${process.pid}`;
    await docker([
      "run",
      "--detach",
      "--rm",
      "--name",
      container,
      "--tmpfs",
      "/tmp",
      "--entrypoint",
      "sleep",
      image,
      "600",
    ]);
    try {
      for (const command of ["run", "link", "unlink", "export", "unexport", "status", "check", "completion"]) {
        const result = await runTool("docker", ["exec", container, ...entrypoint, command, "--help"]);
        assert.equal(result.code, 0, `${command} --help: ${result.stderr}`);
        assert.match(result.stdout, new RegExp(`^Usage: fleet-mirror ${command}\\b`), `${command} --help`);
        assert.equal(result.stderr, "", `${command} --help wrote to stderr`);
      }
    } finally {
      await runTool("docker", ["rm", "--force", container]);
    }
  });

  it("runs as the chart's Pod: registers east and west, mirrors them, answers its probes, no compile-cache warning", async (t) => {
    chartPod = await ChartPod.create(fleet, pod, POD_NAME, image);
    await chartPod.startSandbox();
    const started = Date.now();
    await chartPod.start();
    adminUrl = await chartPod.url("admin");
    await chartPod.waitForReady();
    t.diagnostic(`container_ready_s ${((Date.now() - started) / 1000).toFixed(2)}`);
    // What Docker applied, read back from the running container: the rendered Pod's settings.
    const [inspected] = JSON.parse(await docker(["inspect", POD_NAME])) as {
      Config: { User: string };
      HostConfig: {
        ReadonlyRootfs: boolean;
        CapDrop: string[];
        SecurityOpt: string[];
        Memory: number;
        NanoCpus: number;
      };
    }[];
    assert.ok(inspected);
    assert.equal(inspected.Config.User, "65532:65532");
    assert.equal(inspected.HostConfig.ReadonlyRootfs, true);
    assert.deepEqual(inspected.HostConfig.CapDrop, ["ALL"]);
    assert.ok(inspected.HostConfig.SecurityOpt.includes("no-new-privileges"), inspected.HostConfig.SecurityOpt.join());
    assert.equal(inspected.HostConfig.Memory, 1024 ** 3);
    assert.equal(inspected.HostConfig.NanoCpus, 2e9);
    assert.notEqual((await chartPod.exec(["touch", "/app/written"])).code, 0, "the root filesystem is read-only");
    assert.equal((await get(`${adminUrl}/healthz`)).status, 200);
    const metrics = await get(`${adminUrl}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(metrics.body, /^fleet_mirror_/m);
    for (const remote of REMOTES) await fleet.waitForMirror("shop", `web-${remote}`, () => true, 120_000);
    await waitForControllerIdle(adminUrl, REMOTES, { timeoutMs: 120_000 });
    // The audit log names this Pod as the writer (its bound token): the restart's count below can see it.
    await audit.flush();
    assert.ok(
      audit.writes({ identity: POD_NAME, resources: MIRROR_RESOURCES }).length >= 2,
      "the Pod wrote the mirrors",
    );
    const lease = await fleet
      .kubeConfig("local")
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: "fleet-mirror", namespace: CONTROLLER_NAMESPACE });
    assert.equal(lease.spec?.holderIdentity, POD_NAME);

    const logs = await chartPod.logs();
    assert.doesNotMatch(logs, CACHE_WARNING);
    // The cache is in the Pod's /tmp emptyDir, where a restarted container finds it.
    const cache = join(chartPod.emptyDirPath("tmp"), "node-compile-cache");
    assert.ok(existsSync(cache) && readdirSync(cache).length > 0, `compile cache at ${cache}`);

    // The fleet commands, in the running Pod with its in-cluster credentials.
    const status = await chartPod.exec(["node", "dist/src/main.js", "status"]);
    assert.equal(status.code, 0, status.stderr);
    for (const remote of REMOTES) assert.match(status.stdout, new RegExp(`^${remote}\\b`, "m"), status.stdout);
    // Every permission deploy/rbac/local.yaml lists is granted by the chart's RBAC, both remotes answer.
    const check = await chartPod.exec(["node", "dist/src/main.js", "check"]);
    assert.equal(check.code, 0, `${check.stdout}${check.stderr}`);
    assert.doesNotMatch(check.stdout, /✗/);
  });

  it("converges with zero mirror writes after docker kill and a restart of the container", async () => {
    assert.ok(chartPod, "the Pod runs");
    await chartPod.kill();
    const since = Date.now();
    await chartPod.start();
    await chartPod.waitForReady(120_000);
    await waitForControllerIdle(adminUrl, REMOTES, { timeoutMs: 120_000 });
    const until = await audit.flush();
    const writes = audit.writes({ identity: POD_NAME, resources: MIRROR_RESOURCES, since, until });
    assert.deepEqual(writes, [], describeWrites(writes));
    assert.doesNotMatch(await chartPod.logs(), CACHE_WARNING);
  });

  it("ends within the chart's grace period on docker stop, exit 0, its Lease released", async () => {
    assert.ok(chartPod, "the Pod runs");
    const { exitCode, ms } = await chartPod.stop();
    assert.equal(exitCode, 0, await chartPod.logs());
    assert.ok(ms < chartPod.run.gracePeriodSeconds * 1000, `stopped in ${ms} ms`);
    const lease = await fleet
      .kubeConfig("local")
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: "fleet-mirror", namespace: CONTROLLER_NAMESPACE });
    assert.equal(lease.spec?.holderIdentity ?? "", "", "the Lease is released");
  });

  it("turns the compile cache off, saying so, only without the Pod's writable /tmp (the control)", async () => {
    const result = await runTool("docker", [
      "run",
      "--rm",
      "--read-only",
      "--user",
      "65532:65532",
      image,
      "status",
      "--help",
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, CACHE_WARNING);
  });
});
