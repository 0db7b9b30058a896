/**
 * Changing the Lease layout under a rolling update, judged by the local API server's audit
 * log: the old replicas still run while the new ones start, as a Deployment's rollout
 * with a surge Pod has them. Two layouts are never writing at once: the shard count
 * changed (2 → 3, same Lease id), and sharding turned on (a single leader, then sharded
 * replicas). During the overlap no mirror object is written by two replicas, and the new
 * replicas write nothing at all; once the old replicas are gone (SIGTERM, as the rollout
 * ends them) the new layout takes every shard, relabels the mirrors once, and no old
 * write follows a new one.
 *
 * Timings as in every sharded test (sharded-world.ts): Lease 8 s, deadline 6 s, retry 1 s.
 */
import assert from "node:assert/strict";
import { after, before, describe, it, type TestContext } from "node:test";
import { CLUSTER_NAME, MIRRORED_SERVICE, SHARD_LABEL } from "../../src/core/labels.ts";
import { shardLabelValue } from "../../src/core/shard-label.ts";
import { shardOf } from "../../src/core/shards.ts";
import { type AuditedWrite, describeWrites, MIRROR_RESOURCES } from "../helpers/audit.ts";
import { eventually } from "../helpers/kube.ts";
import type { Replica } from "../helpers/replicas.ts";
import { NAMESPACE, ShardedWorld, shardedReplicaArgs } from "../helpers/sharded-world.ts";

const SERVICES = ["web"];
const EXTRA = ["--max-threads", "2"];

/** Mirror objects (by `resource namespace/name`) written, or tried, by more than one of `identities`. */
function writtenByTwo(writes: readonly AuditedWrite[], identities: readonly string[]): string[] {
  const writers = new Map<string, Set<string>>();
  for (const w of writes) {
    if (!identities.includes(w.identity)) continue;
    const key = `${w.resource} ${w.namespace}/${w.name}`;
    writers.set(key, (writers.get(key) ?? new Set()).add(w.identity));
  }
  return [...writers].filter(([, by]) => by.size > 1).map(([key, by]) => `${key}: ${[...by].join(", ")}`);
}

