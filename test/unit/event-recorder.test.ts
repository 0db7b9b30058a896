/**
 * The local writer's Event recorder: existing Events listed first (a restart repeats
 * none), deduplication within a window with a bounded set, and list failures.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { KubeApiError, type RequestOptions } from "../../src/kube/client.ts";
import { silentLogger } from "../../src/log.ts";
import type { SerializedError } from "../../src/protocol/errors.ts";
import type { EventRequest } from "../../src/protocol/messages.ts";
import { EVENT_DEDUP_MS, EventRecorder } from "../../workers/local-writer/event-recorder.ts";

const registered: EventRequest = {
  involved: { kind: "Secret", apiVersion: "v1", namespace: "fleet-mirror", name: "east", uid: "uid-east" },
  type: "Normal",
  reason: "ClusterRegistered",
  message: "cluster east registered (https://198.51.100.1)",
};

function existing(event: EventRequest): object {
  return { involvedObject: event.involved, type: event.type, reason: event.reason, message: event.message };
}

type Handler = (method: string, path: string, options?: RequestOptions) => Promise<unknown>;

function recorder(handler: Handler, options: { maxDedupEntries?: number } = {}) {
  const clock = new ManualClock();
  const posted: EventRequest[] = [];
  const failures: SerializedError[] = [];
  const lists: (RequestOptions | undefined)[] = [];
  const client = {
    request: async <T>(method: string, path: string, opts?: RequestOptions): Promise<T> => {
      if (method === "GET") lists.push(opts);
      if (method === "POST") {
        const body = opts?.body as {
          involvedObject: EventRequest["involved"];
          type: "Normal";
          reason: string;
          message: string;
        };
        posted.push({ involved: body.involvedObject, type: body.type, reason: body.reason, message: body.message });
      }
      return (await handler(method, path, opts)) as T;
    },
  };
  const events = new EventRecorder(
    {
      client,
      clock,
      log: silentLogger(),
      count: () => {},
      failed: (error) => failures.push(error),
      writable: () => true,
    },
    options,
  );
  return { events, clock, posted, failures, lists };
}

const listOf = (...items: object[]) => Promise.resolve({ items, metadata: {} });
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe("EventRecorder", () => {
  it("holds Events until the existing ones are listed, then posts only those not identical to an existing Event", async () => {
    let answer: (value: unknown) => void = () => {};
    const { events, posted, lists } = recorder((method) =>
      method === "GET" ? new Promise((resolve) => (answer = resolve)) : Promise.resolve({}),
    );
    events.start();
    const changed: EventRequest = { ...registered, type: "Warning", reason: "InvalidCredentials", message: "bad" };
    const done = [events.record(registered), events.record(changed)];
    await flush();
    assert.deepEqual(posted, [], "nothing posted before the list is done");
    answer({ items: [existing(registered)], metadata: {} });
    await Promise.all(done);
    assert.deepEqual(posted, [changed]);
    assert.equal(lists[0]?.query?.["fieldSelector"], "reportingComponent=fleet-mirror");
    await events.record(registered);
    assert.equal(posted.length, 1, "still a duplicate after the list");
  });

  it("reads every page of the existing Events", async () => {
    const other = { ...registered, involved: { ...registered.involved, name: "west", uid: "uid-west" } };
    const { events, posted, lists } = recorder((method, _path, options) => {
      if (method !== "GET") return Promise.resolve({});
      return options?.query?.["continue"] === "page-2"
        ? listOf(existing(other))
        : Promise.resolve({ items: [existing(registered)], metadata: { continue: "page-2" } });
    });
    events.start();
    await Promise.all([events.record(registered), events.record(other)]);
    assert.equal(lists.length, 2);
    assert.deepEqual(posted, []);
  });

  it("gives the list up on 403 (RBAC without list on events): Events flow, and the failure is reported", async () => {
    const forbidden = new KubeApiError({
      method: "GET",
      path: "/api/v1/events",
      server: "https://127.0.0.1:6443",
      status: 403,
      reason: "Forbidden",
      statusMessage: "events is forbidden",
    });
    const { events, posted, failures } = recorder((method) =>
      method === "GET" ? Promise.reject(forbidden) : Promise.resolve({}),
    );
    events.start();
    await events.record(registered);
    assert.deepEqual(posted, [registered]);
    assert.equal(failures.length, 1);
  });

  it("retries a failed list with backoff while Events wait", async () => {
    let calls = 0;
    const { events, clock, posted, failures } = recorder((method) => {
      if (method !== "GET") return Promise.resolve({});
      calls += 1;
      return calls === 1 ? Promise.reject(new Error("connection refused")) : listOf();
    });
    events.start();
    const done = events.record(registered);
    await flush();
    assert.equal(failures.length, 1);
    assert.deepEqual(posted, []);
    assert.equal(events.seeded, false);
    clock.advance(30_000);
    await done;
    assert.equal(calls, 2);
    assert.deepEqual(posted, [registered]);
  });

  it("posts an identical Event again only after the dedup window, and forgets the old entry", async () => {
    const { events, clock, posted } = recorder((method) => (method === "GET" ? listOf() : Promise.resolve({})));
    events.start();
    await events.record(registered);
    clock.advance(EVENT_DEDUP_MS - 1);
    await events.record(registered);
    assert.equal(posted.length, 1);
    clock.advance(1);
    const other = { ...registered, message: "another" };
    await events.record(other);
    assert.equal(events.dedupSize, 1, "the expired entry is gone");
    await events.record(registered);
    assert.equal(posted.length, 3);
  });

  it("holds at most maxDedupEntries entries", async () => {
    const { events } = recorder((method) => (method === "GET" ? listOf() : Promise.resolve({})), {
      maxDedupEntries: 50,
    });
    events.start();
    for (let i = 0; i < 500; i++) await events.record({ ...registered, message: `message ${i}` });
    assert.equal(events.dedupSize, 50);
  });
});
