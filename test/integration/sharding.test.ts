/**
 * Sharding on real API servers, judged by the local API server's audit log: three
 * `fleet-mirror run --shards 12` replicas (each its own Pod and Pod-bound token, so the
 * log names the replica of every write) mirror 60 clusters, registered over three remote
 * API servers. Every mirror is written by exactly one replica, the holder of its
 * cluster's shard when the server received the write (the Lease writes in the same log
 * are the holders' history); a rolling restart, one replica at a time with a new Pod,
 * moves shards and writes no mirror at all.
 *
 * Timings: Lease 8 s, renew deadline 6 s, retry 1 s (sharded-world.ts says why);
 * `--max-threads 2` per replica, so three replicas fit a loaded 2-core machine.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api } from "@kubernetes/client-node";
import { CLUSTER_NAME, MIRRORED_SERVICE, SHARD_LABEL } from "../../src/core/labels.ts";
import { shardLabelValue } from "../../src/core/shard-label.ts";
import { describeWrites, MIRROR_RESOURCES } from "../helpers/audit.ts";
import { eventually } from "../helpers/kube.ts";
import { describeForeignWrites, writersByObject } from "../helpers/shard-audit.ts";
import { NAMESPACE, ShardedWorld } from "../helpers/sharded-world.ts";

const SHARDS = 12;
const SERVICES = ["web", "api"];

describe("sharding: three replicas, 60 clusters, 12 shards (audited)", () => {
  let world: ShardedWorld;

  before(async () => {
    world = await ShardedWorld.start({
      remotes: ["east", "west", "north"],
      clusters: 60,
      shards: SHARDS,
      services: SERVICES,
      extraArgs: ["--max-threads", "2"],
    });
  });
  after(async () => {
    await world?.stop();
  });

  it("every mirror is created once and written only by the replica holding its cluster's shard", async (t) => {
    await world.withDiagnostics(t, async () => {
      const started = Date.now();
      const names = ["fm-0", "fm-1", "fm-2"];
      for (const name of names) await world.addReplica(name);
      await world.waitForEvenHolders(names);
      for (const service of SERVICES) await world.waitForMirrors(service);
      const converged = Date.now();
      await world.waitForSettled(names);
      t.diagnostic(
        `3 replicas: 60 clusters × ${SERVICES.length} Services mirrored ${converged - started} ms after start`,
      );

      const foreign = await world.foreignWrites();
      assert.deepEqual(
        foreign,
        [],
        `mirror writes by a replica not holding the shard:\n${describeForeignWrites(foreign)}`,
      );

      // Every object of a cluster's mirror carries its shard, which each writer's watches
      // select on: a replica decodes its own shards' mirrors only (core/shard-label.ts).
      await eventually("every mirror object labelled with its cluster's shard", async () => {
        const services = await world.fleet.local.listNamespacedService({ namespace: NAMESPACE });
        const slices = await world.fleet
          .kubeConfig("local")
          .makeApiClient(DiscoveryV1Api)
          .listNamespacedEndpointSlice({ namespace: NAMESPACE });
        const objects = [...services.items, ...slices.items].filter(
          (o) => o.metadata?.labels?.[MIRRORED_SERVICE] === "true",
        );
        const wrong = objects.filter((o) => {
          const cluster = o.metadata?.labels?.[CLUSTER_NAME] ?? "";
          return o.metadata?.labels?.[SHARD_LABEL] !== shardLabelValue(world.shardOf(cluster), SHARDS);
        });
        return objects.length >= world.clusters.length * SERVICES.length * 2 && wrong.length === 0 ? true : undefined;
      });

      const mirrorWrites = world.audit.writes({ namespace: NAMESPACE, resources: MIRROR_RESOURCES, since: started });
      const writers = writersByObject(mirrorWrites.filter((w) => names.includes(w.identity)));
      for (const service of SERVICES) {
        for (const cluster of world.clusters) {
          const key = `services ${NAMESPACE}/${service}-${cluster}`;
          const writtenBy = [...(writers.get(key) ?? [])];
          assert.equal(writtenBy.length, 1, `${key}: written by ${writtenBy.join(", ")}`);
          const creates = mirrorWrites.filter(
            (w) => w.resource === "services" && w.verb === "create" && w.name === `${service}-${cluster}`,
          );
          assert.equal(creates.length, 1, `${key}: created ${creates.length} times`);
        }
      }
    });
  });

  it("a rolling restart, one new Pod at a time, moves shards and writes no mirror", async (t) => {
    await world.withDiagnostics(t, async () => {
      let current = ["fm-0", "fm-1", "fm-2"];
      await world.waitForSettled(current);
      const since = await world.audit.flush();
      const before = await world.holders();
      for (const [i, old] of ["fm-0", "fm-1", "fm-2"].entries()) {
        // The Deployment's rolling update with maxUnavailable 1: the old Pod gets SIGTERM,
        // a new Pod (a new name) starts, and the next waits until the shards are spread again.
        const exit = await world.replicas.get(old).terminate();
        assert.equal(exit.code, 0, `${old} exits 0 on SIGTERM`);
        const fresh = `fm-${3 + i}`;
        await world.addReplica(fresh);
        current = [...current.filter((n) => n !== old), fresh];
        await world.waitForSettled(current);
      }
      const after = await world.holders();
      const end = await world.audit.flush();
      t.diagnostic(`holders before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`);

      const writes = world.audit.writes({
        namespace: NAMESPACE,
        resources: MIRROR_RESOURCES,
        since,
        until: end,
        includeFailed: true,
      });
      assert.deepEqual(writes, [], `mirror writes during the rolling restart:\n${describeWrites(writes)}`);
      assert.ok(
        after.every((h) => current.includes(h)),
        "every shard moved to a new Pod",
      );

      // The new Pods are live: a new Service is mirrored in every cluster, by its shard's holder.
      await world.exportEverywhere("after-restart");
      await world.waitForMirrors("after-restart");
      const foreign = await world.foreignWrites();
      assert.deepEqual(
        foreign,
        [],
        `mirror writes by a replica not holding the shard:\n${describeForeignWrites(foreign)}`,
      );
    });
  });
});
