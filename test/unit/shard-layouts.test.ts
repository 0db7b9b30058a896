/**
 * Two Lease layouts of one lease id over an in-memory Lease store (test/helpers/lease-store.ts):
 * the replicas of a new shard count take nothing while the old layout's replicas live,
 * and the old ones take nothing more (not even the shards their own peers release); once
 * the old layout is gone, the new one waits a lease duration after its last live Lease,
 * then takes every shard. A single leader takes no Lease while sharded Leases are live.
 * A take is confirmed by a list sent after it. Real time, short periods (retry 100 ms,
 * Lease 1 s).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemClock } from "../../src/core/clock.ts";
import { shardLeaseName } from "../../src/core/lease-names.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { LeaderElector } from "../../src/leader/elector.ts";
import { LayoutWatch } from "../../src/leader/layout-watch.ts";
import { ShardCoordinator } from "../../src/leader/shard-coordinator.ts";
import { silentLogger } from "../../src/log.ts";
import { eventually } from "../helpers/kube.ts";
import { leaseStore, type Stored } from "../helpers/lease-store.ts";

const LEASE_MS = 1_000;
const RETRY_MS = 100;
const TIMINGS = { leaseDurationMs: LEASE_MS, renewDeadlineMs: 700, retryPeriodMs: RETRY_MS } as const;
const common = { namespace: "fleet-mirror", leaseId: "fleet-mirror", logger: silentLogger() } as const;

/** Requests per identity: `<identity> <METHOD> <path>`, in order (the marker that time passed is a count of them). */
const requests = new Map<string, string[]>();

/** `client`, its requests recorded under `identity`. */
function recorded(client: KubeClient, identity: string): KubeClient {
  const request: KubeClient["request"] = (method, path, options) => {
    requests.set(identity, [...(requests.get(identity) ?? []), `${method} ${path}`]);
    return client.request(method, path, options);
  };
  return { request } as KubeClient;
}

/** Resolves once `identity` sent `n` more requests matching `pattern` than when called. */
async function more(identity: string, pattern: RegExp, n: number): Promise<void> {
  const count = (): number => (requests.get(identity) ?? []).filter((r) => pattern.test(r)).length;
  const from = count();
  await eventually(`${n} more ${pattern} by ${identity}`, () => (count() - from >= n ? true : undefined));
}

const LIST = /^GET \S+\/leases$/;

/** A coordinator of `shards` shards; `handed` gets every held set it hands its host. */
function coordinator(client: KubeClient, identity: string, shards: number, handed: number[][] = []): ShardCoordinator {
  const host = { setShards: async (held: ReadonlyMap<number, number>) => void handed.push([...held.keys()].sort()) };
  return new ShardCoordinator({ client: recorded(client, identity), identity, shards, ...common, ...TIMINGS, host });
}

/** A Lease as another replica leaves it: held by `holder` (renewed now), or released. */
function lease(name: string, holder: string): Stored {
  const now = new Date().toISOString().replace("Z", "000Z");
  return {
    metadata: { name, resourceVersion: "0" },
    spec: { holderIdentity: holder, leaseDurationSeconds: 1, acquireTime: now, renewTime: now },
  };
}

