/**
 * The watcher and the lean client against a tiny fake API server (node:http on
 * loopback) that serves scripted list pages and watch streams. The real API server is
 * exercised in test/integration/watcher.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Service } from "../../src/core/objects.ts";
import { KubeApiError, KubeClient, KubeTransportError } from "../../src/kube/client.ts";
import { Watcher, type WatcherOptions, type WatchFailure } from "../../src/kube/watcher.ts";
import {
  bookmark,
  type FakeApi,
  fakeApi,
  openStream,
  sendJson,
  sendList,
  sendStatus,
  svc,
  until,
} from "../helpers/fake-api.ts";

interface Recorded {
  readonly watcher: Watcher<Service>;
  readonly changes: Array<[string, string | undefined, string | undefined]>;
  readonly failures: WatchFailure[];
  listed: number;
}

/** A started watcher on `api` that records its events (changes as [key, previous rv, current rv]). */
function watch(api: FakeApi, options: Partial<WatcherOptions> = {}): Recorded {
  const watcher = new Watcher<Service>({
    client: api.client,
    path: "/api/v1/services",
    backoff: { initialMs: 5, maxMs: 20 },
    inactivityTimeoutMs: 1_000,
    watchTimeoutSeconds: { min: 60, max: 60 },
    random: () => 0.5,
    ...options,
  });
  const recorded: Recorded = { watcher, changes: [], failures: [], listed: 0 };
  watcher.on("change", (key, previous, current) =>
    recorded.changes.push([key, previous?.metadata.resourceVersion, current?.metadata.resourceVersion]),
  );
  watcher.on("failure", (failure) => recorded.failures.push(failure));
  watcher.on("listed", () => recorded.listed++);
  watcher.start();
  return recorded;
}

function storeRvs(watcher: Watcher<Service>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const key of [...watcher.keys()].sort()) out[key] = watcher.get(key)?.metadata.resourceVersion;
  return out;
}

