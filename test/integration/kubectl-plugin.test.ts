/**
 * `kubectl fleet-mirror ...`: the pinned kubectl finds the package's
 * `kubectl-fleet_mirror` on PATH (installed as npm links it: a link to the entry), runs
 * it against a real local API server, and completes its arguments through
 * `kubectl_complete-fleet_mirror`. The plugin is the same program: its output is
 * compared with `fleet-mirror`'s, byte for byte, for the same arguments and environment.
 *
 * The controller does not run here: `status` then reads the cluster objects, whose rows
 * hold no ages, so two runs print the same.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ensureKubectl } from "../../sandbox/binaries.ts";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { PLUGIN_COMPLETION_EXECUTABLE, PLUGIN_EXECUTABLE } from "../../src/cli/program.ts";
import { binDirectory, type CliResult, cliEnv, runProgram, show } from "../helpers/cli.ts";

const NAMESPACE = "fleet-mirror";

describe("the kubectl plugin", () => {
  let plane: ControlPlane;
  let kubectlPath: string;
  let bin: string;
  let home: string;
  let localKubeconfig: string;
  let eastKubeconfig: string;
  /** Nothing listens there: `status` reads the cluster objects. */
  const adminUrl = ["--admin-url", "http://127.0.0.1:9"];

  /** Runs `program args` with the plugin's links and this Node on PATH, HOME empty, `env` added. */
  const run = (program: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> =>
    runProgram(program, args, { ...cliEnv([bin]), HOME: home, ...env });
  const kubectl = (args: readonly string[], env?: NodeJS.ProcessEnv): Promise<CliResult> => run(kubectlPath, args, env);
  const fleetMirror = (args: readonly string[], env?: NodeJS.ProcessEnv): Promise<CliResult> =>
    run(join(bin, "fleet-mirror"), args, env);

  before(async () => {
    kubectlPath = await ensureKubectl();
    plane = await ControlPlane.start({ clusters: ["local", "east"] });
    bin = binDirectory(["fleet-mirror", PLUGIN_EXECUTABLE, PLUGIN_COMPLETION_EXECUTABLE]);
    home = mkdtempSync(join(tmpdir(), "fleet-mirror-plugin-home-"));
    localKubeconfig = plane.cluster("local").adminKubeconfigPath;
    eastKubeconfig = plane.cluster("east").adminKubeconfigPath;
    const ns = await kubectl(["--kubeconfig", localKubeconfig, "create", "namespace", NAMESPACE]);
    assert.equal(ns.code, 0, show(ns));
  });

  after(async () => {
    await plane?.stop();
    for (const dir of [bin, home]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("is listed by kubectl plugin list, without warnings", async () => {
    const r = await kubectl(["plugin", "list"]);
    assert.equal(r.code, 0, show(r));
    assert.ok(r.stdout.split("\n").includes(join(bin, PLUGIN_EXECUTABLE)), show(r));
    assert.doesNotMatch(r.stderr, /warning/i, show(r));
  });

  it("names itself `kubectl fleet-mirror` in its usage and help, with fleet-mirror's exit codes", async () => {
    const usage = await kubectl(["fleet-mirror", "help"]);
    assert.equal(usage.code, 0, show(usage));
    assert.match(usage.stdout, /^Usage: kubectl fleet-mirror <command> \[flags\]$/m);
    assert.match(usage.stdout, /^ {2}status /m);
    const help = await kubectl(["fleet-mirror", "status", "--help"]);
    assert.equal(help.code, 0, show(help));
    assert.match(help.stdout, /^Usage: kubectl fleet-mirror status \[flags\]/);
    const own = await fleetMirror(["status", "--help"]);
    assert.equal(help.stdout.replaceAll("kubectl fleet-mirror", "fleet-mirror"), own.stdout);
    const bad = await kubectl(["fleet-mirror", "status", "--no-such-flag"]);
    assert.equal(bad.code, 2, show(bad));
    assert.match(bad.stderr, /^kubectl fleet-mirror status: Unknown option '--no-such-flag'/, show(bad));
  });

  it("links a cluster and prints what fleet-mirror status prints, from --kubeconfig (after or before the command) or $KUBECONFIG", async () => {
    const link = await kubectl([
      "fleet-mirror",
      "link",
      "--cluster-name",
      "east",
      "--remote-kubeconfig",
      eastKubeconfig,
      "--kubeconfig",
      localKubeconfig,
      "-n",
      NAMESPACE,
      "--apply",
    ]);
    assert.equal(link.code, 0, show(link));
    const secret = await kubectl([
      "--kubeconfig",
      localKubeconfig,
      "get",
      "secret",
      "-n",
      NAMESPACE,
      "cluster-credentials-east",
      "-o",
      "name",
    ]);
    assert.equal(secret.stdout.trim(), "secret/cluster-credentials-east", show(secret));

    const args = ["status", "--kubeconfig", localKubeconfig, "-n", NAMESPACE, ...adminUrl];
    const plugin = await kubectl(["fleet-mirror", ...args]);
    const own = await fleetMirror(args);
    assert.equal(plugin.code, 0, show(plugin));
    assert.match(plugin.stdout, /^east\s/m, show(plugin));
    assert.deepEqual(plugin, own);

    const fromEnv = await kubectl(["fleet-mirror", "status", "-n", NAMESPACE, ...adminUrl], {
      KUBECONFIG: localKubeconfig,
    });
    assert.deepEqual(fromEnv, own);

    // The local cluster's flags before the command, as with kubectl's own commands.
    const leading = await kubectl([
      "fleet-mirror",
      "--kubeconfig",
      localKubeconfig,
      "-n",
      NAMESPACE,
      "status",
      ...adminUrl,
    ]);
    assert.deepEqual(leading, own);
  });

  it("takes --context from a kubeconfig that kubectl merged", async () => {
    const merged = await kubectl(["config", "view", "--flatten"], {
      KUBECONFIG: [eastKubeconfig, localKubeconfig].join(":"),
    });
    assert.equal(merged.code, 0, show(merged));
    const path = join(home, "merged.kubeconfig");
    writeFileSync(path, merged.stdout, { mode: 0o600 });
    const args = ["status", "-n", NAMESPACE, "-o", "json", ...adminUrl];
    const local = await kubectl(["fleet-mirror", ...args, "--context", "local"], { KUBECONFIG: path });
    assert.equal(local.code, 0, show(local));
    assert.deepEqual(
      (JSON.parse(local.stdout) as { clusters: { cluster: string }[] }).clusters.map((c) => c.cluster),
      ["east"],
    );
    // The merged file's current context is east's, where no cluster is linked.
    const east = await kubectl(["fleet-mirror", ...args], { KUBECONFIG: path });
    assert.equal(east.code, 0, show(east));
    assert.deepEqual((JSON.parse(east.stdout) as { clusters: unknown[] }).clusters, []);
  });

  it("completes through kubectl __complete: the plugin's name, its commands and a command's flags", async () => {
    const name = await kubectl(["__complete", "fleet"]);
    assert.equal(name.code, 0, show(name));
    assert.match(name.stdout, /^fleet-mirror\t/m, show(name));
    const command = await kubectl(["__complete", "fleet-mirror", "st"]);
    assert.equal(command.code, 0, show(command));
    assert.deepEqual(command.stdout.split("\n").slice(0, 2), [
      "status\tone row per remote cluster (state, mirrors, last sync, restarts, gateway), one per fleet-wide Service",
      ":4",
    ]);
    const flag = await kubectl(["__complete", "fleet-mirror", "status", "--kube"]);
    assert.deepEqual(flag.stdout.split("\n").slice(0, 2), [
      "--kubeconfig\tkubeconfig of the local cluster (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)",
      ":4",
    ]);
    const file = await kubectl(["__complete", "fleet-mirror", "status", "--kubeconfig", ""]);
    assert.equal(file.stdout.split("\n")[0], ":0", show(file));
  });
});
