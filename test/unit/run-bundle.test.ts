/**
 * The bundled `run` command (`npm run build`, scripts/bundle-entries.ts): one file that
 * needs nothing at run time but Node's built-in modules and the two modules it shares
 * with src/main.ts's own graph, imported from beside it (one instance of each: the
 * signals recorded before the command loaded must reach it). Bundled into a temporary
 * directory with those two modules' JavaScript next to it, so a bundle that still
 * imported anything else from src/ or a package would fail to load there.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isBuiltin, stripTypeScriptTypes } from "node:module";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import type { Metafile } from "esbuild";
import { bundleRunCommand, RUN_ENTRY, SHARED_WITH_MAIN } from "../../scripts/bundle-entries.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const run = promisify(execFile);

describe("bundled run command", () => {
  let dir = "";
  let metafile: Metafile;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "fleet-mirror-run-bundle-"));
    metafile = await bundleRunCommand(dir);
    // What tsc writes for the shared modules, beside the bundle.
    mkdirSync(join(dir, "src/cli"), { recursive: true });
    for (const path of SHARED_WITH_MAIN) {
      const js = stripTypeScriptTypes(readFileSync(resolve(ROOT, path), "utf8"));
      writeFileSync(join(dir, "src/cli", `${basename(path, ".ts")}.js`), js);
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));
  const bundled = (): string => join(dir, RUN_ENTRY.replace(/\.ts$/, ".js"));

  it("is one file that imports only Node's built-in modules and the modules it shares with main", () => {
    const outputs = Object.entries(metafile.outputs).filter(([file]) => file.endsWith(".js"));
    assert.equal(outputs.length, 1);
    const [file, output] = outputs[0] ?? ["", undefined];
    assert.ok(output);
    const runtime = output.imports.filter((i) => i.external).map((i) => i.path);
    assert.deepEqual(
      [...new Set(runtime.filter((path) => !isBuiltin(path)))].sort(),
      ["./program.js", "./signals.js"],
      `${file} imports at run time`,
    );
    const inputs = Object.keys(output.inputs);
    for (const path of SHARED_WITH_MAIN) assert.equal(inputs.includes(path), false, `${path} is not copied into it`);
    assert.ok(inputs.includes("src/config.ts"), "config.ts is inside it");
    assert.equal(
      inputs.some((i) => i.startsWith("node_modules/@kubernetes/client-node/") && !i.endsWith("config_types.js")),
      false,
      "no client-node module but its kubeconfig model",
    );
    const source = readFileSync(resolve(ROOT, file), "utf8");
    assert.equal(/[^\x20-\x7e\n\t]/.exec(source)?.[0], undefined, `${file} is ASCII`);
  });

  it("loads from its own directory, gives the run flags and prints run --help", async () => {
    const script = `
const m = await import(${JSON.stringify(pathToFileURL(bundled()).href)});
if (!("write-qps" in m.runFlags)) throw new Error("no runFlags");
process.exitCode = await m.runCommand(["--help"]);
`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "--eval", script]);
    assert.match(stdout, /^Usage: \S+ run \[flags\]/);
    assert.match(stdout, /--shards/);
  });
});
