/**
 * `fleet-mirror completion bash|zsh`: prints a script that makes the shell complete
 * fleet-mirror's commands and flags. The scripts hold no list of their own: at each
 * TAB they ask the program (`fleet-mirror __complete ...`, completion.ts), so they
 * offer what the installed program takes. kubectl completes `kubectl fleet-mirror`
 * through `kubectl_complete-fleet_mirror` (program.ts) without any script.
 */
import { type CommandDefinition, commandHelp, type FlagSpecs, runCli, UsageError, writeOut } from "./common.ts";
import { DIRECTIVE_ERROR, DIRECTIVE_NO_FILE_COMPLETION } from "./completion-directives.ts";

export const SHELLS = ["bash", "zsh"] as const;
type Shell = (typeof SHELLS)[number];

export const completionFlags = {} as const satisfies FlagSpecs;

const NO_SPACE = 2;

/** bash ≥ 4 (mapfile, negative indices). The line is split on blanks: quotes are not interpreted. */
export function bashScript(): string {
  return `# bash completion for fleet-mirror, printed by \`fleet-mirror completion bash\`.
#   this shell:   source <(fleet-mirror completion bash)
#   every shell:  fleet-mirror completion bash > /etc/bash_completion.d/fleet-mirror
# The candidates come from the program at each TAB (fleet-mirror __complete ARGS... WORD).
_fleet_mirror() {
  local line="\${COMP_LINE:0:COMP_POINT}" out directive candidate
  local -a words lines
  read -r -a words <<< "$line"
  # After a blank, a new word is being typed.
  [[ $line =~ [[:space:]]$ ]] && words+=("")
  (( \${#words[@]} > 1 )) || words+=("")
  out=$("\${words[0]}" __complete "\${words[@]:1}" 2>/dev/null) || return 0
  mapfile -t lines <<< "$out"
  directive=\${lines[-1]#:}
  unset 'lines[-1]'
  [[ $directive =~ ^[0-9]+$ ]] || directive=0
  COMPREPLY=()
  (( directive & ${DIRECTIVE_ERROR} )) && return 0
  (( directive & ${NO_SPACE} )) && compopt -o nospace 2>/dev/null
  (( directive & ${DIRECTIVE_NO_FILE_COMPLETION} )) && compopt +o default 2>/dev/null
  for candidate in "\${lines[@]}"; do
    [[ -n $candidate ]] && COMPREPLY+=("\${candidate%%$'\\t'*}")
  done
  return 0
}
complete -o default -F _fleet_mirror fleet-mirror
`;
}

/** zsh with compinit; candidates are shown with their descriptions. */
export function zshScript(): string {
  return `#compdef fleet-mirror
# zsh completion for fleet-mirror, printed by \`fleet-mirror completion zsh\`.
#   this shell (after compinit):  source <(fleet-mirror completion zsh)
#   every shell:                  fleet-mirror completion zsh > "\${fpath[1]}/_fleet-mirror"
# The candidates come from the program at each TAB (fleet-mirror __complete ARGS... WORD).
_fleet-mirror() {
  local out directive line
  local -a lines candidates options
  out=$("\${words[1]}" __complete "\${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
  lines=("\${(@f)out}")
  directive=\${lines[-1]#:}
  lines=("\${(@)lines[1,-2]}")
  [[ $directive == <-> ]] || directive=0
  (( directive & ${DIRECTIVE_ERROR} )) && return 1
  for line in "\${lines[@]}"; do
    [[ -z $line ]] && continue
    if [[ $line == *$'\\t'* ]]; then
      candidates+=("\${\${line%%$'\\t'*}//:/\\\\:}:\${line#*$'\\t'}")
    else
      candidates+=("\${line//:/\\\\:}")
    fi
  done
  (( directive & ${NO_SPACE} )) && options=(-S '')
  if (( \${#candidates} )); then
    _describe -t fleet-mirror fleet-mirror candidates "\${options[@]}"
  elif (( ! (directive & ${DIRECTIVE_NO_FILE_COMPLETION}) )); then
    _files
  fi
}
if [[ "\${funcstack[1]}" == _fleet-mirror ]]; then
  _fleet-mirror "$@"
else
  compdef _fleet-mirror fleet-mirror
fi
`;
}

const help = commandHelp(
  "completion bash|zsh",
  `Prints a completion script for the shell: commands, their flags, file names after
--kubeconfig and the like. Load it with \`source <(fleet-mirror completion bash)\` (zsh:
after compinit), or save it where the shell loads completions from.

kubectl completes \`kubectl fleet-mirror ...\` by itself (kubectl 1.26 and later), through
the kubectl_complete-fleet_mirror executable that the package installs next to
kubectl-fleet_mirror: no script is needed for the plugin.`,
  completionFlags,
);

export const completionDefinition: CommandDefinition = {
  name: "completion",
  help,
  flags: completionFlags,
  maxPositionals: 1,
  async run({ positionals }) {
    const shell = SHELLS.find((s): s is Shell => s === positionals[0]);
    if (shell === undefined)
      throw new UsageError(
        positionals[0] === undefined
          ? `which shell? one of ${SHELLS.join(", ")}`
          : `${JSON.stringify(positionals[0])} is not one of ${SHELLS.join(", ")}`,
      );
    writeOut(shell === "bash" ? bashScript() : zshScript());
    return 0;
  },
};

export function completionCommand(argv: readonly string[]): Promise<number> {
  return runCli(completionDefinition, argv);
}
