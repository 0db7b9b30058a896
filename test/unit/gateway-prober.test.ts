/**
 * The prober's scheduling on a manual clock, with a fake probe the test answers: when
 * probes start, that one at most is in flight per address, what a liveness change
 * reports, and that nothing survives a stop.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import type { ProbeSpec } from "../../src/core/probe-spec.ts";
import { silentLogger } from "../../src/log.ts";
import { GatewayProber } from "../../workers/remote-cluster/gateway-prober.ts";
import type { ProbeRequest, ProbeResult } from "../../workers/remote-cluster/http-probe.ts";

interface Call {
  readonly request: ProbeRequest;
  answer(result: ProbeResult): Promise<void>;
}

const SPEC: ProbeSpec = { port: 4191, path: "/ready", periodMs: 1_000 };
const ok: ProbeResult = { ok: true, status: 200, latencyMs: 20 };
const unavailable: ProbeResult = { ok: false, reason: "status", status: 503, message: "HTTP 503", latencyMs: 30 };
const timedOut: ProbeResult = { ok: false, reason: "timeout", message: "no answer", latencyMs: 1_000 };

/** Lets promise callbacks run. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function harness(random = 0.5) {
  const clock = new ManualClock();
  const calls: Call[] = [];
  const changes: string[] = [];
  let probed = 0;
  const prober = new GatewayProber({
    clock,
    random: () => random,
    userAgent: "test",
    log: silentLogger(),
    guard: (fn) => fn,
    livenessChanged: (key) => changes.push(key),
    probed: () => {
      probed += 1;
    },
    probe: (request) =>
      new Promise<ProbeResult>((resolve) => {
        request.signal?.addEventListener("abort", () =>
          resolve({ ok: false, reason: "error", message: "aborted", latencyMs: 0 }),
        );
        calls.push({
          request,
          answer: async (result) => {
            resolve(result);
            await settle();
          },
        });
      }),
  });
  return {
    clock,
    calls,
    changes,
    prober,
    get probed() {
      return probed;
    },
    /** Answers every probe in flight for `address` with `result`. */
    async answerAll(address: string, result: ProbeResult): Promise<void> {
      for (const c of calls.filter((c) => c.request.address === address && !c.request.signal?.aborted))
        await c.answer(result);
    },
  };
}
// Answered calls, so inFlight counts only pending ones.
const answered = new WeakSet<Call>();

/** Advances one period and answers the probe that started, as `result`. */
async function cycle(h: ReturnType<typeof harness>, address: string, result: ProbeResult): Promise<void> {
  const before = h.calls.length;
  h.clock.advance(SPEC.periodMs * 1.1);
  const started = h.calls.slice(before).filter((c) => c.request.address === address);
  assert.equal(started.length, 1, `one probe of ${address} started in the period`);
  const call = started[0] as Call;
  answered.add(call);
  await call.answer(result);
}

