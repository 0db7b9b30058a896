/**
 * Where the CPU of a timed run goes: CPU-seconds so far of every process this benchmark
 * started (the sandbox control plane: etcd, the local and remote API servers, the
 * kube-controller-manager) and of this process's threads by name (the in-process
 * supervisor's writer and actor threads, and the main thread with the bench's own
 * client). Two readings subtracted (`cpuDelta`) say which of them a run kept busy.
 */
import { readdirSync, readFileSync } from "node:fs";
import { round } from "./harness.ts";
import { processCpuSeconds, threadCpuSeconds } from "./process-cpu.ts";

/** A process's parent pid and command line, or undefined once it is gone. */
function processInfo(pid: number): { ppid: number; cmdline: string[] } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 4 (ppid) follows the state, after the command name's last `)`.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return { ppid, cmdline };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "ESRCH")
      return undefined;
    throw error;
  }
}

/**
 * A name for a child process: its program's base name, and for an API server which
 * cluster it serves (its `--etcd-prefix`, as the sandbox starts one per cluster).
 */
function childName(cmdline: readonly string[]): string {
  const program = (cmdline[0] ?? "").split("/").pop() ?? "";
  const prefix = cmdline
    .find((a) => a.startsWith("--etcd-prefix="))
    ?.split("/")
    .pop();
  return prefix ? `${program}/${prefix}` : program;
}

/** CPU-seconds so far by process (direct children of this one) and by thread of this process. */
export function cpuSplit(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const info = processInfo(pid);
    if (info?.ppid !== process.pid) continue;
    const name = childName(info.cmdline);
    try {
      out[name] = (out[name] ?? 0) + processCpuSeconds(pid);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
  for (const [name, seconds] of threadCpuSeconds(process.pid)) {
    // Actor threads are named per thread (`remote-cluster/thread-0`): one sum for all of them.
    const key = `thread:${name.startsWith("remote-cluster") ? "remote-cluster" : name}`;
    out[key] = (out[key] ?? 0) + seconds;
  }
  return out;
}

/** `after − before`, rounded to 10 ms, keeping only what used at least that much. */
export function cpuDelta(after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, seconds] of Object.entries(after)) {
    const d = round(seconds - (before[name] ?? 0), 2);
    if (d >= 0.01) out[name] = d;
  }
  return out;
}
