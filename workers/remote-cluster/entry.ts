/**
 * Worker-thread entry of remote-cluster actors: wires the ports and the lifecycle
 * handshake (init → ready → … → stop → stopped) of every actor the thread hosts,
 * nothing else. Logic lives in actor.ts.
 *
 * A thread hosts one actor (the default: one thread per cluster) or several (with
 * `--max-threads`), keyed by cluster; every message but `actor.init` names its
 * cluster. Fault containment per actor: an exception in one actor's callbacks is caught
 * by that actor's guard, the actor alone is stopped and reported `actor.failed`; its
 * neighbours keep running. A thread whose last actor was stopped ends.
 *
 * A message that does not decode is a protocol error: logged and dropped, never a
 * crash of the thread, and counted in every status this thread sends
 * (`protocolErrors`). So is `actor.inject-fault` unless the named actor's init
 * carried `options.testHooks: true` (only a Supervisor built with `testHooks` sets it).
 *
 * Every `actor.init` is answered (messages assert state, so a duplicate is harmless):
 * - an init for a cluster this thread already hosts with the SAME epoch: `actor.ready`
 *   again;
 * - an init for a cluster hosted with ANOTHER epoch: `actor.failed` for the new epoch
 *   (the running incarnation is untouched; the supervisor's restart policy decides);
 * - an init that does not decode but names its cluster and epoch: `actor.failed`.
 * The new init's writer port is closed whenever it is not used.
 */
import { MessagePort, parentPort } from "node:worker_threads";
import { startHeapSettle } from "../../src/heap-settle.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import { createThreadLogger } from "../../src/log/thread-logger.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { InboundGuard, type ProtocolErrorLog } from "../../src/protocol/guard.ts";
import {
  type ActorFaultKind,
  assertNever,
  type ChannelPort,
  decodeToRemoteActor,
  type FromRemoteActor,
  type LocalRangesMessage,
  ProtocolError,
  type ToRemoteActor,
} from "../../src/protocol/messages.ts";
import { type RemoteActorInit, type RemoteActorPorts, RemoteClusterActor } from "./actor.ts";

/** What the entry drives of an actor (a RemoteClusterActor, or a fake in tests). */
export type HostedActor = Pick<
  RemoteClusterActor,
  "cluster" | "epoch" | "attachWriter" | "start" | "stop" | "runLater"
> &
  Partial<Pick<RemoteClusterActor, "setLocalRanges">>;

export interface RemoteHostDeps {
  /** Where protocol errors are reported (default: a hosted actor's logger, or an error-level one). */
  readonly log?: ProtocolErrorLog;
  readonly createActor?: (init: RemoteActorInit, ports: RemoteActorPorts, logger: LineLogger) => HostedActor;
}

interface Hosted {
  readonly actor: HostedActor;
  readonly logger: LineLogger;
  readonly testHooks: boolean;
}

function defaultActor(init: RemoteActorInit, ports: RemoteActorPorts, logger: LineLogger): HostedActor {
  return new RemoteClusterActor(init, ports, { logger });
}

