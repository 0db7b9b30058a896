/**
 * The remote-slice watches of exported headless Services (SPEC §12), against a fake API
 * server: one label-selected watch per wanted Service in its namespace (never the
 * cluster's slices), `pending` until its first list, hostnames changed only when they
 * change, stopped when no longer wanted; a host missing from the slices stays a host
 * for the grace period; no endpoint at all keeps the shape last seen; a 403 stops every
 * watch, keeps the hosts listed and makes the others unknown (never ordinary), and a
 * retry that lists allows them again; a failing first list stops holding back a
 * complete set.
 */
import assert from "node:assert/strict";
import type * as http from "node:http";
import { afterEach, describe, it } from "node:test";
import type { Service } from "../../src/core/objects.ts";
import { silentLogger } from "../../src/log.ts";
import { HeadlessWatches } from "../../workers/remote-cluster/headless-watches.ts";
import { type FakeApi, fakeApi, openStream, type Stream, sendJson, sendStatus, until } from "../helpers/fake-api.ts";

/** One slice whose endpoints carry `hostnames` (undefined: an endpoint without one). */
const sliceList = (hostnames: (string | undefined)[]) => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSliceList",
  metadata: { resourceVersion: "10" },
  items: [
    {
      metadata: { name: "web-abc", namespace: "shop", resourceVersion: "9" },
      addressType: "IPv4",
      endpoints: hostnames.map((hostname, i) => ({
        addresses: [`10.0.0.${i + 1}`],
        ...(hostname ? { hostname } : {}),
      })),
    },
  ],
});
/** The slice of `sliceList` as a watch event's object, at `resourceVersion`. */
const sliceEvent = (hostnames: (string | undefined)[], resourceVersion: string) => {
  const slice = sliceList(hostnames).items[0];
  return { ...slice, kind: "EndpointSlice", metadata: { ...slice?.metadata, resourceVersion } };
};

