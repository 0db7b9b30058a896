/**
 * A remote that answers its Services list with a 1.5 GiB body, as a whole `fleet-mirror
 * run` process sees it: the response cap (`--max-response-mb`, default 64) ends each such
 * answer, so the process's RSS grows by at most about the cap, and the cluster reports
 * `response-too-large`. Without the cap the body was buffered whole, Buffers outside
 * any thread's heap limit, until the kernel killed the Pod and every cluster with it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { HOSTILE_BODY_BYTES, type HostileRemote, rssMb, startHostileRemote } from "../helpers/hostile-remote.ts";
import { eventually } from "../helpers/kube.ts";

const CAP_MB = 64;
/** What the process may grow by while the remote streams: the cap plus 64 MB of slack (the bound). */
const BOUND_MB = CAP_MB + 64;
const TOO_LARGE = /fleet_mirror_cluster_watch_errors_total\{cluster="hostile",reason="response-too-large"\} [1-9]/;

describe("a remote streaming a 1.5 GiB list to a fleet-mirror run process", () => {
  let fleet: Fleet;
  let hostile: HostileRemote;
  let controller: ControllerProcess;
  let url: string;

  before(async () => {
    fleet = await Fleet.start([]);
    hostile = await startHostileRemote();
    // The hostile remote speaks plain http: allowed only with --allow-insecure-remotes.
    controller = await fleet.startProcess(["--max-threads", "0", "--allow-insecure-remotes"]);
    url = await controller.adminUrl();
  });
  after(async () => {
    await controller?.stop();
    await hostile?.close();
    await fleet?.stop();
  });

  it("costs that cluster a response-too-large error per list, never the process its memory", async () => {
    const metrics = async (): Promise<string> => (await fetch(`${url}/metrics`)).text();
    await eventually("/readyz 200", async () => ((await fetch(`${url}/readyz`)).status === 200 ? true : undefined));
    const pid = controller.child.pid;
    assert.ok(pid !== undefined);
    const baseline = rssMb(pid);

    let peak = baseline;
    let over: string | undefined;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, rssMb(pid));
      } catch {
        return; // the process is gone: the waits below say so
      }
      if (peak - baseline > BOUND_MB && over === undefined)
        over = `RSS grew by ${Math.round(peak - baseline)} MB (baseline ${Math.round(baseline)} MB) while the remote had streamed ${Math.round(hostile.stats.bytes / 2 ** 20)} MiB`;
    }, 20);
    try {
      await fleet.createSecret(
        fleet.secretBody({ secretName: "hostile", clusterName: "hostile", kubeconfig: hostile.kubeconfig("hostile") }),
      );
      // Not `eventually`: a growth past the bound must end the wait at once.
      const deadline = Date.now() + 120_000;
      for (;;) {
        if (over) break;
        if (controller.child.exitCode !== null) assert.fail(`the controller exited:\n${controller.output}`);
        if (hostile.stats.listsCut >= 3 && TOO_LARGE.test(await metrics())) break;
        if (Date.now() > deadline)
          assert.fail(`no three cut lists and response-too-large in 120 s: ${JSON.stringify(hostile.stats)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      clearInterval(sampler);
    }
    assert.equal(over, undefined, over);
    assert.ok(
      hostile.stats.maxListBytes < HOSTILE_BODY_BYTES / 4,
      `each list was cut near the cap: the most one got was ${Math.round(hostile.stats.maxListBytes / 2 ** 20)} MiB`,
    );
    const status = (await (await fetch(`${url}/status`)).json()) as {
      clusters: { cluster: string; state: string; reason?: string }[];
    };
    const row = status.clusters.find((c) => c.cluster === "hostile");
    assert.ok(row, JSON.stringify(status));
    assert.match(row.reason ?? "", /larger than the cap of 67108864 bytes/, JSON.stringify(row));
    assert.notEqual(row.state, "crash-loop");
    process.stdout.write(
      `# hostile remote: RSS baseline ${Math.round(baseline)} MB, peak growth ${Math.round(peak - baseline)} MB over ${hostile.stats.lists} lists (${Math.round(hostile.stats.bytes / 2 ** 20)} MiB streamed); bound ${BOUND_MB} MB\n`,
    );
  });
});
