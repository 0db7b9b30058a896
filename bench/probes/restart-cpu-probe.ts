/**
 * Restart CPU side by side (bench/HISTORY.md, `--no-maglev`): the `restart_cpu_s_50_clusters_default`
 * row's world and configuration (bench/default-config.ts: 50 clusters × 50 Services,
 * `fleet-mirror run` from dist/ with no placement or tuning flag), one converging run,
 * then restarts on the intact world with the variants in turn, so that each variant sees
 * the machine's same moments. Not a scenario of bench/run.ts: a probe run by hand.
 *
 *   node bench/probes/restart-cpu-probe.ts [--runs 12] [--clusters 50] [--services 50] \
 *     [--variant "name=--node-flag --other"]... [--args "--controller-flags"]
 *
 * A variant is a name and the Node flags it adds after the process's own
 * (src/cli/process-flags.ts): `maglev=--maglev`; a bare name adds none. `name@/abs/dist/src/main.js`
 * runs another build (a copy of an earlier dist/), so two builds alternate on one world. Prints one JSON
 * line per restart: CPU-seconds to synced and to the writer idle, by thread, and what
 * the process spends in the `AFTER_IDLE_MS` after it (`cpuAfter`).
 */
import { parseArgs } from "node:util";
import { Fleet } from "../../test/helpers/fleet.ts";
import { mb, progress, round, shapeRemote, sleep } from "../harness.ts";
import { allSynced, freePort, processRss, waitStatus, writerSettled } from "../memory.ts";
import { busiestThreads, processCpuSeconds } from "../process-cpu.ts";

const AFTER_IDLE_MS = 3_000;

const { values } = parseArgs({
  options: {
    clusters: { type: "string", default: "50" },
    services: { type: "string", default: "50" },
    runs: { type: "string", default: "12" },
    variant: { type: "string", multiple: true },
    args: { type: "string", default: "" },
  },
});
const clusters = Number(values.clusters);
const variants = (values.variant ?? ["default"]).map((text): [string, string[], string | undefined] => {
  const at = text.indexOf("=");
  const [head, flags] = at < 0 ? [text, []] : [text.slice(0, at), text.slice(at + 1).split(" ")];
  const build = head.indexOf("@");
  return build < 0 ? [head, flags, undefined] : [head.slice(0, build), flags, head.slice(build + 1)];
});
const extra = values.args === "" ? [] : (values.args ?? "").split(" ");

async function once(fleet: Fleet, execArgv: readonly string[], main?: string) {
  const port = await freePort();
  const admin = `http://127.0.0.1:${port}`;
  const started = Date.now();
  const proc = await fleet.startProcess(
    ["--admin-addr", `127.0.0.1:${port}`, "--endpoints-api", "endpointslices", ...extra],
    {
      entry: "dist",
      execArgv,
      ...(main ? { main } : {}),
    },
  );
  try {
    const pid = proc.child.pid ?? 0;
    await waitStatus(proc, admin, `${clusters} synced`, allSynced(clusters));
    const syncedMs = Date.now() - started;
    const cpuSynced = round(processCpuSeconds(pid), 2);
    await waitStatus(proc, admin, "writer idle", writerSettled(clusters));
    const idleMs = Date.now() - started;
    const cpu = round(processCpuSeconds(pid), 2);
    const byThread = busiestThreads(pid, 4);
    // What the process still spends once idle (its threads' collections after the burst):
    // whether the row's window caught it depends on when the writer was seen idle.
    await sleep(AFTER_IDLE_MS);
    const cpuAfter = round(processCpuSeconds(pid) - cpu, 2);
    const { rss, peak } = processRss(pid);
    return {
      syncedMs,
      idleMs,
      cpuSynced,
      cpu,
      byThread,
      cpuAfter,
      byThreadAfter: busiestThreads(pid, 4),
      rssMb: mb(rss),
      peakRssMb: mb(peak),
    };
  } finally {
    await proc.stop();
  }
}

const fleet = await Fleet.start(["remote"]);
try {
  await shapeRemote(fleet, "remote", { services: Number(values.services), clusters, gatewayIp: "198.18.0.31" });
  progress("converging");
  process.stdout.write(`${JSON.stringify({ run: 0, variant: "converge", ...(await once(fleet, [])) })}\n`);
  for (let run = 0; run < Number(values.runs); run++) {
    const [name, execArgv, main] = variants[run % variants.length] ?? ["default", [], undefined];
    const result = await once(fleet, execArgv, main);
    process.stdout.write(`${JSON.stringify({ run: run + 1, variant: name, ...result })}\n`);
  }
} finally {
  await fleet.stop();
}
