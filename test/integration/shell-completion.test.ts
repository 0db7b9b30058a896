/**
 * `fleet-mirror completion bash|zsh` in the real shells: the printed script is sourced,
 * the shell's registration is read back (`complete -p`, zsh's `$_comps`) and the
 * registered function is called as the shell calls it at a TAB, running the program
 * through an installed-style link on PATH. And the candidates agree with what each
 * command's --help lists: completion and the parsers share one list of flags.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { COMMANDS } from "../../src/cli/commands.ts";
import { localFlags } from "../../src/cli/common.ts";
import { binDirectory, type CliResult, cli, cliEnv, runProgram, show } from "../helpers/cli.ts";

function hasShell(name: string): boolean {
  try {
    execFileSync(name, ["-c", "exit 0"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** The script under the shell's usual startup, without the user's rc files; `line` is $1. */
const BASH_TAB = `source <(fleet-mirror completion bash) || exit 3
complete -p fleet-mirror
COMP_LINE=$1; COMP_POINT=\${#COMP_LINE}
read -r -a COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$(( \${#COMP_WORDS[@]} - 1 ))
function=$(complete -p fleet-mirror | sed -n 's/.* -F \\([^ ]*\\) .*/\\1/p')
"$function" fleet-mirror "\${COMP_WORDS[COMP_CWORD]}" "\${COMP_WORDS[COMP_CWORD-1]}"
echo "--- COMPREPLY"
printf '%s\\n' "\${COMPREPLY[@]}"
`;

/** zsh's own completion system (compinit); _describe and _files report what they were given. */
const ZSH_TAB = `autoload -Uz compinit && compinit -u -D || exit 3
source <(fleet-mirror completion zsh) || exit 3
print -r -- "registered \${_comps[fleet-mirror]}"
_describe() { print -r -- "--- _describe"; print -rl -- "\${(@P)4}" }
_files() { print -r -- "--- _files" }
words=(\${(z)1})
[[ $1 == *' ' ]] && words+=("")
CURRENT=\${#words}
_fleet-mirror
`;

describe("shell completion", () => {
  let bin: string;
  const shell = (program: string, args: readonly string[], input?: string): Promise<CliResult> =>
    runProgram(program, args, cliEnv([bin]), input);
  const lines = (text: string, after: string): string[] =>
    text.split(`${after}\n`)[1]?.split("\n").filter(Boolean) ?? [];

  before(() => {
    bin = binDirectory(["fleet-mirror"]);
  });

  after(() => {
    if (bin) rmSync(bin, { recursive: true, force: true });
  });

  describe("bash", () => {
    const tab = (line: string): Promise<CliResult> =>
      shell("bash", ["--norc", "--noprofile", "-c", BASH_TAB, "bash", line]);

    it("registers a completion function for fleet-mirror that falls back to file names", async () => {
      const r = await tab("fleet-mirror ");
      assert.equal(r.code, 0, show(r));
      assert.match(r.stdout, /^complete -o default -F _fleet_mirror fleet-mirror$/m);
      assert.deepEqual(lines(r.stdout, "--- COMPREPLY"), [...Object.keys(COMMANDS), "help"]);
    });

    it("completes a partial command, a partial flag of that command, and a positional's choices", async () => {
      assert.deepEqual(lines((await tab("fleet-mirror st")).stdout, "--- COMPREPLY"), ["status"]);
      assert.deepEqual(lines((await tab("fleet-mirror status --kube")).stdout, "--- COMPREPLY"), ["--kubeconfig"]);
      assert.deepEqual(lines((await tab("fleet-mirror link --cluster-name east --remote-c")).stdout, "--- COMPREPLY"), [
        "--remote-context",
      ]);
      assert.deepEqual(lines((await tab("fleet-mirror completion ")).stdout, "--- COMPREPLY"), ["bash", "zsh"]);
      assert.deepEqual(lines((await tab("fleet-mirror status --context ")).stdout, "--- COMPREPLY"), []);
    });
  });

  describe("zsh", () => {
    const tab = (line: string): Promise<CliResult> => shell("zsh", ["-f", "-c", ZSH_TAB, "zsh", line]);
    // Each test says so when zsh is missing: a skipped test is listed and counted.
    const noZsh = hasShell("zsh") ? undefined : "zsh is not installed";

    it("prints a script zsh parses", async (t) => {
      if (noZsh) return t.skip(noZsh);
      const script = await cli(["completion", "zsh"]);
      assert.equal(script.code, 0, show(script));
      const r = await shell("zsh", ["-f", "-n"], script.stdout);
      assert.equal(r.code, 0, show(r));
    });

    it("registers _fleet-mirror with compdef and offers commands and flags with their descriptions", async (t) => {
      if (noZsh) return t.skip(noZsh);
      const first = await tab("fleet-mirror st");
      assert.equal(first.code, 0, show(first));
      assert.match(first.stdout, /^registered _fleet-mirror$/m, show(first));
      assert.deepEqual(lines(first.stdout, "--- _describe"), [`status:${COMMANDS["status"]?.summary}`]);
      const flag = await tab("fleet-mirror status --kube");
      assert.deepEqual(lines(flag.stdout, "--- _describe"), [`--kubeconfig:${localFlags.kubeconfig.description}`]);
      const file = await tab("fleet-mirror status --kubeconfig ");
      assert.match(file.stdout, /^--- _files$/m, show(file));
    });
  });

  it("offers for each command exactly the flags its --help lists", async () => {
    for (const name of Object.keys(COMMANDS)) {
      const help = await cli([name, "--help"]);
      assert.equal(help.code, 0, show(help));
      const listed = [...(help.stdout.split("\nFlags:\n")[1] ?? "").matchAll(/^ {2}(?:-\w, | {4})(--[\w-]+)/gm)].map(
        (m) => m[1],
      );
      const offered = (await cli(["__complete", name, "--"])).stdout
        .split("\n")
        .filter((l) => l.startsWith("--"))
        .map((l) => l.split("\t")[0]);
      assert.ok(listed.length > 0, `${name}: no flags in --help`);
      assert.deepEqual(offered.toSorted(), listed.toSorted(), name);
    }
  });
});
