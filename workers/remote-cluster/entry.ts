/**
 * Worker-thread entry of a remote-cluster actor: wires the ports and the lifecycle
 * handshake (init → ready → … → stop → stopped), nothing else. Logic lives in actor.ts.
 *
 * A message that does not decode is a protocol error: logged and ignored, never a
 * crash of the thread. So is `actor.inject-fault` unless this incarnation's init
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
let actor: RemoteClusterActor | undefined;
let logger: Logger | undefined;
let testHooks = false;

function rejectMessage(error: unknown): void {
  const log = logger ?? createLogger("error", { actor: "remote-cluster" });
  log.error({ err: serializeError(error, "remote-cluster: parent port") }, "protocol error: message ignored");
}

/** Tests only (see `ActorFaultKind`): makes this thread fail the way `kind` says. */
function injectFault(kind: ActorFaultKind): void {
  logger?.warn({ fault: kind }, `injecting fault ${kind} (test hooks are on)`);
  switch (kind) {
    case "throw":
      setImmediate(() => {
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
      if (actor) return; // duplicate init: already running
      const { cluster, epoch, connection, options, writerPort } = message;
      testHooks = options.testHooks === true;
      logger = createLogger(
        options.logLevel,
        { actor: "remote-cluster", cluster: cluster.name, epoch },
        options.logFile,
      );
      try {
        actor = new RemoteClusterActor({ cluster, epoch, connection, options }, { supervisor: send }, { logger });
        actor.attachWriter(writerPort);
        actor.start();
        send({ type: "actor.ready", cluster: cluster.name, epoch });
      } catch (error) {
        send({
          type: "actor.failed",
          cluster: cluster.name,
          epoch,
          error: serializeError(error, `remote-cluster/${cluster.name}: init`),
        });
      }
      return;
    }
    case "actor.attach-writer":
      actor?.attachWriter(message.writerPort);
      return;
    case "actor.stop": {
      const current = actor;
      if (!current) {
        port.close();
        return;
      }
      void current.stop().finally(() => {
        send({ type: "actor.stopped", cluster: current.cluster, epoch: current.epoch });
        port.close();
      });
      return;
    }
    case "actor.inject-fault":
      if (!testHooks) {
        rejectMessage(new ProtocolError("actor.inject-fault: refused, this actor was not started with test hooks"));
        return;
      }
      injectFault(message.kind);
      return;
    default:
      assertNever(message);
  }
});
