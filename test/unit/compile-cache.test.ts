/**
 * The compile cache (src/cli/compile-cache.ts), in a child process each (it is
 * process-wide): threads started after it is enabled use the same directory, and a
 * directory that cannot be used is reported on stderr without stopping the command.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { promisify } from "node:util";

const run = promisify(execFile);
const MODULE = new URL("../../src/cli/compile-cache.ts", import.meta.url).href;

/** Enables the cache, then prints the main thread's and a new worker thread's cache directory. */
const SCRIPT = `
import { getCompileCacheDir } from "node:module";
import { Worker } from "node:worker_threads";
const { enableThreadCompileCache } = await import(${JSON.stringify(MODULE)});
enableThreadCompileCache();
const worker = new Worker(
  new URL("data:text/javascript,import { parentPort } from 'node:worker_threads'; import { getCompileCacheDir } from 'node:module'; parentPort.postMessage(getCompileCacheDir() ?? null);"),
);
const threadDir = await new Promise((resolve) => worker.once("message", resolve));
process.stdout.write(JSON.stringify({ main: getCompileCacheDir() ?? null, thread: threadDir }));
`;

async function child(env: Record<string, string>): Promise<{ stdout: string; stderr: string }> {
  const { NODE_COMPILE_CACHE: _cache, NODE_DISABLE_COMPILE_CACHE: _disabled, ...inherited } = process.env;
  return run(process.execPath, ["--input-type=module", "--eval", SCRIPT], { env: { ...inherited, ...env } });
}

describe("compile cache", () => {
  const dir = mkdtempSync(join(tmpdir(), "fleet-mirror-compile-cache-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("is enabled in the main thread and in every thread started afterwards, in one directory (Node's default)", async () => {
    // No NODE_COMPILE_CACHE given: Node's default under the temporary directory, which
    // threads only find through the variable the module sets.
    const temporary = join(dir, "tmp");
    mkdirSync(temporary);
    const { stdout, stderr } = await child({ TMPDIR: temporary });
    const dirs = JSON.parse(stdout) as { main: string | null; thread: string | null };
    assert.equal(stderr, "");
    assert.ok(dirs.main?.startsWith(join(temporary, "node-compile-cache")), stdout);
    assert.equal(dirs.thread, dirs.main);
    assert.ok(readdirSync(dirs.main ?? "").length > 0, "the cache directory was written");
  });

  it("uses the directory NODE_COMPILE_CACHE names, in every thread", async () => {
    const cache = join(dir, "cache");
    const { stdout } = await child({ NODE_COMPILE_CACHE: cache });
    const dirs = JSON.parse(stdout) as { main: string | null; thread: string | null };
    assert.ok(dirs.main?.startsWith(cache), stdout);
    assert.equal(dirs.thread, dirs.main);
  });

  it("reports a directory it cannot use with one line on stderr, and the process goes on", async () => {
    const file = join(dir, "not-a-directory");
    writeFileSync(file, "");
    const { stdout, stderr } = await child({ NODE_COMPILE_CACHE: join(file, "cache") });
    assert.match(stderr, /^fleet-mirror: V8 compile cache off \(.+\); starting takes more CPU\n$/);
    assert.deepEqual(JSON.parse(stdout), { main: null, thread: null });
  });
});
