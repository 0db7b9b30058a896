/**
 * The cap on a response body (`maxResponseBytes`): a remote API server, or anything
 * between it and us, that answers a request with a body larger than the cap costs the
 * request a `RESPONSE_TOO_LARGE` error as soon as the cap is passed, never the memory of
 * the whole body; the watcher reports it (`response-too-large`) and backs off.
 */
import assert from "node:assert/strict";
import type * as http from "node:http";
import { describe, it } from "node:test";
import type { Service } from "../../src/core/objects.ts";
import { KubeClient, KubeTransportError } from "../../src/kube/client.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import { LoadReporter } from "../../workers/remote-cluster/load-report.ts";
import { fakeApi, openStream, type Stream, sendList, svc, until } from "../helpers/fake-api.ts";

const CAP = 256 * 1024;
const MIB = 2 ** 20;
const CHUNK = 16 * 1024;

/**
 * Answers with a valid ServiceList of about `totalBytes`, written `CHUNK` bytes at a time
 * with a turn of the event loop between chunks and back-pressure honoured; `sent` counts
 * the bytes written, `done` turns true once the whole body was written.
 */
function sendPaddedList(res: http.ServerResponse, totalBytes: number, sent: { bytes: number; done: boolean }): void {
  const head = Buffer.from('{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"padding":"');
  const tail = Buffer.from('","items":[]}');
  const body = Buffer.concat([head, Buffer.alloc(Math.max(0, totalBytes - head.length - tail.length), "x"), tail]);
  res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
  res.on("error", () => {});
  let offset = 0;
  const pump = (): void => {
    if (res.destroyed) return;
    if (offset >= body.length) {
      sent.done = true;
      res.end();
      return;
    }
    const part = body.subarray(offset, offset + CHUNK);
    offset += part.length;
    sent.bytes += part.length;
    if (res.write(part)) setImmediate(pump);
    else res.once("drain", pump);
  };
  pump();
}

