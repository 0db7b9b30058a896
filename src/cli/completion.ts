/**
 * Shell completion's one source of candidates: `fleet-mirror __complete ARGS... WORD`
 * prints what may follow, for the bash and zsh scripts of `completion` and for kubectl,
 * which runs `kubectl_complete-fleet_mirror ARGS... WORD` for `kubectl fleet-mirror`.
 * The commands come from the command list (commands.ts) and the flags from each
 * command's own definition, so completion cannot offer a flag a parser would reject.
 *
 * The output is the protocol of Cobra's `__complete` (which kubectl parses for its
 * plugins): one candidate a line, `value<TAB>description`, then `:<directive>`, whose
 * bits tell the shell what to do besides: 1 error (show nothing), 2 no space after the
 * candidate, 4 no file names when there is no candidate.
 */
import { COMMANDS, commandNamed, LEADING_FLAGS, splitCommandLine } from "./commands.ts";
import type { FlagSpecs } from "./common.ts";
import { DIRECTIVE_DEFAULT, DIRECTIVE_ERROR, DIRECTIVE_NO_FILE_COMPLETION } from "./completion-directives.ts";

export interface Candidate {
  readonly value: string;
  readonly description: string;
}

export interface Completions {
  readonly candidates: readonly Candidate[];
  readonly directive: number;
}

const HELP_FLAG: FlagSpecs = { help: { type: "boolean", short: "h", description: "show this help" } };

const none: Completions = { candidates: [], directive: DIRECTIVE_NO_FILE_COMPLETION };

/** After a flag that takes a value: file names for a file (the shell lists them), else nothing. */
function flagValue(flag: string): Completions {
  return flag.endsWith("kubeconfig") || flag.endsWith("-file")
    ? { candidates: [], directive: DIRECTIVE_DEFAULT }
    : none;
}

/** The flag a word names (`--name` or `-s`, without `=value`), if it is one of `flags`. */
function flagOf(word: string, flags: FlagSpecs): string | undefined {
  if (word.startsWith("--")) return Object.hasOwn(flags, word.slice(2)) ? word.slice(2) : undefined;
  if (word.startsWith("-") && word.length === 2) return Object.keys(flags).find((n) => flags[n]?.short === word[1]);
  return undefined;
}

function matching(candidates: readonly Candidate[], prefix: string): Completions {
  return { candidates: candidates.filter((c) => c.value.startsWith(prefix)), directive: DIRECTIVE_NO_FILE_COMPLETION };
}

function commandCandidates(): Candidate[] {
  return [
    ...Object.entries(COMMANDS).map(([value, command]) => ({ value, description: command.summary })),
    { value: "help", description: "show the usage" },
  ];
}

function flagCandidates(flags: FlagSpecs): Candidate[] {
  return Object.entries(flags).flatMap(([name, flag]) => [
    { value: `--${name}`, description: flag.description },
    ...(flag.short ? [{ value: `-${flag.short}`, description: flag.description }] : []),
  ]);
}

/**
 * What may replace `args`' last word (the one being typed, "" for a new word), given
 * the words before it (the command line after the program's name).
 */
export async function complete(args: readonly string[]): Promise<Completions> {
  const word = args.at(-1) ?? "";
  const { name, args: rest, awaitingValueOf: leadingValueOf } = splitCommandLine(args.slice(0, -1));
  if (leadingValueOf !== undefined) return flagValue(leadingValueOf);
  if (name === undefined)
    return word.startsWith("-")
      ? matching(
          [...LEADING_FLAGS, "--help", "-h"].map((value) => ({ value, description: "" })),
          word,
        )
      : matching(commandCandidates(), word);
  if (name === "help") return rest.length === 0 ? matching(commandCandidates(), word) : none;
  const command = commandNamed(name);
  if (command === undefined) return none;
  const loaded = await command.load();
  const flags: FlagSpecs = { ...loaded.flags, ...HELP_FLAG };
  // The words after the command: which are values of a flag, which are positionals.
  let positionals = 0;
  let awaitingValueOf: string | undefined;
  for (const typed of rest) {
    if (awaitingValueOf !== undefined) {
      awaitingValueOf = undefined;
      continue;
    }
    const flag = flagOf(typed, flags);
    if (flag !== undefined && flags[flag]?.type === "string") awaitingValueOf = flag;
    else if (!typed.startsWith("-")) positionals++;
  }
  if (awaitingValueOf !== undefined) return flagValue(awaitingValueOf);
  if (word.startsWith("-")) return word.includes("=") ? none : matching(flagCandidates(flags), word);
  if (positionals === 0)
    return matching(
      loaded.positionalChoices.map((value) => ({ value, description: "" })),
      word,
    );
  return none;
}

/** Cobra's `__complete` output; without descriptions for `__completeNoDesc`. */
export function formatCompletions(completions: Completions, descriptions = true): string {
  const lines = completions.candidates.map((c) =>
    descriptions && c.description !== "" ? `${c.value}\t${c.description.replace(/\s+/g, " ")}` : c.value,
  );
  return `${[...lines, `:${completions.directive}`].join("\n")}\n`;
}

/** `__complete ARGS... WORD` (and `__completeNoDesc`): never fails, prints `:1` on a problem. */
export async function completeCommand(args: readonly string[], descriptions = true): Promise<number> {
  let completions: Completions;
  try {
    completions = await complete(args.length === 0 ? [""] : args);
  } catch {
    completions = { candidates: [], directive: DIRECTIVE_ERROR };
  }
  process.stdout.write(formatCompletions(completions, descriptions));
  return 0;
}
