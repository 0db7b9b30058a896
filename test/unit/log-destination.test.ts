import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { BoundedDestination, type LineBackend, lineCount } from "../../src/log/bounded-destination.ts";
import { reportedDrops, ThreadDestination } from "../../src/log/thread-destination.ts";

/** A backend whose writes complete when the test says so, recording what it was handed. */
class ManualBackend implements LineBackend {
  readonly written: string[] = [];
  readonly writtenNow: string[] = [];
  readonly #pending: ((error: Error | null) => void)[] = [];
  /** What `writeNow` does: take the line, refuse it (pipe full). */
  takesNow = true;
  /** Whether a write handed over is half done (`canWriteNow` false). */
  halfWritten = false;

  write(data: string, done: (error: Error | null) => void): void {
    this.written.push(data);
    this.#pending.push(done);
  }
  canWriteNow(): boolean {
    return !this.halfWritten;
  }
  writeNow(line: string): boolean {
    if (this.takesNow) this.writtenNow.push(line);
    return this.takesNow;
  }
  get inFlight(): number {
    return this.#pending.length;
  }
  /** Completes the oldest write (successfully, or with `error`). */
  complete(error: Error | null = null): void {
    const done = this.#pending.shift();
    assert.ok(done, "a write is in flight");
    done(error);
  }
  /** Everything handed over, as lines. */
  lines(): string[] {
    return [...this.written, ...this.writtenNow].join("").split("\n").slice(0, -1);
  }
}

const line = (n: number): string => `${JSON.stringify({ level: 30, n, msg: "x".repeat(80) })}\n`;
const LINE_BYTES = Buffer.byteLength(line(10));

function destination(backend: ManualBackend, maxLines: number): BoundedDestination {
  return new BoundedDestination({ backend, maxBytes: maxLines * LINE_BYTES, now: () => 1_000 });
}

function reports(lines: readonly string[]): number[] {
  return lines
    .map((l) => JSON.parse(l) as { droppedLines?: number })
    .flatMap((l) => (l.droppedLines === undefined ? [] : [l.droppedLines]));
}

