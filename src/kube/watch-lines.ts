/**
 * Decoding of a watch stream: newline-delimited JSON split into lines with a cap on the
 * length of one line, and each line checked to be a watch event.
 *
 * Why the cap: a remote API server (or anything between it and us) that streams one
 * endless line would otherwise grow the watching thread's heap until it dies. A real
 * watch event holds one object, and the API server refuses objects over ~1.5 MiB (its
 * storage limit), so a few MiB is far above any honest line.
 */

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

/**
 * One line of a watch stream. `object` is a JSON object (for ERROR a `Status`); its shape
 * beyond that is not checked here.
 */
export interface WatchEvent {
  readonly type: WatchEventType;
  readonly object: Readonly<Record<string, unknown>>;
}

/** Default cap on one watch line, in bytes: 4 MiB. */
export const DEFAULT_MAX_WATCH_LINE_BYTES = 4 * 1024 * 1024;

/** A line grew past the cap; the splitter has dropped everything it held. */
export class LineTooLongError extends Error {
  override readonly name = "LineTooLongError";
  readonly maxBytes: number;

  constructor(maxBytes: number) {
    super(`watch line longer than ${maxBytes} bytes without a newline; stream dropped`);
    this.maxBytes = maxBytes;
  }
}

const NEWLINE = 0x0a;

/**
 * Splits a byte stream into lines (without their `\n`), holding at most `maxBytes` of an
 * unfinished line. Works on bytes, so a multi-byte UTF-8 character split across chunks
 * is never cut (0x0a never occurs inside one). Memory: the unfinished line only, at most
 * `maxBytes` (plus the chunk being split).
 */
export class LineSplitter {
  readonly maxBytes: number;
  #pending: Buffer[] = [];
  #pendingBytes = 0;

  /** @throws RangeError when `maxBytes` is not a positive integer. */
  constructor(maxBytes: number = DEFAULT_MAX_WATCH_LINE_BYTES) {
    if (!Number.isInteger(maxBytes) || maxBytes <= 0)
      throw new RangeError(`maxWatchLineBytes must be a positive integer (got ${maxBytes})`);
    this.maxBytes = maxBytes;
  }

  /**
   * The complete lines `chunk` finishes, in order.
   * @throws LineTooLongError when a line reaches more than `maxBytes` before its newline;
   *   the splitter is then empty, and lines completed earlier in this chunk are dropped.
   */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (let newline = chunk.indexOf(NEWLINE); newline >= 0; newline = chunk.indexOf(NEWLINE, start)) {
      this.#hold(chunk.subarray(start, newline));
      lines.push(this.#take());
      start = newline + 1;
    }
    if (start < chunk.length) this.#hold(chunk.subarray(start));
    return lines;
  }

  /** What is left after the stream ended (a last line without a newline), emptying the splitter. */
  end(): string {
    return this.#take();
  }

  /** Bytes of the unfinished line held now. */
  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  #hold(part: Buffer): void {
    if (part.length === 0) return;
    if (this.#pendingBytes + part.length > this.maxBytes) {
      this.#pending = [];
      this.#pendingBytes = 0;
      throw new LineTooLongError(this.maxBytes);
    }
    this.#pending.push(part);
    this.#pendingBytes += part.length;
  }

  #take(): string {
    const line =
      this.#pending.length === 1
        ? (this.#pending[0] as Buffer).toString("utf8")
        : Buffer.concat(this.#pending, this.#pendingBytes).toString("utf8");
    this.#pending = [];
    this.#pendingBytes = 0;
    return line;
  }
}

const WATCH_EVENT_TYPES: ReadonlySet<string> = new Set<WatchEventType>([
  "ADDED",
  "MODIFIED",
  "DELETED",
  "BOOKMARK",
  "ERROR",
]);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Parses one line of a watch stream; throws when it is not `{type, object}` with a known type. */
export function decodeWatchEvent(line: string): WatchEvent {
  const parsed: unknown = JSON.parse(line);
  if (!isRecord(parsed)) throw new Error("watch event is not a JSON object");
  const { type, object } = parsed;
  if (typeof type !== "string" || !WATCH_EVENT_TYPES.has(type)) {
    throw new Error(`unknown watch event type ${JSON.stringify(type)}`);
  }
  if (!isRecord(object)) throw new Error(`watch event ${type} has no object`);
  return { type: type as WatchEventType, object };
}
