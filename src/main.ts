#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --no-node-snapshot --optimize-for-size
/** CLI entry: picks a command and runs it; every command returns an exit code. */
// First, and alone among static imports: signals are recorded from here on, while
// the commands' heavy modules load (see cli/signals.ts).
import "./cli/signals.ts";
import { enableThreadCompileCache } from "./cli/compile-cache.ts";

// Before any command's modules load, so they and every thread's entry use the cache.
enableThreadCompileCache();

const usage = `fleet-mirror — mirrors Services from many remote Kubernetes clusters into one local cluster

Usage: fleet-mirror <command> [flags]

Controller:
  run       run the controller against the local cluster (see run --help)

Operating a fleet (docs/CLI.md):
  link      create a read-only identity on a remote cluster; print or --apply its credentials Secret
  unlink    delete a cluster's credentials Secret (its mirrors go); --wait until they are gone
  export    export a remote Service through a gateway (sets the two gateway annotations)
  unexport  stop exporting a remote Service
  status    one row per remote cluster (state, mirrors, last sync, restarts, gateway), one per fleet-wide Service
  check     pre-flight and health checks (✓/✗); exit 1 on any failure

The sandbox fleet and demo (\`npm start\`) are not part of the controller: they live in
sandbox/ of the repository (fleet-mirror-sandbox), outside the image.

  help      show this text

Run \`fleet-mirror <command> --help\` for a command's flags.
`;

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "run":
      return (await import("./cli/run.ts")).runCommand(rest);
    case "link":
      return (await import("./cli/link.ts")).linkCommand(rest);
    case "unlink":
      return (await import("./cli/unlink.ts")).unlinkCommand(rest);
    case "export":
      return (await import("./cli/export.ts")).exportCommand(rest);
    case "unexport":
      return (await import("./cli/export.ts")).unexportCommand(rest);
    case "status":
      return (await import("./cli/status.ts")).statusCommand(rest);
    case "check":
      return (await import("./cli/check.ts")).checkCommand(rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(usage);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`fleet-mirror: unknown command "${command}"\n\n${usage}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`fleet-mirror: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
