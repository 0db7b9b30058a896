/**
 * The writers behind a `BoundedDestination`: each is the only writer of its fd in this
 * process, and none blocks the event loop while a pipe does not drain.
 */
import { writeSync as fsWriteSync, write } from "node:fs";
import { Socket } from "node:net";
import type { LineBackend } from "./bounded-destination.ts";

/** Bytes a single write to a pipe puts in whole or not at all (POSIX guarantees at least 512; Linux 4096). */
const PIPE_BUF = 4096;
/** For a 1 ms pause between attempts of the exit flush. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/**
 * Standard output: through `process.stdout` when it is a pipe or socket. Node writes those
 * from the event loop (the fd is non-blocking: a full pipe queues the write instead of
 * waiting), so nothing waits on a reader; anything else writes through `process.stdout`
 * too, so the fd keeps one writer. A terminal or a file (shell redirection) is written
 * with `fdBackend`.
 */
export function stdoutBackend(): LineBackend {
  const stream = process.stdout;
  if (!(stream instanceof Socket) || stream.isTTY) return fdBackend(1);
  // A write error (EPIPE: the reader went away) reaches the write callback; without a
  // listener the stream's 'error' event would end the process.
  stream.on("error", () => {});
  return {
    write(data, done) {
      stream.write(data, (error) => done(error ?? null));
    },
    // Node's stream writes at once what the pipe takes; its queue is empty when nothing
    // handed over is half written.
    canWriteNow: () => stream.writableLength === 0,
    writeNow(line, deadline) {
      // A longer line could be cut by a pipe that fills up: it is left out, never split.
      const size = Buffer.byteLength(line);
      if (size > PIPE_BUF) return false;
      for (;;) {
        try {
          return fsWriteSync(1, line) === size;
        } catch (error) {
          // EAGAIN: the pipe is full (the fd is non-blocking); a reader may drain it soon.
          if ((error as NodeJS.ErrnoException).code !== "EAGAIN" || performance.now() >= deadline) return false;
          Atomics.wait(PAUSE, 0, 0, 1);
        }
      }
    },
  };
}

/**
 * An fd written with `fs.write` on libuv's pool, one write at a time: a file (`--log-file`,
 * or standard output redirected to one) or a terminal. Neither stays stuck the way an
 * unread pipe does; if one does, one pool thread waits, not the event loop.
 */
export function fdBackend(fd: number): LineBackend {
  const writeAll = (buffer: Buffer, offset: number, done: (error: Error | null) => void): void => {
    write(fd, buffer, offset, buffer.length - offset, null, (error, written) => {
      if (error) done(error);
      else if (offset + written < buffer.length) writeAll(buffer, offset + written, done);
      else done(null);
    });
  };
  return {
    write(data, done) {
      writeAll(Buffer.from(data), 0, done);
    },
    // The kernel serialises writes to one file or terminal: a write now cannot cut a line
    // a pool thread is writing (it may land before that chunk, though).
    canWriteNow: () => true,
    writeNow(line) {
      // Files and terminals do not report a full buffer: the write waits as long as it takes.
      const buffer = Buffer.from(line);
      try {
        for (let offset = 0; offset < buffer.length; ) offset += fsWriteSync(fd, buffer, offset);
        return true;
      } catch {
        return false;
      }
    },
  };
}
