/**
 * The writer's Link status patches (workers/local-writer/link-status.ts) against a fake
 * API server on loopback: a cold start that finds every Link's status to write sends at
 * most PATCHES_IN_FLIGHT patches at once, each Link's exactly once, and a patch that
 * waited for a slot while its cluster became unwritable is not sent.
 */
import assert from "node:assert/strict";
import type * as http from "node:http";
import { afterEach, describe, it } from "node:test";
import { systemClock } from "../../src/core/clock.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE } from "../../src/core/labels.ts";
import { silentLogger } from "../../src/log.ts";
import { LinkStatusWriter, PATCHES_IN_FLIGHT } from "../../workers/local-writer/link-status.ts";
import { testMirror } from "../helpers/desired-mirror.ts";
import { type FakeApi, fakeApi, openStream, sendJson, until } from "../helpers/fake-api.ts";

const NAMESPACE = "linkerd-multicluster";
const LINKS = 10;
/** Generous: a loaded machine (the suite runs two files at once) may take seconds. */
const WAIT_MS = 10_000;
const link = (i: number) => ({
  apiVersion: "multicluster.linkerd.io/v1alpha3",
  kind: "Link",
  metadata: { name: `c${i}`, namespace: NAMESPACE, uid: `uid-${i}`, resourceVersion: "5" },
});

/** A fake API server listing LINKS Links and holding every status patch until released. */
async function world(): Promise<{
  readonly api: FakeApi;
  readonly held: http.ServerResponse[];
  readonly patched: string[];
  readonly maxHeld: () => number;
}> {
  const held: http.ServerResponse[] = [];
  const patched: string[] = [];
  let maxHeld = 0;
  // A held patch must not time out on the client's side (it would be sent again).
  const api = await fakeApi(
    (url, res, req) => {
      if (req.method === "PATCH") {
        patched.push(url.pathname);
        held.push(res);
        maxHeld = Math.max(maxHeld, held.filter((r) => !r.writableEnded).length);
        return;
      }
      if (url.searchParams.get("watch") === "true") {
        openStream(res); // no event: the Links stay as listed
        return;
      }
      sendJson(res, 200, {
        apiVersion: "multicluster.linkerd.io/v1alpha3",
        kind: "LinkList",
        metadata: { resourceVersion: "5" },
        items: Array.from({ length: LINKS }, (_, i) => link(i)),
      });
    },
    { requestTimeoutMs: 60_000 },
  );
  return { api, held, patched, maxHeld: () => maxHeld };
}

function statusWriter(api: FakeApi, writable: (cluster: string) => boolean): LinkStatusWriter {
  const writer = new LinkStatusWriter({
    client: api.client,
    clock: systemClock,
    log: silentLogger(),
    dryRun: false,
    // One mirror per cluster: every Link's observed status (none) differs from its desired one.
    mirrorsOf: (cluster) => [testMirror({ cluster, name: `web-${cluster}` })],
    membersOf: () => [],
    known: () => true,
    blocked: () => new Map(),
    // Every mirror is observed, the cluster's own: its entry is "Mirrored".
    service: (key) => {
      const [namespace = "", name = ""] = key.split("/");
      const cluster = name.slice("web-".length);
      return { metadata: { namespace, name, labels: { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: cluster } } };
    },
    writable,
    count: () => undefined,
    busy: () => false,
    stamp: () => 0,
  });
  writer.set({
    type: "writer.links",
    seq: 1,
    namespace: NAMESPACE,
    links: Array.from({ length: LINKS }, (_, i) => ({
      cluster: `c${i}`,
      name: `c${i}`,
      uid: `uid-${i}`,
      problems: [],
    })),
  });
  return writer;
}

/** Passes until the first patches went out (a pass does nothing before the Links' list). */
async function firstPatches(writer: LinkStatusWriter, patched: readonly string[]): Promise<void> {
  await until(
    "the first patches",
    () => {
      writer.pass();
      return patched.length >= PATCHES_IN_FLIGHT;
    },
    WAIT_MS,
  );
}

describe("LinkStatusWriter: status patches in flight", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it(`sends a cold start's patches ${PATCHES_IN_FLIGHT} at a time, each Link's once`, async () => {
    const { api, held, patched, maxHeld } = await world();
    const writer = statusWriter(api, () => true);
    cleanups.push(async () => {
      await writer.stop();
      await api.close();
    });
    // One pass makes every patch.
    await firstPatches(writer, patched);
    // Answer the held patches one by one: each answer lets exactly one more through.
    let answered = 0;
    while (answered < LINKS) {
      const next = await until(`patch ${answered + 1} held`, () => held[answered], WAIT_MS);
      sendJson(next, 200, link(answered));
      answered++;
    }
    await until("every Link patched", () => patched.length === LINKS, WAIT_MS);
    assert.equal(maxHeld(), PATCHES_IN_FLIGHT, "patches in flight at once");
    assert.equal(new Set(patched).size, LINKS, "one patch per Link");
    assert.ok(patched.every((p) => p.endsWith("/status")));
  });

  it("does not send a waiting patch whose cluster can no longer be written, and sends it once it can", async () => {
    const { api, held, patched } = await world();
    let writable = true;
    const refused = new Set<string>();
    const writer = statusWriter(api, (cluster) => {
      if (!writable) refused.add(cluster);
      return writable;
    });
    cleanups.push(async () => {
      await writer.stop();
      await api.close();
    });
    await firstPatches(writer, patched);
    writable = false; // the fence closes while the other Links' patches wait for a slot
    for (const res of held.slice(0, PATCHES_IN_FLIGHT)) sendJson(res, 200, link(0));
    // Each freed slot asks about a waiting patch's cluster, which is refused: nothing is sent.
    await until("every waiting patch refused", () => refused.size === LINKS - PATCHES_IN_FLIGHT, WAIT_MS);
    assert.equal(patched.length, PATCHES_IN_FLIGHT, "patches sent after the fence closed");
    writable = true;
    await until(
      "the refused Links patched at a later pass",
      () => {
        writer.pass();
        for (const res of held) if (!res.writableEnded) sendJson(res, 200, link(0));
        return patched.length === LINKS;
      },
      WAIT_MS,
    );
    assert.equal(new Set(patched).size, LINKS, "one patch per Link");
  });
});
