/**
 * The commands of `fleet-mirror`: the one list that src/main.ts dispatches on, that the
 * top-level usage lists and that shell completion offers (with each command's flags, as
 * its own parser takes them). A command's module loads only when it is used, so
 * starting one command does not load the others.
 */
import type { FlagSpecs } from "./common.ts";

/** A command's module, loaded. */
export interface LoadedCommand {
  /** The flags its parser takes (--help included or not: completion adds it). */
  readonly flags: FlagSpecs;
  /** What completion offers for its first positional argument (none: nothing, not even file names). */
  readonly positionalChoices: readonly string[];
  run(argv: readonly string[]): Promise<number>;
}

export interface CliCommand {
  readonly group: "controller" | "fleet" | "shell";
  /** One line for the usage text and for completion's descriptions. */
  readonly summary: string;
  load(): Promise<LoadedCommand>;
}

export const COMMANDS: Readonly<Record<string, CliCommand>> = {
  run: {
    group: "controller",
    summary: "run the controller against the local cluster (see run --help)",
    async load() {
      const [{ runFlags }, { runCommand }] = await Promise.all([import("../config.ts"), import("./run.ts")]);
      return { flags: runFlags, positionalChoices: [], run: runCommand };
    },
  },
  link: {
    group: "fleet",
    summary: "create a read-only identity on a remote cluster; print or --apply its credentials Secret",
    async load() {
      const { linkDefinition, linkCommand } = await import("./link.ts");
      return { flags: linkDefinition.flags, positionalChoices: [], run: linkCommand };
    },
  },
  unlink: {
    group: "fleet",
    summary: "delete a cluster's credentials Secret (its mirrors go); --wait until they are gone",
    async load() {
      const { unlinkDefinition, unlinkCommand } = await import("./unlink.ts");
      return { flags: unlinkDefinition.flags, positionalChoices: [], run: unlinkCommand };
    },
  },
  export: {
    group: "fleet",
    summary: "export a remote Service through a gateway (sets the two gateway annotations)",
    async load() {
      const { exportDefinition, exportCommand } = await import("./export.ts");
      return { flags: exportDefinition.flags, positionalChoices: [], run: exportCommand };
    },
  },
  unexport: {
    group: "fleet",
    summary: "stop exporting a remote Service",
    async load() {
      const { unexportDefinition, unexportCommand } = await import("./export.ts");
      return { flags: unexportDefinition.flags, positionalChoices: [], run: unexportCommand };
    },
  },
  status: {
    group: "fleet",
    summary: "one row per remote cluster (state, mirrors, last sync, restarts, gateway), one per fleet-wide Service",
    async load() {
      const { statusDefinition, statusCommand } = await import("./status.ts");
      return { flags: statusDefinition.flags, positionalChoices: [], run: statusCommand };
    },
  },
  check: {
    group: "fleet",
    summary: "pre-flight and health checks (✓/✗); exit 1 on any failure",
    async load() {
      const { checkDefinition, checkCommand } = await import("./check.ts");
      return { flags: checkDefinition.flags, positionalChoices: [], run: checkCommand };
    },
  },
  completion: {
    group: "shell",
    summary: "print a bash or zsh completion script (completion bash|zsh)",
    async load() {
      const { completionFlags, completionCommand, SHELLS } = await import("./completion-command.ts");
      return { flags: completionFlags, positionalChoices: SHELLS, run: completionCommand };
    },
  },
};

/** The command of `name`, own keys only (`toString` is no command). */
export function commandNamed(name: string): CliCommand | undefined {
  return Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
}