describe("Watcher", () => {
  it("lists page by page with limit and continue, then watches from the list's resourceVersion", async () => {
    const all = ["a", "b", "c", "d", "e"].map((n, i) => svc(n, String(i + 1)));
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") === "true") {
        openStream(res);
        return;
      }
      const start = Number(url.searchParams.get("continue") ?? "0");
      const limit = Number(url.searchParams.get("limit"));
      const next = start + limit < all.length ? String(start + limit) : undefined;
      sendList(res, all.slice(start, start + limit), `10${start}`, next);
    });
    const recorded = watch(api, { pageSize: 2, labelSelector: "app=web" });
    const { watcher, changes } = recorded;
    try {
      await until("a watch", () => api.watches().length === 1);
      assert.deepEqual(
        api.lists().map((u) => [u.searchParams.get("limit"), u.searchParams.get("continue")]),
        [
          ["2", null],
          ["2", "2"],
          ["2", "4"],
        ],
      );
      assert.ok(api.requests.every((u) => u.searchParams.get("labelSelector") === "app=web"));
      const w = api.watches()[0];
      assert.equal(w?.searchParams.get("resourceVersion"), "104");
      assert.equal(w?.searchParams.get("allowWatchBookmarks"), "true");
      assert.equal(w?.searchParams.get("timeoutSeconds"), "60");
      assert.equal(watcher.size, 5);
      assert.equal(watcher.hasSynced, true);
      assert.equal(recorded.listed, 1);
      assert.equal(changes.length, 5);
      assert.equal(watcher.get("default/a")?.kind, "Service", "list items get the kind of their list");
      assert.ok(Object.isFrozen(watcher.get("default/a")));
      assert.deepEqual(watcher.stats, { lists: 1, watchesStarted: 1, failures: 0, relistsOnGone: 0 });
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("applies watch events to the store and emits change with the previous and current objects", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [svc("a", "1"), svc("b", "2")], "2");
      const stream = openStream(res);
      if (api.watches().length === 1) {
        stream.event("ADDED", svc("c", "3"));
        stream.event("MODIFIED", svc("a", "4"));
        stream.event("DELETED", svc("b", "5"));
      }
    });
    const { watcher, changes } = watch(api);
    try {
      await until("three watch changes", () => changes.length === 5);
      assert.deepEqual(changes.slice(2), [
        ["default/c", undefined, "3"],
        ["default/a", "1", "4"],
        ["default/b", "2", undefined],
      ]);
      assert.deepEqual(storeRvs(watcher), { "default/a": "4", "default/c": "3" });
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("re-watches from the last bookmark's resourceVersion when the server ends the stream, without relisting", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [svc("a", "1")], "10");
      const stream = openStream(res);
      if (api.watches().length === 1) {
        stream.event("ADDED", svc("b", "11"));
        stream.event("BOOKMARK", bookmark("15"));
        stream.end();
      }
    });
    const { watcher, failures } = watch(api);
    try {
      await until("a second watch", () => api.watches().length === 2);
      assert.deepEqual(
        api.watches().map((u) => u.searchParams.get("resourceVersion")),
        ["10", "15"],
      );
      assert.equal(api.lists().length, 1);
      assert.deepEqual(failures, []);
      assert.equal(watcher.size, 2);
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("relists on a 410 ERROR event and surfaces, through the swap, the deletions it missed", async () => {
    const api = await fakeApi((url, res) => {
      const lists = api.lists().length;
      if (url.searchParams.get("watch") !== "true") {
        if (lists === 1) return sendList(res, [svc("a", "1"), svc("b", "2"), svc("c", "3")], "3");
        // While "disconnected": a changed, b deleted, d created, c untouched.
        return sendList(res, [svc("a", "7"), svc("c", "3"), svc("d", "8")], "9");
      }
      const stream = openStream(res);
      if (lists === 1) stream.event("ERROR", { kind: "Status", code: 410, reason: "Expired", message: "too old" });
    });
    const recorded = watch(api);
    const { watcher, changes, failures } = recorded;
    try {
      await until("the relist's listed", () => recorded.listed === 2);
      assert.deepEqual(changes.slice(3), [
        ["default/a", "1", "7"],
        ["default/d", undefined, "8"],
        ["default/b", "2", undefined],
      ]);
      assert.deepEqual(storeRvs(watcher), { "default/a": "7", "default/c": "3", "default/d": "8" });
      assert.equal(failures[0]?.phase, "watch");
      assert.equal(failures[0]?.reason, "gone");
      assert.equal(watcher.stats.relistsOnGone, 1);
      await until("a watch from the relist's resourceVersion", () => api.watches()[1]);
      assert.equal(api.watches()[1]?.searchParams.get("resourceVersion"), "9");
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("relists when the watch request itself answers HTTP 410 Gone, emitting listed again", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [svc("a", "1")], String(api.lists().length));
      if (api.watches().length === 1) return sendStatus(res, 410, "Expired");
      openStream(res);
    });
    const recorded = watch(api);
    try {
      await until("two listed events", () => recorded.listed === 2);
      assert.equal(recorded.failures[0]?.reason, "gone");
      assert.equal(recorded.watcher.stats.relistsOnGone, 1);
      assert.equal(recorded.changes.length, 1, "an unchanged object is not reported again by the swap");
    } finally {
      await recorded.watcher.stop();
      await api.close();
    }
  });

  it("re-watches from the last resourceVersion after a non-410 ERROR event, without relisting", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [], "5");
      const stream = openStream(res);
      if (api.watches().length === 1) {
        stream.event("ADDED", svc("a", "6"));
        stream.event("ERROR", { kind: "Status", code: 500, reason: "InternalError", message: "boom" });
        stream.event("ADDED", svc("ignored", "7"));
      }
    });
    const { watcher, failures } = watch(api);
    try {
      await until("a second watch", () => api.watches().length === 2);
      assert.equal(api.watches()[1]?.searchParams.get("resourceVersion"), "6");
      assert.deepEqual(
        failures.map((f) => [f.phase, f.reason]),
        [["watch", "http-500"]],
      );
      assert.equal(watcher.get("default/ignored"), undefined, "events after an ERROR are ignored");
      assert.equal(api.lists().length, 1);
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("restarts a paginated list from scratch, still paginated, when its continue token expires", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") === "true") {
        openStream(res);
        return;
      }
      const n = api.lists().length;
      if (n === 1) return sendList(res, [svc("a", "1")], "3", "page2");
      if (n === 2) return sendStatus(res, 410, "Expired");
      // A fresh list: a new snapshot, page by page again (one unpaginated answer could be
      // larger than the response cap and fail at every try).
      if (n === 3) return sendList(res, [svc("a", "1")], "4", "fresh2");
      sendList(res, [svc("b", "2")], "4");
    });
    const recorded = watch(api, { pageSize: 1 });
    try {
      await until("a watch", () => api.watches().length === 1);
      assert.deepEqual(
        api.lists().map((u) => [u.searchParams.get("limit"), u.searchParams.get("continue")]),
        [
          ["1", null],
          ["1", "page2"],
          ["1", null],
          ["1", "fresh2"],
        ],
      );
      assert.equal(recorded.listed, 1, "the partial list emitted nothing");
      assert.deepEqual(
        recorded.failures.map((f) => [f.phase, f.reason]),
        [["list", "gone"]],
      );
      assert.equal(recorded.watcher.size, 2);
    } finally {
      await recorded.watcher.stop();
      await api.close();
    }
  });

  it("keeps the last known store while relists fail", async () => {
    let apiDown = false;
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") {
        if (apiDown && api.lists().length > 1) return sendStatus(res, 503, "ServiceUnavailable");
        return sendList(res, [svc("a", "1")], "2");
      }
      apiDown = true;
      sendStatus(res, 410, "Expired");
    });
    const recorded = watch(api);
    const { watcher, failures } = recorded;
    try {
      await until("several failed relists", () => failures.length >= 4);
      assert.deepEqual(
        failures.slice(1, 4).map((f) => [f.phase, f.reason]),
        [
          ["list", "http-503"],
          ["list", "http-503"],
          ["list", "http-503"],
        ],
      );
      assert.equal(recorded.listed, 1);
      assert.equal(watcher.hasSynced, true);
      assert.deepEqual(storeRvs(watcher), { "default/a": "1" });
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("drops a watch that receives no bytes for inactivityTimeoutMs, destroying its socket, and re-watches", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [], "1");
      openStream(res); // and then silence
    });
    const { watcher, failures } = watch(api, { inactivityTimeoutMs: 100 });
    try {
      await until("a second watch", () => api.watches().length === 2);
      assert.deepEqual(
        failures.map((f) => [f.phase, f.reason]),
        [["watch", "watch-inactive"]],
      );
      await until("the silent watch's connection to close", () => api.closed.some((u) => u === api.watches()[0]));
      assert.equal(api.watches()[1]?.searchParams.get("resourceVersion"), "1");
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("keeps a watch that receives bookmarks more often than inactivityTimeoutMs", async () => {
    let timer: NodeJS.Timeout | undefined;
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [], "1");
      const stream = openStream(res);
      let rv = 1;
      timer = setInterval(() => stream.event("BOOKMARK", bookmark(String(++rv))), 25);
      res.on("close", () => clearInterval(timer));
    });
    const { watcher, failures } = watch(api, { inactivityTimeoutMs: 250 });
    try {
      await new Promise((resolve) => setTimeout(resolve, 600));
      assert.deepEqual(failures, []);
      assert.equal(api.watches().length, 1);
    } finally {
      await watcher.stop();
      clearInterval(timer);
      await api.close();
    }
  });

  it("backs off exponentially on repeated 500s and resets the backoff after a successful list", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") === "true") {
        if (api.watches().length === 1) sendStatus(res, 500, "InternalError");
        else openStream(res);
        return;
      }
      if (api.lists().length <= 4) return sendStatus(res, 500, "InternalError");
      sendList(res, [], "1");
    });
    // random = 0.5 draws 3/4 of each base (equal jitter: [base / 2, base]): 8 ms doubling to a 32 ms cap.
    const { watcher, failures } = watch(api, { backoff: { initialMs: 8, maxMs: 32 }, random: () => 0.5 });
    try {
      await until("the second watch", () => api.watches().length === 2);
      assert.deepEqual(
        failures.map((f) => [f.phase, f.reason, f.attempt, f.retryInMs]),
        [
          ["list", "http-500", 1, 6],
          ["list", "http-500", 2, 12],
          ["list", "http-500", 3, 24],
          ["list", "http-500", 4, 24],
          ["watch", "http-500", 1, 6],
        ],
      );
      assert.equal(watcher.stats.failures, 5);
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("honours Retry-After as a lower bound on the backoff, and stop() cuts the wait short", async () => {
    const api = await fakeApi((_url, res) => sendStatus(res, 429, "TooManyRequests", { "retry-after": "7" }));
    const { watcher, failures } = watch(api);
    try {
      const failure = await until("a failure", () => failures[0]);
      assert.equal(failure.reason, "http-429");
      assert.equal(failure.retryInMs, 7_000);
    } finally {
      const started = Date.now();
      await watcher.stop();
      assert.ok(Date.now() - started < 500, "stop() does not wait for the backoff");
      await api.close();
    }
  });

  it("reports a watch line that is not JSON as a decode failure and re-watches from the last resourceVersion", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [], "1");
      const stream = openStream(res);
      if (api.watches().length === 1) {
        stream.event("ADDED", svc("a", "2"));
        stream.raw("{not json\n");
      }
    });
    const { watcher, failures } = watch(api);
    try {
      await until("a second watch", () => api.watches().length === 2);
      assert.equal(failures[0]?.reason, "decode");
      assert.equal(api.watches()[1]?.searchParams.get("resourceVersion"), "2");
    } finally {
      await watcher.stop();
      await api.close();
    }
  });

  it("reports a refused connection with its transport code and keeps retrying", async () => {
    const api = await fakeApi(() => {});
    await api.close();
    const client = new KubeClient({ server: api.url, auth: { kind: "anonymous" } });
    const watcher = new Watcher<Service>({ client, path: "/api/v1/services", backoff: { initialMs: 1, maxMs: 2 } });
    const failures: WatchFailure[] = [];
    watcher.on("failure", (f) => failures.push(f));
    watcher.start();
    try {
      await until("three failures", () => failures.length >= 3);
      assert.deepEqual(
        failures.slice(0, 3).map((f) => [f.phase, f.reason, f.attempt]),
        [
          ["list", "ECONNREFUSED", 1],
          ["list", "ECONNREFUSED", 2],
          ["list", "ECONNREFUSED", 3],
        ],
      );
      assert.match(failures[0]?.message ?? "", /GET \/api\/v1\/services on http:\/\/127\.0\.0\.1:\d+/);
      assert.equal(watcher.hasSynced, false);
    } finally {
      await watcher.stop();
      client.close();
    }
  });

  it("stop() aborts the open watch, destroys its connection and leaves no timer behind", async () => {
    const api = await fakeApi((url, res) => {
      if (url.searchParams.get("watch") !== "true") return sendList(res, [], "1");
      openStream(res);
    });
    const timersBefore = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const { watcher } = watch(api);
    await until("a watch", () => api.watches().length === 1);
    await watcher.stop();
    await watcher.stop(); // idempotent
    watcher.start(); // a stopped watcher stays stopped
    await until("the watch connection to close", () => api.closed.some((u) => u === api.watches()[0]));
    assert.equal(process.getActiveResourcesInfo().filter((r) => r === "Timeout").length, timersBefore);
    assert.equal(api.requests.length, 2);
    await api.close();
  });

  it("rejects invalid options at construction", () => {
    const client = new KubeClient({ server: "http://127.0.0.1:1", auth: { kind: "anonymous" } });
    assert.throws(() => new Watcher({ client, path: "api/v1/services" }), /must start with/);
    assert.throws(() => new Watcher({ client, path: "/x", pageSize: 0 }), /pageSize/);
    assert.throws(() => new Watcher({ client, path: "/x", watchTimeoutSeconds: { min: 9, max: 3 } }), /min 9 > max 3/);
    client.close();
  });
});