describe("response body cap", () => {
  it("refuses a list body larger than maxResponseBytes with RESPONSE_TOO_LARGE, naming the cap and the path, before the whole body has arrived", async () => {
    const total = 16 * CAP;
    const sent = { bytes: 0, done: false };
    const api = await fakeApi((_url, res) => sendPaddedList(res, total, sent), {
      maxResponseBytes: CAP,
      requestTimeoutMs: 10_000,
    });
    try {
      const error = await api.client.request("GET", "/api/v1/services", { query: { limit: 500 } }).then(
        () => assert.fail("the request must be refused"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof KubeTransportError, String(error));
      assert.equal(error.code, "RESPONSE_TOO_LARGE");
      assert.equal(error.retryable, false, "the same request, sent again at once, would fail the same way");
      assert.match(error.message, /GET \/api\/v1\/services/);
      assert.match(error.message, /262144 bytes/);
      assert.equal(sent.done, false, `refused after ${sent.bytes} of ${total} bytes were written, not at the end`);
      await until("the server side closed", () => api.closed.length === 1, 5_000);
      assert.ok(sent.bytes < total, `the server stopped after ${sent.bytes} of ${total} bytes`);
    } finally {
      await api.close();
    }
  });

  it("accepts a body of exactly the cap, and counts a GET of one object too", async () => {
    const api = await fakeApi(
      (url, res) => {
        if (url.pathname.endsWith("/big")) return sendPaddedList(res, 2 * CAP, { bytes: 0, done: false });
        sendPaddedList(res, CAP, { bytes: 0, done: false });
      },
      { maxResponseBytes: CAP },
    );
    try {
      const listed = await api.client.request<{ kind?: string }>("GET", "/api/v1/services");
      assert.equal(listed.kind, "ServiceList");
      const error = await api.client.request("GET", "/api/v1/namespaces/x/services/big").then(
        () => assert.fail("the GET must be refused"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof KubeTransportError && error.code === "RESPONSE_TOO_LARGE", String(error));
      assert.match(error.message, /\/api\/v1\/namespaces\/x\/services\/big/);
    } finally {
      await api.close();
    }
  });

  it("reports the bytes of answers held while they arrive and are decoded, and none once they are done or refused", async () => {
    const held: number[] = [];
    const api = await fakeApi(
      (url, res) => sendPaddedList(res, url.pathname.endsWith("/big") ? 4 * CAP : CAP / 2, { bytes: 0, done: false }),
      { maxResponseBytes: CAP, onHeldBytes: (bytes) => held.push(bytes) },
    );
    try {
      await api.client.request("GET", "/api/v1/services");
      assert.equal(Math.max(...held), CAP / 2, "the whole body, held until decoded");
      assert.equal(held.at(-1), 0);
      held.length = 0;
      await api.client.request("GET", "/api/v1/namespaces/x/services/big").catch(() => undefined);
      assert.ok(Math.max(...held) <= CAP, `never more than the cap: ${Math.max(...held)}`);
      assert.equal(held.at(-1), 0, "released when refused");
    } finally {
      await api.close();
    }
  });

  it("the remote actor reports its answers held in steps from 8 MiB: at each doubling or halving, and 0 once below", () => {
    const sent: number[] = [];
    const load = new LoadReporter((bytes) => sent.push(bytes));
    for (const mib of [1, 4, 7.9, 8, 12, 16, 20, 40, 64, 63, 30, 6, 2, 0]) load.held(mib * MIB);
    assert.deepEqual(
      sent.map((b) => b / MIB),
      [8, 16, 40, 64, 63, 30, 0],
    );
  });

  it("rejects a cap that is not a positive whole number", () => {
    const connection = { server: "http://127.0.0.1:1", auth: { kind: "anonymous" } } as const;
    assert.throws(() => new KubeClient(connection, { maxResponseBytes: 0 }), RangeError);
    assert.throws(() => new KubeClient(connection, { maxResponseBytes: 1.5 }), RangeError);
  });

  it("the watcher reports a list over the cap as response-too-large, backs off, keeps its store, and lists again once the answer fits", async () => {
    let oversized = false;
    let stream: Stream | undefined;
    const api = await fakeApi(
      (url, res) => {
        if (url.searchParams.get("watch") === "true") {
          stream = openStream(res);
          return;
        }
        if (oversized) return sendPaddedList(res, 4 * CAP, { bytes: 0, done: false });
        sendList(res, [svc("a", "1")], "1");
      },
      { maxResponseBytes: CAP },
    );
    const watcher = new Watcher<Service>({
      client: api.client,
      path: "/api/v1/services",
      backoff: { initialMs: 20, maxMs: 40 },
      inactivityTimeoutMs: 60_000,
      random: () => 0.5,
    });
    const failures: WatchFailure[] = [];
    watcher.on("failure", (f) => failures.push(f));
    watcher.start();
    try {
      await until("the first list", () => watcher.hasSynced);
      oversized = true;
      // The watch ends with 410 Gone: the watcher must list again, and the list is now too large.
      const open = await until("the watch", () => stream);
      open.event("ERROR", { kind: "Status", code: 410, message: "too old resource version" });
      await until(
        "two response-too-large failures",
        () => failures.filter((f) => f.reason === "response-too-large").length >= 2,
        10_000,
      );
      const tooLarge = failures.filter((f) => f.reason === "response-too-large");
      assert.equal(tooLarge[0]?.phase, "list");
      assert.match(tooLarge[0]?.message ?? "", /262144 bytes/);
      assert.ok((tooLarge[1]?.attempt ?? 0) > (tooLarge[0]?.attempt ?? 0), "the backoff grows");
      assert.ok(
        tooLarge.every((f) => f.retryInMs > 0),
        "each is followed by a backoff",
      );
      assert.deepEqual([...watcher.keys()], ["default/a"], "the store keeps the last complete list");
      oversized = false;
      const lists = watcher.stats.lists;
      await until("a list once the answer fits", () => watcher.stats.lists > lists, 10_000);
    } finally {
      await watcher.stop();
      await api.close();
    }
  });
});
