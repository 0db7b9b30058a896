/**
 * The Node flags and the environment every `fleet-mirror` process is started with. They
 * cannot be set from inside: the process reads them before any module runs (glibc's
 * allocator reads its variables when it first allocates), and every thread it starts
 * inherits them. So they are written where a process is started: the shebang of
 * src/main.ts (an installed `fleet-mirror` bin, `env -S VAR=value node flags`), the
 * image's ENV and ENTRYPOINT (Dockerfile), and the test and bench helpers that spawn
 * `run`; test/unit/process-flags.test.ts keeps the first two equal to these lists.
 *
 * `--no-node-snapshot`: every isolate, the main thread's and each worker thread's,
 * bootstraps Node's environment by running its (cached, pre-compiled) internal modules
 * instead of deserialising Node's built-in startup snapshot. A snapshot brings the whole
 * bootstrapped heap into every isolate at once; bootstrapping brings only what runs.
 * Measured (bench/HISTORY.md, the thread floor): −2.0 MB of RSS per actor thread, the
 * same CPU per thread start, +0.1–0.25 CPU-s once for the main thread's own start. A
 * process started without it works the same and costs more memory per thread.
 *
 * `--optimize-for-size`: V8's size-over-speed mode for every isolate (smaller inlining
 * budgets, collection before growth). Measured in a full bench run next to the default
 * (bench/HISTORY.md, `--optimize-for-size`): −2.3 MB per actor thread, packed 1 000
 * clusters 399 MB idle / 410 MB peak against 429 / 593 MB; +20–40 % CPU where nothing
 * holds the writer (10 000 mirrors with no write limit, 200 isolates starting at once),
 * nothing measurable under the default write limit. A process started without it works
 * the same, faster on bursts, with higher peaks.
 *
 * `--no-maglev`: V8 without its mid-tier optimising compiler (functions go from the
 * interpreter and the baseline compiler straight to TurboFan when hot). Maglev's code
 * sits in every isolate's code space and its compiler's own machine code is paged in
 * from the `node` binary; fleet-mirror's hot paths (JSON, HTTP, the writer's compares)
 * are few and reach TurboFan anyway. Measured (bench/HISTORY.md,
 * `--no-maglev`): packed 1 000 clusters on 8 threads −10 to −16 MB of RSS (V8's pages and the
 * binary's resident code), CPU-seconds to idle the same or lower. A process started
 * without it works the same with more memory.
 *
 * `--invocation-count-for-turbofan=15000`: a function is optimised by TurboFan after
 * 15 000 calls instead of 3 000, the delay V8 itself uses in its efficiency mode (work
 * with no latency requirement). A restart or a cold start is a burst of code that runs a
 * few thousand times and then rests; TurboFan compiled much of it on V8's helper threads
 * for nothing. Code that stays hot (the writer's path in a long convergence, a watch's
 * decoding under churn) is optimised a little later. Measured (bench/HISTORY.md,
 * TurboFan's threshold): a 50 × 50 restart −0.2 to −0.3 CPU-s (V8's helper threads
 * 0.55 → 0.30 CPU-s), 40 000 no better. A process started without it works the same.
 */
export const PROCESS_NODE_FLAGS: readonly string[] = Object.freeze([
  "--no-node-snapshot",
  "--optimize-for-size",
  "--no-maglev",
  "--invocation-count-for-turbofan=15000",
]);

/**
 * `MALLOC_ARENA_MAX=2`: glibc's allocator gives each thread that contends for memory an
 * arena of its own, up to 8 per CPU; a packed process has ten threads or more (main,
 * writer, actor threads, V8's and libuv's), and each arena keeps its own free memory,
 * fragmented on its own. Two arenas: threads share free memory. Measured (bench/HISTORY.md,
 * native memory per cluster): packed 1 000 clusters on 8 threads, RSS at idle
 * + 15 s 420.8 MB against 434.1 (means of 3 runs each, alternated; the same at + 3 s),
 * CPU-seconds to idle unchanged, the writer's included. A process started without it
 * (another launcher, `node dist/src/main.js`) works the same and may hold more native
 * memory; an operator's own value in the environment is overridden only where these lists are
 * written (the image's ENV can be overridden by the Pod's `env`).
 */
export const PROCESS_ENV: Readonly<Record<string, string>> = Object.freeze({ MALLOC_ARENA_MAX: "2" });
