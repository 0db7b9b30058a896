/**
 * A log destination that never blocks its caller and never grows without bound: complete
 * lines go into a queue of at most `maxBytes`, one write at a time hands queued lines to a
 * `LineBackend` (the single writer of the fd or file), and lines that do not fit while the
 * backend does not drain are dropped and counted. Once there is room again (or the queue
 * has drained), one report line saying how many lines were dropped goes into the stream
 * at the place of the gap.
 *
 * Invariants: a queued chunk is written whole and in order (one `backend.write` at a time,
 * chunks are never cut); a chunk is either queued whole or dropped whole; the report line
 * is the only thing queued beyond `maxBytes` (it is small and at most one per gap).
 */

/** The one writer of a destination. */
export interface LineBackend {
  /**
   * Hands `data` (whole lines) to the destination without waiting for it; `done` runs once
   * all of it is written, or with the error that ended this write (nothing of it counts
   * as written then).
   */
  write(data: string, done: (error: Error | null) => void): void;
  /** True when a line written now (`writeNow`) cannot cut a line handed to `write` before. */
  canWriteNow(): boolean;
  /**
   * At process exit, synchronously: writes all of `line` and returns true, or writes
   * nothing and returns false when the destination does not take it by `deadline`
   * (`performance.now()` time) or fails.
   */
  writeNow(line: string, deadline: number): boolean;
}

export interface BoundedDestinationOptions {
  readonly backend: LineBackend;
  /** Bytes queued or being written at most; more is dropped. Default 4 MiB. */
  readonly maxBytes?: number;
  /** A write hands over at most this many bytes of whole chunks (one chunk may be longer). Default 64 KiB. */
  readonly maxWriteBytes?: number;
  /** Wall clock (ms since the epoch) for the report line's `time`, as pino writes it. */
  readonly now?: () => number;
  /** Told once when writing starts failing (and again after it recovered and fails anew). */
  readonly onError?: (error: Error) => void;
}

export const DEFAULT_MAX_BYTES = 4 * 1024 * 1024;
/**
 * How long the exit flush may wait for a destination that is slow to take lines. Short:
 * while it waits the process, its worker threads included, lives on (on Lease loss the
 * writer thread's own fence stops its writes anyway).
 */
export const EXIT_FLUSH_BUDGET_MS = 100;
const DEFAULT_MAX_WRITE_BYTES = 64 * 1024;

/** Number of lines in `chunk` (a chunk without a newline counts as one). */
export function lineCount(chunk: string): number {
  let n = 0;
  for (let i = chunk.indexOf("\n"); i !== -1; i = chunk.indexOf("\n", i + 1)) n += 1;
  return Math.max(n, 1);
}

/** The pino-shaped warning that `dropped` lines are missing at this place of the stream. */
export function droppedReportLine(dropped: number, time: number, pid: number): string {
  return `${JSON.stringify({
    level: 40,
    time,
    pid,
    actor: "log",
    droppedLines: dropped,
    msg: `${dropped} log line${dropped === 1 ? "" : "s"} dropped: the log destination did not take them in time`,
  })}\n`;
}

export class BoundedDestination {
  readonly #backend: LineBackend;
  readonly #maxBytes: number;
  readonly #maxWriteBytes: number;
  readonly #now: () => number;
  readonly #onError: (error: Error) => void;
  /** Queued chunks from `#head` on; a chunk is one `write()` call's whole lines. */
  #queue: string[] = [];
  #head = 0;
  /** Bytes queued plus bytes being written. */
  #bytes = 0;
  #writing = false;
  #failing = false;
  #dropped = 0;
  #unreported = 0;

  constructor(options: BoundedDestinationOptions) {
    this.#backend = options.backend;
    this.#maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.#maxWriteBytes = options.maxWriteBytes ?? DEFAULT_MAX_WRITE_BYTES;
    this.#now = options.now ?? Date.now;
    this.#onError = options.onError ?? (() => {});
  }

  /** Lines dropped since this destination was made (never decreases). */
  get dropped(): number {
    return this.#dropped;
  }

