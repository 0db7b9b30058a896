/**
 * The remote-cluster actor run in-process through its ports, against a real API server:
 * a fake desired port records every batch and lets the test answer with acks, and the
 * supervisor port records every status. For actor-level tests (test/actor/).
 */

import type { ConnectionSpec } from "../../src/core/connection.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../../src/core/labels.ts";
import type { Service } from "../../src/core/objects.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import { silentLogger } from "../../src/log.ts";
import type {
  ClusterStatus,
  FromRemoteActor,
  RemoteActorOptions,
  ToActorFromWriter,
  ToWriterFromActor,
} from "../../src/protocol/messages.ts";
import { type DesiredPort, type Probe, RemoteClusterActor } from "../../workers/remote-cluster/actor.ts";
import { DesiredSender, type DesiredSenderDeps } from "../../workers/remote-cluster/desired-sender.ts";
import { eventually } from "./kube.ts";

export type Batch = ToWriterFromActor;

/** The writer's side of a desired channel, in memory. */
export class FakeDesiredPort implements DesiredPort {
  readonly batches: Batch[] = [];
  closed = false;
  #listener: ((message: unknown) => void) | undefined;

  postMessage(message: Batch): void {
    if (this.closed) throw new Error("postMessage on a closed desired port");
    this.batches.push(structuredClone(message));
  }

  on(_event: "message", listener: (message: unknown) => void): this {
    this.#listener = listener;
    return this;
  }

  close(): void {
    this.closed = true;
  }

  /** Delivers a message from the writer (an ack, or anything a test wants to throw at the actor). */
  deliver(message: ToActorFromWriter | unknown): void {
    this.#listener?.(message);
  }

  last(): Batch | undefined {
    return this.batches.at(-1);
  }
}

export interface RunningActor {
  readonly actor: RemoteClusterActor;
  readonly port: FakeDesiredPort;
  readonly statuses: ClusterStatus[];
  readonly faults: unknown[];
  /** Acks `seq` (cumulative) as the writer would, for this actor's epoch unless told otherwise. */
  ack(seq: number, extra?: { resend?: true; epoch?: number }): void;
  /** Waits until a batch with a seq above `afterSeq` satisfies `match`; returns it. */
  waitForBatch(what: string, match: (batch: Batch) => boolean, afterSeq?: number): Promise<Batch>;
}

export function startActor(
  connection: ConnectionSpec,
  options: Partial<RemoteActorOptions> & { cluster?: string; epoch?: number; probe?: Probe; logger?: LineLogger } = {},
): RunningActor {
  const { probe, logger, ...actorOptions } = options;
  const cluster = options.cluster ?? "east";
  const epoch = options.epoch ?? 1;
  const statuses: ClusterStatus[] = [];
  const faults: unknown[] = [];
  const port = new FakeDesiredPort();
  const actor = new RemoteClusterActor(
    {
      cluster: {
        name: cluster,
        domain: "cluster.local",
        excludedNamespaces: ["kube-system"],
        defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
        exportSelector: { key: "mirror.linkerd.io/exported", value: "true" },
      },
      epoch,
      connection,
      options: {
        resolvePeriodMs: 60_000,
        maxInFlight: 2,
        batchDelayMs: 10,
        logLevel: "silent",
        memberSelector: { key: "mirror.linkerd.io/federated", value: "member" },
        ...actorOptions,
      },
    },
    {
      supervisor: (message: FromRemoteActor) => {
        if (message.type === "actor.status") statuses.push(message.status);
      },
      onFault: (error) => faults.push(error),
    },
    { logger: logger ?? silentLogger(), ...(probe ? { probe } : {}) },
  );
  actor.attachWriter(port);
  actor.start();
  return {
    actor,
    port,
    statuses,
    faults,
    ack(seq, extra = {}) {
      port.deliver({
        type: "desired.ack",
        cluster,
        epoch: extra.epoch ?? epoch,
        seq,
        ...(extra.resend ? { resend: true } : {}),
      });
    },
    waitForBatch(what, match, afterSeq = 0) {
      return eventually(
        () => `${what} (batches: ${JSON.stringify(port.batches.map(summary))}, faults: ${String(faults)})`,
        () => port.batches.find((b) => b.seq > afterSeq && match(b)),
        20_000,
        5,
      );
    },
  };
}

/** A batch in one line, for failure messages. */
export function summary(batch: Batch): string {
  const names = batch.upserts.map((m) => `${m.namespace}/${m.name}`);
  return `#${batch.seq}${batch.complete ? " complete" : ""} +[${names.join(",")}] -[${batch.deletes.join(",")}]`;
}

/** Upserted mirror keys of `batch` in `namespace`, sorted. */
export function upsertsIn(batch: Batch, namespace: string): string[] {
  return batch.upserts
    .filter((m) => m.namespace === namespace)
    .map((m) => m.name)
    .sort();
}

/** Creates namespace `namespace` (if needed) and a gateway `gw/gateway` usable at `ip`. */
export async function createGateway(client: KubeClient, namespace: string, ip: string): Promise<void> {
  await ensureNamespace(client, namespace);
  const created = await client.request<Service>("POST", `/api/v1/namespaces/${namespace}/services`, {
    body: {
      metadata: { name: "gateway" },
      spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143, protocol: "TCP" }] },
    },
  });
  await client.request("PATCH", `/api/v1/namespaces/${namespace}/services/gateway/status`, {
    contentType: "application/merge-patch+json",
    body: {
      metadata: { resourceVersion: created.metadata.resourceVersion },
      status: { loadBalancer: { ingress: [{ ip }] } },
    },
  });
}

/** Creates Service `name` in `namespace`, exported through the gateway of `gatewayNamespace`. */
export async function createExported(
  client: KubeClient,
  namespace: string,
  name: string,
  gatewayNamespace: string,
): Promise<void> {
  await ensureNamespace(client, namespace);
  await client.request("POST", `/api/v1/namespaces/${namespace}/services`, {
    body: {
      metadata: { name, annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: gatewayNamespace } },
      spec: { ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }] },
    },
  });
}

export async function ensureNamespace(client: KubeClient, namespace: string): Promise<void> {
  try {
    await client.request("POST", "/api/v1/namespaces", { body: { metadata: { name: namespace } } });
  } catch (error) {
    if (!(typeof error === "object" && error !== null && "status" in error && error.status === 409)) throw error;
  }
}

/**
 * A desired sender on fake inputs (for the sender's unit tests): no flush delay, no
 * credit limit to speak of, no gateway hostnames or probes, every headless Service's
 * reads denied unless `deps` says otherwise.
 */
export function fakeSender(
  deps: Pick<DesiredSenderDeps, "cluster" | "services"> & Partial<DesiredSenderDeps>,
): DesiredSender {
  return new DesiredSender({
    epoch: 1,
    batchDelayMs: 0,
    maxInFlight: 100,
    serviceExports: { get: () => undefined, keys: () => [], settled: true, known: true },
    memberSelector: { key: "mirror.linkerd.io/federated", value: "member" },
    lookupHostname: () => undefined,
    deadAddresses: () => undefined,
    headlessHosts: () => ({ kind: "ordinary" }),
    hostClaimant: () => undefined,
    headlessPending: () => false,
    log: silentLogger(),
    guard: (fn) => fn,
    statusChanged: () => {},
    ...deps,
  });
}
