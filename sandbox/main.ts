#!/usr/bin/env node
/**
 * Entry of the sandbox tools: `demo` (what `npm start` runs) and `sandbox` (the control
 * plane alone). Test and demo infrastructure: the controller (src/main.ts) never imports
 * anything under sandbox/, and the production image does not ship it.
 */
// First, and alone among static imports: signals are recorded from here on (see cli/signals.ts).
import "../src/cli/signals.ts";

const usage = `fleet-mirror-sandbox — a local sandbox fleet for trying fleet-mirror

Usage: fleet-mirror-sandbox <command> [flags]

  demo      start a local sandbox fleet and mirror it (what \`npm start\` runs)
  sandbox   start the sandbox control plane only and print its clusters
  help      show this text
`;

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case "demo":
      return (await import("./demo.ts")).demoCommand(rest);
    case "sandbox":
      if (rest.includes("--help") || rest.includes("-h")) {
        process.stdout.write(
          "Usage: fleet-mirror-sandbox sandbox\n\nStarts etcd and three kube-apiservers (local, east, west) on 127.0.0.1 and runs until Ctrl-C.\n",
        );
        return 0;
      }
      return (await import("./sandbox.ts")).sandboxCommand();
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(usage);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`fleet-mirror-sandbox: unknown command "${command}"\n\n${usage}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `fleet-mirror-sandbox: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
