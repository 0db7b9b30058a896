/**
 * An `actor.init` message for the thread-entry tests: one cluster against an address
 * nothing listens on (its actor never syncs), with the given writer port.
 */
import type { MessagePort } from "node:worker_threads";
import type { ToRemoteActor } from "../../src/protocol/messages.ts";

export type ActorInit = Extract<ToRemoteActor, { type: "actor.init" }>;

export function actorInitMessage(
  cluster: string,
  epoch: number,
  logLevel: ActorInit["options"]["logLevel"],
  writerPort: MessagePort,
): ActorInit {
  return {
    type: "actor.init",
    cluster: {
      name: cluster,
      domain: "cluster.local",
      excludedNamespaces: [],
      defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
    },
    epoch,
    connection: { server: "https://127.0.0.1:1", auth: { kind: "anonymous" } },
    options: {
      resolvePeriodMs: 60_000,
      maxInFlight: 2,
      batchDelayMs: 10,
      logLevel,
      memberSelector: { key: "mirror.linkerd.io/federated", value: "member" },
    },
    writerPort,
  };
}
