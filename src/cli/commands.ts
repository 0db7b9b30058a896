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

/** A command defined with common.ts's `CommandDefinition`, run by its module's entry. */
function defined(
  definition: { readonly flags: FlagSpecs },
  run: LoadedCommand["run"],
  positionalChoices: readonly string[] = [],
): LoadedCommand {
  return { flags: definition.flags, positionalChoices, run };
}

export const COMMANDS: Readonly<Record<string, CliCommand>> = {
  run: {
    group: "controller",
    summary: "run the controller against the local cluster (see run --help)",
    // One module: from dist/ it is the run bundle, which holds config.ts (a second import
    // of config.ts beside it would load and evaluate its module graph twice).
    load: () => import("./run.ts").then((m) => defined({ flags: m.runFlags }, m.runCommand)),
  },
  link: {
    group: "fleet",
    summary: "create a read-only identity on a remote cluster; print or --apply its credentials Secret",
    load: () => import("./link.ts").then((m) => defined(m.linkDefinition, m.linkCommand)),
  },
  unlink: {
    group: "fleet",
    summary: "delete a cluster's credentials Secret (its mirrors go); --wait until they are gone",
    load: () => import("./unlink.ts").then((m) => defined(m.unlinkDefinition, m.unlinkCommand)),
  },
  export: {
    group: "fleet",
    summary: "export a remote Service through a gateway (sets the two gateway annotations)",
    load: () => import("./export.ts").then((m) => defined(m.exportDefinition, m.exportCommand)),
  },
  unexport: {
    group: "fleet",
    summary: "stop exporting a remote Service",
    load: () => import("./export.ts").then((m) => defined(m.unexportDefinition, m.unexportCommand)),
  },
  status: {
    group: "fleet",
    summary: "one row per remote cluster (state, mirrors, last sync, restarts, gateway), one per fleet-wide Service",
    load: () => import("./status.ts").then((m) => defined(m.statusDefinition, m.statusCommand)),
  },
  check: {
    group: "fleet",
    summary: "pre-flight and health checks (✓/✗); exit 1 on any failure",
    load: () => import("./check.ts").then((m) => defined(m.checkDefinition, m.checkCommand)),
  },
  completion: {
    group: "shell",
    summary: "print a bash or zsh completion script (completion bash|zsh)",
    load: () =>
      import("./completion-command.ts").then((m) => defined(m.completionDefinition, m.completionCommand, m.SHELLS)),
  },
};

/** The command of `name`, own keys only (`toString` is no command). */
export function commandNamed(name: string): CliCommand | undefined {
  return Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
}

/**
 * The local cluster's flags, which may also come before the command (`fleet-mirror
 * --context prod status`, `kubectl fleet-mirror -n ops status`), as kubectl's own global
 * flags and the persistent flags of Cobra CLIs (linkerd, cilium) do. They are handed to
 * the command, whose parser judges them like any other of its flags.
 */
export const LEADING_FLAGS: ReadonlySet<string> = new Set(["--kubeconfig", "--context", "--namespace", "-n"]);

export interface CommandLine {
  /** The command's name: the first word that is not a leading flag or its value. */
  readonly name: string | undefined;
  /** Its arguments: the leading flags first, then the words after the name. */
  readonly args: readonly string[];
  /** A leading flag whose value is missing (the line ends with it). */
  readonly awaitingValueOf?: string;
}

export function splitCommandLine(argv: readonly string[]): CommandLine {
  const leading: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const word = argv[i] ?? "";
    const flag = word.startsWith("--") ? word.split("=", 1)[0] : word;
    if (flag === undefined || !LEADING_FLAGS.has(flag)) break;
    if (flag !== word) {
      leading.push(word);
      continue;
    }
    const value = argv[i + 1];
    if (value === undefined) return { name: undefined, args: leading, awaitingValueOf: flag };
    leading.push(word, value);
    i++;
  }
  return { name: argv[i], args: [...leading, ...argv.slice(i + 1)] };
}
