/**
 * A shard's elector handed the membership list's observation of its Lease: a dead
 * holder's record expires from when the list first saw it, so the takeover takes one
 * lease duration, not two. A fake API answers in memory; time is a ManualClock.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { LeaderElector } from "../../src/leader/elector.ts";
import { type LeaseRecord, observe } from "../../src/leader/lease.ts";
import { silentLogger } from "../../src/log.ts";

const DEAD: LeaseRecord = {
  holderIdentity: "replica-dead",
  leaseDurationSeconds: 4,
  acquireTime: "2026-12-03T12:00:00.000000Z",
  renewTime: "2026-12-03T12:00:05.000000Z",
  leaseTransitions: 2,
};

/** A Lease API in memory: GET answers the dead holder's Lease until a PUT replaces it. */
function fakeApi() {
  const writes: string[] = [];
  let lease: Record<string, unknown> = {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: { name: "fleet-mirror-shard-3", namespace: "fleet-mirror", resourceVersion: "1" },
    spec: DEAD,
  };
  const client = {
    request: async (method: string, _path: string, options?: { body?: unknown }) => {
      if (method === "GET") return lease;
      writes.push(method);
      lease = { ...(options?.body as Record<string, unknown>), kind: "Lease" };
      return lease;
    },
  } as unknown as KubeClient;
  return { client, writes };
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

function elector(client: KubeClient, clock: ManualClock, seen: boolean): LeaderElector {
  return new LeaderElector({
    client,
    namespace: "fleet-mirror",
    name: "fleet-mirror-shard-3",
    identity: "replica-b",
    leaseDurationMs: 4_000,
    renewDeadlineMs: 3_000,
    retryPeriodMs: 500,
    logger: silentLogger(),
    clock,
    wallClock: () => Date.parse("2026-12-03T12:01:00Z"),
    // The membership list first saw this record at 1 000 ms.
    ...(seen ? { observation: observe(undefined, DEAD, 1_000) } : {}),
  });
}

describe("a shard's elector and the membership list's observation", () => {
  it("takes a dead holder's Lease at its first try when the list saw the record unchanged for a lease duration", async () => {
    const clock = new ManualClock(5_100);
    const { client, writes } = fakeApi();
    const e = elector(client, clock, true);
    e.run();
    await settle();
    assert.deepEqual(writes, ["PUT"]);
    assert.equal(e.isLeader, true);
    await e.stop();
  });

  it("without it, waits a whole lease duration from its own first read", async () => {
    const clock = new ManualClock(5_100);
    const { client, writes } = fakeApi();
    const e = elector(client, clock, false);
    e.run();
    await settle();
    assert.deepEqual(writes, [], "took a Lease it had not seen unchanged for a lease duration");
    assert.equal(e.isLeader, false);
    await e.stop();
  });
});
