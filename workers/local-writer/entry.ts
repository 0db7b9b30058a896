/**
 * Worker-thread entry of the local-writer actor: wires the ports and the lifecycle
 * handshake (init → ready → … → stop → stopped), nothing else. Logic lives in actor.ts.
 */
import { parentPort } from "node:worker_threads";
import { createLogger } from "../../src/log.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { assertNever, decodeToWriter, type FromWriter } from "../../src/protocol/messages.ts";
import { LocalWriterActor } from "./actor.ts";

if (!parentPort) throw new Error("local-writer entry must run in a worker thread");
const port = parentPort;
const send = (message: FromWriter): void => port.postMessage(message);
let actor: LocalWriterActor | undefined;

port.on("message", (raw: unknown) => {
  const message = decodeToWriter(raw);
  switch (message.type) {
    case "writer.init":
      if (actor) return;
      try {
        actor = new LocalWriterActor(
          message.connection,
          message.options,
          { supervisor: send },
          {
            logger: createLogger(message.options.logLevel, { actor: "local-writer" }),
          },
        );
        actor.start();
      } catch (error) {
        send({ type: "writer.failed", error: serializeError(error, "local-writer: init") });
      }
      return;
    case "writer.attach":
      if (actor) actor.attach(message.cluster, message.epoch, message.port);
      else message.port.close();
      return;
    case "writer.clusters":
      actor?.setKeep(message.keep);
      return;
    case "writer.event":
      void actor?.recordEvent(message.event);
      return;
    case "writer.fence":
      actor?.fence(message.writableUntil);
      return;
    case "writer.stop":
      void (actor?.stop() ?? Promise.resolve()).finally(() => {
        send({ type: "writer.stopped" });
        port.close();
      });
      return;
    default:
      assertNever(message);
  }
});
