/**
 * V8's compile cache for this process and its threads. Node keeps the code V8 compiled
 * for each module in a directory and reuses it while the module is unchanged, so a start
 * after the first skips most compiling: `run` loads ~1 450 modules on the main thread
 * (mostly @kubernetes/client-node), and every actor thread its bundled entry (measured in
 * bench/HISTORY.md, cheaper threads).
 *
 * The directory is Node's: `NODE_COMPILE_CACHE` when set, else `<tmpdir>/node-compile-cache`
 * (in the Deployment, /tmp is an emptyDir: the first start of a Pod fills it, restarts of
 * the container reuse it). `NODE_DISABLE_COMPILE_CACHE=1` turns it off. Worker threads
 * inherit the process's environment when they are created, so setting
 * `NODE_COMPILE_CACHE` here enables it in every thread started afterwards.
 *
 * A cache that cannot be enabled (no writable directory) only makes starts slower: one
 * line on stderr says so, and the command runs.
 */
import { constants, enableCompileCache } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";

export function enableThreadCompileCache(): void {
  // Node's own default, named here because threads inherit the variable, not the call.
  // (Not `result.directory`: that is the versioned subdirectory Node adds to this one.)
  const directory = process.env["NODE_COMPILE_CACHE"] || join(tmpdir(), "node-compile-cache");
  const result = enableCompileCache(directory);
  if (result.status === constants.compileCacheStatus.FAILED) {
    process.stderr.write(
      `fleet-mirror: V8 compile cache off (${result.message ?? "unknown reason"}); starting takes more CPU\n`,
    );
    return;
  }
  if (result.status !== constants.compileCacheStatus.DISABLED) process.env["NODE_COMPILE_CACHE"] = directory;
}