describe("changing the Lease layout while the old replicas still run (audited)", () => {
  let world: ShardedWorld;

  before(async () => {
    world = await ShardedWorld.start({
      remotes: ["east", "west"],
      clusters: 12,
      shards: 2,
      services: SERVICES,
      extraArgs: EXTRA,
    });
  });
  after(async () => {
    await world?.stop();
  });

  /** Runs a scenario; whatever its end, none of its replicas runs into the next one. */
  async function scenario(t: TestContext, body: () => Promise<void>): Promise<void> {
    try {
      await world.withDiagnostics(t, body);
    } finally {
      await Promise.all(world.replicas.list.filter((r) => r.running).map((r) => r.kill()));
    }
  }

  /** Waits until every mirror Service carries the shard label of layout `shards` (none when 1). */
  async function waitForLabels(shards: number): Promise<void> {
    let wrong: string[] = [];
    await eventually(
      () => `every mirror labelled for ${shards} shard(s); wrong: ${wrong.slice(0, 6).join(", ")}`,
      async () => {
        const list = await world.fleet.local.listNamespacedService({ namespace: NAMESPACE });
        const mirrors = list.items.filter((s) => s.metadata?.labels?.[MIRRORED_SERVICE] === "true");
        wrong = mirrors
          .filter((s) => {
            const cluster = s.metadata?.labels?.[CLUSTER_NAME] ?? "";
            const want = shards > 1 ? shardLabelValue(shardOf(cluster, shards), shards) : undefined;
            return s.metadata?.labels?.[SHARD_LABEL] !== want;
          })
          .map((s) => s.metadata?.name ?? "");
        return mirrors.length >= world.clusters.length * SERVICES.length && wrong.length === 0 ? true : undefined;
      },
      180_000,
      250,
    );
  }

  /**
   * The positive marker that the overlap lasted long enough for a new replica to act: the
   * API server received `n` renewals of its membership Lease (one per retry period, each
   * followed by a list of the Leases); its own /status shows it holding what it wants and
   * its writer idle with a complete desired set of every cluster of its shards (had it
   * taken a shard, its writes of that shard's mirrors are done by then), for 1.5 s; and
   * the old layout mirrored a Service made meanwhile.
   */
  async function overlapLasted(fresh: readonly Replica[], shards: number, service: string, n = 4): Promise<void> {
    await world.exportEverywhere(service);
    await world.waitForMirrors(service);
    for (const replica of fresh) {
      await eventually(
        `${n} renewals of ${replica.name}'s membership Lease`,
        async () => {
          await world.audit.flush();
          const renewals = world.audit
            .writes({ identity: replica.name, resources: ["leases"] })
            .filter((w) => w.name.includes("-member-") && w.verb === "update");
          return renewals.length >= n ? true : undefined;
        },
        60_000,
        250,
      );
      let since: number | undefined;
      await replica.waitForStatus(
        "holding what it wants, its writer idle on it for 1.5 s",
        (status) => {
          const sharding = status.leadership.sharding;
          const writer = status.writer;
          const mine = world.clusters.filter((c) => sharding?.held.includes(shardOf(c, shards)));
          const settled =
            sharding !== undefined &&
            JSON.stringify(sharding.held) === JSON.stringify(sharding.wanted) &&
            writer?.ready === true &&
            writer.queueDepth === 0 &&
            writer.inFlight === 0 &&
            mine.every((c) => writer.clusters[c]?.complete === true);
          if (!settled) since = undefined;
          else since ??= Date.now();
          return since !== undefined && Date.now() - since >= 1_500 ? true : undefined;
        },
        180_000,
      );
    }
  }

  /**
   * The overlap from `since`: no mirror object written by two replicas, none by `fresh`.
   * Then the old replicas end (SIGTERM), the new layout relabels every mirror, and no old
   * write follows a new one.
   */
  async function checkHandover(
    since: number,
    old: readonly Replica[],
    fresh: readonly Replica[],
    shards: number,
  ): Promise<void> {
    const end = await world.audit.flush();
    const names = [...old, ...fresh].map((r) => r.name);
    const overlap = world.audit.writes({
      namespace: NAMESPACE,
      resources: MIRROR_RESOURCES,
      since,
      until: end,
      includeFailed: true,
    });
    const doubled = writtenByTwo(overlap, names);
    assert.deepEqual(doubled, [], `mirror objects written by two replicas:\n${describeWrites(overlap)}`);
    const byFresh = overlap.filter((w) => fresh.some((r) => r.name === w.identity));
    assert.deepEqual(byFresh, [], `the new layout wrote while the old one ran:\n${describeWrites(byFresh)}`);

    for (const replica of old) assert.equal((await replica.terminate()).code, 0, `${replica.name} exits 0`);
    await waitForLabels(shards);
    await world.exportEverywhere(`after-${shards}`);
    await world.waitForMirrors(`after-${shards}`);
    const done = await world.audit.flush();
    const all = world.audit.writes({
      namespace: NAMESPACE,
      resources: MIRROR_RESOURCES,
      since,
      until: done,
      includeFailed: true,
    });
    const lastOld = Math.max(0, ...all.filter((w) => old.some((r) => r.name === w.identity)).map((w) => w.receivedAt));
    const firstNew = Math.min(
      Number.POSITIVE_INFINITY,
      ...all.filter((w) => fresh.some((r) => r.name === w.identity)).map((w) => w.receivedAt),
    );
    assert.ok(Number.isFinite(firstNew), "the new layout wrote nothing after the old one left");
    assert.ok(lastOld < firstNew, `an old replica wrote ${lastOld - firstNew} ms after the new layout's first write`);
  }

  it("a new shard count (2 → 3, same Lease id) writes nothing while the old replicas run, then takes over", async (t) => {
    await scenario(t, async () => {
      const old = [await world.addReplica("two-0"), await world.addReplica("two-1")];
      await world.waitForSettled(old.map((r) => r.name));
      await waitForLabels(2);
      const since = await world.audit.flush();
      const fresh = [await world.replicas.add("three-0", { args: [...shardedReplicaArgs(3), ...EXTRA] })];
      await overlapLasted(fresh, 3, "during-3");
      await checkHandover(since, old, fresh, 3);
      for (const replica of fresh) await replica.terminate();
    });
  });

  it("turning sharding on (a single leader, then sharded replicas) writes nothing new while the leader runs, then takes over", async (t) => {
    await scenario(t, async () => {
      const old = [await world.replicas.add("solo-0", { args: [...shardedReplicaArgs(1), ...EXTRA] })];
      old.push(await world.replicas.add("solo-1", { args: [...shardedReplicaArgs(1), ...EXTRA] }));
      await waitForLabels(1);
      const since = await world.audit.flush();
      const fresh = [
        await world.replicas.add("on-0", { args: [...shardedReplicaArgs(2), ...EXTRA] }),
        await world.replicas.add("on-1", { args: [...shardedReplicaArgs(2), ...EXTRA] }),
      ];
      await overlapLasted(fresh, 2, "during-on");
      await checkHandover(since, old, fresh, 2);
    });
  });
});
