/**
 * The main thread's reading of the local cluster's own ranges (SPEC §10): Service CIDRs
 * and Nodes' pod CIDRs from the local API, reported on change only; a read the local
 * role denies, or a resource the server does not serve, reported once, falling back to
 * the flags and built-in ranges, and tried again. A scripted API on loopback.
 */
import assert from "node:assert/strict";
import type { ServerResponse } from "node:http";
import { after, describe, it } from "node:test";
import type { LocalRanges } from "../../src/core/address-policy.ts";
import { LocalRangesWatch } from "../../src/supervisor/local-ranges.ts";
import { type FakeApi, fakeApi, sendJson } from "../helpers/fake-api.ts";
import { eventually } from "../helpers/kube.ts";

const SERVICE_CIDRS = "/apis/networking.k8s.io/v1/servicecidrs";
const NODES = "/api/v1/nodes";

const serviceCidr = (name: string, cidrs: string[]) => ({ metadata: { name, resourceVersion: "1" }, spec: { cidrs } });
const node = (name: string, rv: string, podCIDRs: string[]) => ({
  metadata: { name, resourceVersion: rv },
  spec: { podCIDRs },
  status: { images: [{ names: ["a-large-field"] }] },
});

/** Answers lists from `lists` (an HTTP status for a refusal), and holds every watch open, sending `events` first. */
function scripted(lists: Record<string, unknown[] | number>, events: Record<string, unknown[]> = {}) {
  return (url: URL, res: ServerResponse) => {
    const answer = lists[url.pathname];
    if (typeof answer === "number" || answer === undefined) {
      sendJson(res, answer ?? 404, { kind: "Status", code: answer ?? 404, message: "refused by the test" });
      return;
    }
    if (url.searchParams.get("watch") === "true") {
      res.writeHead(200, { "content-type": "application/json" });
      for (const object of events[url.pathname] ?? []) res.write(`${JSON.stringify({ type: "MODIFIED", object })}\n`);
      return; // held open
    }
    sendJson(res, 200, { kind: "List", metadata: { resourceVersion: "10" }, items: answer });
  };
}

function harness(api: FakeApi, recheckMs = 60_000) {
  const changes: LocalRanges[] = [];
  const warnings: string[] = [];
  let settled = 0;
  const watch = new LocalRangesWatch({
    client: api.client,
    log: { info: () => {}, warn: (_fields, message) => warnings.push(message) },
    changed: (ranges) => changes.push(ranges),
    settled: () => {
      settled += 1;
    },
    recheckMs,
  });
  return { watch, changes, warnings, settled: () => settled };
}

describe("the local cluster's own ranges", () => {
  const apis: FakeApi[] = [];
  const watches: LocalRangesWatch[] = [];
  after(async () => {
    for (const w of watches) await w.stop();
    for (const a of apis) await a.close();
  });

  it("reads the Service CIDRs and the Nodes' pod CIDRs, and reports a change once: a Node's heartbeat changes nothing", async () => {
    const api = await fakeApi(
      scripted(
        {
          [SERVICE_CIDRS]: [serviceCidr("kubernetes", ["10.96.0.0/16", "fd00:96::/112"])],
          [NODES]: [node("a", "1", ["10.244.0.0/24"]), node("b", "1", ["10.244.1.0/24", "fd00:244:1::/64"])],
        },
        { [NODES]: [node("a", "2", ["10.244.0.0/24"]), node("c", "1", ["10.244.2.0/24"])] },
      ),
    );
    apis.push(api);
    const h = harness(api);
    watches.push(h.watch);
    h.watch.start();
    await eventually("settled", () => (h.settled() === 1 ? true : undefined), 5_000);
    // The watch sends node a's heartbeat, then node c: once c is seen, a was processed.
    await eventually("node c's pod CIDR", () => (h.watch.ranges.podCidrs.includes("10.244.2.0/24") ? true : undefined));
    const sets = h.changes.map((r) => JSON.stringify([r.serviceCidrs, r.podCidrs]));
    assert.equal(new Set(sets).size, sets.length, "every report is a change: node a's heartbeat made none");
    assert.deepEqual(
      h.changes.map((r) => r.seq),
      h.changes.map((_, i) => i + 1),
    );
    assert.deepEqual(h.changes.at(-1), {
      seq: h.changes.length,
      serviceCidrs: ["10.96.0.0/16", "fd00:96::/112"],
      podCidrs: ["10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24", "fd00:244:1::/64"],
    });
    assert.deepEqual(h.watch.status(), {
      serviceCidrs: ["10.96.0.0/16", "fd00:96::/112"],
      podCidrs: 4,
      deniedReads: [],
    });
    assert.deepEqual(h.warnings, []);
  });

  it("reports a denied read once, falls back to what it can read, and tries it again every recheck period", async () => {
    const api = await fakeApi(
      scripted({ [SERVICE_CIDRS]: [serviceCidr("kubernetes", ["10.96.0.0/16"])], [NODES]: 403 }),
    );
    apis.push(api);
    const h = harness(api, 100);
    watches.push(h.watch);
    h.watch.start();
    await eventually("settled", () => (h.settled() === 1 ? true : undefined), 5_000);
    await eventually("three reads of the nodes", () =>
      api.lists().filter((u) => u.pathname === NODES).length >= 3 ? true : undefined,
    );
    assert.deepEqual(h.watch.ranges.serviceCidrs, ["10.96.0.0/16"]);
    assert.deepEqual(h.watch.ranges.podCidrs, []);
    assert.equal(h.warnings.length, 1, "reported once");
    assert.match(h.warnings[0] ?? "", /local nodes cannot be read .*403.*flags, the built-in ranges/);
    assert.deepEqual(
      h.watch.status().deniedReads.map((d) => d.resource),
      ["nodes"],
    );
  });

  it("settles when the server serves no ServiceCIDRs (404), with the pod CIDRs it can read", async () => {
    const api = await fakeApi(scripted({ [NODES]: [node("a", "1", ["10.244.0.0/24"])] }));
    apis.push(api);
    const h = harness(api);
    watches.push(h.watch);
    h.watch.start();
    await eventually("settled", () => (h.settled() === 1 ? true : undefined), 5_000);
    await eventually("the pod CIDRs", () => (h.watch.ranges.podCidrs.length === 1 ? true : undefined), 5_000);
    assert.deepEqual(h.watch.ranges.serviceCidrs, []);
    assert.deepEqual(
      h.watch.status().deniedReads.map((d) => d.resource),
      ["networking.k8s.io/servicecidrs"],
    );
  });
});
