/**
 * Shell completion's candidates (src/cli/completion.ts) and the program's names
 * (src/cli/program.ts). The shells and kubectl that consume them are exercised in
 * test/integration/shell-completion.test.ts and test/integration/kubectl-plugin.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { COMMANDS, splitCommandLine } from "../../src/cli/commands.ts";
import { type Completions, complete, formatCompletions } from "../../src/cli/completion.ts";
import { DIRECTIVE_DEFAULT, DIRECTIVE_NO_FILE_COMPLETION } from "../../src/cli/completion-directives.ts";
import { invocationOf } from "../../src/cli/program.ts";

const values = (c: Completions): string[] => c.candidates.map((candidate) => candidate.value);

describe("the program's names", () => {
  it("tells fleet-mirror, kubectl's plugin and its completion executable apart by the script's name", () => {
    assert.equal(invocationOf("/usr/local/bin/fleet-mirror"), "fleet-mirror");
    assert.equal(invocationOf("/work/src/main.ts"), "fleet-mirror");
    assert.equal(invocationOf(undefined), "fleet-mirror");
    assert.equal(invocationOf("/usr/local/bin/kubectl-fleet_mirror"), "kubectl-plugin");
    assert.equal(invocationOf("/usr/local/bin/kubectl_complete-fleet_mirror"), "kubectl-plugin-completion");
    // Only the exact names: a plugin named otherwise is someone else's.
    assert.equal(invocationOf("/usr/local/bin/kubectl-fleet-mirror"), "fleet-mirror");
  });
});

describe("the command line", () => {
  it("takes the local cluster's flags before the command too, and hands them to it first", () => {
    assert.deepEqual(splitCommandLine(["status", "-o", "json"]), { name: "status", args: ["-o", "json"] });
    assert.deepEqual(splitCommandLine(["--context", "prod", "-n", "ops", "status", "-o", "json"]), {
      name: "status",
      args: ["--context", "prod", "-n", "ops", "-o", "json"],
    });
    assert.deepEqual(splitCommandLine(["--kubeconfig=/k", "check"]), { name: "check", args: ["--kubeconfig=/k"] });
    // A value that looks like a command is still the flag's value.
    assert.deepEqual(splitCommandLine(["--context", "status", "link"]), {
      name: "link",
      args: ["--context", "status"],
    });
    assert.deepEqual(splitCommandLine(["--context"]), { name: undefined, args: [], awaitingValueOf: "--context" });
    // Other flags are not the local cluster's: they stay where they are, an unknown command.
    assert.deepEqual(splitCommandLine(["-o", "json", "status"]), { name: "-o", args: ["json", "status"] });
    assert.deepEqual(splitCommandLine([]), { name: undefined, args: [] });
  });
});

describe("completion candidates", () => {
  it("offers the commands for the first word, by prefix, with their summaries", async () => {
    const all = await complete([""]);
    assert.deepEqual(values(all), [...Object.keys(COMMANDS), "help"]);
    assert.equal(all.directive, DIRECTIVE_NO_FILE_COMPLETION);
    const st = await complete(["st"]);
    assert.deepEqual(st.candidates, [{ value: "status", description: COMMANDS["status"]?.summary }]);
    assert.deepEqual(values(await complete(["un"])), ["unlink", "unexport"]);
    assert.deepEqual(values(await complete(["--"])), ["--kubeconfig", "--context", "--namespace", "--help"]);
    assert.deepEqual(values(await complete(["--context", "prod", "st"])), ["status"]);
    assert.deepEqual(values(await complete(["-n", "ops", "status", "--cont"])), ["--context"]);
    assert.deepEqual(await complete(["--kubeconfig", ""]), { candidates: [], directive: DIRECTIVE_DEFAULT });
    assert.deepEqual(await complete(["--context", ""]), { candidates: [], directive: DIRECTIVE_NO_FILE_COMPLETION });
    assert.deepEqual(values(await complete(["nope"])), []);
  });

  it("offers each command's own flags, --help included, and nothing for an unknown command", async () => {
    for (const [name, command] of Object.entries(COMMANDS)) {
      const { flags } = await command.load();
      const offered = values(await complete([name, "--"]));
      const expected = [...new Set([...Object.keys(flags), "help"])].map((flag) => `--${flag}`);
      assert.deepEqual(offered.toSorted(), expected.toSorted(), name);
    }
    assert.deepEqual(values(await complete(["status", "--kube"])), ["--kubeconfig"]);
    assert.deepEqual(
      values(await complete(["status", "-"])).filter((v) => !v.startsWith("--")),
      ["-n", "-o", "-h"],
    );
    assert.deepEqual(await complete(["frobnicate", "--"]), { candidates: [], directive: DIRECTIVE_NO_FILE_COMPLETION });
  });

  it("lets the shell complete file names after a file flag, and nothing after another flag that takes a value", async () => {
    assert.deepEqual(await complete(["status", "--kubeconfig", ""]), { candidates: [], directive: DIRECTIVE_DEFAULT });
    assert.deepEqual(await complete(["link", "--remote-kubeconfig", "/tm"]), {
      candidates: [],
      directive: DIRECTIVE_DEFAULT,
    });
    assert.deepEqual(await complete(["run", "--log-file", ""]), { candidates: [], directive: DIRECTIVE_DEFAULT });
    assert.deepEqual(await complete(["status", "-n", ""]), { candidates: [], directive: DIRECTIVE_NO_FILE_COMPLETION });
    // A boolean flag takes no value: flags come next.
    assert.deepEqual(values(await complete(["link", "--apply", "--wa"])), ["--wait"]);
    // After a flag's value, flags again.
    assert.deepEqual(values(await complete(["status", "--kubeconfig", "k", "--con"])), ["--context"]);
  });

  it("offers the first positional's choices once, and never file names for it", async () => {
    assert.deepEqual(values(await complete(["completion", ""])), ["bash", "zsh"]);
    assert.deepEqual(values(await complete(["completion", "z"])), ["zsh"]);
    assert.deepEqual(await complete(["completion", "bash", ""]), {
      candidates: [],
      directive: DIRECTIVE_NO_FILE_COMPLETION,
    });
    assert.deepEqual(await complete(["export", ""]), { candidates: [], directive: DIRECTIVE_NO_FILE_COMPLETION });
    assert.deepEqual(values(await complete(["help", "ch"])), ["check"]);
  });

  it("prints Cobra's __complete lines: value<TAB>description, then :directive", () => {
    const completions: Completions = {
      candidates: [
        { value: "status", description: "one row\nper cluster" },
        { value: "bash", description: "" },
      ],
      directive: DIRECTIVE_NO_FILE_COMPLETION,
    };
    assert.equal(formatCompletions(completions), "status\tone row per cluster\nbash\n:4\n");
    assert.equal(formatCompletions(completions, false), "status\nbash\n:4\n");
    assert.equal(formatCompletions({ candidates: [], directive: DIRECTIVE_DEFAULT }), ":0\n");
  });
});
