/**
 * The local writer serves clusters fairly: one remote churning at full speed (every
 * change of a remote Service's resourceVersion is a local write) keeps a backlog of its
 * own, and another cluster's change is written next, not after that backlog. Through
 * the writer's ports against a real local API server, at the default write rate limit.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { WriterStatus } from "../../src/protocol/messages.ts";
import type { LocalWriterActor } from "../../workers/local-writer/actor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { batch, desiredMirror, FakeActorPort, type RunningWriter, startWriter } from "./writer-harness.ts";

/** The churning cluster's mirrors: a backlog of FLOOD writes (a port change: the Service) at 50 writes/s is 12 s. */
const FLOOD = 600;
/** How long the quiet cluster's write may take: a handful of the flood's writes, not its backlog. */
const BOUND_MS = 3_000;

function writesSoFar(status: WriterStatus): number {
  return Object.values(status.writes).reduce((sum, n) => sum + n, 0);
}

/**
 * Cluster `flood` sends its FLOOD mirrors with a new port every 100 ms (each send makes
 * every one of them differ from what is written) until the returned stop is called.
 */
function startFlood(writer: RunningWriter): { stop: () => void; port: FakeActorPort } {
  const port = new FakeActorPort();
  writer.actor.attach("flood", 1, port);
  const mirrors = (n: number): DesiredMirror[] =>
    Array.from({ length: FLOOD }, (_, i) => desiredMirror("flood", "flood", `svc-${i}`, 1000 + n));
  let seq = 1;
  port.send(batch("flood", 1, seq, { complete: true, upserts: mirrors(seq) }));
  const timer = setInterval(() => {
    seq += 1;
    port.send(batch("flood", 1, seq, { upserts: mirrors(seq) }));
  }, 100);
  return { stop: () => clearInterval(timer), port };
}

async function backlogOf(actor: LocalWriterActor, keys: number): Promise<void> {
  await eventually(`a writer backlog of ${keys} keys`, () => (actor.status().queueDepth >= keys ? true : undefined));
}

describe("fair writes between clusters", () => {
  let fleet: Fleet;

  before(async () => {
    fleet = await Fleet.start([]);
  });
  after(async () => {
    await fleet?.stop();
  });

  it(`writes a quiet cluster's changed mirror within ${BOUND_MS} ms while another cluster keeps a backlog of ${FLOOD} changed mirrors`, async (t) => {
    const writer = await startWriter(fleet, { qps: 50, burst: 10, concurrency: 4 });
    let flood: { stop: () => void } | undefined;
    try {
      writer.actor.setKeep(["flood", "quiet"]);
      const quiet = new FakeActorPort();
      writer.actor.attach("quiet", 1, quiet);
      quiet.send(batch("quiet", 1, 1, { complete: true, upserts: [desiredMirror("quiet", "calm", "web", 80)] }));
      await fleet.waitForMirror("calm", "web-quiet", () => true, 30_000);

      flood = startFlood(writer);
      await backlogOf(writer.actor, FLOOD / 2);

      const writesBefore = writesSoFar(writer.actor.status());
      const sent = Date.now();
      quiet.send(batch("quiet", 1, 2, { upserts: [desiredMirror("quiet", "calm", "web", 81)] }));
      await fleet.waitForMirror("calm", "web-quiet", (svc) => svc.spec?.ports?.[0]?.port === 81, 60_000);
      const tookMs = Date.now() - sent;
      const writesBetween = writesSoFar(writer.actor.status()) - writesBefore;
      const depth = writer.actor.status().queueDepth;
      t.diagnostic(`quiet change written in ${tookMs} ms; ${writesBetween} writes in between; backlog ${depth} keys`);
      assert.ok(
        tookMs <= BOUND_MS,
        `the quiet cluster's change took ${tookMs} ms (${writesBetween} writes in between; backlog still ${depth} keys)`,
      );
      // Its own two writes and, at most, a few rounds of the churning cluster's.
      assert.ok(writesBetween <= 40, `${writesBetween} writes went before the quiet cluster's change`);
    } finally {
      flood?.stop();
      await writer.stop();
    }
  });

  it("rewrites every mirror of a quiet cluster's gateway change within seconds while another cluster churns", async (t) => {
    const writer = await startWriter(fleet, { qps: 50, burst: 10, concurrency: 4 });
    let flood: { stop: () => void } | undefined;
    try {
      writer.actor.setKeep(["flood", "quiet"]);
      const quiet = new FakeActorPort();
      writer.actor.attach("quiet", 2, quiet);
      const names = ["a", "b", "c", "d", "e"];
      const withGateway = (ip: string): DesiredMirror[] =>
        names.map((n) => ({ ...desiredMirror("quiet", "gateway-move", n), addresses: [ip] }));
      quiet.send(batch("quiet", 2, 1, { complete: true, upserts: withGateway("198.18.0.10") }));
      for (const n of names)
        await fleet.waitForEndpoints("gateway-move", `${n}-quiet`, (e) => (e.subsets?.length ?? 0) > 0, 30_000);

      flood = startFlood(writer);
      await backlogOf(writer.actor, FLOOD / 2);

      const sent = Date.now();
      quiet.send(batch("quiet", 2, 2, { upserts: withGateway("198.18.0.77") }));
      for (const n of names)
        await fleet.waitForEndpoints(
          "gateway-move",
          `${n}-quiet`,
          (e) => e.subsets?.[0]?.addresses?.[0]?.ip === "198.18.0.77",
          60_000,
        );
      const tookMs = Date.now() - sent;
      t.diagnostic(`quiet gateway change on 5 mirrors written in ${tookMs} ms`);
      assert.ok(tookMs <= 2 * BOUND_MS, `the quiet cluster's gateway change took ${tookMs} ms to reach its 5 mirrors`);
    } finally {
      flood?.stop();
      await writer.stop();
    }
  });
});
