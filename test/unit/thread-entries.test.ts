/**
 * Both thread entries in-process, through a fake parent port and fake actors: what
 * they answer, what they report and drop, and the count their statuses carry.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { describe, it } from "node:test";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { PROTOCOL_ERROR_LOG, type ProtocolErrorLog } from "../../src/protocol/guard.ts";
import {
  type ChannelPort,
  type ClusterStatus,
  type FromRemoteActor,
  type FromWriter,
  type ToWriter,
  WRITE_DURATION_BUCKETS,
} from "../../src/protocol/messages.ts";
import { type HostedWriter, hostLocalWriter } from "../../workers/local-writer/entry.ts";
import type { RemoteActorPorts } from "../../workers/remote-cluster/actor.ts";
import { type HostedActor, hostRemoteActors } from "../../workers/remote-cluster/entry.ts";
import { actorInitMessage } from "../helpers/actor-init.ts";

class FakeParentPort<Out> implements ChannelPort<Out> {
  readonly posted: Out[] = [];
  closed = false;
  #listener: ((message: unknown) => void) | undefined;
  postMessage(message: Out): void {
    this.posted.push(message);
  }
  on(_event: "message", listener: (message: unknown) => void): this {
    this.#listener = listener;
    return this;
  }
  close(): void {
    this.closed = true;
  }
  /** Delivers `raw` as the parent would; throws whatever the entry's handler throws. */
  deliver(raw: unknown): void {
    this.#listener?.(raw);
  }
}

class RecordingLog implements ProtocolErrorLog {
  readonly lines: { fields: Record<string, unknown>; message: string }[] = [];
  error(fields: object, message: string): void {
    this.lines.push({ fields: fields as Record<string, unknown>, message });
  }
  /** The `err.message` of every protocol-error line. */
  get rejections(): string[] {
    return this.lines
      .filter((l) => l.message === PROTOCOL_ERROR_LOG)
      .map((l) => String((l.fields["err"] as { message?: unknown }).message));
  }
}

const writerInit: ToWriter = {
  type: "writer.init",
  connection: { server: "https://127.0.0.1:1", auth: { kind: "anonymous" } },
  options: {
    createNamespaces: false,
    excludedNamespaces: [],
    concurrency: 2,
    qps: 0,
    burst: 1,
    resyncPeriodMs: 60_000,
    blockedRecheckMs: 1_000,
    endpointsApi: "endpoints",
    logLevel: "silent",
    namespace: "fleet-mirror",
  },
};

/** A writer that records the calls it gets and can post a status. */
function fakeWriter() {
  const calls: string[] = [];
  let post: (m: FromWriter) => void = () => {};
  const writer: HostedWriter & { ready: boolean } = {
    ready: false,
    start: () => void calls.push("start"),
    attach: () => void calls.push("attach"),
    setKeep: (keep) => void calls.push(`keep ${keep.join(",")}`),
    recordEvent: async () => void calls.push("event"),
    fence: () => void calls.push("fence"),
    setShards: (seq) => void calls.push(`shards ${seq}`),
    stop: async () => void calls.push("stop"),
    links: { set: (message) => void calls.push(`links ${message.seq}`) },
  };
  const status = (): void =>
    post({
      type: "writer.status",
      status: {
        ready: true,
        queueDepth: 0,
        inFlight: 0,
        writes: {},
        retries: 0,
        writeDuration: { buckets: WRITE_DURATION_BUCKETS.map(() => 0), sum: 0, count: 0 },
        clusters: {},
      },
    });
  return {
    writer,
    calls,
    status,
    create: (_init: unknown, send: (m: FromWriter) => void) => {
      post = send;
      return writer;
    },
  };
}

describe("local-writer entry", () => {
  it("reports a message that does not decode, drops it, and counts it in the next status", () => {
    const port = new FakeParentPort<FromWriter>();
    const log = new RecordingLog();
    const fake = fakeWriter();
    hostLocalWriter(port, { log, createWriter: fake.create });
    port.deliver(writerInit);
    assert.doesNotThrow(() => port.deliver({ type: "writer.clusters", keep: "east" }));
    assert.doesNotThrow(() => port.deliver({ type: "writer.event", event: { reason: 5 } }));
    assert.doesNotThrow(() => port.deliver("garbage"));
    port.deliver({ type: "writer.clusters", keep: ["east"] });
    assert.deepEqual(fake.calls, ["start", "keep east"]);
    assert.equal(log.rejections.length, 3);
    assert.match(log.rejections[0] ?? "", /^writer\.clusters: keep: expected Array but received "east"$/);
    assert.match(log.rejections[1] ?? "", /^writer\.event: event\.involved: required field is missing$/);
    fake.status();
    const status = port.posted.at(-1);
    assert.ok(status?.type === "writer.status");
    assert.equal(status.status.protocolErrors, 3);
  });

  it("answers a writer.init that does not decode with writer.failed naming the bad field", () => {
    const port = new FakeParentPort<FromWriter>();
    const fake = fakeWriter();
    hostLocalWriter(port, { log: new RecordingLog(), createWriter: fake.create });
    const bad = { ...writerInit, options: { ...(writerInit.type === "writer.init" ? writerInit.options : {}) } };
    bad.options = { ...bad.options, concurrency: 2.5 };
    port.deliver(bad);
    const failed = port.posted[0];
    assert.ok(failed?.type === "writer.failed", JSON.stringify(port.posted));
    assert.equal(failed.error.message, "writer.init: options.concurrency: must be an integer");
    assert.deepEqual(fake.calls, []);
  });

  it("answers a duplicate writer.init with writer.ready once the writer is ready, and starts nothing twice", () => {
    const port = new FakeParentPort<FromWriter>();
    const fake = fakeWriter();
    hostLocalWriter(port, { log: new RecordingLog(), createWriter: fake.create });
    port.deliver(writerInit);
    port.deliver(writerInit); // not ready yet: its own writer.ready will follow
    assert.deepEqual(port.posted, []);
    fake.writer.ready = true;
    port.deliver(writerInit);
    assert.deepEqual(port.posted, [{ type: "writer.ready" }]);
    assert.deepEqual(fake.calls, ["start"]);
  });
});

