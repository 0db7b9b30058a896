/**
 * The Node flags every `fleet-mirror` process is started with. They cannot be set from
 * inside: the process reads them before any module runs, and every thread it starts
 * inherits them. So they are written where a process is started: the shebang of
 * src/main.ts (an installed `fleet-mirror` bin), the image's ENTRYPOINT (Dockerfile),
 * and the test and bench helpers that spawn `run`; test/unit/process-flags.test.ts keeps
 * the first two equal to this list.
 *
 * `--no-node-snapshot`: every isolate, the main thread's and each worker thread's,
 * bootstraps Node's environment by running its (cached, pre-compiled) internal modules
 * instead of deserialising Node's built-in startup snapshot. A snapshot brings the whole
 * bootstrapped heap into every isolate at once; bootstrapping brings only what runs.
 * Measured (docs/DESIGN.md §8, "The thread floor"): −2.0 MB of RSS per actor thread, the
 * same CPU per thread start, +0.1–0.25 CPU-s once for the main thread's own start. A
 * process started without it works the same and costs more memory per thread.
 */
export const PROCESS_NODE_FLAGS: readonly string[] = Object.freeze(["--no-node-snapshot"]);
