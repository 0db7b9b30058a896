/**
 * A worker thread's log destination: its `process.stdout`, which Node forwards to the
 * main thread (`relayThreadOutput` reads it there). Node's stream buffers what the main
 * thread has not taken yet; this keeps that buffer bounded: a line that would grow it
 * beyond `maxBytes` is dropped and counted, and one report line (the same as the main
 * thread's destination writes) says how many, before the next line that fits or once the
 * stream has drained. Lines are handed to the stream whole and at once, so what a thread
 * logged before it ends is delivered (Node flushes a thread's stdout when it ends).
 */
import type { Writable } from "node:stream";
import { droppedReportLine, lineCount } from "./bounded-destination.ts";

/** Node's stream may hold this much of a thread's output that the main thread has not read yet. */
export const THREAD_MAX_BYTES = 1024 * 1024;

export class ThreadDestination {
  readonly #stream: Writable;
  readonly #maxBytes: number;
  readonly #pid: number;
  #unreported = 0;

  constructor(stream: Writable, maxBytes = THREAD_MAX_BYTES, pid = process.pid) {
    this.#stream = stream;
    this.#maxBytes = maxBytes;
    this.#pid = pid;
    stream.on("drain", () => this.#report());
  }

  /** Hands `chunk` (whole lines) to the stream, or drops and counts it. Never blocks. */
  write(chunk: string): void {
    if (this.#stream.writableLength + Buffer.byteLength(chunk) > this.#maxBytes) {
      this.#unreported += lineCount(chunk);
      return;
    }
    this.#report();
    this.#stream.write(chunk);
  }

  #report(): void {
    if (this.#unreported === 0) return;
    const line = droppedReportLine(this.#unreported, Date.now(), this.#pid);
    this.#unreported = 0;
    this.#stream.write(line);
  }
}

let current: ThreadDestination | undefined;

/** This worker thread's one destination, on its `process.stdout` (made on first use; every logger of the thread shares it). */
export function threadDestination(): ThreadDestination {
  current ??= new ThreadDestination(process.stdout);
  return current;
}

/** Lines a thread reported dropped in `line`, if it is a report line (`droppedReportLine`); else 0. */
export function reportedDrops(line: string): number {
  if (!line.includes('"actor":"log","droppedLines":')) return 0;
  try {
    const parsed = JSON.parse(line) as { droppedLines?: unknown };
    return typeof parsed.droppedLines === "number" ? parsed.droppedLines : 0;
  } catch {
    return 0;
  }
}
