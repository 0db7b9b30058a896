/**
 * Native memory of the packed fleet, side by side (bench/HISTORY.md, native memory
 * per cluster). Not a scenario of bench/run.ts: a probe run by hand.
 *
 *   node bench/probes/native-memory-probe.ts [--clusters 1000] [--runs 6] [--threads 8] \
 *     [--variant name=VAR=value,VAR=value]... [--args "--more flags"]
 *
 * One world (bench/memory.ts's shape: K credentials Secrets, one remote with 10
 * Services), then `fleet-mirror run` from dist/ once per run, the variants in turn (the
 * first run writes the mirrors; the later ones start on the converged world). Per run:
 * RSS at writer idle + 3 s and + 15 s, the peak, /proc/<pid>/smaps_rollup's anonymous
 * memory, CPU-seconds to idle by thread, and the load average. The controller is started
 * as test/helpers/fleet.ts starts it (PROCESS_ENV included); a variant's variables come
 * last: `without=MALLOC_ARENA_MAX=` starts it with glibc's default arenas (an empty value
 * is not a valid count and glibc ignores it). `EXEC_ARGV` is not a variable: its value
 * (space-separated) goes to Node, after the process's own flags: `nomaglev=EXEC_ARGV=--no-maglev`.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Fleet } from "../../test/helpers/fleet.ts";
import { mb, progress, round, shapeRemote, sleep } from "../harness.ts";
import { allSynced, freePort, processRss, waitStatus, writerSettled } from "../memory.ts";
import { busiestThreads, processCpuSeconds } from "../process-cpu.ts";

const WRITE_ARGS = ["--write-qps", "0", "--write-concurrency", "16"];

/** "name=A=1,B=2" → [name, {A: "1", B: "2"}]; "name" alone → no variables. */
function variant(text: string): [string, Record<string, string>] {
  const [name = text, ...rest] = text.split("=");
  const env: Record<string, string> = {};
  const assignments = rest.join("=");
  for (const pair of assignments === "" ? [] : assignments.split(",")) {
    const at = pair.indexOf("=");
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return [name, env];
}

function smapsRollup(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").split("\n")) {
    const m = /^(\w+):\s+(\d+) kB/.exec(line);
    if (m?.[1] && m[2]) out[m[1]] = round(Number(m[2]) / 1024, 1);
  }
  return out;
}

/**
 * Resident memory of the process by kind of mapping, from /proc/<pid>/smaps, in address
 * order: glibc's main arena (`[heap]`), V8's heap pages (256 KB read-write anonymous
 * chunks), read-write anonymous mappings that follow a `---p` one (a thread's stack above
 * its guard page, or an arena heap placed after the previous heap's unused `---p` tail:
 * the two are not told apart here), the rest of the anonymous memory (the first arena
 * heap, V8's large objects), and file-backed mappings by file and permissions.
 */
function smapsByKind(pid: number): string {
  const kinds = new Map<string, number>();
  const lines = readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n");
  let kind = "";
  let previousNone = false;
  for (const line of lines) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const size = (Number.parseInt(head[2] ?? "0", 16) - Number.parseInt(head[1] ?? "0", 16)) / 1024;
      const perms = head[3] ?? "";
      const path = head[4] ?? "";
      if (path === "[heap]") kind = "malloc main arena";
      else if (path.startsWith("[")) kind = path;
      else if (path !== "") kind = `file ${path.split("/").pop() ?? path} ${perms}`;
      else if (perms.startsWith("---")) kind = "reserved";
      else if (size === 256) kind = "anon 256 KB (V8 pages)";
      else if (size < 256) kind = "anon < 256 KB";
      else if (size <= 65536 && size % 4 === 0 && previousNone) kind = "anon after ---p (stack/arena)";
      else kind = `anon other`;
      previousNone = perms.startsWith("---");
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kinds.set(kind, (kinds.get(kind) ?? 0) + Number(rss[1]));
  }
  return [...kinds]
    .sort(([, a], [, b]) => b - a)
    .map(([k, v]) => `${k} ${round(v / 1024, 1)}`)
    .join(", ");
}

const loadavg = (): string => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

async function heaps(admin: string): Promise<string> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const used = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^fleet_mirror_thread_heap_used_bytes\{thread="([^"/]*)[^"]*"\} (\S+)$/.exec(line);
    if (m?.[1] && m[2]) used.set(m[1], (used.get(m[1]) ?? 0) + Number(m[2]));
  }
  return [...used].map(([name, bytes]) => `${name} ${mb(bytes)}`).join(", ");
}

const { values } = parseArgs({
  options: {
    clusters: { type: "string", default: "1000" },
    runs: { type: "string", default: "6" },
    threads: { type: "string", default: "8" },
    variant: { type: "string", multiple: true },
    args: { type: "string", default: "" },
  },
});
const clusters = Number(values.clusters);
const variants = (values.variant ?? ["without=MALLOC_ARENA_MAX=", "with"]).map(variant);
const extra = values.args === "" ? [] : (values.args ?? "").split(" ");

const fleet = await Fleet.start(["remote"]);
try {
  await shapeRemote(fleet, "remote", { services: 10, clusters, gatewayIp: "198.18.0.30" });
  for (let run = 0; run < Number(values.runs); run++) {
    const [name, env] = variants[run % variants.length] ?? ["before", {}];
    const port = await freePort();
    const admin = `http://127.0.0.1:${port}`;
    const started = Date.now();
    const proc = await fleet.startProcess(
      [
        "--log-level",
        "warn",
        "--admin-addr",
        `127.0.0.1:${port}`,
        ...WRITE_ARGS,
        "--max-threads",
        String(values.threads),
        "--endpoints-api",
        "endpointslices",
        ...extra,
      ],
      {
        entry: "dist",
        env: Object.fromEntries(Object.entries(env).filter(([key]) => key !== "EXEC_ARGV")),
        execArgv: env["EXEC_ARGV"]?.split(" ") ?? [],
      },
    );
    try {
      const pid = proc.child.pid ?? 0;
      await waitStatus(proc, admin, `${clusters} synced`, allSynced(clusters));
      const syncedMs = Date.now() - started;
      await waitStatus(proc, admin, "writer idle", writerSettled(clusters));
      const idleMs = Date.now() - started;
      const cpu = round(processCpuSeconds(pid), 2);
      const byThread = busiestThreads(pid, 4);
      const load = loadavg();
      await sleep(3_000);
      const rss3 = mb(processRss(pid).rss);
      const smaps = smapsRollup(pid);
      await sleep(12_000);
      const { rss, peak } = processRss(pid);
      const heap = await heaps(admin);
      const kinds = smapsByKind(pid);
      process.stdout.write(
        `${JSON.stringify({
          run: run + 1,
          variant: name,
          env,
          syncedMs,
          idleMs,
          rss3,
          rss15: mb(rss),
          peak: mb(peak),
          anon: smaps.Anonymous,
          privateDirty: smaps.Private_Dirty,
          cpu,
          byThread,
          heap,
          kinds,
          load,
        })}\n`,
      );
    } finally {
      await proc.stop();
    }
    progress(`run ${run + 1} done`);
  }
} finally {
  await fleet.stop();
}
