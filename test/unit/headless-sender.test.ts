/**
 * The desired sender with headless Services (SPEC §12), on fake inputs: a complete set
 * waits for the first answer of every exported headless Service's slice list, and says
 * "hosts unknown" of one whose list failed; while a Service's hostnames are not known
 * nothing new is sent for it (no flapping to an ordinary mirror and back); hostnames
 * appearing and disappearing upsert and delete per-host mirrors; no hosts at all keep
 * the mirror headless; 5 000 hosts are one batch of at most 1 001 mirrors, and a report.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ClusterSettings } from "../../src/core/desired.ts";
import { HEADLESS_MIRROR_LABEL, type HeadlessHosts, MAX_HEADLESS_HOSTS } from "../../src/core/headless.ts";
import { GATEWAY_NAME, GATEWAY_NS } from "../../src/core/labels.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import { eventually } from "../helpers/kube.ts";
import { type Batch, FakeDesiredPort, fakeSender, summary } from "../helpers/remote-actor.ts";

const SETTINGS: ClusterSettings = {
  name: "east",
  domain: "cluster.local",
  excludedNamespaces: [],
  defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
};

const gateway: Service = {
  metadata: { name: "gateway", namespace: "gw", resourceVersion: "1" },
  spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port: 4143 }] },
  status: { loadBalancer: { ingress: [{ ip: "198.18.0.1" }] } },
};

const service = (name: string, headless: boolean): Service => ({
  metadata: {
    name,
    namespace: "shop",
    resourceVersion: "1",
    annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gw" },
  },
  spec: { ...(headless ? { clusterIP: "None" } : {}), ports: [{ name: "http", port: 80, protocol: "TCP" }] },
});

function world(services: Service[]) {
  const store = new Map(services.map((s) => [objectKey(s.metadata), s]));
  const hosts = new Map<string, HeadlessHosts>();
  /** Services whose first slice list failed: a complete set waits for them no longer. */
  const failed = new Set<string>();
  const port = new FakeDesiredPort();
  let acked = 0;
  const sender = fakeSender({
    cluster: SETTINGS,
    services: { get: (k) => store.get(k), values: () => store.values(), hasSynced: true },
    headlessHosts: (k) => hosts.get(k) ?? { kind: "pending" },
    // As HeadlessWatches: the first key of the namespace whose listed hostnames hold it.
    hostClaimant: (namespace, hostname) =>
      [...hosts]
        .filter(([k, h]) => k.startsWith(`${namespace}/`) && h.kind === "listed" && h.hostnames.includes(hostname))
        .map(([k]) => k)
        .sort()[0],
    headlessPending: () =>
      [...store.values()].some(
        (s) =>
          s.spec?.clusterIP === "None" &&
          !failed.has(objectKey(s.metadata)) &&
          (hosts.get(objectKey(s.metadata)) ?? { kind: "pending" }).kind === "pending",
      ),
  });
  sender.attach(port);
  const next = (what: string, match: (b: Batch) => boolean = () => true): Promise<Batch> =>
    eventually(
      () => `${what} (batches: ${port.batches.map(summary).join(" ")})`,
      () => port.batches.find((b) => b.seq > acked && match(b)),
      5_000,
      5,
    ).then((b) => {
      acked = b.seq;
      return b;
    });
  return { store, hosts, failed, port, sender, next };
}

const names = (b: Batch): string[] => b.upserts.map((m) => m.name).sort();

