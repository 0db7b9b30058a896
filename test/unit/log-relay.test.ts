import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { Worker } from "node:worker_threads";
import { createLogger, relayThreadOutput } from "../../src/log.ts";

const dir = mkdtempSync(join(tmpdir(), "fleet-mirror-log-"));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Line {
  readonly actor?: string;
  readonly n?: number;
  readonly msg?: string;
}

/** The file's lines, parsed; throws on any line that is not whole JSON. */
function readLines(file: string): Line[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .slice(0, -1)
    .map((l) => JSON.parse(l) as Line);
}

async function waitForLines(file: string, count: number): Promise<Line[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const lines = readLines(file);
    if (lines.length >= count) return lines;
    if (Date.now() > deadline) throw new Error(`${file}: ${lines.length} of ${count} lines`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A fixture thread, created the way the supervisor creates actor threads, relayed to `file`. */
function startThread(file: string, name: string, lines: number, end: "return" | "throw" | "exit"): Worker {
  const worker = new Worker(new URL("./fixtures/log-thread.ts", import.meta.url), {
    workerData: { name, lines, end },
    stdout: true,
    stderr: false,
  });
  worker.on("error", () => {}); // the "throw" fixture's exception: expected
  relayThreadOutput(worker, file);
  return worker;
}

/** Resolves when the thread has ended (`once` would reject on the thrown fixture's 'error'). */
const exited = (worker: Worker): Promise<void> => new Promise((resolve) => worker.once("exit", () => resolve()));

const ns = (lines: readonly Line[], actor: string): number[] =>
  lines.filter((l) => l.actor === actor).map((l) => l.n ?? -1);
const range = (count: number): number[] => Array.from({ length: count }, (_, i) => i);

describe("log lines of worker threads", () => {
  for (const end of ["throw", "exit"] as const) {
    it(`reach the destination whole and in order when the thread ends right after logging (${end})`, async () => {
      const file = join(dir, `${end}.log`);
      const worker = startThread(file, "t", 500, end);
      await exited(worker);
      const lines = await waitForLines(file, 500);
      assert.deepEqual(ns(lines, "t"), range(500));
    });
  }

  it("never interleave with each other or with the main thread's lines: one writer of the file", async () => {
    const file = join(dir, "shared.log");
    const main = createLogger("info", { actor: "main" }, file);
    const workers = ["a", "b", "c", "d"].map((name) => startThread(file, name, 400, "return"));
    for (let n = 0; n < 400; n++) main.info({ n }, `line ${n} of main`);
    await Promise.all(workers.map(exited));
    const lines = await waitForLines(file, 2_000); // readLines throws on a split line
    for (const actor of ["main", "a", "b", "c", "d"]) assert.deepEqual(ns(lines, actor), range(400), actor);
  });
});

describe("log lines at process exit", () => {
  it("are written before process.exit(1) ends the process, the last one included", async () => {
    const child = spawn(process.execPath, [new URL("./fixtures/log-exit.ts", import.meta.url).pathname, "300"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let text = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      text += chunk;
    });
    const [code] = (await once(child, "exit")) as [number | null];
    if (!child.stdout.readableEnded) await once(child.stdout, "end");
    assert.equal(code, 1);
    const lines = text
      .split("\n")
      .slice(0, -1)
      .map((l) => JSON.parse(l) as Line);
    assert.deepEqual(
      lines.filter((l) => l.n !== undefined).map((l) => l.n),
      range(300),
    );
    assert.equal(lines.at(-1)?.msg, "leadership lost: exiting");
  });
});
