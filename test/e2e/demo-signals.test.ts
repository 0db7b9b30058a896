/**
 * Stopping the demo as a terminal does: Ctrl-C (SIGINT), closing the terminal (SIGHUP) and
 * `kill` (SIGTERM) go to the whole foreground process group, not only to the demo. The
 * demo must then stop its sandbox itself, in order, within seconds, quietly, and leave no
 * etcd, no kube-apiserver, no working directory and no route for its gateway addresses
 * behind; also when the reader of its stdout dies from the same Ctrl-C (`npm start | tee log`).
 */
import assert from "node:assert/strict";
import { type ChildProcessByStdio, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import { describe, it, type TestContext } from "node:test";
import { routeExists } from "../../sandbox/local-addresses.ts";

const MAIN = new URL("../../sandbox/main.ts", import.meta.url).pathname;
/** Start-up of etcd and three API servers on a loaded 2-core machine, then the first sync. */
const TABLE_TIMEOUT_MS = 240_000;
/** Generous on purpose: the demo stops in seconds; this only bounds a hang. */
const STOP_BOUND_MS = 30_000;

interface ProcInfo {
  readonly pid: number;
  readonly ppid: number;
  readonly comm: string;
  readonly state: string;
}

function readProc(pid: number): ProcInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const open = stat.indexOf("(");
    const close = stat.lastIndexOf(")");
    const [state, ppid] = stat.slice(close + 2).split(" ");
    return { pid, ppid: Number(ppid), comm: stat.slice(open + 1, close), state: state ?? "?" };
  } catch {
    return undefined;
  }
}

/** Every live descendant of `root` (children of children included), from /proc. */
function descendants(root: number): ProcInfo[] {
  const all = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((name) => readProc(Number(name)))
    .filter((p): p is ProcInfo => p !== undefined);
  const found: ProcInfo[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all)
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        found.push(p);
        grew = true;
      }
  }
  return found;
}

/** Still running: present, not a zombie, and still the same program (pids are reused). */
function alive(p: ProcInfo): boolean {
  const now = readProc(p.pid);
  return now !== undefined && now.state !== "Z" && now.comm === p.comm;
}

interface Demo {
  readonly child: ChildProcessByStdio<null, Readable, Readable>;
  readonly output: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startDemo(): Demo {
  // Its own process group, as a shell gives a foreground job: the signal goes to the group.
  const child = spawn(process.execPath, [MAIN, "demo"], { stdio: ["ignore", "pipe", "pipe"], detached: true });
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => output, exited };
}

async function waitFor(what: string, check: () => boolean, timeoutMs: number, demo: Demo): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline || demo.child.exitCode !== null)
      assert.fail(`${what} (exit ${demo.child.exitCode}); output:\n${demo.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function stopLikeATerminal(
  t: TestContext,
  signal: NodeJS.Signals,
  options: { readerDies?: boolean } = {},
): Promise<void> {
  const demo = startDemo();
  const pid = demo.child.pid;
  assert.ok(pid !== undefined);
  try {
    await waitFor(
      "the demo shows its table",
      () => /MIRROR \(local namespace\/name\)/.test(demo.output()),
      TABLE_TIMEOUT_MS,
      demo,
    );
    const dir = /working dir (\S+)\)/.exec(demo.output())?.[1];
    assert.ok(dir && existsSync(dir), `sandbox directory from the output: ${dir}`);
    const route = /Gateway addresses (\S+) made local/.exec(demo.output())?.[1];
    assert.ok(route, `the route the demo added, from the output:\n${demo.output()}`);
    assert.equal(await routeExists(route), true, `route ${route} while the demo runs`);
    const children = descendants(pid);
    const names = children.map((p) => p.comm);
    assert.ok(names.includes("etcd"), `etcd among the demo's children: ${names.join(",")}`);
    assert.equal(names.filter((n) => n === "kube-apiserver").length, 3, names.join(","));
    // /proc's comm holds 15 characters: kube-controller-manager shows as "kube-controller".
    assert.ok(
      names.includes("kube-controller"),
      `kube-controller-manager among the demo's children: ${names.join(",")}`,
    );

    const sent = Date.now();
    process.kill(-pid, signal);
    // `| tee log`: the reader of stdout gets the same Ctrl-C and is gone.
    if (options.readerDies) demo.child.stdout.destroy();
    const bound = new Promise<"bound">((resolve) => setTimeout(resolve, STOP_BOUND_MS, "bound").unref());
    const result = await Promise.race([demo.exited, bound]);
    const stoppedMs = Date.now() - sent;
    t.diagnostic(
      `${signal}${options.readerDies ? " (stdout reader gone)" : ""}: demo exited ${stoppedMs} ms after the signal`,
    );
    assert.notEqual(result, "bound", `the demo ended within ${STOP_BOUND_MS} ms; output:\n${demo.output()}`);
    assert.deepEqual(result, { code: 0, signal: null }, demo.output());

    const after = demo.output().slice(demo.output().lastIndexOf("MIRROR (local namespace/name)"));
    const stopLine = /^Stopped .*$/m.exec(after)?.[0];
    if (stopLine) t.diagnostic(stopLine);
    assert.doesNotMatch(after, /TypeError|Error:|\n\s+at /, `quiet stop, no stack trace:\n${after}`);
    // With the stdout reader gone, the line goes to stderr (the terminal).
    assert.match(
      after,
      /^Stopped [\d.]+ s after the signal .*: controller .*removed\.$/m,
      `one line saying it stopped:\n${after}`,
    );
    const leftovers = children.filter(alive);
    assert.deepEqual(
      leftovers.map((p) => `${p.comm}[${p.pid}]`),
      [],
      "no etcd, kube-apiserver or kube-controller-manager outlives the demo",
    );
    assert.equal(existsSync(dir), false, `sandbox directory ${dir} removed`);
    assert.equal(await routeExists(route), false, `route ${route} removed`);
  } finally {
    if (demo.child.exitCode === null && demo.child.signalCode === null) {
      try {
        process.kill(-pid, "SIGKILL");
      } catch {
        // already gone
      }
      await demo.exited;
    }
  }
}

describe("stopping the demo from a terminal", () => {
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    it(`stops quietly within seconds on ${signal} to its process group, leaving no process and no directory behind`, async (t) => {
      await stopLikeATerminal(t, signal);
    });
  }

  it("stops cleanly on SIGINT when the reader of its stdout dies too (npm start | tee log)", async (t) => {
    await stopLikeATerminal(t, "SIGINT", { readerDies: true });
  });
});