describe("two Lease layouts", () => {
  it("a new shard count takes nothing while the old layout lives, the old one takes nothing more, then the new one takes over", async () => {
    const client = leaseStore();
    const handedA: number[][] = [];
    const handedC: number[][] = [];
    const [a, b] = [coordinator(client, "two-0", 2, handedA), coordinator(client, "two-1", 2)];
    const c = coordinator(client, "three-0", 3, handedC);
    try {
      a.run();
      b.run();
      await eventually("one shard each", () =>
        a.status().held.length + b.status().held.length === 2 ? true : undefined,
      );
      c.run();
      await eventually("three-0 refuses", () => c.status().refused);
      await eventually("the old replicas see the new one", () =>
        a.status().refused !== undefined && b.status().refused !== undefined ? true : undefined,
      );
      const kept = a.status().held;
      const handedBefore = handedA.length;
      await b.stop();
      await eventually("two-0 sees two-1 gone", () => (a.status().live.join() === "two-0" ? true : undefined));
      // Ten lists of the Leases by each: two-0 would take two-1's shard within about one
      // when no other layout is live, and three-0 any shard.
      await Promise.all([more("two-0", LIST, 10), more("three-0", LIST, 10)]);
      assert.deepEqual(a.status().held, kept);
      assert.deepEqual(
        handedA.slice(handedBefore).filter((set) => set.length > kept.length),
        [],
        "the old layout took a shard its peer released",
      );
      assert.deepEqual(
        handedC.filter((set) => set.length > 0),
        [],
        "the new layout took a shard while the old one lived",
      );
      await a.stop();
      const gone = Date.now();
      await eventually(
        "three-0 holds every shard",
        () => (c.status().held.length === 3 ? true : undefined),
        10_000,
        20,
      );
      // A lease duration after the last list that showed two-0's Leases live (a list
      // period, at most, before they were released).
      const after = Date.now() - gone;
      assert.ok(after >= LEASE_MS - 2 * RETRY_MS, `took over ${after} ms after the old layout left`);
    } finally {
      await Promise.all([a.stop(), b.stop(), c.stop()]);
    }
  });

  it("a single leader takes no Lease while a sharded one is live, and takes it a lease duration after its release", async () => {
    const leases = new Map<string, Stored>([["fleet-mirror-s2-shard-0", lease("fleet-mirror-s2-shard-0", "old")]]);
    const client = leaseStore(leases);
    const layout = new LayoutWatch({ ...common, shards: 1, ...TIMINGS });
    const elector = new LeaderElector({
      client: recorded(client, "solo"),
      ...common,
      name: "fleet-mirror",
      identity: "solo",
      ...TIMINGS,
      mayAcquire: () => layout.refused(),
    });
    try {
      layout.run(client, "fleet-mirror");
      elector.run();
      await eventually("the single leader refuses", () => layout.refused());
      for (let i = 0; i < 5; i++) {
        // Keep the sharded Lease renewed, as its holder would, and let the candidate read
        // the leader Lease (one try) once more each time.
        leases.set("fleet-mirror-s2-shard-0", lease("fleet-mirror-s2-shard-0", "old"));
        await more("solo", /^GET \S+\/leases\/fleet-mirror$/, 1);
        assert.equal(elector.isLeader, false, "took the Lease while a sharded one was live");
      }
      assert.equal(leases.has("fleet-mirror"), false, "a refusing candidate wrote the Lease");
      leases.set("fleet-mirror-s2-shard-0", lease("fleet-mirror-s2-shard-0", ""));
      const released = Date.now();
      await eventually("the single leader leads", () => (elector.isLeader ? true : undefined), 10_000, 20);
      assert.ok(Date.now() - released >= LEASE_MS - 2 * RETRY_MS, `led ${Date.now() - released} ms after the release`);
    } finally {
      await elector.stop();
      await layout.stop();
    }
  });

  it("confirms a take only on a list sent after it, and refuses one while another layout holds a Lease", async () => {
    const leases = new Map<string, Stored>();
    const client = leaseStore(leases);
    const layout = new LayoutWatch({ ...common, shards: 3, ...TIMINGS });
    try {
      layout.run(client, "fleet-mirror");
      await eventually("a first list", () => (layout.refused() === undefined ? true : undefined));
      leases.set(shardLeaseName("fleet-mirror", 2, 1), lease(shardLeaseName("fleet-mirror", 2, 1), "two-0"));
      // Asked at once, not a retry period later: the list that shows the Lease answers it.
      assert.equal(await layout.confirm(systemClock.now()), false);
      leases.set(shardLeaseName("fleet-mirror", 2, 1), lease(shardLeaseName("fleet-mirror", 2, 1), ""));
      assert.equal(await layout.confirm(systemClock.now()), true);
    } finally {
      await layout.stop();
    }
  });
});
