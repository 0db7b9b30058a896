/**
 * One pre-bundled ESM file per thread entry: `npm run build` (after `tsc`) writes
 * dist/workers/<kind>/entry.js as a single file holding the entry, every module of src/
 * and workers/ it imports, and the npm packages it uses (pino, valibot, eventemitter3),
 * over the per-module file tsc wrote there. `src/supervisor/worker-entry.ts` resolves the
 * same path either way, so nothing else changes; tests that run the entries from the
 * TypeScript sources keep the module graph.
 *
 * Why: a thread that loads ~100 modules one by one resolves, reads, compiles and links
 * each (and keeps a module record per file); one file is read and compiled once. Measured
 * in docs/DESIGN.md §8 ("Cheaper threads").
 *
 * The bundle imports nothing at run time but Node's built-in modules (test/unit/thread-bundles.test.ts
 * checks it). CommonJS packages inside it (pino) call `require` for built-ins, which an
 * ES module does not have: the banner makes one with `createRequire`.
 *
 *   node scripts/bundle-entries.ts [outdir=dist]
 */
import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Metafile } from "esbuild";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The thread entries, relative to the repository root; the bundles keep these paths under `outdir`. */
export const THREAD_ENTRIES = ["workers/remote-cluster/entry.ts", "workers/local-writer/entry.ts"] as const;

const REQUIRE_BANNER =
  "import { createRequire as __fleetMirrorCreateRequire } from 'node:module';\n" +
  "const require = __fleetMirrorCreateRequire(import.meta.url);";

/** Bundles every thread entry into `outdir` (absolute, or relative to the repository root). */
export async function bundleEntries(outdir: string): Promise<Metafile> {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: [...THREAD_ENTRIES],
    outbase: ".",
    outdir,
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
  });
  for (const file of Object.keys(result.metafile.outputs)) if (file.endsWith(".js")) asciiOnly(resolve(ROOT, file));
  return result.metafile;
}

/**
 * Makes a bundle pure ASCII. V8 holds a script's source in memory for as long as its
 * functions live (lazy compilation, stack traces), one byte per character if every
 * character is Latin-1 and two otherwise: one `→` in a comment doubles the source's
 * memory in every thread (≈ 0.15 MB per actor thread; docs/DESIGN.md §8, "The thread
 * floor"). With `charset: "ascii"` esbuild escapes every non-ASCII character in code
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
  const metafile = await bundleEntries(outdir);
  for (const [file, output] of Object.entries(metafile.outputs)) {
    if (file.endsWith(".js")) process.stdout.write(`${file}: ${Math.round(output.bytes / 1024)} kB\n`);
  }
}