describe("gateway prober", () => {
  it("probes each address first within one period, with the spec's port, path and timeout", () => {
    const h = harness(0.5);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1", "198.51.100.2"]);
    h.clock.advance(499);
    assert.equal(h.calls.length, 0);
    h.clock.advance(1);
    assert.deepEqual(
      h.calls.map((c) => [c.request.address, c.request.port, c.request.path, c.request.timeoutMs]),
      [
        ["198.51.100.1", 4191, "/ready", 1_000],
        ["198.51.100.2", 4191, "/ready", 1_000],
      ],
    );
  });

  it("keeps at most one probe in flight per address, however long it hangs", async () => {
    const h = harness(0);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1"]);
    h.clock.advance(0);
    assert.equal(h.calls.length, 1);
    for (let i = 0; i < 20; i++) h.clock.advance(SPEC.periodMs);
    await settle();
    assert.equal(h.calls.length, 1, "no second probe while the first is unanswered");
    await h.answerAll("198.51.100.1", timedOut);
    h.clock.advance(SPEC.periodMs);
    assert.equal(h.calls.length, 2, "the next probe follows the answer");
  });

  it("marks an address dead after 3 failures and alive after one success, reporting each change once", async () => {
    const h = harness(0);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1", "198.51.100.2"]);
    h.clock.advance(0);
    for (const c of h.calls) {
      answered.add(c);
      await c.answer(c.request.address === "198.51.100.1" ? unavailable : ok);
    }
    await cycle(h, "198.51.100.1", timedOut);
    assert.deepEqual(h.changes, []);
    assert.deepEqual([...(h.prober.deadAddresses("gw/gateway") ?? [])], []);
    await cycle(h, "198.51.100.1", unavailable);
    assert.deepEqual(h.changes, ["gw/gateway"]);
    assert.deepEqual([...(h.prober.deadAddresses("gw/gateway") ?? [])], ["198.51.100.1"]);
    const status = h.prober.status("gw/gateway");
    assert.equal(status?.alive, 1);
    assert.equal(status?.dead, 1);
    assert.deepEqual(status?.deadAddresses, ["198.51.100.1"]);
    assert.match(status?.lastFailure ?? "", /HTTP 503/);

    for (let i = 0; i < 5; i++) await cycle(h, "198.51.100.1", timedOut);
    assert.deepEqual(h.changes, ["gw/gateway"], "failures that confirm dead report nothing");

    await cycle(h, "198.51.100.1", ok);
    assert.deepEqual(h.changes, ["gw/gateway", "gw/gateway"]);
    assert.deepEqual([...(h.prober.deadAddresses("gw/gateway") ?? [])], []);
  });

  it("counts failures by reason and the latency of answered probes only", async () => {
    const h = harness(0);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1"]);
    h.clock.advance(0);
    answered.add(h.calls[0] as Call);
    await (h.calls[0] as Call).answer(ok);
    await cycle(h, "198.51.100.1", unavailable);
    await cycle(h, "198.51.100.1", timedOut);
    const counters = h.prober.counters()["gw/gateway"];
    assert.deepEqual(counters?.failures, { timeout: 1, refused: 0, status: 1, error: 0 });
    assert.equal(counters?.latency.count, 2, "the timeout has no latency");
    assert.ok(Math.abs((counters?.latency.sum ?? 0) - 0.05) < 1e-9);
    assert.equal(h.probed, 3);
  });

  it("goes on with the same loops when set again with the same spec and addresses", async () => {
    const h = harness(0);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1"]);
    h.clock.advance(0);
    for (const result of [timedOut, timedOut]) {
      const c = h.calls.at(-1) as Call;
      answered.add(c);
      await c.answer(result);
      h.clock.advance(SPEC.periodMs * 1.1);
    }
    h.prober.set("gw/gateway", { ...SPEC }, ["198.51.100.1"]);
    const c = h.calls.at(-1) as Call;
    assert.equal(c.request.signal?.aborted, false, "the probe in flight goes on");
    answered.add(c);
    await c.answer(timedOut);
    assert.deepEqual(h.changes, ["gw/gateway"], "the third consecutive failure still counts");
  });

  it("starts over, alive, when the spec changes, and aborts the probe in flight", async () => {
    const h = harness(0);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1"]);
    h.clock.advance(0);
    for (let i = 0; i < 3; i++) {
      const c = h.calls.at(-1) as Call;
      answered.add(c);
      await c.answer(timedOut);
      h.clock.advance(SPEC.periodMs * 1.1);
    }
    assert.deepEqual([...(h.prober.deadAddresses("gw/gateway") ?? [])], ["198.51.100.1"]);
    const inFlight = h.calls.at(-1) as Call;
    h.prober.set("gw/gateway", { ...SPEC, path: "/live" }, ["198.51.100.1"]);
    assert.equal(inFlight.request.signal?.aborted, true);
    assert.deepEqual([...(h.prober.deadAddresses("gw/gateway") ?? [])], []);
    h.clock.advance(0);
    assert.equal(h.calls.at(-1)?.request.path, "/live");
  });

  it("stops probing a removed address, and its late answer changes nothing", async () => {
    const h = harness(0);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1", "198.51.100.2"]);
    h.clock.advance(0);
    const gone = h.calls.find((c) => c.request.address === "198.51.100.2") as Call;
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1"]);
    assert.equal(gone.request.signal?.aborted, true);
    await gone.answer(timedOut);
    for (let i = 0; i < 5; i++) h.clock.advance(SPEC.periodMs);
    assert.equal(h.calls.filter((c) => c.request.address === "198.51.100.2").length, 1);
    assert.equal(h.prober.counters()["gw/gateway"]?.failures["error"] ?? 0, 0, "an aborted probe is not counted");
  });

  it("stops a gateway without a spec or addresses, and keeps its counters", async () => {
    const h = harness(0);
    h.prober.set("gw/gateway", SPEC, ["198.51.100.1"]);
    h.clock.advance(0);
    answered.add(h.calls[0] as Call);
    await (h.calls[0] as Call).answer(unavailable);
    h.prober.set("gw/gateway", undefined, []);
    assert.equal(h.prober.status("gw/gateway"), undefined);
    assert.equal(h.prober.deadAddresses("gw/gateway"), undefined);
    assert.equal(h.clock.pending, 0);
    assert.equal(h.prober.counters()["gw/gateway"]?.failures["status"], 1);
  });

  it("leaves nothing behind after stop: no timer, every probe aborted, no report", async () => {
    const h = harness(0.3);
    for (let g = 0; g < 10; g++) h.prober.set(`gw/g${g}`, SPEC, [`198.51.100.${g + 1}`]);
    h.clock.advance(SPEC.periodMs);
    assert.equal(h.calls.length, 10);
    h.prober.stop();
    assert.equal(h.clock.pending, 0);
    assert.ok(h.calls.every((c) => c.request.signal?.aborted));
    const probed = h.probed;
    for (const c of h.calls) await c.answer(timedOut);
    assert.equal(h.probed, probed);
    h.prober.set("gw/g0", SPEC, ["198.51.100.1"]);
    assert.equal(h.clock.pending, 0, "a stopped prober starts nothing");
  });

  it("keeps probing other gateways while one hangs forever", async () => {
    const h = harness(0);
    h.prober.set("gw/hung", SPEC, ["198.51.100.1"]);
    h.prober.set("gw/fine", SPEC, ["198.51.100.2"]);
    h.clock.advance(0);
    for (let i = 0; i < 10; i++) {
      const fine = h.calls.filter((c) => c.request.address === "198.51.100.2").at(-1) as Call;
      answered.add(fine);
      await fine.answer(ok);
      h.clock.advance(SPEC.periodMs * 1.1);
    }
    assert.equal(h.calls.filter((c) => c.request.address === "198.51.100.2").length, 11);
    assert.equal(h.calls.filter((c) => c.request.address === "198.51.100.1").length, 1);
  });
});
