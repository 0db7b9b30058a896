/**
 * Runs the local-writer actor in-process through its ports, against a real local API
 * server: fake desired channels stand in for remote actors, a list stands in for the
 * supervisor. The writer authenticates least-privilege (deploy/rbac/local.yaml).
 */
import type { DesiredMirror } from "../../src/core/desired.ts";
import { silentLogger } from "../../src/log.ts";
import type {
  ChannelPort,
  FromWriter,
  ToActorFromWriter,
  ToWriterFromActor,
  WriterOptions,
  WriterStatus,
} from "../../src/protocol/messages.ts";
import { LocalWriterActor } from "../../workers/local-writer/actor.ts";
import type { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";

/** A remote actor's end of the desired channel, in memory: records the writer's acks. */
export class FakeActorPort implements ChannelPort<ToActorFromWriter> {
  readonly acks: ToActorFromWriter[] = [];
  closed = false;
  /** Every listener gets every message, as on a real MessagePort. */
  readonly #listeners: ((message: unknown) => void)[] = [];

  postMessage(message: ToActorFromWriter): void {
    this.acks.push(message);
  }

  on(_event: "message", listener: (message: unknown) => void): this {
    this.#listeners.push(listener);
    return this;
  }

  close(): void {
    this.closed = true;
  }

  /** Delivers a message to the writer as the remote actor would (anything, even garbage). */
  send(message: unknown): void {
    if (this.closed) throw new Error("send on a closed desired channel");
    for (const listener of this.#listeners) listener(message);
  }

  async waitForAck(predicate: (ack: ToActorFromWriter) => boolean, what: string): Promise<ToActorFromWriter> {
    return eventually(what, () => this.acks.find(predicate), 10_000, 20);
  }
}

export const WRITER_OPTIONS: WriterOptions = Object.freeze({
  createNamespaces: true,
  excludedNamespaces: ["kube-system", "kube-public", "kube-node-lease"],
  concurrency: 4,
  qps: 0,
  burst: 1,
  resyncPeriodMs: 10 * 60_000,
  blockedRecheckMs: 30_000,
  endpointsApi: "endpoints",
  logLevel: "silent",
  namespace: "fleet-mirror",
});

export interface RunningWriter {
  readonly actor: LocalWriterActor;
  readonly fromWriter: FromWriter[];
  stop(): Promise<void>;
}

/** Starts a writer on the fleet's local API server and waits until it is ready. */
export async function startWriter(fleet: Fleet, options: Partial<WriterOptions> = {}): Promise<RunningWriter> {
  const fromWriter: FromWriter[] = [];
  const actor = new LocalWriterActor(
    fleet.controllerConnection(),
    { ...WRITER_OPTIONS, ...options },
    { supervisor: (message) => fromWriter.push(message) },
    { logger: silentLogger() },
  );
  actor.start();
  await eventually("the writer to be ready", () => (actor.ready ? true : undefined), 30_000, 20);
  return { actor, fromWriter, stop: () => actor.stop() };
}

/** Waits until the writer has nothing queued and nothing in flight; returns its status. */
export async function writerIdle(actor: LocalWriterActor): Promise<WriterStatus> {
  return eventually(
    "the writer to be idle",
    () => {
      const status = actor.status();
      return status.queueDepth === 0 && status.inFlight === 0 ? status : undefined;
    },
    30_000,
    20,
  );
}

/** A desired mirror `<svc>-<cluster>` in `namespace`, as a remote actor would send it. */
export function desiredMirror(cluster: string, namespace: string, svc: string, port = 80): DesiredMirror {
  const fq = `${svc}.${namespace}.svc.cluster.local`;
  return Object.freeze({
    cluster,
    namespace,
    name: `${svc}-${cluster}`,
    remote: `${namespace}/${svc}`,
    labels: {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/cluster-name": cluster,
      "mirror.linkerd.io/remote-gateway-name": "gateway",
      "mirror.linkerd.io/remote-gateway-ns": "gateway",
    },
    serviceAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": fq },
    ports: [{ name: "http", protocol: "TCP", port, targetPort: 8080 }],
    endpointsAnnotations: { "mirror.linkerd.io/remote-svc-fq-name": fq },
    addresses: ["198.18.0.10"],
    notReadyAddresses: [],
    endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  });
}

export function batch(
  cluster: string,
  epoch: number,
  seq: number,
  fields: { complete?: boolean; upserts?: readonly DesiredMirror[]; deletes?: readonly string[] },
): ToWriterFromActor {
  return {
    type: "desired.batch",
    cluster,
    epoch,
    seq,
    complete: fields.complete ?? false,
    upserts: fields.upserts ?? [],
    deletes: fields.deletes ?? [],
  };
}

/** The local API server's own count of requests (`apiserver_request_total`) by verb and resource. */
export async function apiRequests(fleet: Fleet, verb: string, resource: string): Promise<number> {
  let total = 0;
  for (const line of (await fleet.localMetrics()).split("\n")) {
    if (!line.startsWith("apiserver_request_total{")) continue;
    if (!line.includes(`verb="${verb}"`) || !line.includes(`resource="${resource}"`)) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}