describe("the desired sender and headless Services", () => {
  it("a complete set waits for the hostnames of every exported headless Service", async () => {
    const w = world([gateway, service("web", true), service("api", false)]);
    w.sender.requestSnapshot();
    await eventually("a flush that waited for web's hostnames", () =>
      w.sender.flowState.hostnameWaits > 0 ? true : undefined,
    );
    assert.equal(w.port.batches.length, 0, "nothing sent while web's hostnames are pending");
    w.hosts.set("shop/web", { kind: "listed", hostnames: ["web-0", "web-1"] });
    w.sender.changed("shop/web");
    const first = await w.next("the complete set");
    assert.equal(first.complete, true);
    assert.deepEqual(names(first), ["api-east", "web-0-east", "web-1-east", "web-east"]);
    assert.deepEqual(
      first.upserts.find((m) => m.name === "web-east")?.headless?.hosts.map((h) => h.service),
      ["web-0-east", "web-1-east"],
    );
  });

  it("hostnames appearing and disappearing upsert and delete per-host mirrors; pending sends nothing new", async () => {
    const w = world([gateway, service("web", true)]);
    w.hosts.set("shop/web", { kind: "listed", hostnames: ["web-0"] });
    w.sender.requestSnapshot();
    await w.next("the complete set");
    w.hosts.set("shop/web", { kind: "listed", hostnames: ["web-0", "web-1"] });
    w.sender.changed("shop/web");
    const up = await w.next("web-1 added");
    assert.deepEqual(names(up), ["web-1-east", "web-east"]);
    assert.deepEqual(up.deletes, []);
    w.hosts.set("shop/web", { kind: "listed", hostnames: ["web-1"] });
    w.sender.changed("shop/web");
    const down = await w.next("web-0 removed");
    assert.deepEqual(down.deletes, ["shop/web-0-east"]);
    assert.deepEqual(names(down), ["web-east"]);
    // A watch started again (its store not listed yet): what was sent stays.
    w.hosts.set("shop/web", { kind: "pending" });
    w.sender.changed("shop/web");
    w.store.set("shop/other", service("other", false));
    w.sender.changed("shop/other");
    const other = await w.next("other's mirror");
    assert.deepEqual(names(other), ["other-east"]);
    assert.deepEqual(other.deletes, []);
    // No host left (scaled to 0): still the headless mirror, without hosts; never an ordinary one.
    w.hosts.set("shop/web", { kind: "listed", hostnames: [] });
    w.sender.changed("shop/web");
    const empty = await w.next("web without hosts");
    assert.deepEqual(empty.deletes, ["shop/web-1-east"]);
    assert.deepEqual(empty.upserts.find((m) => m.name === "web-east")?.headless, { hosts: [] });
    // Endpoints without hostnames: an ordinary mirror.
    w.hosts.set("shop/web", { kind: "ordinary" });
    w.sender.changed("shop/web");
    const ordinary = await w.next("web as an ordinary mirror");
    const mirror = ordinary.upserts.find((m) => m.name === "web-east");
    assert.equal(mirror?.headless, undefined);
    assert.equal(mirror?.hostsUnknown, undefined);
  });

  it("a headless Service whose hosts are not known is the ordinary mirror marked hostsUnknown: in a delta when refused, in a complete set when its first list failed", async () => {
    const w = world([gateway, service("web", true), service("db", true), service("api", false)]);
    w.hosts.set("shop/web", { kind: "unknown" });
    w.failed.add("shop/db"); // db's first list failed: pending still, but the complete set waits no longer
    w.sender.requestSnapshot();
    const first = await w.next("the complete set");
    assert.equal(first.complete, true);
    assert.deepEqual(names(first), ["api-east", "db-east", "web-east"]);
    for (const name of ["db-east", "web-east"]) {
      const m = first.upserts.find((u) => u.name === name);
      assert.equal(m?.hostsUnknown, true, name);
      assert.equal(m?.headless, undefined, name);
    }
    assert.equal(first.upserts.find((u) => u.name === "api-east")?.hostsUnknown, undefined);
    // db still pending in a delta: nothing new for it. Listed at last: its headless mirrors.
    w.sender.changed("shop/db");
    w.store.set("shop/other", service("other", false));
    w.sender.changed("shop/other");
    assert.deepEqual(names(await w.next("other's mirror")), ["other-east"]);
    // A Service whose read is refused before any list, in a delta: the marked ordinary mirror at once.
    w.store.set("shop/late", service("late", true));
    w.hosts.set("shop/late", { kind: "unknown" });
    w.sender.changed("shop/late");
    const late = await w.next("late's mirror");
    assert.equal(late.upserts.find((m) => m.name === "late-east")?.hostsUnknown, true);
    w.hosts.set("shop/db", { kind: "listed", hostnames: ["db-0"] });
    w.sender.changed("shop/db");
    const listed = await w.next("db's hosts");
    assert.deepEqual(names(listed), ["db-0-east", "db-east"]);
    assert.equal(listed.upserts.find((m) => m.name === "db-east")?.hostsUnknown, undefined);
  });

  it("a host named like an exported Service: that Service's own mirror, not a per-host one", async () => {
    const w = world([gateway, service("web", true), service("web-0", false)]);
    w.hosts.set("shop/web", { kind: "listed", hostnames: ["web-0", "web-1"] });
    w.sender.requestSnapshot();
    const first = await w.next("the complete set");
    assert.deepEqual(names(first), ["web-0-east", "web-1-east", "web-east"]);
    assert.equal(first.upserts.find((m) => m.name === "web-0-east")?.labels[HEADLESS_MIRROR_LABEL], undefined);
    assert.equal(w.sender.problems().find((p) => p.remote === "shop/web")?.reason, "headless-hostname-invalid");
  });

  it("two headless Services with a host of the same name: the first keeps the per-host mirror, the other is told", async () => {
    const w = world([gateway, service("alpha", true), service("beta", true)]);
    w.hosts.set("shop/alpha", { kind: "listed", hostnames: ["db-0"] });
    w.hosts.set("shop/beta", { kind: "listed", hostnames: ["db-0", "db-1"] });
    w.sender.requestSnapshot();
    const first = await w.next("the complete set");
    assert.deepEqual(names(first), ["alpha-east", "beta-east", "db-0-east", "db-1-east"]);
    assert.equal(first.upserts.find((m) => m.name === "db-0-east")?.labels[HEADLESS_MIRROR_LABEL], "alpha-east");
    assert.deepEqual(
      first.upserts.find((m) => m.name === "beta-east")?.headless?.hosts.map((h) => h.service),
      ["db-1-east"],
    );
    const problem = w.sender.problems().find((p) => p.remote === "shop/beta");
    assert.equal(problem?.reason, "headless-hostname-invalid");
    assert.match(problem?.message ?? "", /db-0-east is a host of headless Service shop\/alpha too/);
    assert.equal(
      w.sender.problems().find((p) => p.remote === "shop/alpha"),
      undefined,
    );
    // alpha loses db-0 (HeadlessWatches tells beta too): beta's per-host mirror takes the name, never deleted.
    w.hosts.set("shop/alpha", { kind: "listed", hostnames: [] });
    w.sender.changed("shop/alpha");
    w.sender.changed("shop/beta");
    const moved = await w.next("db-0-east now beta's");
    assert.deepEqual(moved.deletes, []);
    assert.equal(moved.upserts.find((m) => m.name === "db-0-east")?.labels[HEADLESS_MIRROR_LABEL], "beta-east");
    assert.equal(
      w.sender.problems().find((p) => p.remote === "shop/beta"),
      undefined,
    );
  });

  it(`5 000 hosts: one batch, at most ${MAX_HEADLESS_HOSTS} per-host mirrors, and a report`, async () => {
    const w = world([gateway, service("big", true)]);
    const hostnames = Array.from({ length: 5_000 }, (_, i) => `big-${i}`).sort();
    w.hosts.set("shop/big", { kind: "listed", hostnames });
    w.sender.requestSnapshot();
    const batch = await w.next("the complete set");
    assert.equal(w.port.batches.length, 1);
    assert.equal(batch.upserts.length, MAX_HEADLESS_HOSTS + 1);
    const problem = w.sender.problems().find((p) => p.remote === "shop/big");
    assert.equal(problem?.reason, "headless-hostname-invalid");
    assert.match(problem?.message ?? "", /5000 hostnames, more than the 1000 mirrored: 4000 left out/);
  });
});
