/**
 * One pre-bundled ESM file per thread entry: `npm run build` (after `tsc`) writes
 * dist/workers/<kind>/entry.js as a single file holding the entry, every module of src/
 * and workers/ it imports, and the npm packages it uses (pino, valibot, eventemitter3),
 * over the per-module file tsc wrote there. The `run` command's main-thread graph is
 * bundled the same way (`bundleRunCommand`, below), and so are the other commands
 * (`bundleCommands`). `src/supervisor/worker-entry.ts` resolves the same path either way,
 * so nothing else changes; tests that run the entries from the TypeScript sources keep
 * the module graph.
 *
 * With every module src/main.ts loads either in its own small static graph (which imports
 * no package) or in a bundle, dist/ needs no node_modules at run time: the image ships
 * none (test/unit/dist-graph.test.ts walks dist/src/main.js's graph to prove it).
 *
 * Why: a thread that loads ~100 modules one by one resolves, reads, compiles and links
 * each (and keeps a module record per file); one file is read and compiled once. Measured
 * in bench/HISTORY.md (cheaper threads).
 *
 * The bundle imports nothing at run time but Node's built-in modules (test/unit/thread-bundles.test.ts
 * checks it). CommonJS packages inside it (pino) call `require` for built-ins, which an
 * ES module does not have: the banner makes one with `createRequire`.
 *
 *   node scripts/bundle-entries.ts [outdir=dist]
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { type BuildOptions, build, type Metafile, type Plugin } from "esbuild";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The thread entries, relative to the repository root; the bundles keep these paths under `outdir`. */
export const THREAD_ENTRIES = ["workers/remote-cluster/entry.ts", "workers/local-writer/entry.ts"] as const;

/**
 * The `run` command's module graph (the controller's main thread), bundled over the file
 * tsc wrote for it: src/main.ts loads it with `import()` when the command is `run`, so
 * the other commands and the usage text stay a small module graph, and `run` reads and
 * compiles one file instead of ≈ 200 (measured in bench/HISTORY.md).
 * It stays at src/cli/run.js, the depth of src/supervisor/, so the paths it resolves
 * from its own URL (the thread entries, worker-entry.ts) are the same as unbundled.
 */
export const RUN_ENTRY = "src/cli/run.ts";

/**
 * Modules the bundles import from beside them instead of holding a copy: src/main.ts's own
 * static graph. One of them keeps state (signals.ts records the signals received while
 * the command loads) and completion.ts reads the command list main dispatches on, so
 * there must be one instance of each. Every import of them, from any module of a bundle's
 * graph, resolves to the tsc output next to the bundle (all sit in src/cli/).
 */
export const SHARED_WITH_MAIN = [
  "src/cli/signals.ts",
  "src/cli/program.ts",
  "src/cli/commands.ts",
  "src/cli/compile-cache.ts",
] as const;

/**
 * The other modules src/main.ts and commands.ts load with `import()`: every command but
 * `run`, and shell completion. They share one module graph (the CLI helpers and
 * @kubernetes/client-node), so they are bundled together with code splitting: each stays
 * one small file at its tsc path and the code they share sits in chunk files beside them
 * (`COMMAND_CHUNK_PREFIX`), in src/cli/ too, so that paths resolved from a module's own
 * URL (deploy/rbac/, two and three levels up) are the same as unbundled.
 */
export const COMMAND_ENTRIES = [
  "src/cli/link.ts",
  "src/cli/unlink.ts",
  "src/cli/export.ts",
  "src/cli/status.ts",
  "src/cli/check.ts",
  "src/cli/completion-command.ts",
  "src/cli/completion.ts",
] as const;

/** The file name prefix of the commands' shared chunks in src/cli/ (a build removes the previous ones). */
export const COMMAND_CHUNK_PREFIX = "command-chunk-";

const REQUIRE_BANNER =
  "import { createRequire as __fleetMirrorCreateRequire } from 'node:module';\n" +
  "const require = __fleetMirrorCreateRequire(import.meta.url);";

