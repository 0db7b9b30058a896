#!/usr/bin/env -S MALLOC_ARENA_MAX=2 node --no-node-snapshot --optimize-for-size --no-maglev --invocation-count-for-turbofan=15000
/** CLI entry (also kubectl's plugin, cli/program.ts): picks a command and runs it; every command returns an exit code. */
// First, and alone among static imports: signals are recorded from here on, while
// the commands' heavy modules load (see cli/signals.ts).
import "./cli/signals.ts";
import { type CliCommand, COMMANDS, commandNamed, splitCommandLine } from "./cli/commands.ts";
import { enableThreadCompileCache } from "./cli/compile-cache.ts";
import { INVOCATION, PROGRAM } from "./cli/program.ts";

// Before any command's modules load, so they and every thread's entry use the cache.
enableThreadCompileCache();

const GROUPS: Readonly<Record<CliCommand["group"], string>> = {
  controller: "Controller:",
  fleet: "Operating a fleet (docs/CLI.md):",
  shell: "Shell:",
};

function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const line = (name: string, summary: string): string => `  ${name.padEnd(width)} ${summary}`;
  const groups = Object.entries(GROUPS).map(([group, title]) =>
    [
      title,
      ...Object.entries(COMMANDS)
        .filter(([, command]) => command.group === group)
        .map(([name, command]) => line(name, command.summary)),
    ].join("\n"),
  );
  return `${PROGRAM} — mirrors Services from many remote Kubernetes clusters into one local cluster

Usage: ${PROGRAM} <command> [flags]

${groups.join("\n\n")}

The sandbox fleet and demo (\`npm start\`) are not part of the controller: they live in
sandbox/ of the repository (fleet-mirror-sandbox), outside the image.

${line("help", "show this text")}

Run \`${PROGRAM} <command> --help\` for a command's flags.
`;
}

async function completeCommand(args: readonly string[], descriptions: boolean): Promise<number> {
  return (await import("./cli/completion.ts")).completeCommand(args, descriptions);
}

async function main(argv: readonly string[]): Promise<number> {
  // kubectl asks kubectl_complete-fleet_mirror for the completions of `kubectl fleet-mirror ARGS`.
  if (INVOCATION === "kubectl-plugin-completion") return completeCommand(argv, true);
  if (argv[0] === "__complete" || argv[0] === "__completeNoDesc")
    return completeCommand(argv.slice(1), argv[0] === "__complete");
  const { name: command, args: rest } = splitCommandLine(argv);
  switch (command) {
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(usage());
      return command === undefined ? 2 : 0;
  }
  const found = commandNamed(command);
  if (found === undefined) {
    process.stderr.write(`${PROGRAM}: unknown command "${command}"\n\n${usage()}`);
    return 2;
  }
  return (await found.load()).run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`${PROGRAM}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  },
);
