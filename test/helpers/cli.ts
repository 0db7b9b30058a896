/**
 * The operator CLI as a user runs it: `fleet-mirror <args>` as a child process from the
 * TypeScript sources, without any ambient kubeconfig (no KUBECONFIG, no POD_NAMESPACE, a
 * HOME without ~/.kube), so each test names every cluster it means.
 */
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";

export const MAIN = new URL("../../src/main.ts", import.meta.url).pathname;

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `fleet-mirror <args>`; resolves with its exit code and output, never rejects. */
export function cli(args: readonly string[]): Promise<CliResult> {
  const env = { ...process.env };
  delete env["KUBECONFIG"];
  delete env["POD_NAMESPACE"];
  env["HOME"] = tmpdir();
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { env, timeout: 120_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** A CLI run's exit code and both outputs, for assertion messages. */
export const show = (r: CliResult): string => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