describe("headless watches", () => {
  let api: FakeApi | undefined;
  let watches: HeadlessWatches | undefined;
  afterEach(async () => {
    watches?.stop();
    await api?.close();
  });

  function start(
    handle: (url: URL, res: http.ServerResponse) => void,
    deniedRetryMs = 60_000,
    headlessHostGraceMs = 0,
  ) {
    const changed: string[] = [];
    let statusChanges = 0;
    return fakeApi(handle).then((fake) => {
      api = fake;
      watches = new HeadlessWatches({
        client: fake.client,
        log: silentLogger(),
        guard: (fn) => fn,
        track: (promise) => void promise,
        hostsChanged: (key) => changed.push(key),
        statusChanged: () => {
          statusChanges += 1;
        },
        options: { deniedRetryMs, headlessHostGraceMs },
      });
      return { watches, changed, statusChanges: () => statusChanges };
    });
  }

  it("watches only the wanted Service's slices, by label, in its namespace; pending until listed", async () => {
    const streams: Stream[] = [];
    const w = await start((url, res) => {
      if (url.searchParams.get("watch") === "true") streams.push(openStream(res));
      else sendJson(res, 200, sliceList(["web-1", "web-0", "web-1"]));
    });
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "pending" });
    w.watches.sync("shop/web", true);
    assert.equal(w.watches.pending, true);
    await until("the first list", () => w.changed.length > 0);
    const list = api?.lists()[0];
    assert.equal(list?.pathname, "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices");
    assert.equal(list?.searchParams.get("labelSelector"), "kubernetes.io/service-name=web");
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "listed", hostnames: ["web-0", "web-1"] });
    assert.equal(w.watches.pending, false);
    await until("the watch", () => streams.length > 0);
    // A change that leaves the hostnames as they were is not news; one that changes them is.
    const slice = sliceList(["web-0", "web-1"]).items[0];
    streams[0]?.event("MODIFIED", {
      ...slice,
      kind: "EndpointSlice",
      metadata: { ...slice?.metadata, resourceVersion: "11" },
    });
    streams[0]?.event("ADDED", {
      kind: "EndpointSlice",
      metadata: { name: "web-def", namespace: "shop", resourceVersion: "12" },
      addressType: "IPv4",
      endpoints: [{ addresses: ["10.0.0.9"], hostname: "web-2" }],
    });
    await until("web-2", () => w.changed.length > 1);
    assert.deepEqual(w.changed, ["shop/web", "shop/web"]);
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "listed", hostnames: ["web-0", "web-1", "web-2"] });
    // A Service named like one of its hosts changed: web is recomputed (its host may lose its mirror name).
    w.watches.sync("shop/web-1", false);
    w.watches.sync("other/web-1", false);
    assert.deepEqual(w.changed, ["shop/web", "shop/web", "shop/web"]);
    w.watches.sync("shop/web", false);
    assert.equal(w.watches.watching, 0);
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "pending" });
    assert.equal(w.watches.pending, false, "a Service no longer wanted is not waited for");
  });

  it("two headless Services with a host of the same name: the first in key order claims it; each change tells the other", async () => {
    const streams = new Map<string, Stream>();
    const w = await start((url, res) => {
      const service = url.searchParams.get("labelSelector")?.split("=")[1] ?? "";
      if (url.searchParams.get("watch") === "true") streams.set(service, openStream(res));
      else sendJson(res, 200, sliceList(service === "alpha" ? ["db-0"] : ["db-0", "db-1"]));
    });
    w.watches.sync("shop/beta", true);
    await until("beta listed", () => w.changed.includes("shop/beta"));
    assert.equal(w.watches.hostClaimant("shop", "db-0"), "shop/beta");
    w.changed.length = 0;
    w.watches.sync("shop/alpha", true);
    await until("alpha listed", () => w.changed.includes("shop/alpha"));
    assert.deepEqual(w.changed.sort(), ["shop/alpha", "shop/beta"], "beta told: it lost db-0");
    assert.equal(w.watches.hostClaimant("shop", "db-0"), "shop/alpha");
    assert.equal(w.watches.hostClaimant("shop", "db-1"), "shop/beta");
    assert.equal(w.watches.hostClaimant("other", "db-0"), undefined);
    // alpha's host goes: beta is told and claims it again.
    await until("alpha's watch", () => streams.has("alpha"));
    w.changed.length = 0;
    streams.get("alpha")?.event("DELETED", {
      kind: "EndpointSlice",
      metadata: { name: "web-abc", namespace: "shop", resourceVersion: "20" },
    });
    await until("alpha changed", () => w.changed.includes("shop/alpha"));
    assert.deepEqual(w.changed.sort(), ["shop/alpha", "shop/beta"]);
    assert.equal(w.watches.hostClaimant("shop", "db-0"), "shop/beta");
    // beta no longer wanted: its claims go with its watch.
    w.watches.sync("shop/beta", false);
    assert.equal(w.watches.hostClaimant("shop", "db-0"), undefined);
    assert.equal(w.watches.hostClaimant("shop", "db-1"), undefined);
  });

  it("watches only exported headless Services: not an unexported headless one, not an exported ClusterIP one", async () => {
    const w = await start((url, res) => {
      if (url.searchParams.get("watch") === "true") openStream(res);
      else sendJson(res, 200, sliceList([]));
    });
    const settings = { defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" } };
    const annotations = { "mirror.linkerd.io/gateway-name": "gw", "mirror.linkerd.io/gateway-ns": "gw" };
    const svc = (name: string, headless: boolean, exported: boolean): Service => ({
      metadata: { name, namespace: "shop", ...(exported ? { annotations } : {}) },
      spec: headless ? { clusterIP: "None" } : { clusterIP: "10.0.0.1" },
    });
    w.watches.syncService("shop/quiet", svc("quiet", true, false), settings);
    w.watches.syncService("shop/plain", svc("plain", false, true), settings);
    assert.equal(w.watches.watching, 0);
    w.watches.syncService("shop/sts", svc("sts", true, true), settings);
    assert.equal(w.watches.watching, 1);
    await until("sts's first list", () => w.changed.includes("shop/sts"));
    assert.deepEqual(
      api?.lists().map((u) => u.searchParams.get("labelSelector")),
      ["kubernetes.io/service-name=sts"],
    );
    // Unexported, or deleted: the watch stops.
    w.watches.syncService("shop/sts", svc("sts", true, false), settings);
    assert.equal(w.watches.watching, 0);
  });

  it("a 403 before any list makes every headless Service's hosts unknown (never ordinary), stops every watch, and a retry that lists allows them again", async () => {
    let forbidden = true;
    const w = await start((url, res) => {
      if (forbidden) sendStatus(res, 403, "Forbidden");
      else if (url.searchParams.get("watch") === "true") openStream(res);
      else sendJson(res, 200, sliceList(["db-0"]));
    }, 200);
    w.watches.sync("shop/web", true);
    w.watches.sync("shop/db", true);
    await until("denied", () => w.watches.denied);
    assert.match(w.watches.denied ?? "", /discovery\.k8s\.io\/endpointslices is forbidden/);
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "unknown" });
    assert.deepEqual(w.watches.hosts("shop/db"), { kind: "unknown" });
    assert.equal(w.watches.pending, false, "a denied read holds nothing back");
    assert.equal(w.watches.watching, 0);
    assert.deepEqual([...w.changed].sort(), ["shop/db", "shop/web"]);
    const requestsWhenDenied = api?.requests.length ?? 0;
    assert.ok(requestsWhenDenied <= 2, `one list per watch, not a retry loop (${requestsWhenDenied})`);
    forbidden = false;
    await until("allowed again after the retry", () => (w.watches.denied === undefined ? true : undefined), 3_000);
    await until("db's hostnames", () => w.watches.hosts("shop/db").kind === "listed");
    assert.deepEqual(w.watches.hosts("shop/db"), { kind: "listed", hostnames: ["db-0"] });
  });

  it("a 403 after a list keeps the hosts listed: a refused read is no answer", async () => {
    let forbidden = false;
    const streams: Stream[] = [];
    const w = await start(
      (url, res) => {
        if (forbidden) sendStatus(res, 403, "Forbidden");
        else if (url.searchParams.get("watch") === "true") streams.push(openStream(res));
        else sendJson(res, 200, sliceList(["web-0", "web-1"]));
      },
      60_000,
      60_000,
    );
    w.watches.sync("shop/web", true);
    await until("listed", () => w.watches.hosts("shop/web").kind === "listed");
    await until("the watch", () => streams.length > 0);
    forbidden = true;
    w.changed.length = 0;
    streams[0]?.end(); // the watch ends; the next request is refused
    await until("denied", () => w.watches.denied);
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "listed", hostnames: ["web-0", "web-1"] });
    assert.deepEqual(w.changed, [], "nothing changed for web");
    assert.equal(w.watches.watching, 0);
  });

  it("a host missing from the slices stays a host for the grace period, then goes; one back within it never left", async () => {
    const streams: Stream[] = [];
    const w = await start(
      (url, res) => {
        if (url.searchParams.get("watch") === "true") streams.push(openStream(res));
        else sendJson(res, 200, sliceList(["web-0", "web-1"]));
      },
      60_000,
      400,
    );
    w.watches.sync("shop/web", true);
    await until("listed", () => w.watches.hosts("shop/web").kind === "listed");
    await until("the watch", () => streams.length > 0);
    w.changed.length = 0;
    // web-0's pod is replaced: gone from the slice, back within the grace. Nothing changes.
    streams[0]?.event("MODIFIED", sliceEvent(["web-1"], "11"));
    streams[0]?.event("MODIFIED", sliceEvent(["web-1", "web-0"], "12"));
    // web-1 goes for good as web-2 comes (the change that proves the events were seen):
    // web-1 is still a host for the grace, then not.
    streams[0]?.event("MODIFIED", sliceEvent(["web-0", "web-2"], "13"));
    await until("web-2", () => (w.changed.length > 0 ? true : undefined));
    const goneAt = Date.now();
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "listed", hostnames: ["web-0", "web-1", "web-2"] });
    assert.deepEqual(w.changed, ["shop/web"], "web-0's brief absence changed nothing");
    await until("web-1 gone after the grace", () => (w.changed.length > 1 ? true : undefined), 3_000);
    assert.ok(Date.now() - goneAt >= 250, "not before the grace");
    assert.deepEqual(w.watches.hosts("shop/web"), { kind: "listed", hostnames: ["web-0", "web-2"] });
    assert.deepEqual(w.changed, ["shop/web", "shop/web"]);
  });

  it("no endpoint at all keeps the shape last seen: headless without hosts (scaled to 0), ordinary as ordinary, unknown when nothing was seen", async () => {
    const streams = new Map<string, Stream>();
    const first: Record<string, (string | undefined)[]> = { sts: ["sts-0"], plain: [undefined], empty: [] };
    const w = await start((url, res) => {
      const service = url.searchParams.get("labelSelector")?.split("=")[1] ?? "";
      if (url.searchParams.get("watch") === "true") streams.set(service, openStream(res));
      else sendJson(res, 200, sliceList(first[service] ?? []));
    });
    for (const name of ["sts", "plain", "empty"]) w.watches.sync(`shop/${name}`, true);
    await until("listed", () => (streams.size === 3 ? true : undefined));
    assert.deepEqual(w.watches.hosts("shop/sts"), { kind: "listed", hostnames: ["sts-0"] });
    assert.deepEqual(w.watches.hosts("shop/plain"), { kind: "ordinary" });
    assert.deepEqual(w.watches.hosts("shop/empty"), { kind: "unknown" });
    streams.get("sts")?.event("MODIFIED", sliceEvent([], "11"));
    streams.get("plain")?.event("MODIFIED", sliceEvent([], "11"));
    await until("sts scaled to 0", () => {
      const hosts = w.watches.hosts("shop/sts");
      return hosts.kind === "listed" && hosts.hostnames.length === 0 ? true : undefined;
    });
    assert.deepEqual(w.watches.hosts("shop/plain"), { kind: "ordinary" });
  });

  it("a first list that fails (500) holds a complete set back no longer; the hosts stay pending until a list", async () => {
    let failing = true;
    const w = await start((url, res) => {
      if (failing) sendStatus(res, 500, "InternalError");
      else if (url.searchParams.get("watch") === "true") openStream(res);
      else sendJson(res, 200, sliceList(["db-0"]));
    });
    w.watches.sync("shop/db", true);
    assert.equal(w.watches.pending, true);
    await until("the failure answered", () => (w.watches.pending ? undefined : true));
    assert.deepEqual(w.watches.hosts("shop/db"), { kind: "pending" });
    assert.deepEqual(w.changed, ["shop/db"], "told once: a complete set may go");
    failing = false;
    await until(
      "listed after the retry",
      () => (w.watches.hosts("shop/db").kind === "listed" ? true : undefined),
      5_000,
    );
  });
});