  /** Bytes queued or being written (at most `maxBytes` plus one report line). */
  get bufferedBytes(): number {
    return this.#bytes;
  }

  /**
   * Queues `chunk` (one or more complete lines, the last ending in a newline) or, if it
   * does not fit, drops and counts it. Never blocks, never throws.
   */
  write(chunk: string): void {
    const size = Buffer.byteLength(chunk);
    if (this.#bytes + size > this.#maxBytes) {
      this.#drop(lineCount(chunk));
      return;
    }
    this.#reportDrops();
    this.#enqueue(chunk, size);
    this.#pump();
  }

  /** Counts `lines` that were lost before they reached this destination as dropped. */
  discard(lines: number): void {
    this.#drop(lines);
  }

  /**
   * At process exit: writes what is queued now, line by line, as far as the backend
   * takes it within `budgetMs`, then the report of dropped lines if there is one; what
   * is left is counted as dropped. Writes nothing while an earlier write is half done
   * (the rest of it would be cut by a later line). The destination is not used after this.
   */
  flushSync(budgetMs = EXIT_FLUSH_BUDGET_MS): void {
    if (this.#head >= this.#queue.length && this.#unreported === 0) return;
    if (!this.#backend.canWriteNow()) {
      this.#dropQueued();
      return;
    }
    const deadline = performance.now() + budgetMs;
    for (; this.#head < this.#queue.length; this.#head++) {
      const lines = (this.#queue[this.#head] ?? "").split(/(?<=\n)/);
      for (let i = 0; i < lines.length; i++) {
        if (this.#backend.writeNow(lines[i] ?? "", deadline)) continue;
        this.#drop(1);
        if (performance.now() < deadline) continue; // this line alone could not go (too long)
        this.#drop(lines.length - i - 1);
        this.#head += 1;
        this.#dropQueued();
        return;
      }
    }
    this.#queue = [];
    this.#head = 0;
    if (this.#unreported === 0) return;
    if (this.#backend.writeNow(droppedReportLine(this.#unreported, this.#now(), process.pid), deadline))
      this.#unreported = 0;
  }

  #enqueue(chunk: string, size: number): void {
    this.#queue.push(chunk);
    this.#bytes += size;
  }

  #drop(lines: number): void {
    this.#dropped += lines;
    this.#unreported += lines;
  }

  #dropQueued(): void {
    for (; this.#head < this.#queue.length; this.#head++) this.#drop(lineCount(this.#queue[this.#head] ?? ""));
    this.#queue = [];
    this.#head = 0;
  }

  /** Queues the report of the lines dropped since the last report, if any. */
  #reportDrops(): void {
    if (this.#unreported === 0) return;
    const line = droppedReportLine(this.#unreported, this.#now(), process.pid);
    this.#unreported = 0;
    this.#enqueue(line, Buffer.byteLength(line));
  }

  /** Starts the next write unless one is in flight: whole chunks, up to `maxWriteBytes`. */
  #pump(): void {
    if (this.#writing || this.#head >= this.#queue.length) return;
    let data = this.#queue[this.#head] ?? "";
    let size = Buffer.byteLength(data);
    let lines = lineCount(data);
    this.#head += 1;
    while (this.#head < this.#queue.length) {
      const next = this.#queue[this.#head] ?? "";
      const nextSize = Buffer.byteLength(next);
      if (size + nextSize > this.#maxWriteBytes) break;
      data += next;
      size += nextSize;
      lines += lineCount(next);
      this.#head += 1;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue = this.#queue.slice(this.#head);
      this.#head = 0;
    }
    this.#writing = true;
    this.#backend.write(data, (error) => this.#written(size, lines, error));
  }

  #written(size: number, lines: number, error: Error | null): void {
    this.#writing = false;
    this.#bytes -= size;
    if (error) {
      this.#drop(lines);
      if (!this.#failing) this.#onError(error);
      this.#failing = true;
    } else {
      this.#failing = false;
      // Writing works again and nothing waits: say now how many lines are missing.
      if (this.#head >= this.#queue.length) this.#reportDrops();
    }
    this.#pump();
  }
}
