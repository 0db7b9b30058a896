/**
 * The writer runner in process, with a fake writer thread: an Event reported while
 * the writer is down is handed to the next writer once it is ready, never dropped.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { describe, it } from "node:test";
import type { Worker } from "node:worker_threads";
import { defaultConfig } from "../../src/config.ts";
import { silentLogger } from "../../src/log.ts";
import type { EventRequest, ToWriter } from "../../src/protocol/messages.ts";
import { WriterRunner } from "../../src/supervisor/writer-runner.ts";
import { eventually } from "../helpers/kube.ts";

/** A writer thread that records what it is sent; the test makes it ready or exit. */
class FakeWriter extends EventEmitter {
  readonly received: ToWriter[] = [];
  postMessage(message: ToWriter): void {
    this.received.push(message);
  }
  terminate(): Promise<number> {
    this.emit("exit", 1);
    return Promise.resolve(1);
  }
  ready(): void {
    this.emit("message", { type: "writer.ready" });
  }
  events(): string[] {
    return this.received.flatMap((m) => (m.type === "writer.event" ? [m.event.reason] : []));
  }
}

function event(reason: string): EventRequest {
  return {
    involved: { kind: "Secret", apiVersion: "v1", namespace: "fleet", name: "s" },
    type: "Normal",
    reason,
    message: reason,
  };
}

describe("writer runner", () => {
  it("an Event reported while the writer restarts is handed to the new writer once it is ready", async () => {
    const writers: FakeWriter[] = [];
    const runner = new WriterRunner({
      config: defaultConfig(),
      local: { server: "https://127.0.0.1:1", auth: { kind: "token", token: "t" } },
      logger: silentLogger(),
      policy: { initialMs: 1, maxMs: 1, windowMs: 60_000, crashLoopAfter: 5, crashLoopRetryMs: 1 },
      stopTimeoutMs: 1_000,
      writeFence: false,
      onReady: () => {},
      onStatus: () => {},
      spawn: () => {
        const w = new FakeWriter();
        writers.push(w);
        return w as unknown as Worker;
      },
    });
    runner.start();
    const first = writers[0];
    assert.ok(first);
    first.ready();
    runner.sendEvent(event("Before"));
    assert.deepEqual(first.events(), ["Before"]);

    first.emit("exit", 1);
    runner.sendEvent(event("DuringRestart"));
    const second = await eventually("a new writer", () => writers[1]);
    assert.deepEqual(second.events(), [], "not before it is ready");
    second.ready();
    assert.deepEqual(second.events(), ["DuringRestart"]);
    assert.equal(runner.state.restarts, 1);
    const stopped = runner.stop();
    second.emit("exit", 0);
    await stopped;
  });

  it("sharded: a held-shards change resolves once the writer answers it is fenced, or exits; a new writer gets the latest", async () => {
    const writers: FakeWriter[] = [];
    const runner = new WriterRunner({
      config: defaultConfig({ leaderElect: true, shards: 6 }),
      local: { server: "https://127.0.0.1:1", auth: { kind: "token", token: "t" } },
      logger: silentLogger(),
      policy: { initialMs: 1, maxMs: 1, windowMs: 60_000, crashLoopAfter: 5, crashLoopRetryMs: 1 },
      stopTimeoutMs: 1_000,
      writeFence: true,
      onReady: () => {},
      onStatus: () => {},
      spawn: () => {
        const w = new FakeWriter();
        writers.push(w);
        return w as unknown as Worker;
      },
    });
    runner.start();
    const first = writers[0];
    assert.ok(first);
    const init = first.received[0];
    assert.ok(init?.type === "writer.init" && init.options.shards === 6, "the writer learns S at init");
    // --mcs-recheck-period's default reaches the writer's ServiceImport discovery (SPEC §12).
    assert.equal(init.options.mcsRecheckMs, 300_000);
    let settled = false;
    const giving = runner.setShards([{ shard: 1, writableUntil: 50 }]).then(() => {
      settled = true;
    });
    const sent = first.received.at(-1);
    assert.ok(sent?.type === "writer.shards");
    first.emit("message", { type: "writer.shards-fenced", seq: sent.seq - 1 });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(settled, false, "an answer to an older message does not count");
    first.emit("message", { type: "writer.shards-fenced", seq: sent.seq });
    await giving;

    const pending = runner.setShards([{ shard: 2, writableUntil: 60 }]);
    first.emit("exit", 1);
    await pending; // a writer that is gone has nothing in flight
    const second = await eventually("a new writer", () => writers[1]);
    const latest = second.received.find((m) => m.type === "writer.shards");
    assert.deepEqual(latest?.type === "writer.shards" ? latest.held : undefined, [{ shard: 2, writableUntil: 60 }]);
    const stopped = runner.stop();
    second.emit("exit", 0);
    await stopped;
  });
});
