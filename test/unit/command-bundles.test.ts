/**
 * The bundled commands (`npm run build`, scripts/bundle-entries.ts) and what that buys the
 * image: every module src/main.ts can load is either in main's own small static graph,
 * which imports nothing but Node's built-in modules, or in a bundle that imports nothing
 * else (the run command's, the other commands' with their shared chunks), so dist/ runs
 * without node_modules and the image ships none.
 *
 * The bundles are written to a temporary directory outside the repository with main's
 * graph beside them (its TypeScript stripped to JavaScript, as tsc would emit it), where
 * no node_modules can be found; every command then prints its help from there.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isBuiltin, stripTypeScriptTypes } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { Metafile } from "esbuild";
import {
  bundleCommands,
  bundleRunCommand,
  COMMAND_CHUNK_PREFIX,
  COMMAND_ENTRIES,
  RUN_ENTRY,
  SHARED_WITH_MAIN,
} from "../../scripts/bundle-entries.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const run = promisify(execFile);
const MAIN = "src/main.ts";
/**
 * Packages the bundled code asks for with `require` inside try/catch and does without:
 * ws's optional native add-ons and debug's colour detection. Not installed, so left
 * external; at run time the require fails and the package takes its fallback.
 */
const OPTIONAL_REQUIRES: ReadonlySet<string> = new Set(["bufferutil", "utf-8-validate", "supports-color"]);

/** The relative modules a source file imports statically (type-only imports left out) and with `import()`. */
function importsOf(path: string): { readonly static: string[]; readonly dynamic: string[]; readonly bare: string[] } {
  const source = readFileSync(resolve(ROOT, path), "utf8");
  const local = (specifier: string) => join(dirname(path), specifier);
  const staticImports = [...source.matchAll(/^import (?!type )(?:[^"']*? from )?["']([^"']+)["'];$/gm)].map(
    (m) => m[1] ?? "",
  );
  const dynamicImports = [...source.matchAll(/import\(["']([^"']+)["']\)/g)].map((m) => m[1] ?? "");
  const all = [...staticImports, ...dynamicImports];
  return {
    static: staticImports.filter((s) => s.startsWith(".")).map(local),
    dynamic: dynamicImports.filter((s) => s.startsWith(".")).map(local),
    bare: all.filter((s) => !s.startsWith(".") && !isBuiltin(s)),
  };
}

/** What tsc writes for a module: its types stripped, its relative `.ts` imports made `.js`. */
function emitted(path: string): string {
  const js = stripTypeScriptTypes(readFileSync(resolve(ROOT, path), "utf8"));
  return js.replace(/(["']\.{1,2}\/[^"']+)\.ts(["'])/g, "$1.js$2");
}

describe("bundled commands: dist/ needs no node_modules", () => {
  let dir = "";
  let commands: Metafile;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "fleet-mirror-command-bundles-"));
    await bundleRunCommand(dir);
    commands = await bundleCommands(dir);
    for (const path of [MAIN, ...SHARED_WITH_MAIN]) {
      const out = join(dir, path.replace(/\.ts$/, ".js"));
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, emitted(path));
    }
    // A package.json as the image's: ES modules.
    writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("src/main.ts's static graph is the shared modules alone, importing only Node's built-in modules", () => {
    const graph = new Set<string>();
    const pending = [MAIN];
    for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
      if (graph.has(path)) continue;
      graph.add(path);
      const imports = importsOf(path);
      assert.deepEqual(imports.bare, [], `${path} imports a package`);
      pending.push(...imports.static);
    }
    graph.delete(MAIN);
    assert.deepEqual([...graph].sort(), [...SHARED_WITH_MAIN].sort());
  });

  it("every module main.ts and commands.ts load with import() is the run bundle or a command bundle", () => {
    const loaded = [MAIN, "src/cli/commands.ts"].flatMap((path) => importsOf(path).dynamic);
    assert.deepEqual([...new Set(loaded)].sort(), [RUN_ENTRY, ...COMMAND_ENTRIES].sort());
  });

  it("the command bundles and their chunks import only Node's built-in modules and main's graph, from src/cli/", () => {
    const outputs = Object.entries(commands.outputs).filter(([file]) => file.endsWith(".js"));
    const shared = new Set(SHARED_WITH_MAIN.map((path) => `./${path.split("/").pop()?.replace(/\.ts$/, ".js")}`));
    for (const [file, output] of outputs) {
      assert.ok(file.includes("/src/cli/"), `${file} sits in src/cli/`);
      const external = output.imports.filter((i) => i.external).map((i) => i.path);
      assert.deepEqual(
        external.filter((path) => !isBuiltin(path) && !shared.has(path) && !OPTIONAL_REQUIRES.has(path)),
        [],
        `${file} imports at run time`,
      );
      const source = readFileSync(resolve(ROOT, file), "utf8");
      assert.equal(/[^\x20-\x7e\n\t]/.exec(source)?.[0], undefined, `${file} is ASCII`);
    }
    const chunks = outputs.filter(([file]) => file.split("/").pop()?.startsWith(COMMAND_CHUNK_PREFIX));
    const holdsClient = chunks.filter(([, output]) =>
      Object.keys(output.inputs).some((input) => input.startsWith("node_modules/@kubernetes/client-node/")),
    );
    assert.equal(holdsClient.length, 1, "@kubernetes/client-node is in one shared chunk, not in every command");
  });

  it("every command prints its help from a directory without node_modules", async () => {
    const main = join(dir, "src/main.js");
    for (const command of ["run", "link", "unlink", "export", "unexport", "status", "check", "completion"]) {
      const { stdout } = await run(process.execPath, [main, command, "--help"], { cwd: dir });
      assert.match(stdout, new RegExp(`^Usage: fleet-mirror ${command}\\b`), `${command} --help`);
    }
    const completion = await run(process.execPath, [main, "__complete", "st"], { cwd: dir });
    assert.match(completion.stdout, /^status\t/);
    const script = await run(process.execPath, [main, "completion", "bash"], { cwd: dir });
    assert.match(script.stdout, /bash completion for fleet-mirror/);
  });
});
