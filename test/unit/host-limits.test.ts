/**
 * The container's memory limit, read once at start for the default placement: cgroup v2
 * `memory.max`, cgroup v1 `memory.limit_in_bytes`, "max" and v1's huge "no limit",
 * found through /proc/self/cgroup; garbage is reported once and read as no limit,
 * never a crash.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { pino } from "pino";
import type { Logger } from "../../src/log.ts";
import {
  memoryLimitFiles,
  parseLimitInBytes,
  parseMemoryMax,
  readHostLimits,
} from "../../src/supervisor/host-limits.ts";

/** A logger that keeps its lines (as parsed JSON). */
function capturingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

/** A fake file system: path → text. */
const files =
  (entries: Readonly<Record<string, string>>) =>
  (path: string): string | undefined =>
    entries[path];

describe("memory limit parsing", () => {
  it("cgroup v2 memory.max: bytes, or max for no limit", () => {
    assert.deepEqual(parseMemoryMax("536870912\n"), { kind: "bytes", bytes: 536_870_912 });
    assert.deepEqual(parseMemoryMax("max\n"), { kind: "none" });
  });

  it("cgroup v1 memory.limit_in_bytes: bytes; the kernel's huge value is no limit", () => {
    assert.deepEqual(parseLimitInBytes("1073741824\n"), { kind: "bytes", bytes: 1_073_741_824 });
    assert.deepEqual(parseLimitInBytes("9223372036854771712\n"), { kind: "none" });
  });

  it("garbage is named with the file and the text", () => {
    for (const text of ["", "lots", "-1", "1e9", "12 MiB", "0"]) {
      const parsed = parseMemoryMax(text);
      assert.equal(parsed.kind, "garbage", JSON.stringify(text));
      assert.match(parsed.kind === "garbage" ? parsed.problem : "", /^memory\.max: /);
    }
    assert.equal(parseLimitInBytes("max").kind, "garbage", "v1 never says max");
  });

  it("the files come from /proc/self/cgroup: v2's unified path, v1's memory controller, then the roots", () => {
    assert.deepEqual(memoryLimitFiles("0::/kubepods/pod1/c1\n"), [
      "/sys/fs/cgroup/kubepods/pod1/c1/memory.max",
      "/sys/fs/cgroup/memory.max",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]);
    assert.deepEqual(memoryLimitFiles("5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n"), [
      "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
      "/sys/fs/cgroup/memory.max",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]);
    assert.deepEqual(memoryLimitFiles("not a cgroup file"), [
      "/sys/fs/cgroup/memory.max",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]);
  });
});

describe("readHostLimits", () => {
  it("reads the limit of the process's own cgroup (v2) and the CPUs given", () => {
    const { logger, lines } = capturingLogger();
    const read = files({
      "/proc/self/cgroup": "0::/pod\n",
      "/sys/fs/cgroup/pod/memory.max": "268435456\n",
      "/sys/fs/cgroup/memory.max": "max\n",
    });
    assert.deepEqual(readHostLimits(logger, read, 3), { cpus: 3, memoryLimitBytes: 268_435_456 });
    assert.equal(lines.length, 0);
  });

  it("cgroup v1, and no limit when the file says so or no file exists", () => {
    const { logger } = capturingLogger();
    const v1 = files({
      "/proc/self/cgroup": "4:memory:/docker/abc\n",
      "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "536870912\n",
    });
    assert.equal(readHostLimits(logger, v1, 2).memoryLimitBytes, 536_870_912);
    const unlimited = files({
      "/proc/self/cgroup": "4:memory:/\n",
      "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
    });
    assert.equal(readHostLimits(logger, unlimited, 2).memoryLimitBytes, undefined);
    assert.deepEqual(readHostLimits(logger, files({}), 2), { cpus: 2, memoryLimitBytes: undefined });
  });

  it("garbage in the limit file: one warning naming the file and the text, then no limit (never a throw)", () => {
    const { logger, lines } = capturingLogger();
    const read = files({ "/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "a lot\n" });
    assert.deepEqual(readHostLimits(logger, read, 2), { cpus: 2, memoryLimitBytes: undefined });
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.["level"], 40);
    assert.equal(lines[0]?.["file"], "/sys/fs/cgroup/memory.max");
    assert.match(
      String(lines[0]?.["msg"]),
      /memory limit unreadable \(memory\.max: "a lot" is not a number of bytes\)/,
    );
  });

  it("on this machine it answers without throwing", () => {
    const { logger } = capturingLogger();
    const limits = readHostLimits(logger);
    assert.ok(limits.cpus >= 1);
    assert.ok(limits.memoryLimitBytes === undefined || limits.memoryLimitBytes > 0);
  });
});
