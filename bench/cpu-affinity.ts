/**
 * CPU affinity for benchmarks that model the control plane and the controller on
 * different machines (as in a real cluster, where the API servers do not run on the
 * controller's nodes): the control plane's processes go on some CPUs, the controller's on
 * the others, with `taskset` (util-linux), every thread of each process.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

/** Which CPUs each side gets: the first CPU for the control plane, the rest for the controller. */
export interface CpuSplit {
  readonly controlPlane: string;
  readonly controller: string;
  /** Every CPU: what a process pinned to one side is given back. */
  readonly every: string;
}

/** The split, or undefined on a machine with one CPU (nothing to split). */
export function cpuSplit(): CpuSplit | undefined {
  const n = availableParallelism();
  return n < 2 ? undefined : { controlPlane: "0", controller: n === 2 ? "1" : `1-${n - 1}`, every: `0-${n - 1}` };
}

/** The pids of `pid`'s children, grandchildren and so on (from /proc). */
export function descendants(pid: number): number[] {
  const children: number[] = [];
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  for (const task of tasks) {
    let text = "";
    try {
      text = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8");
    } catch {
      // The thread ended between the two reads: it has no children to report.
    }
    for (const child of text.split(" ").filter(Boolean)) children.push(Number(child));
  }
  return children.flatMap((child) => [child, ...descendants(child)]);
}

/** Every thread of each of `pids` may run only on `cpus` (a `taskset` CPU list); threads made later inherit it. */
export function pin(pids: readonly number[], cpus: string): void {
  for (const pid of pids) execFileSync("taskset", ["--all-tasks", "--pid", "--cpu-list", cpus, String(pid)]);
}
