/**
 * The Node flags and environment of a `fleet-mirror` process (src/cli/process-flags.ts)
 * are written where a process is started; these tests keep those places equal to the
 * lists and check that this Node accepts the flags for the whole process, threads included.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { promisify } from "node:util";
import { PROCESS_ENV, PROCESS_NODE_FLAGS } from "../../src/cli/process-flags.ts";

const run = promisify(execFile);
const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

describe("process flags", () => {
  it("are the flags of the shebang of src/main.ts (an installed fleet-mirror bin)", () => {
    const shebang = read("src/main.ts").split("\n", 1)[0];
    const assignments = Object.entries(PROCESS_ENV).map(([name, value]) => `${name}=${value} `);
    assert.equal(shebang, `#!/usr/bin/env -S ${assignments.join("")}node ${PROCESS_NODE_FLAGS.join(" ")}`);
  });

  it("are the environment of the image (ENV)", () => {
    const env = new Map<string, string>();
    for (const m of read("Dockerfile").matchAll(/^ENV (\w+)=(\S+)$/gm)) env.set(m[1] ?? "", m[2] ?? "");
    for (const [name, value] of Object.entries(PROCESS_ENV)) assert.equal(env.get(name), value, `ENV ${name}`);
  });

  it("are the flags of the image's ENTRYPOINT, before the script", () => {
    const entrypoint = /^ENTRYPOINT (.+)$/m.exec(read("Dockerfile"))?.[1];
    assert.ok(entrypoint, "the Dockerfile has an ENTRYPOINT");
    assert.deepEqual(JSON.parse(entrypoint), ["node", ...PROCESS_NODE_FLAGS, "dist/src/main.js"]);
  });

  it("start a process whose worker threads start and answer", async () => {
    const script =
      "const { Worker } = await import('node:worker_threads');" +
      "const w = new Worker(new URL(\"data:text/javascript,import { parentPort } from 'node:worker_threads'; parentPort.postMessage(process.execArgv);\"));" +
      "w.once('message', (m) => { process.stdout.write(JSON.stringify(m)); w.terminate(); });";
    const { stdout } = await run(process.execPath, [...PROCESS_NODE_FLAGS, "--input-type=module", "--eval", script], {
      env: { ...process.env, ...PROCESS_ENV },
    });
    // A worker inherits the process's flags: the snapshot choice is the process's.
    const threadFlags = JSON.parse(stdout) as string[];
    for (const flag of PROCESS_NODE_FLAGS) assert.ok(threadFlags.includes(flag), `${flag} in ${stdout}`);
  });
});
