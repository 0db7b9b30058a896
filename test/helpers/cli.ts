/**
 * The operator CLI as a user runs it: `fleet-mirror <args>` as a child process from the
 * TypeScript sources, without any ambient kubeconfig (no KUBECONFIG, no POD_NAMESPACE, a
 * HOME without ~/.kube), so each test names every cluster it means.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";

export const MAIN = new URL("../../src/main.ts", import.meta.url).pathname;

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment of a CLI run: no ambient kubeconfig, and `pathDirs` then this test's
 * Node first on PATH (an installed bin's shebang runs `node`).
 */
export function cliEnv(pathDirs: readonly string[] = []): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env["KUBECONFIG"];
  delete env["POD_NAMESPACE"];
  env["HOME"] = tmpdir();
  env["PATH"] = [...pathDirs, dirname(process.execPath), env["PATH"] ?? ""].join(delimiter);
  return env;
}

/**
 * A new directory of links to src/main.ts named `names` (`fleet-mirror`,
 * `kubectl-fleet_mirror`, ...), as npm links an installed package's bins.
 */
export function binDirectory(names: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "fleet-mirror-bin-"));
  for (const name of names) symlinkSync(MAIN, join(dir, name));
  return dir;
}

/** Runs `program args` (stdin: `input`); resolves with its exit code and output, never rejects. */
export function runProgram(
  program: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  input = "",
): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(program, args, { env, timeout: 120_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
    child.stdin?.end(input);
  });
}

/** Runs `fleet-mirror <args>`; resolves with its exit code and output, never rejects. */
export function cli(args: readonly string[]): Promise<CliResult> {
  return runProgram(process.execPath, [MAIN, ...args], cliEnv());
}

/** A CLI run's exit code and both outputs, for assertion messages. */
export const show = (r: CliResult): string => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
