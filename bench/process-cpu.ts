/**
 * CPU time of another process, from the kernel (/proc/<pid>/stat): user + system time of
 * every thread of the process (not of its children), in seconds.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

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