describe("KubeClient", () => {
  it("throws KubeApiError with the Status reason, Retry-After and a message naming method, path and server", async () => {
    const api = await fakeApi((url, res) => {
      if (url.pathname.endsWith("/busy")) return sendStatus(res, 429, "TooManyRequests", { "retry-after": "3" });
      if (url.pathname.endsWith("/exists")) return sendStatus(res, 409, "AlreadyExists");
      if (url.pathname.endsWith("/conflict")) return sendStatus(res, 409, "Conflict");
      if (url.pathname.endsWith("/proxy")) return res.writeHead(502).end("bad gateway");
      sendStatus(res, 404, "NotFound");
    });
    try {
      const failure = async (path: string) => {
        const error = await api.client.request("GET", path).then(
          () => assert.fail("expected a failure"),
          (e: unknown) => e,
        );
        assert.ok(error instanceof KubeApiError);
        return error;
      };
      const busy = await failure("/api/v1/busy");
      assert.deepEqual(
        [busy.status, busy.reason, busy.retryAfterSeconds, busy.retryable],
        [429, "TooManyRequests", 3, true],
      );
      assert.match(busy.message, /^GET \/api\/v1\/busy on http:\/\/127\.0\.0\.1:\d+: HTTP 429 TooManyRequests: fake/);
      const missing = await failure("/api/v1/missing");
      assert.deepEqual([missing.status, missing.reason, missing.retryable], [404, "NotFound", false]);
      assert.equal((await failure("/api/v1/exists")).retryable, false);
      assert.equal((await failure("/api/v1/conflict")).retryable, true);
      const proxy = await failure("/api/v1/proxy");
      assert.deepEqual([proxy.status, proxy.reason, proxy.retryable], [502, "BadGateway", true]);
    } finally {
      await api.close();
    }
  });

  it("sends a JSON body with its content type and parses the JSON answer", async () => {
    const api = await fakeApi((url, res, req) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () =>
        sendJson(res, 200, {
          method: req.method,
          contentType: req.headers["content-type"],
          query: url.search,
          body: JSON.parse(Buffer.concat(chunks).toString()),
        }),
      );
    });
    try {
      const answer = await api.client.request("PATCH", "/api/v1/namespaces/a/services/b", {
        query: { fieldManager: "fm", dryRun: undefined, force: true },
        body: { metadata: { labels: { x: "y" } } },
        contentType: "application/merge-patch+json",
      });
      assert.deepEqual(answer, {
        method: "PATCH",
        contentType: "application/merge-patch+json",
        query: "?fieldManager=fm&force=true",
        body: { metadata: { labels: { x: "y" } } },
      });
    } finally {
      await api.close();
    }
  });

  it("times out a request with ETIMEDOUT and an aborted request with ABORTED, closing the connection", async () => {
    const api = await fakeApi(() => {}); // never answers
    try {
      const timedOut = await api.client.request("GET", "/slow", { timeoutMs: 50 }).catch((e: unknown) => e);
      assert.ok(timedOut instanceof KubeTransportError);
      assert.equal(timedOut.code, "ETIMEDOUT");
      assert.equal(timedOut.retryable, true);
      const controller = new AbortController();
      const pending = api.client.request("GET", "/slow", { signal: controller.signal }).catch((e: unknown) => e);
      await until("the request to arrive", () => api.requests.length === 2);
      controller.abort();
      const aborted = await pending;
      assert.ok(aborted instanceof KubeTransportError);
      assert.equal(aborted.code, "ABORTED");
      assert.equal(aborted.retryable, false);
      await until("both connections to close", () => api.closed.length === 2);
    } finally {
      await api.close();
    }
  });

  it("parses watch events split across chunks and several per chunk, and resolves when the stream ends", async () => {
    const lines = [
      JSON.stringify({ type: "ADDED", object: svc("a", "1") }),
      JSON.stringify({ type: "MODIFIED", object: svc("a", "2") }),
      JSON.stringify({ type: "BOOKMARK", object: bookmark("3") }),
      JSON.stringify({ type: "DELETED", object: svc("é", "4") }),
    ];
    const text = Buffer.from(`${lines.join("\n")}\n`, "utf8");
    const api = await fakeApi((_url, res) => {
      openStream(res);
      // Cut in odd places, including inside the two-byte "é", and send the end without its final newline.
      const cuts = [...new Set([0, 7, 8, 60, text.length - 30, text.indexOf(Buffer.from("é")) + 1])].sort(
        (a, b) => a - b,
      );
      let i = 0;
      const step = (): void => {
        const from = cuts[i];
        if (from === undefined) {
          res.end();
          return;
        }
        res.write(text.subarray(from, cuts[i + 1] ?? text.length - 1));
        i++;
        setTimeout(step, 5);
      };
      step();
    });
    try {
      const events: string[] = [];
      let chunks = 0;
      await api.client.watch(
        "/api/v1/services",
        { resourceVersion: "0" },
        {
          onEvent: (e) => events.push(`${e.type} ${(e.object["metadata"] as { name?: string }).name ?? "-"}`),
          onBytes: () => chunks++,
        },
        new AbortController().signal,
      );
      assert.deepEqual(events, ["ADDED a", "MODIFIED a", "BOOKMARK -", "DELETED é"]);
      assert.ok(chunks >= 5);
      assert.equal(api.requests[0]?.searchParams.get("watch"), "true");
    } finally {
      await api.close();
    }
  });

  it("rejects a watch with KubeApiError on a non-2xx status and with ABORTED on abort, destroying the socket", async () => {
    const api = await fakeApi((url, res) => {
      if (url.pathname === "/forbidden") return sendStatus(res, 403, "Forbidden");
      openStream(res).event("ADDED", svc("a", "1"));
    });
    try {
      const handlers = { onEvent: () => {} };
      const forbidden = await api.client
        .watch("/forbidden", {}, handlers, new AbortController().signal)
        .catch((e: unknown) => e);
      assert.ok(forbidden instanceof KubeApiError);
      assert.deepEqual([forbidden.status, forbidden.reason, forbidden.retryable], [403, "Forbidden", false]);
      const controller = new AbortController();
      let seen = 0;
      const pending = api.client
        .watch("/open", {}, { onEvent: () => seen++ }, controller.signal)
        .catch((e: unknown) => e);
      await until("an event", () => seen === 1);
      controller.abort();
      const aborted = await pending;
      assert.ok(aborted instanceof KubeTransportError);
      assert.equal(aborted.code, "ABORTED");
      await until("the watch connection to close", () => api.closed.some((u) => u.pathname === "/open"));
    } finally {
      await api.close();
    }
  });
});
