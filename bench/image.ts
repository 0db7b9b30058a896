/**
 * The controller's image: its size, and how fast a Pod of the Helm chart becomes ready.
 *
 * The image is built from the repository's Dockerfile on the local stand-in for its base
 * (scripts/image/build.sh; a smoke run builds it too), then run as the chart's Pod
 * (test/helpers/chart-pod.ts: `helm template`, the Deployment's Pod template as docker
 * run, a token of the chart's ServiceAccount) against one remote API server with 10
 * exported Services:
 * - `image_app_mb`: the size of the layers the project adds to its base (10^6 bytes, as
 *   Docker prints sizes), `image_total_mb` the whole image's;
 * - `container_ready_s`: a new Pod (empty emptyDir, so an empty V8 compile cache, as every
 *   Pod of a rollout) from the `docker run` of its container (the Pod's sandbox is up
 *   already, as the kubelet starts containers in a ready sandbox) to /readyz 200 through the
 *   published admin port;
 *   the median of 5 Pods (smoke 1), each stopped (`docker stop`) before the next starts,
 *   so each takes the Lease its predecessor released. Also reported: the same after a
 *   container restart in the last Pod (a warm cache), the time until every cluster is
 *   synced and the writer idle, and how long `docker stop` took.
 */
import { ChartPod, deploymentPod, installRendering, renderChart } from "../test/helpers/chart-pod.ts";
import {
  acquireDocker,
  baseImage,
  buildImage,
  imageBytes,
  imageLayers,
  megabytes,
  releaseDocker,
} from "../test/helpers/docker.ts";
import { Fleet } from "../test/helpers/fleet.ts";
import { waitForControllerIdle } from "../test/helpers/settle.ts";
import { type BenchOptions, percentile, printTable, round, type ScenarioResult, writeResult } from "./harness.ts";

const SERVICES = 10;

/** One new Pod: start → ready → synced and idle → stopped (and, when `restart`, a kill and a restart between). */
async function podRun(
  fleet: Fleet,
  rendered: ReturnType<typeof deploymentPod>,
  image: string,
  name: string,
  restart: boolean,
) {
  const pod = await ChartPod.create(fleet, rendered, name, image);
  try {
    // The clock starts at the container's docker run, its Pod's sandbox up already.
    await pod.startSandbox();
    const started = Date.now();
    await pod.start();
    await pod.waitForReady();
    const readyMs = Date.now() - started;
    const adminUrl = await pod.url("admin");
    await waitForControllerIdle(adminUrl, ["east"], { timeoutMs: 300_000, holdMs: 0 });
    const syncedMs = Date.now() - started;
    let restartReadyMs: number | null = null;
    if (restart) {
      await pod.kill();
      const again = Date.now();
      await pod.start();
      await pod.waitForReady();
      restartReadyMs = Date.now() - again;
      await waitForControllerIdle(adminUrl, ["east"], { timeoutMs: 300_000, holdMs: 0 });
    }
    const stop = await pod.stop();
    return { pod: name, readyMs, syncedMs, restartReadyMs, stopMs: stop.ms, exitCode: stop.exitCode };
  } finally {
    await pod.remove();
  }
}

export async function runImage(opts: BenchOptions): Promise<ScenarioResult> {
  await acquireDocker();
  try {
    const buildStarted = Date.now();
    const image = await buildImage();
    const buildS = round((Date.now() - buildStarted) / 1000, 1);
    const base = await baseImage();
    const totalBytes = await imageBytes(image);
    const baseBytes = await imageBytes(base);
    // The layers above the base, newest first, with the instruction that made each.
    const history = await imageLayers(image);
    const layers = history
      .slice(0, history.length - (await imageLayers(base)).length)
      .filter((layer) => layer.bytes > 0)
      .map((layer) => ({
        mb: megabytes(layer.bytes),
        createdBy: layer.createdBy.replace(/^\/bin\/sh -c (#\(nop\) )?/, ""),
      }));

    const objects = await renderChart(["--set", "namespace.create=true"]);
    const rendered = deploymentPod(objects);
    const fleet = await Fleet.start(["east"], { installIdentity: installRendering(objects) });
    try {
      await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.1" }] });
      for (let i = 0; i < SERVICES; i++) await fleet.createService("east", "shop", `svc-${i}`);
      await fleet.ensureNamespace("local", "shop");
      await fleet.register("east");
      const pods = opts.smoke ? 1 : 5;
      const rows = [];
      for (let i = 0; i < pods; i++)
        rows.push(await podRun(fleet, rendered, image, `fleet-mirror-bench-${i}`, i === pods - 1));
      printTable("the chart's Pod from the image: new Pods, then a container restart in the last", rows);
      const seconds = (ms: number | null) => (ms === null ? null : round(ms / 1000));
      const containerReadyS = seconds(
        percentile(
          rows.map((r) => r.readyMs),
          50,
        ),
      );
      const result = {
        image,
        base,
        buildS,
        imageTotalMb: megabytes(totalBytes),
        baseMb: megabytes(baseBytes),
        imageAppMb: megabytes(totalBytes - baseBytes),
        layers,
        servicesMirrored: SERVICES,
        pods: rows,
        containerReadyS,
        containerRestartReadyS: seconds(rows.at(-1)?.restartReadyMs ?? null),
      };
      printTable("image sizes (MB, 10^6 bytes)", [
        { image: result.imageTotalMb, base: result.baseMb, project: result.imageAppMb, buildS },
      ]);
      writeResult(opts.out, "image", { smoke: opts.smoke, ...result });
      return {
        result,
        summary: opts.smoke
          ? {}
          : {
              image_app_mb: result.imageAppMb,
              image_total_mb: result.imageTotalMb,
              container_ready_s: containerReadyS,
            },
      };
    } finally {
      await fleet.stop();
    }
  } finally {
    await releaseDocker();
  }
}