/** What every bundle shares: one ESM file for Node 24, pure ASCII, with its source map. */
const BUNDLE_OPTIONS = {
  absWorkingDir: ROOT,
  outbase: ".",
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node24",
  // Stack traces of the image point into the TypeScript sources (with --enable-source-maps).
  sourcemap: "linked",
  banner: { js: REQUIRE_BANNER },
  // Non-ASCII characters in code as escapes; in the comments esbuild keeps: `asciiOnly`.
  charset: "ascii",
  metafile: true,
  logLevel: "warning",
} as const satisfies BuildOptions;

async function bundle(outdir: string, options: BuildOptions): Promise<Metafile> {
  const { metafile } = await build({ ...BUNDLE_OPTIONS, ...options, outdir });
  if (metafile === undefined) throw new Error("esbuild wrote no metafile");
  for (const file of Object.keys(metafile.outputs)) if (file.endsWith(".js")) asciiOnly(resolve(ROOT, file));
  return metafile;
}

/** Bundles every thread entry into `outdir` (absolute, or relative to the repository root). */
export function bundleEntries(outdir: string): Promise<Metafile> {
  return bundle(outdir, { entryPoints: [...THREAD_ENTRIES] });
}

/** Leaves every import of a SHARED_WITH_MAIN module as an import of its tsc output beside the bundle. */
function sharedWithMain(): Plugin {
  const shared = new Set(SHARED_WITH_MAIN.map((path) => resolve(ROOT, path)));
  return {
    name: "shared-with-main",
    setup(plugin) {
      plugin.onResolve({ filter: /\.ts$/ }, (args) => {
        const path = resolve(args.resolveDir, args.path);
        return shared.has(path) ? { path: `./${basename(path, ".ts")}.js`, external: true } : undefined;
      });
    },
  };
}

/** Bundles the run command into `outdir`/src/cli/run.js, its SHARED_WITH_MAIN modules left as imports. */
export function bundleRunCommand(outdir: string): Promise<Metafile> {
  return bundle(outdir, { entryPoints: [RUN_ENTRY], plugins: [sharedWithMain()] });
}

/**
 * Bundles COMMAND_ENTRIES into `outdir`/src/cli/ (one file each, their shared code in
 * chunks beside them), SHARED_WITH_MAIN left as imports; the chunks of an earlier build
 * are removed first, so dist/ holds only the ones its entries import.
 */
export function bundleCommands(outdir: string): Promise<Metafile> {
  const cli = resolve(ROOT, outdir, "src/cli");
  if (existsSync(cli)) {
    for (const file of readdirSync(cli)) if (file.startsWith(COMMAND_CHUNK_PREFIX)) rmSync(join(cli, file));
  }
  return bundle(outdir, {
    entryPoints: [...COMMAND_ENTRIES],
    splitting: true,
    chunkNames: `src/cli/${COMMAND_CHUNK_PREFIX}[hash]`,
    plugins: [sharedWithMain()],
  });
}

/**
 * Makes a bundle pure ASCII. V8 holds a script's source in memory for as long as its
 * functions live (lazy compilation, stack traces), one byte per character if every
 * character is Latin-1 and two otherwise: one `→` in a comment doubles the source's
 * memory in every thread (≈ 0.15 MB per actor thread; bench/HISTORY.md, the thread
 * floor). With `charset: "ascii"` esbuild escapes every non-ASCII character in code
 * (strings, templates, regular expressions, names); what is left is in the comments it
 * keeps, and each of those UTF-16 units becomes `?`, one unit for one, so the source
 * map's columns stay right.
 */
function asciiOnly(file: string): void {
  const text = readFileSync(file, "utf8");
  const ascii = text.replace(/[\u0080-\uffff]/g, "?");
  if (ascii !== text) writeFileSync(file, ascii);
}

if (import.meta.main) {
  const outdir = process.argv[2] ?? "dist";
  const metafiles = [await bundleEntries(outdir), await bundleRunCommand(outdir), await bundleCommands(outdir)];
  for (const [file, output] of metafiles.flatMap((metafile) => Object.entries(metafile.outputs))) {
    if (file.endsWith(".js")) process.stdout.write(`${file}: ${Math.round(output.bytes / 1024)} kB\n`);
  }
}
