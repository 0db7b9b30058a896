/**
 * A rendered Pod template as `docker run` arguments (test/helpers/pod-run-args.ts), on the
 * Pod template of deploy/deployment.yaml (the chart renders the same: helm-chart.test.ts)
 * and on small variations of it.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { load } from "js-yaml";
import { type PodContext, type PodTemplateSpec, parseQuantity, podRun } from "../helpers/pod-run-args.ts";

const deployment = load(readFileSync(new URL("../../deploy/deployment.yaml", import.meta.url), "utf8")) as {
  spec: { template: { spec: PodTemplateSpec } };
};
const POD = deployment.spec.template.spec;
const CONTEXT: PodContext = {
  podName: "fleet-mirror-abc-0",
  namespace: "fleet-mirror",
  image: "fleet-mirror:test",
  apiHost: "127.0.0.1",
  apiPort: 6443,
  emptyDir: (name) => `/pods/abc/volumes/${name}`,
  serviceAccountDir: "/pods/abc/serviceaccount",
  sandboxContainer: "abc-sandbox",
  containerName: "abc",
};

/** The value after `flag` in `args` (every one when the flag repeats). */
function values(args: readonly string[], flag: string): string[] {
  return args.flatMap((arg, i) => (arg === flag ? [args[i + 1] ?? ""] : []));
}

/** `POD` with its only container changed by `change`. */
function withContainer(change: Record<string, unknown>): PodTemplateSpec {
  return { ...POD, containers: [{ ...POD.containers[0], ...change } as PodTemplateSpec["containers"][number]] };
}

describe("pod run arguments", () => {
  it("map deploy/'s Pod: user, read-only root, no capabilities or privilege escalation, limits, env, volumes, args", () => {
    const run = podRun(POD, CONTEXT);
    const args = run.containerArgs;
    assert.deepEqual(values(args, "--user"), ["65532:65532"]);
    assert.ok(args.includes("--read-only"));
    assert.deepEqual(values(args, "--cap-drop"), ["ALL"]);
    assert.deepEqual(values(args, "--security-opt"), ["no-new-privileges"]);
    assert.deepEqual(values(args, "--cpus"), ["2"]);
    assert.deepEqual(values(args, "--memory"), [String(1024 ** 3)]);
    assert.deepEqual(values(args, "--memory-swap"), [String(1024 ** 3)]);
    // 100m requested: the kubelet's 102 CPU shares.
    assert.deepEqual(values(args, "--cpu-shares"), ["102"]);
    assert.deepEqual(values(args, "--network"), ["container:abc-sandbox"]);
    assert.deepEqual(values(args, "--env"), [
      "KUBERNETES_SERVICE_HOST=127.0.0.1",
      "KUBERNETES_SERVICE_PORT=6443",
      "KUBERNETES_SERVICE_PORT_HTTPS=6443",
      "POD_NAME=fleet-mirror-abc-0",
      "POD_NAMESPACE=fleet-mirror",
    ]);
    assert.deepEqual(values(args, "--volume"), [
      "/pods/abc/volumes/tmp:/tmp",
      "/pods/abc/serviceaccount:/var/run/secrets/kubernetes.io/serviceaccount:ro",
    ]);
    // No command: the image's ENTRYPOINT; the args replace its CMD, after the image.
    assert.equal(values(args, "--entrypoint").length, 0);
    assert.deepEqual(args.slice(args.indexOf("fleet-mirror:test")), [
      "fleet-mirror:test",
      "run",
      "--leader-elect",
      "--admin-addr",
      ":9999",
    ]);
    assert.deepEqual(run.sandboxArgs, ["--hostname", "fleet-mirror-abc-0", "--publish", "127.0.0.1::9999"]);
    assert.deepEqual([...run.ports], [["admin", 9999]]);
    assert.equal(run.gracePeriodSeconds, 30);
  });

  it("give a command as the entrypoint and the rest of it before the args", () => {
    const args = podRun(
      withContainer({ command: ["node", "--inspect", "main.js"], args: ["run"] }),
      CONTEXT,
    ).containerArgs;
    assert.deepEqual(values(args, "--entrypoint"), ["node"]);
    assert.deepEqual(args.slice(args.indexOf("fleet-mirror:test")), [
      "fleet-mirror:test",
      "--inspect",
      "main.js",
      "run",
    ]);
  });

  it("refuse what they do not map, naming it", () => {
    assert.throws(() => podRun(withContainer({ lifecycle: { preStop: {} } }), CONTEXT), /lifecycle not mapped/);
    assert.throws(
      () =>
        podRun(withContainer({ env: [{ name: "T", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] }), CONTEXT),
      /env T: its source is not mapped/,
    );
    assert.throws(
      () => podRun({ ...POD, volumes: [{ name: "tmp", configMap: { name: "c" } } as never] }, CONTEXT),
      /volume tmp: only emptyDir volumes are mapped/,
    );
    assert.throws(
      () => podRun(withContainer({ securityContext: { runAsNonRoot: true, runAsUser: 0 } }), CONTEXT),
      /runAsNonRoot with runAsUser 0/,
    );
    assert.throws(
      () => podRun(withContainer({ securityContext: { seccompProfile: { type: "Localhost" } } }), CONTEXT),
      /seccompProfile Localhost/,
    );
  });

  it("read Kubernetes quantities in cores and bytes", () => {
    assert.equal(parseQuantity("2"), 2);
    assert.equal(parseQuantity("100m"), 0.1);
    assert.equal(parseQuantity("1.5"), 1.5);
    assert.equal(parseQuantity("512Mi"), 512 * 2 ** 20);
    assert.equal(parseQuantity("1G"), 1e9);
    assert.throws(() => parseQuantity("1e3"), /not one this mapping reads/);
  });
});