/** An actor that records its lifecycle and can post a status through its ports. */
function fakeActors() {
  const events: string[] = [];
  const ports = new Map<string, RemoteActorPorts>();
  const create = (init: { cluster: { name: string }; epoch: number }, actorPorts: RemoteActorPorts): HostedActor => {
    const tag = `${init.cluster.name}/${init.epoch}`;
    ports.set(tag, actorPorts);
    return {
      cluster: init.cluster.name,
      epoch: init.epoch,
      attachWriter: () => void events.push(`attach ${tag}`),
      start: () => void events.push(`start ${tag}`),
      stop: async () => void events.push(`stop ${tag}`),
      runLater: (fn) => fn(),
    };
  };
  return { events, ports, create };
}

/** An `actor.init` of cluster `east` at `epoch`. */
const actorInit = (epoch: number, writerPort: MessagePort) => actorInitMessage("east", epoch, "silent", writerPort);

describe("remote-cluster entry", () => {
  it("answers an actor.init of the running epoch with actor.ready and closes the duplicate's writer port", async () => {
    const port = new FakeParentPort<FromRemoteActor>();
    const fake = fakeActors();
    hostRemoteActors(port, { log: new RecordingLog(), createActor: fake.create });
    const first = new MessageChannel();
    port.deliver(actorInit(5, first.port1));
    const duplicate = new MessageChannel();
    const closed = once(duplicate.port2, "close");
    port.deliver(actorInit(5, duplicate.port1));
    await closed;
    assert.deepEqual(port.posted, [
      { type: "actor.ready", cluster: "east", epoch: 5 },
      { type: "actor.ready", cluster: "east", epoch: 5 },
    ]);
    assert.deepEqual(fake.events, ["attach east/5", "start east/5"]);
    first.port2.close();
  });

  it("answers an actor.init of another epoch for a hosted cluster with actor.failed and leaves the running one alone", async () => {
    const port = new FakeParentPort<FromRemoteActor>();
    const fake = fakeActors();
    hostRemoteActors(port, { log: new RecordingLog(), createActor: fake.create });
    const first = new MessageChannel();
    port.deliver(actorInit(5, first.port1));
    const newer = new MessageChannel();
    const closed = once(newer.port2, "close");
    port.deliver(actorInit(6, newer.port1));
    await closed;
    const failed = port.posted[1];
    assert.ok(failed?.type === "actor.failed" && failed.cluster === "east" && failed.epoch === 6);
    assert.match(failed.error.message, /already hosted on this thread by epoch 5; init of epoch 6 refused/);
    assert.deepEqual(fake.events, ["attach east/5", "start east/5"]);
    port.deliver({ type: "actor.stop", cluster: "east" });
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual(port.posted[2], { type: "actor.stopped", cluster: "east", epoch: 5 });
    assert.equal(port.closed, true);
    first.port2.close();
  });

  it("answers an actor.init that does not decode but names cluster and epoch with actor.failed", async () => {
    const port = new FakeParentPort<FromRemoteActor>();
    const log = new RecordingLog();
    hostRemoteActors(port, { log, createActor: fakeActors().create });
    const channel = new MessageChannel();
    const closed = once(channel.port2, "close");
    port.deliver({ ...actorInit(2, channel.port1), options: { logLevel: "info" } });
    await closed;
    const failed = port.posted[0];
    assert.ok(failed?.type === "actor.failed" && failed.epoch === 2, JSON.stringify(port.posted));
    assert.equal(failed.error.message, "actor.init: options.resolvePeriodMs: required field is missing");
    assert.equal(log.rejections.length, 1);
  });

  it("reports and drops malformed messages and refused test hooks, and counts them in every status", () => {
    const port = new FakeParentPort<FromRemoteActor>();
    const log = new RecordingLog();
    const fake = fakeActors();
    hostRemoteActors(port, { log, createActor: fake.create });
    const channel = new MessageChannel();
    assert.doesNotThrow(() => port.deliver({ type: "actor.stop" }));
    port.deliver(actorInit(1, channel.port1));
    assert.doesNotThrow(() => port.deliver({ type: "actor.inject-fault", cluster: "east", kind: "throw" }));
    assert.deepEqual(log.rejections, [
      "actor.stop: cluster: required field is missing",
      "actor.inject-fault: refused, this actor was not started with test hooks",
    ]);
    const status: ClusterStatus = {
      cluster: "east",
      epoch: 1,
      state: "starting",
      since: 0,
      exportedServices: 0,
      mirrors: 0,
      problems: [],
      gateways: [],
      watch: { lists: 0, watchesStarted: 0, failures: 0, relistsOnGone: 0 },
      failuresByReason: {},
    };
    fake.ports.get("east/1")?.supervisor({ type: "actor.status", status });
    const posted = port.posted.at(-1);
    assert.ok(posted?.type === "actor.status");
    assert.equal(posted.status.protocolErrors, 2);
    channel.port2.close();
  });
});
