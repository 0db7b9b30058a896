/**
 * Collecting a response body with a cap, counted as the chunks arrive: an error body is
 * cut (only its beginning is kept for the message), a success body that grows past the
 * cap fails its exchange at once, before anything more is held.
 *
 * Why a cap on success bodies: the chunks are Node Buffers, memory outside the V8 heap,
 * so a thread's heap limit does not stop them; a remote API server (or anything between
 * it and us) answering a list with gigabytes would grow the whole process until the
 * kernel kills it, every cluster with it. An honest answer is a page of a paginated list
 * (500 objects) or one object: the default cap, 64 MiB, is 500 objects of 128 KiB each,
 * several times the largest Services and EndpointSlices seen in practice (most are 1–10
 * KiB, so a page is a few MiB), while a cap the size of the body still fits beside a
 * Pod's other memory (the chart's limit is 1 GiB).
 */
import type * as HttpModule from "node:http";

/** Default cap on one response body: 64 MiB. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** Bytes of an error body kept for the message; the rest is drained and dropped. */
const MAX_ERROR_BODY = 64 * 1024;

/** A response body grew past the client's cap; what it held is released. */
export class ResponseTooLargeError extends Error {
  override readonly name = "ResponseTooLargeError";
  readonly maxBytes: number;

  constructor(maxBytes: number) {
    super(`response body larger than the cap of ${maxBytes} bytes; answer dropped`);
    this.maxBytes = maxBytes;
  }
}

/** `value` as a cap in bytes; throws a RangeError naming `option` unless it is a positive whole number. */
export function byteCap(value: number, option: string): number {
  if (!Number.isInteger(value) || value <= 0)
    throw new RangeError(`${option} must be a positive integer (got ${value})`);
  return value;
}

/**
 * The chunks of one success body, at most `maxBytes` of them. `push` returns false once
 * the body has grown past the cap; the chunks are then already released.
 */
export class BodyCollector {
  readonly maxBytes: number;
  #chunks: Buffer[] = [];
  #bytes = 0;

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.#bytes;
  }

  push(chunk: Buffer): boolean {
    this.#bytes += chunk.length;
    if (this.#bytes > this.maxBytes) {
      this.release();
      return false;
    }
    this.#chunks.push(chunk);
    return true;
  }

  /** The body as text, releasing the chunks. */
  take(): string {
    const text = Buffer.concat(this.#chunks, this.#bytes).toString("utf8");
    this.release();
    return text;
  }

  release(): void {
    this.#chunks = [];
    this.#bytes = 0;
  }
}

/** Collects at most MAX_ERROR_BODY bytes of `res` and hands them over as text at its end. */
export function collectErrorBody(res: HttpModule.IncomingMessage, done: (text: string) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on("data", (chunk: Buffer) => {
    if (size >= MAX_ERROR_BODY) return;
    size += chunk.length;
    chunks.push(chunk);
  });
  res.on("end", () => {
    const text = Buffer.concat(chunks).toString("utf8");
    chunks.length = 0; // the socket may keep this listener alive (see `KubeClient.request`)
    done(text);
  });
}
