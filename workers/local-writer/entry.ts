/**
 * Worker-thread entry of the local-writer actor: wires the ports and the lifecycle
 * handshake (init → ready → … → stop → stopped), nothing else. Logic lives in actor.ts.
 *
 * A message that does not decode is a protocol error: logged and dropped (never a
 * crash of the thread) and counted in the writer's status as `protocolErrors`. A
 * `writer.init` that does not decode is answered `writer.failed` with the decoding
 * error, so the supervisor
 * is never left waiting for a handshake; a duplicate `writer.init` is answered
 * `writer.ready` again once the writer is ready (messages assert state).
 */
import { parentPort } from "node:worker_threads";
import { startHeapSettle } from "../../src/heap-settle.ts";
import { createLogger, type Logger } from "../../src/log.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { InboundGuard, type ProtocolErrorLog } from "../../src/protocol/guard.ts";
import {
  assertNever,
  type ChannelPort,
  decodeToWriter,
  type FromWriter,
  type ToWriter,
  type WriterOptions,
} from "../../src/protocol/messages.ts";
import { LocalWriterActor } from "./actor.ts";

type WriterInit = Extract<ToWriter, { type: "writer.init" }>;

/** What the entry drives of the writer actor (a LocalWriterActor, or a fake in tests). */
export type HostedWriter = Pick<
  LocalWriterActor,
  "start" | "attach" | "setKeep" | "recordEvent" | "fence" | "setShards" | "stop" | "ready"
>;

export interface WriterHostDeps {
  /** Where protocol errors are reported (default: the writer's logger, or an error-level one before init). */
  readonly log?: ProtocolErrorLog;
  readonly createWriter?: (init: WriterInit, send: (message: FromWriter) => void, logger: Logger) => HostedWriter;
}

function defaultWriter(init: WriterInit, send: (message: FromWriter) => void, logger: Logger): HostedWriter {
  return new LocalWriterActor(init.connection, init.options, { supervisor: send }, { logger });
}

function writerLogger(options: WriterOptions): Logger {
  return createLogger(options.logLevel, { actor: "local-writer" });
}

/** Serves the writer's side of `port` (the worker's parentPort, or a fake in tests). */
export function hostLocalWriter(port: ChannelPort<FromWriter>, deps: WriterHostDeps = {}): void {
  const guard = new InboundGuard(decodeToWriter, "local-writer: parent port");
  const createWriter = deps.createWriter ?? defaultWriter;
  let actor: HostedWriter | undefined;
  let logger: Logger | undefined;
  const log = (): ProtocolErrorLog => deps.log ?? logger ?? createLogger("error", { actor: "local-writer" });
  /** Every status carries the count of messages this thread dropped. */
  const send = (message: FromWriter): void =>
    port.postMessage(
      message.type === "writer.status"
        ? { ...message, status: { ...message.status, protocolErrors: guard.rejected } }
        : message,
    );

  port.on("message", (raw: unknown) => {
    const message = guard.accept(raw, log());
    if (!message) {
      if ((raw as { type?: unknown } | null)?.type === "writer.init" && guard.lastRejection)
        send({ type: "writer.failed", error: guard.lastRejection });
      return;
    }
    switch (message.type) {
      case "writer.init":
        if (actor) {
          if (actor.ready) send({ type: "writer.ready" });
          return;
        }
        try {
          logger = writerLogger(message.options);
          actor = createWriter(message, send, logger);
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
        actor?.setKeep(message.keep, message.order, message.registeredAt, message.priorities);
        return;
      case "writer.event":
        void actor
          ?.recordEvent(message.event)
          .catch((error: unknown) =>
            log().error({ err: serializeError(error, "local-writer: event") }, "recording an Event failed"),
          );
        return;
      case "writer.fence":
        actor?.fence(message.writableUntil);
        return;
      case "writer.shards":
        actor?.setShards(message.seq, message.held);
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
}

if (parentPort) {
  startHeapSettle();
  hostLocalWriter(parentPort);
}
