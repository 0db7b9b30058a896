/**
 * One program, three names. The package installs the same entry as `fleet-mirror`, as
 * kubectl's plugin `kubectl-fleet_mirror` (kubectl runs `kubectl fleet-mirror ARGS` as
 * `kubectl-fleet_mirror ARGS`: an `_` in a plugin's file name stands for a `-` of the
 * command) and as `kubectl_complete-fleet_mirror`, the executable kubectl asks for the
 * completions of a plugin's arguments. An installed bin is a link to the entry, so the
 * name it was started by is the basename of the script path Node was given (Node keeps
 * a link's own path in `argv[1]`).
 *
 * Light on purpose: src/main.ts imports it before any command's modules load.
 */
import { basename } from "node:path";

export const PLUGIN_EXECUTABLE = "kubectl-fleet_mirror";
export const PLUGIN_COMPLETION_EXECUTABLE = "kubectl_complete-fleet_mirror";

/** `fleet-mirror` itself; kubectl's plugin; kubectl's plugin-completion executable. */
export type Invocation = "fleet-mirror" | "kubectl-plugin" | "kubectl-plugin-completion";

export function invocationOf(scriptPath: string | undefined): Invocation {
  const name = basename(scriptPath ?? "");
  if (name === PLUGIN_EXECUTABLE) return "kubectl-plugin";
  if (name === PLUGIN_COMPLETION_EXECUTABLE) return "kubectl-plugin-completion";
  return "fleet-mirror";
}

export const INVOCATION: Invocation = invocationOf(process.argv[1]);

/** The command as the operator typed it: what usage, help and error messages name. */
export const PROGRAM = INVOCATION === "fleet-mirror" ? "fleet-mirror" : "kubectl fleet-mirror";
