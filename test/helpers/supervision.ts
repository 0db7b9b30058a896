/**
 * Waiting on an in-process Supervisor (tests that run it directly, with options
 * `fleet.startInProcess()` does not offer): its status rows and its actor threads.
 */
import type { Worker } from "node:worker_threads";
import type { ClusterRow } from "../../src/status/fleet-view.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE } from "./fleet.ts";
import { eventually } from "./kube.ts";

const TIMEOUT_MS = 60_000;

export function clusterRow(supervisor: Supervisor, cluster: string): ClusterRow | undefined {
  return supervisor.status().clusters.find((c) => c.cluster === cluster);
}

/** Resolves with `cluster`'s status row once `check` holds for it. */
export async function waitForClusterRow(
  supervisor: Supervisor,
  cluster: string,
  what: string,
  check: (row: ClusterRow) => boolean,
  timeoutMs = TIMEOUT_MS,
): Promise<ClusterRow> {
  return eventually(
    () => `cluster ${cluster}: ${what} (now ${JSON.stringify(clusterRow(supervisor, cluster))})`,
    () => {
      const r = clusterRow(supervisor, cluster);
      return r && check(r) ? r : undefined;
    },
    timeoutMs,
    20,
  );
}

/** A thread hosting `cluster`'s actor, other than `previous` when given (a restart). */
export async function waitForActorThread(
  supervisor: Supervisor,
  cluster: string,
  previous?: Worker,
  timeoutMs = TIMEOUT_MS,
): Promise<Worker> {
  return eventually(
    `a ${previous ? "new " : ""}actor thread for ${cluster}`,
    () => {
      const thread = supervisor.actorThread(cluster);
      return thread && thread !== previous ? thread : undefined;
    },
    timeoutMs,
    10,
  );
}

/** The status row of the credentials Secret `secretName` (in the controller's namespace). */
export function secretRow(supervisor: Supervisor, secretName: string): ClusterRow | undefined {
  return supervisor.status().clusters.find((r) => r.secret === `${CONTROLLER_NAMESPACE}/${secretName}`);
}

/** Resolves with the status row of Secret `secretName` once `check` holds for it. */
export async function waitForSecretRow(
  supervisor: Supervisor,
  secretName: string,
  check: (row: ClusterRow) => boolean,
  what: string,
  timeoutMs = TIMEOUT_MS,
): Promise<ClusterRow> {
  return eventually(
    () => `status row of Secret ${secretName} ${what} (now ${JSON.stringify(secretRow(supervisor, secretName))})`,
    () => {
      const row = secretRow(supervisor, secretName);
      return row && check(row) ? row : undefined;
    },
    timeoutMs,
  );
}
