/**
 * Two builds side by side on `sharded_converge_ratio` (diagnostic, not part of `npm run
 * bench`): the world of bench/sharded.ts, converged by one replica (`--leader-elect`) and
 * by three (`--shards 12`) of this checkout's `dist/` and of another build's
 * (`--before <checkout>/dist/src/main.js`), the two three-replica runs in alternating
 * order, `--pairs` times, every mirror deleted between runs. Per run: ms from the spawn
 * to the first and to the last right mirror (Service with its port, slice at the
 * gateway: the bench's criterion), CPU-seconds of every replica by thread (main, writer,
 * actor threads) read at convergence, CPU-seconds of the control plane over the run
 * (bench/cpu-split.ts), and the load average. The one-replica run is of this build.
 *
 *   node bench/probes/sharded-pairs.ts --before /tmp/x/dist/src/main.js [--pairs 2] [--clusters-per-remote 100] [--services 5]
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Fleet } from "../../test/helpers/fleet.ts";
import { type Replica, Replicas } from "../../test/helpers/replicas.ts";
import { cpuDelta, cpuSplit } from "../cpu-split.ts";
import { localAdminClient, round, sleep } from "../harness.ts";
import { processCpuSeconds, threadCpuSeconds } from "../process-cpu.ts";
import { resetLocal, rightMirrors, shapeShardedWorld } from "../sharded.ts";

const { values } = parseArgs({
  options: {
    before: { type: "string" },
    pairs: { type: "string", default: "2" },
    "clusters-per-remote": { type: "string", default: "100" },
    services: { type: "string", default: "5" },
  },
});
if (!values.before) throw new Error("--before <checkout>/dist/src/main.js is required");
const remotes = ["east", "west", "north"];
const perRemote = Number(values["clusters-per-remote"]);
const services = Number(values.services);
const mirrors = remotes.length * perRemote * services;
const ARGS = ["--max-threads", "4", "--write-qps", "0", "--log-level", "warn"];
const SHARDED = ["--leader-elect", "--shards", "12", ...ARGS];

const fleet = await Fleet.start(remotes);
const replicas = new Replicas(fleet);
const client = localAdminClient(fleet);

/** CPU-seconds of a replica by thread group, read while it runs. */
function replicaCpu(replica: Replica): Record<string, number> {
  const pid = replica.pid;
  if (pid === undefined) return {};
  const out: Record<string, number> = { total: round(processCpuSeconds(pid), 2) };
  for (const [name, seconds] of threadCpuSeconds(pid)) {
    const key = name.startsWith("remote-cluster") ? "actors" : name.startsWith("local-writer") ? "writer" : name;
    if (key === "actors" || key === "writer" || key === "MainThread") out[key] = round((out[key] ?? 0) + seconds, 2);
  }
  return out;
}

async function converge(label: string, names: string[], args: string[], main?: string): Promise<void> {
  const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  const cpuBefore = cpuSplit();
  const spawned = Date.now();
  await Promise.all(names.map((name) => replicas.add(name, { args, entry: "dist", ...(main ? { main } : {}) })));
  let first = 0;
  for (;;) {
    const n = await rightMirrors(client);
    if (n > 0 && first === 0) first = Date.now() - spawned;
    if (n === mirrors) break;
    await sleep(250);
  }
  const total = Date.now() - spawned;
  const cpu = Object.fromEntries(names.map((name) => [name, replicaCpu(replicas.get(name))]));
  const plane = cpuDelta(cpuSplit(), cpuBefore);
  const control = Object.fromEntries(
    Object.entries(plane)
      .filter(([k]) => !k.startsWith("thread:") && !k.startsWith("node") && !k.startsWith("setpriv"))
      .map(([k, v]) => [k, round(v, 1)]),
  );
  process.stdout.write(
    `${JSON.stringify({ label, firstMs: first, totalMs: total, loadBefore: load, loadAfter: readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" "), cpu, control })}\n`,
  );
  for (const name of names) await replicas.get(name).kill();
  await resetLocal(fleet, client);
  await replicas.stop();
}

try {
  await shapeShardedWorld(fleet, remotes, perRemote, services);

  const three = ["fm-0", "fm-1", "fm-2"];
  for (let pair = 0; pair < Number(values.pairs); pair++) {
    await converge("one", ["solo"], ["--leader-elect", ...ARGS]);
    const runs: [string, string | undefined][] = [
      ["three-before", values.before],
      ["three-after", undefined],
    ];
    if (pair % 2 === 1) runs.reverse();
    for (const [label, main] of runs) await converge(label, three, SHARDED, main);
  }
} finally {
  client.close();
  await replicas.stop();
  await fleet.stop();
}
