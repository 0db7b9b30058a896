/**
 * The local writer serves clusters fairly: one remote churning at full speed (every
 * change of a remote Service's resourceVersion is a local write) keeps a backlog of its
 * own, and another cluster's change is written next, not after that backlog. Through
 * the writer's ports against a real local API server, at the default write rate limit;
 * and with a busy share (`--busy-write-percent`), the churning cluster's writes are held
 * to that share of the rate while the quiet one writes, and get the whole rate back
 * once it stops.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { WriterStatus } from "../../src/protocol/messages.ts";
import type { LocalWriterActor } from "../../workers/local-writer/actor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { batch, desiredMirror, FakeActorPort, type RunningWriter, startWriter, writerIdle } from "./writer-harness.ts";

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
 * `created`: the churn starts once the mirrors are created (a create writes the mirror's
 * addresses too, which the busy share never holds back; a port change writes the Service alone).
 */
async function startFlood(
  writer: RunningWriter,
  options: { created?: boolean; count?: number } = {},
): Promise<{ stop: () => void; port: FakeActorPort }> {
  const port = new FakeActorPort();
  writer.actor.attach("flood", 1, port);
  const mirrors = (n: number): DesiredMirror[] =>
    Array.from({ length: options.count ?? FLOOD }, (_, i) => desiredMirror("flood", "flood", `svc-${i}`, 1000 + n));
  let seq = 1;
  port.send(batch("flood", 1, seq, { complete: true, upserts: mirrors(seq) }));
  if (options.created === true) await writerIdle(writer.actor);
  const timer = setInterval(() => {
    seq += 1;
    port.send(batch("flood", 1, seq, { upserts: mirrors(seq) }));
  }, 100);
  return { stop: () => clearInterval(timer), port };
}

/** Cluster `quiet` (epoch 1) with its one mirror `calm/web-quiet` written at port 80. */
async function attachQuiet(fleet: Fleet, writer: RunningWriter): Promise<FakeActorPort> {
  writer.actor.setKeep(["flood", "quiet"]);
  const quiet = new FakeActorPort();
  writer.actor.attach("quiet", 1, quiet);
  quiet.send(batch("quiet", 1, 1, { complete: true, upserts: [desiredMirror("quiet", "calm", "web", 80)] }));
  await fleet.waitForMirror("calm", "web-quiet", () => true, 30_000);
  return quiet;
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
      const quiet = await attachQuiet(fleet, writer);

      flood = await startFlood(writer);
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

      flood = await startFlood(writer);
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

  it("holds a churning cluster to the busy share while a quiet cluster writes, and gives it the whole rate once the quiet one stops", async (t) => {
    const qps = 40;
    const writer = await startWriter(fleet, { qps, burst: 10, concurrency: 4, busyWritePercent: 25 });
    let flood: { stop: () => void } | undefined;
    let quietTimer: NodeJS.Timeout | undefined;
    try {
      const quiet = await attachQuiet(fleet, writer);
      // 150 mirrors: created (two writes each) in about 8 s at this rate.
      flood = await startFlood(writer, { created: true, count: 150 });
      await backlogOf(writer.actor, 75);

      // The quiet cluster changes its mirror 5 times a second (light: under a quarter of the rate).
      let quietSeq = 1;
      let quietPort = 100;
      quietTimer = setInterval(() => {
        quietSeq += 1;
        quietPort += 1;
        quiet.send(batch("quiet", 1, quietSeq, { upserts: [desiredMirror("quiet", "calm", "web", quietPort)] }));
      }, 200);
      await fleet.waitForMirror("calm", "web-quiet", (svc) => (svc.spec?.ports?.[0]?.port ?? 0) >= 103, 30_000);
      const writesBefore = writesSoFar(writer.actor.status());
      const portBefore = quietPort;
      const start = Date.now();
      await fleet.waitForMirror(
        "calm",
        "web-quiet",
        (svc) => (svc.spec?.ports?.[0]?.port ?? 0) >= portBefore + 15,
        30_000,
      );
      const seconds = (Date.now() - start) / 1000;
      const quietWrites = quietPort - portBefore + 1;
      const floodPerS = (writesSoFar(writer.actor.status()) - writesBefore - quietWrites) / seconds;
      t.diagnostic(
        `while the quiet cluster wrote: the churning one ${floodPerS.toFixed(1)} writes/s (share ${qps / 4}/s)`,
      );
      // The share is a quarter of the rate; without it the churning cluster takes the rest (≈ 35/s).
      assert.ok(floodPerS <= qps / 2, `the churning cluster wrote ${floodPerS.toFixed(1)}/s beside the quiet one`);
      const { clusters } = writer.actor.status();
      assert.ok((clusters["flood"]?.heldWrites ?? 0) > 0, "the status counts the churning cluster's held writes");
      assert.equal(clusters["quiet"]?.heldWrites, undefined, "and none of the quiet one's");

      clearInterval(quietTimer);
      quietTimer = undefined;
      let last = { writes: writesSoFar(writer.actor.status()), at: Date.now() };
      const lifted = await eventually(
        "the churning cluster to have the whole rate again",
        () => {
          // Measured between two checks of `eventually`, a quarter second apart.
          const now = { writes: writesSoFar(writer.actor.status()), at: Date.now() };
          const perS = ((now.writes - last.writes) * 1000) / (now.at - last.at);
          last = now;
          return perS > qps / 2 ? perS : undefined;
        },
        60_000,
        250,
      );
      t.diagnostic(`alone again: ${lifted.toFixed(1)} writes/s`);
    } finally {
      if (quietTimer !== undefined) clearInterval(quietTimer);
      flood?.stop();
      await writer.stop();
    }
  });
});