describe("bounded log destination", () => {
  it("hands lines to the backend one write at a time, whole and in order", () => {
    const backend = new ManualBackend();
    const d = destination(backend, 100);
    for (let n = 10; n < 15; n++) d.write(line(n));
    assert.equal(backend.inFlight, 1, "one write in flight, the rest queued");
    assert.deepEqual(backend.written, [line(10)]);
    backend.complete();
    assert.deepEqual(backend.written, [line(10), [11, 12, 13, 14].map(line).join("")], "the queue goes in one write");
    backend.complete();
    assert.deepEqual(
      backend.lines().map((l) => (JSON.parse(l) as { n: number }).n),
      [10, 11, 12, 13, 14],
    );
    assert.equal(d.dropped, 0);
    assert.equal(d.bufferedBytes, 0);
  });

  it("never buffers more than its bound while the backend does not drain: further lines are dropped whole and counted", () => {
    const backend = new ManualBackend();
    const d = destination(backend, 10);
    for (let n = 10; n < 1_010; n++) d.write(line(n));
    assert.ok(d.bufferedBytes <= 10 * LINE_BYTES, `${d.bufferedBytes} bytes buffered`);
    assert.equal(d.dropped, 990);
    // A chunk of several lines that does not fit counts as all its lines.
    d.write(line(1).repeat(3));
    assert.equal(d.dropped, 993);
  });

  it("reports how many lines were dropped at the place of the gap, once there is room again", () => {
    const backend = new ManualBackend();
    const d = destination(backend, 3);
    for (let n = 10; n < 20; n++) d.write(line(n)); // 10 in flight, 11 and 12 queued, 13..19 dropped
    backend.complete();
    d.write(line(20));
    backend.complete();
    backend.complete();
    const lines = backend.lines();
    assert.deepEqual(reports(lines), [7]);
    const ns = lines.map((l) => (JSON.parse(l) as { n?: number }).n ?? "report");
    assert.deepEqual(ns, [10, 11, 12, "report", 20]);
    assert.match(lines[3] ?? "", /"level":40,"time":1000,.*"msg":"7 log lines dropped/);
  });

  it("reports dropped lines once the queue has drained even when nothing more is logged", () => {
    const backend = new ManualBackend();
    const d = destination(backend, 2);
    for (let n = 10; n < 15; n++) d.write(line(n));
    backend.complete();
    backend.complete();
    assert.equal(backend.inFlight, 1, "the report is written");
    backend.complete();
    assert.deepEqual(reports(backend.lines()), [3]);
    assert.equal(d.dropped, 3, "the total never goes down");
  });

  it("counts the lines of a failed write as dropped, tells the failure once, and reports after writing works again", () => {
    const backend = new ManualBackend();
    const errors: Error[] = [];
    const d = new BoundedDestination({ backend, onError: (e) => errors.push(e), now: () => 1 });
    d.write(line(1));
    d.write(line(2));
    backend.complete(new Error("EPIPE"));
    backend.complete(new Error("EPIPE"));
    assert.equal(d.dropped, 2);
    assert.equal(errors.length, 1, "told once per failing spell");
    d.write(line(3));
    backend.complete();
    const after = backend.written.slice(2).join("").split("\n").slice(0, -1);
    assert.deepEqual(reports(after), [2], "the report comes first");
    assert.equal((JSON.parse(after[1] ?? "{}") as { n?: number }).n, 3);
  });

  it("writes what is queued at exit as far as the backend takes it now, and counts the rest as dropped", () => {
    const backend = new ManualBackend();
    const d = destination(backend, 100);
    for (let n = 10; n < 15; n++) d.write(line(n));
    d.flushSync();
    assert.deepEqual(backend.writtenNow, [11, 12, 13, 14].map(line), "the queued lines, after the one in flight");
    assert.equal(d.dropped, 0);

    const stuck = new ManualBackend();
    const s = destination(stuck, 100);
    for (let n = 10; n < 15; n++) s.write(line(n));
    stuck.takesNow = false;
    s.flushSync(0);
    assert.deepEqual(stuck.writtenNow, []);
    assert.equal(s.dropped, 4);
  });

  it("writes nothing at exit while a write is half done, so no line is cut", () => {
    const backend = new ManualBackend();
    const d = destination(backend, 100);
    for (let n = 10; n < 15; n++) d.write(line(n));
    backend.halfWritten = true;
    d.flushSync();
    assert.deepEqual(backend.writtenNow, []);
    assert.equal(d.dropped, 4);
  });

  it("counts lines by their newlines", () => {
    assert.equal(lineCount("a\n"), 1);
    assert.equal(lineCount("a\nb\n"), 2);
    assert.equal(lineCount("unterminated"), 1);
  });
});

describe("a worker thread's log stream", () => {
  /** A stream whose writes complete when the test says so, like a thread's stdout the main thread does not read. */
  function stuckStream(): { stream: Writable; chunks: string[]; release: () => void } {
    const chunks: string[] = [];
    const pending: (() => void)[] = [];
    const stream = new Writable({
      decodeStrings: false,
      highWaterMark: 1, // below the bound, as a thread's stdout (16 KiB) is below 1 MiB: 'drain' follows
      write(chunk: string, _encoding, callback) {
        chunks.push(chunk);
        pending.push(callback);
      },
    });
    const release = (): void => {
      while (pending.length > 0) pending.shift()?.();
    };
    return { stream, chunks, release };
  }

  it("holds at most its bound that the main thread has not read; further lines are dropped and reported once it drains", async () => {
    const { stream, chunks, release } = stuckStream();
    const d = new ThreadDestination(stream, 10 * LINE_BYTES, 7);
    for (let n = 10; n < 110; n++) d.write(line(n));
    assert.ok(stream.writableLength <= 10 * LINE_BYTES, `${stream.writableLength} bytes held`);
    for (let i = 0; i < 20 && !chunks.join("").includes("droppedLines"); i++) {
      release();
      await new Promise((resolve) => setImmediate(resolve));
    }
    const lines = chunks.join("").split("\n").slice(0, -1);
    assert.deepEqual(
      lines.slice(0, 10).map((l) => (JSON.parse(l) as { n: number }).n),
      [10, 11, 12, 13, 14, 15, 16, 17, 18, 19],
    );
    assert.deepEqual(
      lines.slice(10).map((l) => reportedDrops(l)),
      [90],
      "one report line once the stream drained",
    );
  });

  it("recognises only report lines as reports", () => {
    assert.equal(reportedDrops(line(1)), 0);
    assert.equal(reportedDrops('{"msg":"droppedLines in a message: \\"actor\\":\\"log\\",\\"droppedLines\\":5"}'), 0);
  });
});