/** Serves the actors' side of `port` (the worker's parentPort, or a fake in tests). */
export function hostRemoteActors(port: ChannelPort<FromRemoteActor>, deps: RemoteHostDeps = {}): void {
  const guard = new InboundGuard(decodeToRemoteActor, "remote-cluster: parent port");
  const createActor = deps.createActor ?? defaultActor;
  /** Every status carries the count of messages this thread dropped. */
  const send = (message: FromRemoteActor): void =>
    port.postMessage(
      message.type === "actor.status"
        ? { ...message, status: { ...message.status, protocolErrors: guard.rejected } }
        : message,
    );

  /** The actors this thread hosts, by cluster. */
  const hosted = new Map<string, Hosted>();
  /**
   * One logger per level on this thread; each actor logs through a child of it with
   * its cluster and epoch bound (the same lines as a logger of its own). A pino
   * instance per actor cost ≈ 13 KB of RSS, a child < 1 KB: hundreds of times over on a
   * packed thread. The loggers write pino's lines without pino
   * (src/log/thread-logger.ts).
   */
  const threadLoggers = new Map<string, LineLogger>();
  function threadLogger(level: string): LineLogger {
    let logger = threadLoggers.get(level);
    if (logger === undefined) {
      logger = createThreadLogger(level, { actor: "remote-cluster" });
      threadLoggers.set(level, logger);
    }
    return logger;
  }
  let stopsPending = 0;
  /** The newest local ranges this thread was told (`actor.local-ranges`, or an init's): every actor it starts gets them. */
  let localRanges: LocalRangesMessage | undefined;
  const newer = (ranges: LocalRangesMessage | undefined): boolean =>
    ranges !== undefined && ranges.seq > (localRanges?.seq ?? -1);

  function log(): ProtocolErrorLog {
    if (deps.log) return deps.log;
    for (const h of hosted.values()) return h.logger;
    return createThreadLogger("error", { actor: "remote-cluster" });
  }

  /**
   * One actor failed (its guard caught an exception, or its init/attach threw): it alone
   * is stopped and reported; the supervisor restarts it with its own backoff.
   */
  function failActor(cluster: string, epoch: number, error: unknown, where: string): void {
    const h = hosted.get(cluster);
    if (h && h.actor.epoch !== epoch) return; // a newer incarnation is running
    hosted.delete(cluster);
    const serialized = serializeError(error, `remote-cluster/${cluster}: ${where}`);
    h?.logger.error(
      { err: serialized },
      `actor of cluster ${cluster} failed; stopping it (its neighbours keep running)`,
    );
    void h?.actor.stop().catch(() => {});
    send({ type: "actor.failed", cluster, epoch, error: serialized });
  }

  /** The thread ends once its last actor has stopped (on request) and nothing is left. */
  function closeIfIdle(): void {
    if (hosted.size === 0 && stopsPending === 0) port.close();
  }

  /** An init that did not decode is still answered when its cluster and epoch can be read. */
  function failMalformedInit(raw: unknown): void {
    const init = raw as { type?: unknown; cluster?: { name?: unknown }; epoch?: unknown; writerPort?: unknown } | null;
    if (init?.type !== "actor.init") return;
    if (init.writerPort instanceof MessagePort) init.writerPort.close();
    const cluster = init.cluster?.name;
    const epoch = init.epoch;
    if (typeof cluster !== "string" || typeof epoch !== "number" || !Number.isSafeInteger(epoch) || epoch < 0) return;
    if (hosted.get(cluster)?.actor.epoch === epoch) return; // never fail a running incarnation
    const error = guard.lastRejection ?? serializeError(new ProtocolError("actor.init did not decode"));
    send({ type: "actor.failed", cluster, epoch, error });
  }

  function init(message: Extract<ToRemoteActor, { type: "actor.init" }>): void {
    const { cluster, epoch, connection, options, writerPort } = message;
    if (newer(message.localRanges)) localRanges = message.localRanges;
    const running = hosted.get(cluster.name);
    if (running) {
      writerPort.close();
      if (running.actor.epoch === epoch) {
        send({ type: "actor.ready", cluster: cluster.name, epoch }); // a duplicate: assert the state again
        return;
      }
      const refused = new ProtocolError(
        `actor.init: cluster ${cluster.name} is already hosted on this thread by epoch ${running.actor.epoch}; ` +
          `init of epoch ${epoch} refused (stop the running incarnation first)`,
      );
      running.logger.error({ err: serializeError(refused) }, "refused an init for a cluster this thread already hosts");
      send({
        type: "actor.failed",
        cluster: cluster.name,
        epoch,
        error: serializeError(refused, `remote-cluster/${cluster.name}: init`),
      });
      return;
    }
    const logger = threadLogger(options.logLevel).child({ cluster: cluster.name, epoch });
    let actor: HostedActor | undefined;
    try {
      actor = createActor(
        { cluster, epoch, connection, options, ...(localRanges ? { localRanges } : {}) },
        { supervisor: send, onFault: (error) => failActor(cluster.name, epoch, error, "handler") },
        logger,
      );
      hosted.set(cluster.name, { actor, logger, testHooks: options.testHooks === true });
      actor.attachWriter(writerPort);
      actor.start();
      send({ type: "actor.ready", cluster: cluster.name, epoch });
    } catch (error) {
      if (actor) failActor(cluster.name, epoch, error, "init");
      else
        send({
          type: "actor.failed",
          cluster: cluster.name,
          epoch,
          error: serializeError(error, `remote-cluster/${cluster.name}: init`),
        });
    }
  }

  port.on("message", (raw: unknown) => {
    const message = guard.accept(raw, log());
    if (!message) {
      failMalformedInit(raw);
      return;
    }
    switch (message.type) {
      case "actor.init":
        init(message);
        return;
      case "actor.attach-writer": {
        const h = hosted.get(message.cluster);
        if (!h) {
          message.writerPort.close();
          return;
        }
        try {
          h.actor.attachWriter(message.writerPort);
        } catch (error) {
          failActor(message.cluster, h.actor.epoch, error, "attach-writer");
        }
        return;
      }
      case "actor.stop": {
        const h = hosted.get(message.cluster);
        if (!h) {
          closeIfIdle();
          return;
        }
        hosted.delete(message.cluster);
        stopsPending += 1;
        void h.actor
          .stop()
          .catch((error: unknown) => h.logger.warn({ err: serializeError(error) }, "stopping the actor failed"))
          .finally(() => {
            send({ type: "actor.stopped", cluster: h.actor.cluster, epoch: h.actor.epoch });
            stopsPending -= 1;
            closeIfIdle();
          });
        return;
      }
      case "actor.local-ranges":
        if (!newer(message.ranges)) return;
        localRanges = message.ranges;
        for (const h of hosted.values()) h.actor.setLocalRanges?.(message.ranges);
        return;
      case "actor.inject-fault": {
        const h = hosted.get(message.cluster);
        if (!h?.testHooks) {
          guard.reject(
            new ProtocolError("actor.inject-fault: refused, this actor was not started with test hooks"),
            log(),
          );
          return;
        }
        injectFault(h, message.kind);
        return;
      }
      default:
        assertNever(message);
    }
  });
}

