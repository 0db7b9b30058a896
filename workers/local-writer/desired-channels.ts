/**
 * The writer's ends of the remote actors' desired channels, and the writer's side of the
 * credit rule. Every batch that arrives on a channel is answered, never acknowledged and
 * dropped:
 * - absorbed into the desired store → `desired.ack {seq}`; acks are cumulative ("every
 *   batch of this epoch on this channel up to seq is taken"), and batches on one channel
 *   arrive in order, so the batch's own seq is the cumulative answer;
 * - rejected (does not decode, names another cluster or epoch, or the store refuses it)
 *   → `desired.ack {seq, resend: true}`: the actor settles every credit and sends its
 *   complete set again. When the seq itself cannot be read, the ack carries the highest
 *   seq seen on the channel (0 if none).
 * Acks carry the channel's epoch (the epoch the supervisor attached it with).
 * One channel per cluster: attaching a newer epoch closes the older channel; an older
 * epoch than the current one is closed at once.
 */
import type { Logger } from "../../src/log.ts";
import { type SerializedError, serializeError } from "../../src/protocol/errors.ts";
import {
  type ChannelPort,
  decodeToWriterFromActor,
  type ToActorFromWriter,
  type ToWriterFromActor,
} from "../../src/protocol/messages.ts";

/** The writer's end of one actor's desired channel. */
export type ActorPort = ChannelPort<ToActorFromWriter>;

interface Channel {
  readonly epoch: number;
  readonly port: ActorPort;
  /** The highest seq seen on this channel, readable in a batch absorbed or rejected. */
  highestSeq: number;
}

export interface DesiredChannelsDeps {
  /** Absorbs a decoded batch of the channel's cluster; false when it cannot be kept. Throws are rejections. */
  readonly absorb: (batch: ToWriterFromActor) => boolean;
  /** A batch was rejected: report it (status, log). */
  readonly rejected: (cluster: string, error: SerializedError) => void;
  readonly log: Logger;
}

/** The seq of a message when it is readable: a non-negative safe integer. */
function readableSeq(raw: unknown): number | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const seq = (raw as Record<string, unknown>)["seq"];
  return typeof seq === "number" && Number.isSafeInteger(seq) && seq >= 0 ? seq : undefined;
}

export class DesiredChannels {
  readonly #deps: DesiredChannelsDeps;
  readonly #channels = new Map<string, Channel>();

  constructor(deps: DesiredChannelsDeps) {
    this.#deps = deps;
  }

  /** Clusters with an open channel. */
  clusters(): string[] {
    return [...this.#channels.keys()];
  }

  /** A remote actor incarnation's channel. Returns false (and closes it) when a newer epoch is attached. */
  attach(cluster: string, epoch: number, port: ActorPort): boolean {
    const current = this.#channels.get(cluster);
    if (current && current.epoch > epoch) {
      port.close();
      return false;
    }
    if (current?.port === port) return current.epoch === epoch; // attached already: one listener per port
    if (current) current.port.close();
    const channel: Channel = { epoch, port, highestSeq: 0 };
    this.#channels.set(cluster, channel);
    port.on("message", (raw) => this.#onMessage(cluster, channel, raw));
    return true;
  }

  /** Closes `cluster`'s channel (the cluster was unregistered). */
  close(cluster: string): void {
    this.#channels.get(cluster)?.port.close();
    this.#channels.delete(cluster);
  }

  closeAll(): void {
    for (const cluster of this.clusters()) this.close(cluster);
  }

  #onMessage(cluster: string, channel: Channel, raw: unknown): void {
    const seq = readableSeq(raw);
    if (seq !== undefined) channel.highestSeq = Math.max(channel.highestSeq, seq);
    try {
      if (this.#channels.get(cluster) !== channel) throw new Error(`a batch on ${cluster}'s closed channel`);
      const batch = decodeToWriterFromActor(raw);
      if (batch.cluster !== cluster) throw new Error(`a batch of cluster ${batch.cluster} on ${cluster}'s channel`);
      if (batch.epoch !== channel.epoch)
        throw new Error(`a batch of epoch ${batch.epoch} on ${cluster}'s channel of epoch ${channel.epoch}`);
      if (!this.#deps.absorb(batch)) throw new Error(`cluster ${cluster} is not registered: its batch cannot be kept`);
      this.#ack(cluster, channel, batch.seq, false);
    } catch (error) {
      const serialized = serializeError(error, `local-writer: desired channel of ${cluster}`);
      this.#deps.log.error(
        { err: serialized, cluster },
        "rejected a desired batch: asking the actor to send its complete set again",
      );
      this.#deps.rejected(cluster, serialized);
      this.#ack(cluster, channel, seq ?? channel.highestSeq, true);
    }
  }

  #ack(cluster: string, channel: Channel, seq: number, resend: boolean): void {
    const ack: ToActorFromWriter = {
      type: "desired.ack",
      cluster,
      epoch: channel.epoch,
      seq,
      ...(resend ? { resend: true as const } : {}),
    };
    try {
      channel.port.postMessage(ack);
    } catch (error) {
      // A port closed under us (the actor is gone): nothing to answer any more.
      this.#deps.log.debug({ err: serializeError(error), cluster }, "could not acknowledge a desired batch");
    }
  }
}
