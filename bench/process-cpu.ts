/**
 * CPU time of another process, from the kernel (/proc/<pid>/stat): user + system time of
 * every thread of the process (not of its children), in seconds.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { round } from "./harness.ts";

/**
 * utime + stime, in clock ticks, from the text of /proc/<pid>/stat. The command name
 * (field 2) is in parentheses and may hold spaces and parentheses itself, so fields are
 * counted after its LAST `)`: utime and stime are fields 14 and 15.
 * @throws when the text is not a stat line.
 */
export function statCpuTicks(stat: string): number {
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // rest[0] is field 3 (state): field n is rest[n - 3].
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  if (!stat.includes(")") || !Number.isInteger(utime) || !Number.isInteger(stime))
    throw new Error(`not a /proc/<pid>/stat line: ${JSON.stringify(stat.slice(0, 80))}`);
  return utime + stime;
}

let ticksPerSecond: number | undefined;

/** CPU-seconds process `pid` has used so far. */
export function processCpuSeconds(pid: number): number {
  ticksPerSecond ??= Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  return statCpuTicks(readFileSync(`/proc/${pid}/stat`, "utf8")) / ticksPerSecond;
}

/**
 * CPU-seconds of each live thread of process `pid` so far, summed by thread name (Linux
 * `comm`, cut at 15 characters: `MainThread`, `V8Worker`, a worker thread's `name`...).
 * A thread that exited is no longer counted: the sum may be below processCpuSeconds().
 */
export function threadCpuSeconds(pid: number): Map<string, number> {
  processCpuSeconds(pid); // sets ticksPerSecond
  const byName = new Map<string, number>();
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue; // exited meanwhile
      throw error;
    }
    const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    byName.set(name, (byName.get(name) ?? 0) + statCpuTicks(stat) / (ticksPerSecond ?? 100));
  }
  return byName;
}

/** `name seconds, …` of process `pid`'s `count` busiest thread names so far, the busiest first. */
export function busiestThreads(pid: number, count: number): string {
  return [...threadCpuSeconds(pid)]
    .sort(([, a], [, b]) => b - a)
    .slice(0, count)
    .map(([name, seconds]) => `${name} ${round(seconds, 2)}`)
    .join(", ");
}
