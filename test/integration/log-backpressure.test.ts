/**
 * `fleet-mirror run` whose log pipe nobody reads: the controller keeps serving, mirroring
 * and renewing its Lease; lines that do not fit are dropped whole, counted
 * (`fleet_mirror_log_lines_dropped_total`) and reported by a line once the pipe drains.
 *
 * The log volume comes from credentials Secrets whose kubeconfig names a missing
 * context with a very long name: the main thread logs each as one error line of
 * about 500 kB, far more than the pipe and the test's paused stream can hold.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { after, before, describe, it } from "node:test";
import { CoordinationV1Api, type V1Lease, type V1Secret } from "@kubernetes/client-node";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";

const TIMEOUT_MS = 60_000;
/** A controller that answers at all answers well within this. */
const ANSWER_MS = 5_000;
const BURST_SECRETS = 16;
const CONTEXT_NAME_CHARS = 500_000;

/** A kubeconfig whose current-context does not exist: the Secret registers nothing and is logged. */
function badKubeconfig(i: number): string {
  const context = `missing-${i}-${"x".repeat(CONTEXT_NAME_CHARS)}`;
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]",
    "users: [{name: u, user: {token: t}}]",
    "contexts: [{name: ctx, context: {cluster: c, user: u}}]",
    `current-context: ${context}`,
    "",
  ].join("\n");
}

/** The value of an unlabelled sample in a Prometheus text exposition. */
function sample(text: string, name: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

describe("a controller whose log pipe is not read", () => {
  let fleet: Fleet;
  let controller: ControllerProcess;
  let url: string;
  let leases: CoordinationV1Api;

  /** GET `path` on the admin server; rejects when it takes longer than ANSWER_MS. */
  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(ANSWER_MS) });
    return { status: res.status, body: await res.text() };
  };

  async function renewTime(): Promise<number> {
    const lease: V1Lease = await leases.readNamespacedLease({ namespace: CONTROLLER_NAMESPACE, name: "fleet-mirror" });
    const value: unknown = lease.spec?.renewTime;
    return value instanceof Date ? value.getTime() : Date.parse(String(value));
  }

  before(async () => {
    fleet = await Fleet.start(["east"]);
    leases = fleet.kubeConfig("local").makeApiClient(CoordinationV1Api);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.register("east");
    await fleet.createService("east", "shop", "before");
    controller = await fleet.startProcess([
      "--leader-elect",
      "--leader-election-identity",
      "replica-a",
      "--leader-election-retry-period",
      "500ms",
    ]);
    url = await controller.adminUrl();
    await fleet.waitForMirror("shop", "before-east", () => true, TIMEOUT_MS);
  });
  after(async () => {
    await controller?.stop("SIGKILL");
    await fleet?.stop();
  });

  it("stays responsive, drops whole lines while stuck, and reports the drop once the pipe drains", async () => {
    const stdout = controller.child.stdout;
    assert.ok(stdout);
    let text = "";
    stdout.on("data", (chunk: string) => {
      text += chunk;
    });
    // From here on nobody reads the pipe: it fills and stays full.
    stdout.pause();
    for (let i = 0; i < BURST_SECRETS; i++)
      await fleet.createSecret(
        fleet.secretBody({
          secretName: `noisy-${i}`,
          clusterName: `noisy-${i}`,
          kubeconfig: badKubeconfig(i),
        }) as V1Secret,
      );

    // The controller drops what does not fit instead of waiting for the pipe.
    await eventually(
      `the admin server to answer within ${ANSWER_MS} ms and count dropped log lines while the pipe is full`,
      async () =>
        (sample((await get("/metrics")).body, "fleet_mirror_log_lines_dropped_total") ?? 0) > 0 ? true : undefined,
      TIMEOUT_MS,
    );
    const stuckSince = Date.now();
    assert.equal((await get("/healthz")).status, 200, "/healthz answers while the log pipe is full");
    await fleet.createService("east", "shop", "during");
    await fleet.waitForMirror("shop", "during-east", () => true, TIMEOUT_MS);
    await eventually("the Lease renewed while the log pipe is full", async () =>
      (await renewTime()) > stuckSince ? true : undefined,
    );
    assert.equal((await get("/healthz")).status, 200);
    assert.equal(controller.child.exitCode, null, "the controller still runs");

    stdout.resume();
    const report = await eventually("a line reporting the dropped lines", () => {
      for (const line of text.split("\n").slice(0, -1)) {
        const parsed = JSON.parse(line) as { droppedLines?: unknown };
        if (typeof parsed.droppedLines === "number") return parsed.droppedLines;
      }
      return undefined;
    });
    assert.ok(report > 0);
    // Every line that came out is whole: nothing was split or interleaved.
    assert.equal(await controller.stop("SIGTERM"), 0, "a clean stop");
    if (!stdout.readableEnded) await once(stdout, "end");
    for (const line of text.split("\n").slice(0, -1))
      assert.doesNotThrow(() => JSON.parse(line), `a whole JSON line: ${line.slice(0, 200)}`);
    const dropped = text.split("\n").filter((l) => l.includes('"droppedLines"'));
    assert.ok(dropped.length >= 1);
  });
});
