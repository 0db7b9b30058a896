/**
 * Waiting for the controller to have processed everything, instead of sleeping and
 * hoping it has: a test that asserts "nothing was written" must first prove that the
 * change it made was seen, and that the writer has nothing left to do about it.
 *
 * - `waitForWriterIdle`: a writer status published AFTER the call says the writer is
 *   ready, its queue is empty and no write is in flight (an older snapshot proves
 *   nothing: the writer publishes every second, so the latest one may predate the change).
 * - `waitForMarker`: changes a marker Service on a remote and waits until its mirror
 *   carries the marker's new resourceVersion. One watch delivers a remote's Services in
 *   order, so every remote change made before the marker has reached the writer by then.
 * - both, in that order: every earlier change of that remote has been reconciled (a
 *   delayed retry of a blocked key aside, which is not a pending write).
 * - `waitForLocalEcho`: every local write made before the call (the writer's own
 *   included) has come back to the writer through its local watches and been acted on:
 *   what a "no write loop" assertion waits for.
 * - `waitForControllerIdle`: the same idle state for a controller process, read from its
 *   admin endpoint.
 */
import type { V1Endpoints, V1Service } from "@kubernetes/client-node";
import type { AdminStatus } from "../../src/admin/source.ts";
import { REMOTE_RESOURCE_VERSION, REMOTE_SVC_FQ_NAME } from "../../src/core/labels.ts";
import { mirrorName } from "../../src/core/naming.ts";
import type { WriterStatus } from "../../src/protocol/messages.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import type { Fleet } from "./fleet.ts";
import { eventually, statusCode } from "./kube.ts";

const TIMEOUT_MS = 60_000;
/** The namespace of marker Services (and of their mirrors) unless a test gives another. */
export const MARKER_NAMESPACE = "marker";
const MARKER_SERVICE = "marker";
const MARKER_ANNOTATION = "test.fleet-mirror/marker";

/**
 * Resolves with a writer status the supervisor receives after this call in which the writer
 * is ready, has an empty queue and no write in flight. `reports: 2` asks for two such
 * reports in a row: use it when what must have been processed is a message posted to the
 * writer just before the call (the first report may have been made before the writer read
 * it; the second is made a status interval later).
 */
export async function waitForWriterIdle(
  supervisor: Supervisor,
  opts: { reports?: number; timeoutMs?: number } = {},
): Promise<WriterStatus> {
  const wanted = opts.reports ?? 1;
  // Every writer.status message is decoded into a new object: a different object is a newer report.
  let seen = supervisor.status().writer;
  let idleInARow = 0;
  return eventually(
    () => `the local writer idle (last report ${JSON.stringify(supervisor.status().writer ?? null)?.slice(0, 300)})`,
    () => {
      const w = supervisor.status().writer;
      if (!w || w === seen) return undefined;
      seen = w;
      idleInARow = w.ready && w.queueDepth === 0 && w.inFlight === 0 ? idleInARow + 1 : 0;
      return idleInARow >= wanted ? w : undefined;
    },
    opts.timeoutMs ?? TIMEOUT_MS,
    20,
  );
}

/**
 * Creates the marker Service on `remote` (exported through gateway/gateway) or changes it,
 * then resolves with its mirror once the mirror carries the marker's new resourceVersion.
 * `cluster` is the name the remote is registered under (default: the remote's name).
 */
export async function waitForMarker(
  fleet: Fleet,
  remote: string,
  opts: { cluster?: string; namespace?: string; timeoutMs?: number } = {},
): Promise<V1Service> {
  const namespace = opts.namespace ?? MARKER_NAMESPACE;
  const cluster = opts.cluster ?? remote;
  const api = fleet.api(remote);
  let exists = true;
  try {
    await api.readNamespacedService({ namespace, name: MARKER_SERVICE });
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
    exists = false;
  }
  const marked = exists
    ? await fleet.patchService(remote, namespace, MARKER_SERVICE, (svc) => {
        svc.metadata = {
          ...svc.metadata,
          annotations: { ...svc.metadata?.annotations, [MARKER_ANNOTATION]: `${Date.now()}` },
        };
      })
    : await fleet.createService(remote, namespace, MARKER_SERVICE);
  const version = marked.metadata?.resourceVersion;
  return fleet.waitForMirror(
    namespace,
    mirrorName(MARKER_SERVICE, cluster),
    (mirror) => mirror.metadata?.annotations?.[REMOTE_RESOURCE_VERSION] === version,
    opts.timeoutMs ?? TIMEOUT_MS,
  );
}

