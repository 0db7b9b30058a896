/**
 * What `fleet-mirror run` loads on the main thread: never @kubernetes/client-node's
 * index or its generated API (≈ 75 MB of RSS in every Pod, measured in
 * bench/HISTORY.md); kubeconfigs are parsed with its kubeconfig model module alone
 * (src/kube/kubeconfig.ts). Checked in a child process, whose module cache is its own.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, it } from "node:test";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Imports `module` with a hook that records every module loaded, and prints those of client-node. */
function script(module: string): string {
  return `
import { registerHooks } from "node:module";
const loaded = [];
registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
await import(${JSON.stringify(module)});
process.stdout.write(JSON.stringify(loaded.filter((url) => url.includes("/@kubernetes/client-node/"))));
`;
}

async function clientNodeModules(module: string): Promise<string[]> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "--eval", script(module)]);
  return (JSON.parse(stdout) as string[]).map((url) => url.replace(/^.*\/@kubernetes\/client-node\//, ""));
}

describe("run's main-thread footprint", () => {
  it("the run command loads only client-node's kubeconfig model, not its index or generated API", async () => {
    const loaded = await clientNodeModules(new URL("../../src/cli/run.ts", import.meta.url).href);
    assert.deepEqual(loaded, ["dist/config_types.js"]);
  });
});
