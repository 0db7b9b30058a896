/**
 * Defects of the lean client and the watcher found by review (issue 10), each shown
 * against the fake API server: an endless watch line, the reconnect backoff after a long
 * outage, and `Warning` headers that were dropped.
 */
import assert from "node:assert/strict";
import type * as http from "node:http";
import { describe, it } from "node:test";
import type { Service } from "../../src/core/objects.ts";
import { KubeTransportError } from "../../src/kube/client.ts";
import { warningValues } from "../../src/kube/warnings.ts";
import { LineSplitter, LineTooLongError } from "../../src/kube/watch-lines.ts";
import { Watcher, type WatchFailure } from "../../src/kube/watcher.ts";
import { fakeApi, openStream, sendJson, sendList, sendStatus, until } from "../helpers/fake-api.ts";

/** Writes `x` bytes without a newline, honouring back-pressure, until the client goes away; counts what it wrote. */
function streamEndlessLine(res: http.ServerResponse, sent: { bytes: number }): void {
  const chunk = Buffer.alloc(64 * 1024, "x");
  openStream(res);
  const pump = (): void => {
    while (!res.destroyed && !res.writableEnded) {
      sent.bytes += chunk.length;
      if (!res.write(chunk)) {
        res.once("drain", pump);
        return;
      }
    }
  };
  res.on("error", () => {});
  pump();
}

const CAP = 256 * 1024;

describe("LineSplitter", () => {
  it("splits lines across chunks and several per chunk, keeping multi-byte characters whole", () => {
    const lines = new LineSplitter(64);
    const bytes = Buffer.from('{"a":"é"}\n{"b":2}\n{"c"', "utf8");
    const cut = bytes.indexOf(0xc3) + 1; // between the two bytes of é
    assert.deepEqual(lines.push(bytes.subarray(0, cut)), []);
    assert.deepEqual(lines.push(bytes.subarray(cut)), ['{"a":"é"}', '{"b":2}']);
    assert.equal(lines.pendingBytes, 4);
    assert.deepEqual(lines.push(Buffer.from(":3}\n")), ['{"c":3}']);
    assert.equal(lines.end(), "");
  });

  it("holds at most maxBytes of an unfinished line and empties itself when a line grows past it", () => {
    const lines = new LineSplitter(10);
    assert.deepEqual(lines.push(Buffer.from("0123456789")), []);
    assert.equal(lines.pendingBytes, 10);
    assert.throws(() => lines.push(Buffer.from("x")), LineTooLongError);
    assert.equal(lines.pendingBytes, 0, "what the line held is released");
    assert.deepEqual(lines.push(Buffer.from("ok\n")), ["ok"], "usable again after the error");
    assert.throws(() => lines.push(Buffer.alloc(11, "y")), /longer than 10 bytes/);
  });

  it("accepts a line of exactly maxBytes and rejects a non-positive or fractional cap", () => {
    assert.deepEqual(new LineSplitter(3).push(Buffer.from("abc\n")), ["abc"]);
    assert.throws(() => new LineSplitter(0), RangeError);
    assert.throws(() => new LineSplitter(1.5), RangeError);
  });
});

describe("watch line cap", () => {
  it("ends a watch whose line grows past maxWatchLineBytes with LINE_TOO_LONG and destroys the stream", async () => {
    const sent = { bytes: 0 };
    const api = await fakeApi((_url, res) => streamEndlessLine(res, sent), { maxWatchLineBytes: CAP });
    try {
      const error = await api.client
        .watch(
          "/api/v1/services",
          {},
          { onEvent: () => assert.fail("no event expected") },
          new AbortController().signal,
        )
        .then(
          () => assert.fail("the watch must fail"),
          (e: unknown) => e,
        );
      assert.ok(error instanceof KubeTransportError, String(error));
      assert.equal(error.code, "LINE_TOO_LONG");
      assert.ok(error.retryable);
      assert.match(error.message, /longer than 262144 bytes/);
      await until("the server side closed", () => api.closed.length === 1, 5_000);
      assert.ok(sent.bytes > CAP, "the server did send more than the cap");
    } finally {
      await api.close();
    }
  });

  it("reports an over-long line as a line-too-long failure and re-watches with backoff", async () => {
    const sent = { bytes: 0 };
    const api = await fakeApi(
      (url, res) => {
        if (url.searchParams.get("watch") !== "true") return sendList(res, [], "1");
        streamEndlessLine(res, sent);
      },
      { maxWatchLineBytes: CAP },
    );
    const watcher = new Watcher<Service>({
      client: api.client,
      path: "/api/v1/services",
      backoff: { initialMs: 5, maxMs: 10 },
    });
    const failures: WatchFailure[] = [];
    watcher.on("failure", (f) => failures.push(f));
    watcher.start();
    try {
      await until("two line-too-long failures", () => failures.length >= 2, 10_000);
      assert.deepEqual(
        failures.slice(0, 2).map((f) => [f.phase, f.reason, f.attempt]),
        [
          ["watch", "line-too-long", 1],
          ["watch", "line-too-long", 2],
        ],
      );
      assert.match(failures[0]?.message ?? "", /longer than 262144 bytes/);
    } finally {
      await watcher.stop();
      await api.close();
    }
  });
});

