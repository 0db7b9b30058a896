/**
 * A hostile remote's body (`hostile_body_rss_mb`): the RSS growth of a `fleet-mirror run`
 * process (from dist/) while one registered remote answers every list of its Services
 * with a 1.5 GiB body (test/helpers/hostile-remote.ts), until that remote has streamed
 * 1.5 GiB in all. The response cap (`--max-response-mb`, default 64) ends each answer,
 * and the actor lists again after its backoff; the growth is measured from the RSS with
 * no cluster registered, sampled every 20 ms, so it includes the actor's own thread.
 * Target: at most the cap + 64 MB.
 */
import { Fleet } from "../test/helpers/fleet.ts";
import { HOSTILE_BODY_BYTES, rssMb, startHostileRemote } from "../test/helpers/hostile-remote.ts";
import { type BenchOptions, printTable, progress, round, type ScenarioResult, sleep, writeResult } from "./harness.ts";
import { startController } from "./memory.ts";

/** The default `--max-response-mb`, which this scenario measures. */
const CAP_MB = 64;
/** The quiet time before the baseline sample, after the writer is ready. */
const SETTLE_MS = 3_000;

export async function runHostileBody(opts: BenchOptions): Promise<ScenarioResult> {
  const bodyBytes = opts.smoke ? 256 * 2 ** 20 : HOSTILE_BODY_BYTES;
  progress(`hostile body: a remote streaming ${Math.round(bodyBytes / 2 ** 20)} MiB lists`);
  const fleet = await Fleet.start([]);
  const hostile = await startHostileRemote({ bodyBytes });
  try {
    // The hostile remote speaks plain http: allowed only with --allow-insecure-remotes.
    const [proc, admin] = await startController(fleet, ["--allow-insecure-remotes"]);
    try {
      await waitReady(admin);
      await sleep(SETTLE_MS);
      const pid = proc.child.pid ?? 0;
      const baseline = rssMb(pid);
      let peak = baseline;
      const sampler = setInterval(() => {
        peak = Math.max(peak, rssMb(pid));
      }, 20);
      const started = Date.now();
      try {
        await fleet.createSecret(
          fleet.secretBody({
            secretName: "hostile",
            clusterName: "hostile",
            kubeconfig: hostile.kubeconfig("hostile"),
          }),
        );
        // The remote's streaming is this scenario's input: it runs until 1.5 GiB went out.
        while (hostile.stats.bytes < bodyBytes) {
          if (proc.child.exitCode !== null) throw new Error(`the controller exited:\n${proc.output}`);
          if (Date.now() - started > 600_000) throw new Error(`only ${hostile.stats.bytes} bytes in 10 min`);
          await sleep(100);
        }
      } finally {
        clearInterval(sampler);
      }
      const row = {
        bodyMiB: Math.round(bodyBytes / 2 ** 20),
        capMb: CAP_MB,
        streamedMiB: Math.round(hostile.stats.bytes / 2 ** 20),
        lists: hostile.stats.lists,
        listsCut: hostile.stats.listsCut,
        largestListMiB: round(hostile.stats.maxListBytes / 2 ** 20, 1),
        durationS: round((Date.now() - started) / 1000, 1),
        baselineRssMb: round(baseline, 1),
        peakRssMb: round(peak, 1),
        hostileBodyRssMb: round(peak - baseline, 1),
      };
      printTable("process RSS while a remote streams hostile lists", [row]);
      writeResult(opts.out, "hostile-body", { smoke: opts.smoke, entry: "dist/src/main.js run", ...row });
      return { result: row, summary: opts.smoke ? {} : { hostile_body_rss_mb: row.hostileBodyRssMb } };
    } finally {
      await proc.stop();
    }
  } finally {
    await hostile.close();
    await fleet.stop();
  }
}

/** Until the controller's /readyz answers 200 (its writer has listed the local cluster). */
async function waitReady(admin: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      if ((await fetch(`${admin}/readyz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error("the controller was not ready within 120 s");
    await sleep(200);
  }
}