/**
 * Resolves once the writer's local watches have delivered every local write made before
 * the call, its own included, and it has acted on them: edits the marker's mirror (its
 * Service, and its Endpoints when the controller writes them) by hand, waits until the
 * writer has restored both, then for an idle writer report. One watch delivers a kind's
 * objects in resourceVersion order, so each edit reached the writer after everything
 * written before it; a write the writer's own watch answers with another write (a write
 * loop) has been made by then, and shows as a changed resourceVersion.
 */
export async function waitForLocalEcho(
  fleet: Fleet,
  supervisor: Supervisor,
  remote: string,
  opts: { cluster?: string; namespace?: string; timeoutMs?: number } = {},
): Promise<void> {
  const namespace = opts.namespace ?? MARKER_NAMESPACE;
  const name = mirrorName(MARKER_SERVICE, opts.cluster ?? remote);
  const timeoutMs = opts.timeoutMs ?? TIMEOUT_MS;
  const mirror = await waitForMarker(fleet, remote, opts);
  const fqName = mirror.metadata?.annotations?.[REMOTE_SVC_FQ_NAME];
  await fleet.patchService("local", namespace, name, (svc) => {
    svc.metadata = { ...svc.metadata, annotations: { ...svc.metadata?.annotations, [REMOTE_SVC_FQ_NAME]: "echo" } };
  });
  let endpoints: V1Endpoints | undefined;
  try {
    endpoints = await fleet.local.readNamespacedEndpoints({ namespace, name });
  } catch (error) {
    if (statusCode(error) !== 404) throw error;
  }
  const subsets = JSON.stringify(endpoints?.subsets ?? null);
  if (endpoints) {
    endpoints.subsets = [{ addresses: [{ ip: "203.0.113.254" }], ports: [{ name: "echo", port: 1 }] }];
    await fleet.local.replaceNamespacedEndpoints({ namespace, name, body: endpoints });
    await fleet.waitForEndpoints(namespace, name, (e) => JSON.stringify(e.subsets ?? null) === subsets, timeoutMs);
  }
  await fleet.waitForMirror(
    namespace,
    name,
    (svc) => svc.metadata?.annotations?.[REMOTE_SVC_FQ_NAME] === fqName,
    timeoutMs,
  );
  await waitForWriterIdle(supervisor, { timeoutMs });
}

/**
 * For a controller process: resolves once its admin endpoint (`/status`) shows the writer
 * ready, holding a complete desired set for each of `clusters`, with an empty queue and
 * nothing in flight, and still does `holdMs` later. A report carries no time of its own,
 * so "newer than the change" is had by holding longer than one report interval (1 s).
 */
export async function waitForControllerIdle(
  adminUrl: string,
  clusters: readonly string[],
  opts: { holdMs?: number; timeoutMs?: number } = {},
): Promise<void> {
  const holdMs = opts.holdMs ?? 1_200;
  let idleSince: number | undefined;
  let last: AdminStatus | undefined;
  await eventually(
    () =>
      `the controller idle with ${clusters.join(", ")} complete (now ${JSON.stringify(last?.writer ?? null)?.slice(0, 300)})`,
    async () => {
      last = (await (await fetch(`${adminUrl}/status`)).json()) as AdminStatus;
      const w = last.writer;
      const idle =
        w?.ready === true &&
        w.queueDepth === 0 &&
        w.inFlight === 0 &&
        clusters.every((c) => w.clusters[c]?.complete === true);
      if (!idle) {
        idleSince = undefined;
        return undefined;
      }
      idleSince ??= Date.now();
      return Date.now() - idleSince >= holdMs ? true : undefined;
    },
    opts.timeoutMs ?? TIMEOUT_MS,
    100,
  );
}