describe("watch reconnect backoff", () => {
  it("reconnects on the WATCH_BACKOFF schedule by default: 250 ms, then doubling", async () => {
    const api = await fakeApi((_url, res) => sendStatus(res, 500, "InternalError"));
    // The largest draw the jitter allows, and an injected sleep: no real waiting.
    const watcher = new Watcher<Service>({ client: api.client, path: "/api/v1/services", random: () => 0.999_999 });
    const failures: WatchFailure[] = [];
    watcher.on("failure", (f) => failures.push(f));
    watcher.start();
    try {
      await until("three failures", () => failures.length >= 3, 5_000);
      assert.deepEqual(
        failures.slice(0, 3).map((f) => f.retryInMs),
        [250, 500, 1_000],
      );
    } finally {
      await watcher.stop();
      await api.close();
    }
  });
});

describe("relist after 410 Gone", () => {
  it("relists at the first backoff step after 410 Gone, however many failures came before (a remote that just came back)", async () => {
    let watches = 0;
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [], "1");
      watches += 1;
      // The remote is down for five watches, then back with its watch cache reset.
      if (watches <= 5) return sendStatus(res, 503, "ServiceUnavailable");
      if (watches === 6) return sendStatus(res, 410, "Gone");
      openStream(res);
    });
    const watcher = new Watcher<Service>({
      client: api.client,
      path: "/api/v1/services",
      backoff: { initialMs: 5, maxMs: 40 },
      random: () => 0.999_999,
    });
    const failures: WatchFailure[] = [];
    watcher.on("failure", (f) => failures.push(f));
    watcher.start();
    try {
      await until("the 410", () => failures.find((f) => f.reason === "gone"), 5_000);
      assert.deepEqual(
        failures.map((f) => [f.reason, f.attempt, f.retryInMs]),
        [
          ["http-503", 1, 5],
          ["http-503", 2, 10],
          ["http-503", 3, 20],
          ["http-503", 4, 40],
          ["http-503", 5, 40],
          ["gone", 1, 5],
        ],
      );
    } finally {
      await watcher.stop();
      await api.close();
    }
  });
});

describe("API warnings", () => {
  const deprecation = "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice";
  it("logs each distinct Warning header once per client and counts every one", async () => {
    const api = await fakeApi(
      (url, res) => {
        const warnings = [`299 - "${deprecation}"`];
        if (url.pathname.endsWith("/other")) warnings.push('299 - "another \\"quoted\\" warning"');
        res.setHeader("warning", warnings);
        sendJson(res, 200, { kind: "Endpoints" });
      },
      { logger: recordingLogger() },
    );
    try {
      await api.client.request("GET", "/api/v1/namespaces/a/endpoints/x");
      await api.client.request("GET", "/api/v1/namespaces/a/endpoints/x");
      await api.client.request("GET", "/api/v1/namespaces/a/endpoints/other");
      assert.deepEqual(api.client.apiWarnings, {
        total: 4,
        byText: { [deprecation]: 3, 'another "quoted" warning': 1 },
      });
      assert.deepEqual(logged, [deprecation, 'another "quoted" warning']);
    } finally {
      await api.close();
    }
  });

  it("reads Warning values from the raw header list, in any case, without building the header objects", () => {
    assert.deepEqual(
      warningValues(["Content-Type", "application/json", "Warning", "a", "WARNING", "b", "warning", "c"]),
      ["a", "b", "c"],
    );
    assert.equal(warningValues(["Audit-Id", "x", "Date", "y"]), undefined);
    assert.equal(warningValues([]), undefined);
  });
});

const logged: string[] = [];
function recordingLogger(): { warn(obj: Record<string, unknown>, msg: string): void } {
  return {
    warn(obj) {
      logged.push(String(obj["warning"]));
    },
  };
}
