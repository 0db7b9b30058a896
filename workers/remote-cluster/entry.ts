/**
 * Worker-thread entry of a remote-cluster actor: wires the ports and the lifecycle
 * handshake (init → ready → … → stop → stopped), nothing else. Logic lives in actor.ts.
 */
import { parentPort } from "node:worker_threads";
import { createLogger } from "../../src/log.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { assertNever, decodeToRemoteActor, type FromRemoteActor } from "../../src/protocol/messages.ts";
import { RemoteClusterActor } from "./actor.ts";

if (!parentPort) throw new Error("remote-cluster entry must run in a worker thread");
const port = parentPort;
const send = (message: FromRemoteActor): void => port.postMessage(message);
let actor: RemoteClusterActor | undefined;

port.on("message", (raw: unknown) => {
  const message = decodeToRemoteActor(raw);
  switch (message.type) {
    case "actor.init": {
      if (actor) return; // duplicate init: already running
      const { cluster, epoch, connection, options, writerPort } = message;
      const logger = createLogger(
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
    default:
      assertNever(message);
  }
});