/** Tests only (see `ActorFaultKind`): makes this actor, or its whole thread, fail the way `kind` says. */
function injectFault(h: Hosted, kind: ActorFaultKind): void {
  h.logger.warn({ fault: kind }, `injecting fault ${kind} (test hooks are on)`);
  switch (kind) {
    case "throw":
      h.actor.runLater(() => {
        throw new Error("injected fault: uncaught exception in the actor's event loop");
      });
      return;
    case "reject":
      void Promise.reject(new Error("injected fault: unhandled promise rejection"));
      return;
    case "exit":
      process.exit(3);
      break; // not reached: process.exit ends the thread
    case "oom": {
      // Retained, heap-allocated arrays until the thread's resourceLimits are exceeded:
      // Node then ends the thread with ERR_WORKER_OUT_OF_MEMORY.
      // Grows in steps with a turn of the event loop between them, like a leak does: V8
      // can then stop the thread at its limit. (A single allocation larger than the
      // whole limit cannot be interrupted and ends the process; see DESIGN §5.)
      const hog: number[][] = [];
      const grow = (): void => {
        for (let i = 0; i < 64; i++) hog.push(new Array<number>(4096).fill(hog.length));
        setImmediate(grow);
      };
      grow();
      return;
    }
    default:
      assertNever(kind);
  }
}

if (parentPort) {
  startHeapSettle();
  hostRemoteActors(parentPort);
}
