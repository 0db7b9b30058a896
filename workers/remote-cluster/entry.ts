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
 * A message that does not decode is a protocol error: logged and ignored, never a
 * crash of the thread. So is `actor.inject-fault` unless the named actor's init
 * carried `options.testHooks: true` (only a Supervisor built with `testHooks` sets it).
 */
import { parentPort } from "node:worker_threads";
import { createLogger, type Logger } from "../../src/log.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import {
  type ActorFaultKind,
  assertNever,
  decodeToRemoteActor,
  type FromRemoteActor,
  ProtocolError,
  type ToRemoteActor,
} from "../../src/protocol/messages.ts";
import { RemoteClusterActor } from "./actor.ts";

if (!parentPort) throw new Error("remote-cluster entry must run in a worker thread");
const port = parentPort;
const send = (message: FromRemoteActor): void => port.postMessage(message);

interface Hosted {
  readonly actor: RemoteClusterActor;
  readonly logger: Logger;
  readonly testHooks: boolean;
}

/** The actors this thread hosts, by cluster. */
const hosted = new Map<string, Hosted>();
let stopsPending = 0;

function anyLogger(): Logger {
  for (const h of hosted.values()) return h.logger;
  return createLogger("error", { actor: "remote-cluster" });
}

function rejectMessage(error: unknown): void {
  anyLogger().error({ err: serializeError(error, "remote-cluster: parent port") }, "protocol error: message ignored");
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
  h?.logger.error({ err: serialized }, `actor of cluster ${cluster} failed; stopping it (its neighbours keep running)`);
  void h?.actor.stop().catch(() => {});
  send({ type: "actor.failed", cluster, epoch, error: serialized });
}

/** The thread ends once its last actor has stopped (on request) and nothing is left. */
function closeIfIdle(): void {
  if (hosted.size === 0 && stopsPending === 0) port.close();
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

port.on("message", (raw: unknown) => {
  let message: ToRemoteActor;
  try {
    message = decodeToRemoteActor(raw);
  } catch (error) {
    rejectMessage(error);
    return;
  }
  switch (message.type) {
    case "actor.init": {
      const { cluster, epoch, connection, options, writerPort } = message;
      if (hosted.has(cluster.name)) {
        writerPort.close();
        return; // duplicate init: already running
      }
      const logger = createLogger(options.logLevel, { actor: "remote-cluster", cluster: cluster.name, epoch });
      let actor: RemoteClusterActor | undefined;
      try {
        actor = new RemoteClusterActor(
          { cluster, epoch, connection, options },
          { supervisor: send, onFault: (error) => failActor(cluster.name, epoch, error, "handler") },
          { logger },
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
      return;
    }
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
    case "actor.inject-fault": {
      const h = hosted.get(message.cluster);
      if (!h?.testHooks) {
        rejectMessage(new ProtocolError("actor.inject-fault: refused, this actor was not started with test hooks"));
        return;
      }
      injectFault(h, message.kind);
      return;
    }
    default:
      assertNever(message);
  }
});
