/**
 * The README's first command, as a user runs it: `npm start` (`sandbox/main.ts demo`) starts its own
 * sandbox fleet; `--script-once` runs the scripted remote changes once and fails
 * unless every change became visible in the local cluster.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, it } from "node:test";

describe("the sandbox demo (npm start)", () => {
  it("mirrors both sandbox remotes and every scripted change, then stops cleanly", async () => {
    const main = new URL("../../sandbox/main.ts", import.meta.url).pathname;
    const child = spawn(process.execPath, [main, "demo", "--script-once"], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
    });
    const [code] = (await once(child, "exit")) as [number | null];
    assert.equal(code, 0, output);
    assert.match(output, /demo script passed: every change was mirrored/);
    assert.match(output, /shop\/web-east\s+east/);
    assert.match(output, /billing\/invoices-west\s+west/);
    assert.doesNotMatch(output, /NOT mirrored/);
  });
});
