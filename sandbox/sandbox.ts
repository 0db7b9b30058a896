/**
 * `fleet-mirror-sandbox sandbox`: starts the local sandbox fleet (one local and two remote
 * API servers on one etcd, and a kube-controller-manager for the local one), prints how to reach each cluster, and runs until Ctrl-C.
 */

import { untilSignal } from "../src/cli/signals.ts";
import { ControlPlane } from "./control-plane.ts";

export const sandboxClusters = ["local", "east", "west"] as const;

/** Where start-up lines go: a stream, or the demo's Screen. */
export interface TextOut {
  write(text: string): unknown;
}

/** Starts the sandbox; `signal` aborts a start in progress (whatever started is stopped, then it rejects). */
export async function startSandbox(out: TextOut, signal?: AbortSignal): Promise<ControlPlane> {
  out.write(
    "Starting the sandbox control plane (etcd + 3 kube-apiservers + kube-controller-manager on 127.0.0.1)...\n",
  );
  const started = Date.now();
  const plane = await ControlPlane.start({
    clusters: sandboxClusters,
    // The local cluster is where fleet-mirror writes: its built-in controllers run, as in a real one.
    controllerManagers: ["local"],
    ...(signal ? { signal } : {}),
  });
  out.write(`Control plane ready in ${((Date.now() - started) / 1000).toFixed(1)} s (working dir ${plane.dir})\n\n`);
  out.write(`${"CLUSTER".padEnd(8)} ${"SERVER".padEnd(26)} KUBECONFIG\n`);
  for (const name of plane.clusterNames) {
    const c = plane.cluster(name);
    out.write(`${name.padEnd(8)} ${c.server.padEnd(26)} ${c.adminKubeconfigPath}\n`);
  }
  out.write(`\nTry: kubectl --kubeconfig ${plane.cluster("local").adminKubeconfigPath} get namespaces\n`);
  return plane;
}

export async function sandboxCommand(): Promise<number> {
  const stop = new AbortController();
  void untilSignal().then(() => stop.abort());
  let plane: ControlPlane;
  try {
    plane = await startSandbox(process.stdout, stop.signal);
  } catch (error) {
    // Ctrl-C during start-up: what started is stopped already; no stack trace.
    if (!stop.signal.aborted) throw error;
    process.stdout.write("Stopped during start-up; nothing left running.\n");
    return 0;
  }
  process.stdout.write("Press Ctrl-C to stop.\n");
  await untilSignal();
  process.stdout.write("Stopping the sandbox...\n");
  await plane.stop();
  return 0;
}
