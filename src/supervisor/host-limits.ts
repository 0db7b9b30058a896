/**
 * The host limits the default placement is sized to (default-placement.ts): the CPUs
 * this process may run on and its container's memory limit, read ONCE at start. The
 * parsers are pure; `readHostLimits` is the only I/O, and never throws: a file that is
 * missing means "no limit", a file that does not parse is reported (one warning, with
 * the path and the text) and treated as no limit.
 *
 * Where the limit is: the process's own cgroup, from /proc/self/cgroup —
 * - cgroup v2: the `0::<path>` line → /sys/fs/cgroup<path>/memory.max, a number of
 *   bytes or `max` (no limit);
 * - cgroup v1: the line whose controllers include `memory` →
 *   /sys/fs/cgroup/memory<path>/memory.limit_in_bytes; "no limit" is a huge number
 *   (the page-rounded 2^63 − 1), so anything from 2^60 bytes up is no limit.
 * Inside a container the cgroup namespace makes that path `/`, i.e. the container's own
 * cgroup. Limits of ancestor cgroups are not read (a Pod's limit is on its container).
 */
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import type { Logger } from "../log.ts";
import type { HostLimits } from "./default-placement.ts";

/** A v1 limit at or above this is "no limit" (the kernel writes 2^63 − 1 rounded down to a page). */
const V1_UNLIMITED_BYTES = 2 ** 60;

/** A limit read from one file: bytes, "none" (no limit), or the problem with the text. */
export type ParsedLimit =
  | { readonly kind: "bytes"; readonly bytes: number }
  | { readonly kind: "none" }
  | { readonly kind: "garbage"; readonly problem: string };

/** The text of cgroup v2 `memory.max`: bytes or `max`. */
export function parseMemoryMax(text: string): ParsedLimit {
  const value = text.trim();
  if (value === "max") return { kind: "none" };
  return parseBytes(value, "memory.max");
}

/** The text of cgroup v1 `memory.limit_in_bytes`: bytes; ≥ 2^60 means no limit. */
export function parseLimitInBytes(text: string): ParsedLimit {
  const parsed = parseBytes(text.trim(), "memory.limit_in_bytes");
  return parsed.kind === "bytes" && parsed.bytes >= V1_UNLIMITED_BYTES ? { kind: "none" } : parsed;
}

function parseBytes(value: string, file: string): ParsedLimit {
  if (!/^\d+$/.test(value))
    return { kind: "garbage", problem: `${file}: ${JSON.stringify(value.slice(0, 40))} is not a number of bytes` };
  const bytes = Number(value);
  if (bytes <= 0 || !Number.isSafeInteger(bytes)) {
    if (bytes >= V1_UNLIMITED_BYTES) return { kind: "none" };
    return { kind: "garbage", problem: `${file}: ${value} is not a usable memory limit` };
  }
  return { kind: "bytes", bytes };
}

/** The files that may hold this process's memory limit, most specific first, from /proc/self/cgroup. */
export function memoryLimitFiles(procSelfCgroup: string, root = "/sys/fs/cgroup"): string[] {
  const files: string[] = [];
  for (const line of procSelfCgroup.split("\n")) {
    // hierarchy-ID:controller-list:cgroup-path (the path may itself hold ':')
    const match = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!match) continue;
    const [, id, controllers, path] = match;
    const dir = path === "/" || path === undefined ? "" : path;
    if (id === "0" && controllers === "") files.push(`${root}${dir}/memory.max`);
    else if (controllers?.split(",").includes("memory")) files.push(`${root}/memory${dir}/memory.limit_in_bytes`);
  }
  files.push(`${root}/memory.max`, `${root}/memory/memory.limit_in_bytes`);
  return [...new Set(files)];
}

/** Reads a file; undefined when it does not exist (or cannot be read: no cgroup there). */
function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/**
 * This process's CPUs and memory limit. Never throws: garbage in a limit file is
 * logged once (warn) and read as no limit; a missing file is no limit.
 * @param read a file's text or undefined (tests give a fake file system)
 */
export function readHostLimits(
  logger: Logger,
  read: (path: string) => string | undefined = readOptional,
  cpus: number = availableParallelism(),
): HostLimits {
  for (const file of memoryLimitFiles(read("/proc/self/cgroup") ?? "")) {
    const text = read(file);
    if (text === undefined) continue;
    const parsed = file.endsWith("memory.max") ? parseMemoryMax(text) : parseLimitInBytes(text);
    if (parsed.kind === "bytes") return { cpus, memoryLimitBytes: parsed.bytes };
    if (parsed.kind === "garbage")
      logger.warn(
        { file, problem: parsed.problem },
        `memory limit unreadable (${parsed.problem}): the default placement assumes no memory limit`,
      );
    return { cpus, memoryLimitBytes: undefined };
  }
  return { cpus, memoryLimitBytes: undefined };
}
