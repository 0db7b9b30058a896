/**
 * Both thread entries in real worker threads: a message that does not decode leaves
 * the thread running, and every `actor.init` is answered. No API server is needed:
 * the remote actors point at a closed loopback port and are stopped right away.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { after, describe, it } from "node:test";
import { MessageChannel, Worker } from "node:worker_threads";
import { decodeFromRemoteActor, decodeFromWriter } from "../../src/protocol/messages.ts";
import { type ActorInit, actorInitMessage } from "../helpers/actor-init.ts";

const entry = (actor: string): URL => new URL(`../../workers/${actor}/entry.ts`, import.meta.url);

/** The messages a worker posts, in order; `next(match)` waits for the first unread one matching. */
function inbox(worker: Worker) {
  const received: unknown[] = [];
  const waiters: (() => void)[] = [];
  worker.on("message", (m: unknown) => {
    received.push(m);
    for (const w of waiters.splice(0)) w();
  });
  let read = 0;
  return async function next(match: (m: unknown) => boolean): Promise<unknown> {
    for (;;) {
      while (read < received.length) {
        const m = received[read++];
        if (match(m)) return m;
      }
      const exited = once(worker, "exit").then(([code]) => {
        throw new Error(`worker exited (code ${String(code)}) before the expected message`);
      });
      await Promise.race([new Promise<void>((resolve) => waiters.push(resolve)), exited]);
    }
  };
}

const typed = (type: string) => (m: unknown) => (m as { type?: unknown }).type === type;

/** An `actor.init` of `cluster` at `epoch` against a closed port, with the writer's end and the other end of its channel. */
function actorInit(
  cluster: string,
  epoch: number,
  logLevel: ActorInit["options"]["logLevel"],
): { message: ActorInit; other: MessageChannel["port2"] } {
  const { port1, port2 } = new MessageChannel();
  return { message: actorInitMessage(cluster, epoch, logLevel, port1), other: port2 };
}

describe("thread entries in worker threads", () => {
  const workers: Worker[] = [];
  after(async () => {
    await Promise.all(workers.map((w) => w.terminate()));
  });

  it("the writer thread drops a message that does not decode and keeps serving", async () => {
    const worker = new Worker(entry("local-writer"), { stdout: true, stderr: true });
    workers.push(worker);
    const next = inbox(worker);
    worker.postMessage({ type: "writer.clusters", keep: "east" });
    worker.postMessage({ type: "writer.stop" });
    const stopped = decodeFromWriter(await next(typed("writer.stopped")));
    assert.equal(stopped.type, "writer.stopped");
  });

  it("a remote-cluster thread answers a duplicate actor.init with actor.ready, and one of another epoch with actor.failed", async () => {
    const worker = new Worker(entry("remote-cluster"), { stdout: true, stderr: true });
    workers.push(worker);
    const next = inbox(worker);
    const init = (epoch: number) => actorInit("east", epoch, "silent");
    const first = init(5);
    worker.postMessage(first.message, [first.message.writerPort]);
    await next(typed("actor.ready"));
    const again = init(5);
    worker.postMessage(again.message, [again.message.writerPort]);
    const ready = decodeFromRemoteActor(await next(typed("actor.ready")));
    assert.deepEqual(ready, { type: "actor.ready", cluster: "east", epoch: 5 });
    const newer = init(6);
    worker.postMessage(newer.message, [newer.message.writerPort]);
    const failed = decodeFromRemoteActor(await next(typed("actor.failed")));
    assert.ok(failed.type === "actor.failed" && failed.epoch === 6, JSON.stringify(failed));
    assert.match(failed.error.message, /already hosted on this thread by epoch 5/);
    worker.postMessage({ type: "actor.stop", cluster: "east" });
    const stopped = decodeFromRemoteActor(await next(typed("actor.stopped")));
    assert.deepEqual(stopped, { type: "actor.stopped", cluster: "east", epoch: 5 });
    for (const c of [first, again, newer]) c.other.close();
  });

  it("actors packed on one thread log through one logger, each line bound to its own cluster and epoch", async () => {
    const worker = new Worker(entry("remote-cluster"), { stdout: true, stderr: true });
    workers.push(worker);
    const next = inbox(worker);
    const lines: Record<string, unknown>[] = [];
    let partial = "";
    worker.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      const parts = (partial + chunk).split("\n");
      partial = parts.pop() ?? "";
      for (const part of parts) if (part !== "") lines.push(JSON.parse(part) as Record<string, unknown>);
    });
    const others: MessageChannel["port2"][] = [];
    for (const [name, epoch] of [
      ["east", 3],
      ["west", 8],
    ] as const) {
      const { message, other } = actorInit(name, epoch, "info");
      others.push(other);
      worker.postMessage(message, [message.writerPort]);
      await next(typed("actor.ready"));
    }
    // Each actor logs its state as its watch fails against the closed port.
    const from = (cluster: string) => lines.filter((l) => typeof l["msg"] === "string" && l["cluster"] === cluster);
    const deadline = Date.now() + 20_000;
    while (from("east").length === 0 || from("west").length === 0) {
      assert.ok(Date.now() < deadline, `no line of each cluster within 20 s: ${JSON.stringify(lines)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const [cluster, epoch] of [
      ["east", 3],
      ["west", 8],
    ] as const) {
      for (const line of from(cluster)) {
        assert.equal(line["epoch"], epoch, JSON.stringify(line));
        assert.equal(line["actor"], "remote-cluster");
        assert.equal(line["pid"], process.pid);
      }
    }
    assert.ok(
      lines.every((l) => l["cluster"] === "east" || l["cluster"] === "west"),
      "every line names its cluster",
    );
    for (const cluster of ["east", "west"]) {
      worker.postMessage({ type: "actor.stop", cluster });
      await next(typed("actor.stopped"));
    }
    for (const port of others) port.close();
  });
});
