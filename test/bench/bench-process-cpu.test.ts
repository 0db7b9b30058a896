import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { processCpuSeconds, statCpuTicks, threadCpuSeconds } from "../../bench/process-cpu.ts";

describe("statCpuTicks", () => {
  it("adds utime and stime (fields 14 and 15), counted after the command name", () => {
    const stat = "3600 (cat) R 3597 3597 27198 0 -1 4194304 99 0 0 0 17 5 3 2 20 0 1 0 4215775 3133440 383";
    assert.equal(statCpuTicks(stat), 22);
  });

  it("is not misled by spaces and parentheses in the command name", () => {
    const stat = "42 (node (x) y) S 1 42 42 0 -1 4194560 10 0 0 0 1234 567 0 0 20 0 11 0 100 1000 50";
    assert.equal(statCpuTicks(stat), 1801);
  });

  it("throws on text that is not a stat line", () => {
    assert.throws(() => statCpuTicks("no such process"), /not a \/proc\/<pid>\/stat line/);
  });
});

describe("processCpuSeconds", () => {
  it("reads this process's CPU time, which grows while it computes", () => {
    const before = processCpuSeconds(process.pid);
    const until = performance.now() + 100;
    let spin = 0;
    while (performance.now() < until) spin += 1;
    assert.ok(spin > 0);
    assert.ok(processCpuSeconds(process.pid) > before);
  });
});

describe("threadCpuSeconds", () => {
  it("sums this process's CPU by thread name, the main thread's growing while it computes", () => {
    const before = threadCpuSeconds(process.pid).get("MainThread") ?? 0;
    const until = performance.now() + 100;
    while (performance.now() < until);
    const after = threadCpuSeconds(process.pid);
    assert.ok((after.get("MainThread") ?? 0) > before);
    let sum = 0;
    for (const seconds of after.values()) sum += seconds;
    assert.ok(sum <= processCpuSeconds(process.pid) + 0.02, "threads never add up to more than the process");
  });
});
