/**
 * The default placement (`--max-threads auto`): the thread budget from the CPUs and the
 * memory limit, the switch from a thread per cluster to packed as the fleet grows (in
 * the actor lifecycle, as a pure function), and the status that `status` and /metrics show.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetrics } from "../../src/admin/metrics.ts";
import { formatStatusTable } from "../../src/cli/status-table.ts";
import type { PlacementStatus } from "../../src/status/placement-status.ts";
import { transition } from "../../src/supervisor/actor-lifecycle.ts";
import {
  initialLifecycleState,
  type LifecycleEvent,
  type LifecycleSettings,
  type LifecycleState,
} from "../../src/supervisor/actor-lifecycle-state.ts";
import { autoBudget, COSTS, placementStatus, RULE } from "../../src/supervisor/default-placement.ts";
import type { RegisteredCluster } from "../../src/supervisor/registry.ts";

const MIB = 2 ** 20;
const GIB = 2 ** 30;

describe("default placement: the thread budget", () => {
  it("with no memory limit: packed threads follow the CPUs between the minimum and the maximum", () => {
    assert.deepEqual(autoBudget({ cpus: 1, memoryLimitBytes: undefined }), {
      isolatedUpTo: RULE.isolatedMin,
      threads: RULE.minThreads,
      basis: "1 CPU, no memory limit",
    });
    assert.equal(autoBudget({ cpus: 2, memoryLimitBytes: undefined }).threads, Math.max(RULE.minThreads, 2));
    assert.equal(autoBudget({ cpus: 8, memoryLimitBytes: undefined }).threads, 8 * RULE.threadsPerCpu);
    assert.equal(autoBudget({ cpus: 256, memoryLimitBytes: undefined }).threads, RULE.maxThreads);
  });

  it("a thread per cluster up to isolatedMin clusters at least, and up to the packed thread count on a larger node", () => {
    assert.equal(autoBudget({ cpus: 2, memoryLimitBytes: undefined }).isolatedUpTo, RULE.isolatedMin);
    assert.equal(autoBudget({ cpus: 12, memoryLimitBytes: undefined }).isolatedUpTo, 12);
  });

  it("a memory limit bounds both: threads take at most their share of the limit above the base process", () => {
    // 256 MiB: (256 − base) × share / threadMb threads fit, fewer than 64 CPUs would take.
    const fit = Math.floor(((256 - COSTS.baseMb) * RULE.threadMemoryShare) / COSTS.threadMb);
    const bound = autoBudget({ cpus: 64, memoryLimitBytes: 256 * MIB });
    assert.equal(bound.threads, fit);
    assert.equal(bound.basis, "64 CPUs, memory limit 256 MiB, bound by the memory limit");
    // 4 GiB: the CPUs bind, not the memory.
    assert.deepEqual(autoBudget({ cpus: 4, memoryLimitBytes: 4 * GIB }), {
      isolatedUpTo: Math.max(RULE.isolatedMin, 4),
      threads: 4,
      basis: "4 CPUs, memory limit 4 GiB",
    });
    // 192 MiB: (192 − 85) × 0.5 / 10.5 = 5.1 → 5 threads, and a thread each for at most 5 clusters.
    const small = autoBudget({ cpus: 8, memoryLimitBytes: 192 * MIB });
    assert.deepEqual([small.isolatedUpTo, small.threads], [5, 5]);
  });

  it("gives the examples docs/CLI.md shows (threads and blast radius per Pod and fleet)", () => {
    const examples = [
      { cpus: 2, limit: undefined, clusters: 3, packed: false, threads: 3, radius: 1 },
      { cpus: 2, limit: undefined, clusters: 50, packed: true, threads: 2, radius: 25 },
      { cpus: 8, limit: GIB, clusters: 200, packed: true, threads: 8, radius: 25 },
      { cpus: 16, limit: 256 * MIB, clusters: 200, packed: true, threads: 8, radius: 25 },
      { cpus: 8, limit: 192 * MIB, clusters: 10, packed: true, threads: 5, radius: 2 },
    ];
    for (const e of examples) {
      const budget = autoBudget({ cpus: e.cpus, memoryLimitBytes: e.limit });
      const packed = e.clusters > budget.isolatedUpTo;
      assert.equal(packed, e.packed, JSON.stringify(e));
      assert.equal(packed ? budget.threads : e.clusters, e.threads, JSON.stringify(e));
      assert.equal(packed ? Math.ceil(e.clusters / budget.threads) : 1, e.radius, JSON.stringify(e));
    }
  });

  it("a limit too small for even one more thread still gives one packed thread, never none", () => {
    const tiny = autoBudget({ cpus: 4, memoryLimitBytes: 64 * MIB });
    assert.deepEqual([tiny.isolatedUpTo, tiny.threads], [1, 1]);
  });

  it("nonsense inputs (0 CPUs, NaN, a zero limit) give the budget of one CPU and no limit", () => {
    assert.deepEqual(
      autoBudget({ cpus: 0, memoryLimitBytes: 0 }),
      autoBudget({ cpus: 1, memoryLimitBytes: undefined }),
    );
    assert.equal(autoBudget({ cpus: Number.NaN, memoryLimitBytes: Number.NaN }).threads, RULE.minThreads);
  });
});

const POLICY = { initialMs: 1_000, maxMs: 60_000, windowMs: 600_000, crashLoopAfter: 3, crashLoopRetryMs: 300_000 };
const SOLO: LifecycleSettings = { maxThreads: 0, maxConcurrentStarts: 100, policy: POLICY, stopTimeoutMs: 10_000 };
const BUDGET = { isolatedUpTo: 3, threads: 2, basis: "2 CPUs" };
const AUTO: LifecycleSettings = { ...SOLO, auto: BUDGET };

function reg(cluster: string, fingerprint = "f1"): RegisteredCluster {
  return {
    cluster,
    domain: "example.test",
    connection: { server: `https://${cluster}.test:6443`, auth: { kind: "token", token: "t" } },
    defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
    priority: 100,
    fingerprint,
    secretKey: `fleet/cluster-credentials-${cluster}`,
    secretUid: `uid-${cluster}`,
  };
}

const registrations = (rs: RegisteredCluster[]): LifecycleEvent => ({
  type: "registrations",
  registered: new Map(rs.map((r) => [r.cluster, r])),
});

const names = (n: number) => Array.from({ length: n }, (_, i) => `c${i}`);

/** Steps the lifecycle; returns the names of the threads spawned by each step. */
class Driver {
  state: LifecycleState = initialLifecycleState(AUTO);
  step(event: LifecycleEvent): string[] {
    const next = transition(this.state, event, 1_000_000);
    this.state = next.state;
    return next.effects.flatMap((e) => (e.type === "spawn-thread" ? [e.name] : []));
  }
  threadOf(cluster: string): number | undefined {
    const epoch = this.state.actors.get(cluster)?.epoch;
    return epoch === undefined ? undefined : this.state.incarnations.get(epoch)?.thread;
  }
  readyAll(): void {
    for (const actor of [...this.state.actors.values()]) {
      const thread = this.threadOf(actor.cluster);
      if (thread !== undefined && actor.epoch !== undefined)
        this.step({ type: "actor-ready", thread, cluster: actor.cluster, epoch: actor.epoch });
    }
  }
}

describe("default placement in the actor lifecycle", () => {
  it("up to isolatedUpTo clusters: a thread of its own each, as --max-threads 0", () => {
    const d = new Driver();
    assert.deepEqual(d.step(registrations(names(3).map((c) => reg(c)))), ["c0", "c1", "c2"]);
    assert.equal(d.state.packedSlots, 0);
    const status = placementStatus("auto", BUDGET, d.state);
    assert.deepEqual([status.mode, status.threads, status.blastRadius, status.packedThreads], ["isolated", 3, 1, null]);
    assert.match(
      status.reason,
      /^auto: 3 clusters ≤ 3 → a thread per cluster; more are packed on 2 threads \(2 CPUs\)$/,
    );
  });

  it("a fleet larger than isolatedUpTo at start is packed from the first start: only the slots' threads are spawned", () => {
    const d = new Driver();
    assert.deepEqual(d.step(registrations(names(7).map((c) => reg(c)))), ["thread-0", "thread-1"]);
    d.readyAll();
    const status = placementStatus("auto", BUDGET, d.state);
    assert.deepEqual([status.mode, status.threads, status.blastRadius, status.packedThreads], ["packed", 2, 4, 2]);
    assert.match(status.reason, /^auto: 7 clusters > 3 → packed on 2 threads/);
  });

  it("growing past isolatedUpTo while running packs new clusters and moves no running actor; a restart of its own moves one to its slot", () => {
    const d = new Driver();
    d.step(registrations(names(3).map((c) => reg(c))));
    d.readyAll();
    const before = new Map(names(3).map((c) => [c, d.threadOf(c)]));
    const spawned = d.step(registrations(names(5).map((c) => reg(c))));
    assert.equal(d.state.packedSlots, 2);
    assert.deepEqual(spawned.sort(), ["thread-0", "thread-1"], "the new clusters start on shared threads");
    for (const [c, thread] of before) assert.equal(d.threadOf(c), thread, `${c} still runs on its own thread`);
    assert.equal(placementStatus("auto", undefined, d.state).threads, 5, "3 own threads + 2 shared while switching");
    // c0's credentials change: it stops on its own thread, then starts on its slot's thread.
    d.step(
      registrations([
        reg("c0", "f2"),
        ...names(5)
          .slice(1)
          .map((c) => reg(c)),
      ]),
    );
    const old = before.get("c0");
    assert.ok(old !== undefined);
    d.step({ type: "thread-exited", thread: old, code: 0 });
    const slotThread = d.state.slotThreads.get(d.state.slots.get("c0") ?? -1);
    assert.equal(d.threadOf("c0"), slotThread, "c0 now runs on its slot's shared thread");
  });

  it("a fleet that shrinks back stays packed until the process restarts", () => {
    const d = new Driver();
    d.step(registrations(names(5).map((c) => reg(c))));
    d.step(registrations(names(2).map((c) => reg(c))));
    assert.equal(d.state.packedSlots, 2);
    assert.equal(placementStatus("auto", undefined, d.state).mode, "packed");
  });

  it("explicit settings are named as such: --max-threads 0 and --max-threads N", () => {
    const isolated = new Driver();
    isolated.state = initialLifecycleState(SOLO);
    isolated.step(registrations(names(9).map((c) => reg(c))));
    const s0 = placementStatus("isolated", undefined, isolated.state);
    assert.deepEqual(
      [s0.mode, s0.threads, s0.blastRadius, s0.reason],
      ["isolated", 9, 1, "--max-threads 0: a thread per cluster"],
    );
    const fixed = new Driver();
    fixed.state = initialLifecycleState({ ...SOLO, maxThreads: 4 });
    fixed.step(registrations(names(9).map((c) => reg(c))));
    const s4 = placementStatus("fixed", undefined, fixed.state);
    assert.deepEqual([s4.mode, s4.packedThreads, s4.blastRadius], ["packed", 4, 3]);
    assert.match(s4.reason, /^--max-threads 4: a thread per cluster up to 4 clusters, then 4 shared threads$/);
  });

  it("no cluster: blast radius 0", () => {
    assert.equal(placementStatus("auto", undefined, initialLifecycleState(AUTO)).blastRadius, 0);
  });
});

describe("default placement in /metrics", () => {
  const metricsOf = (placement: PlacementStatus | undefined) =>
    createMetrics({
      fleet: () => placement && { secretsListed: true, writer: undefined, writerRestarts: 0, clusters: [], placement },
      counters: () => undefined,
      leadership: () => ({ enabled: false, leading: placement !== undefined, identity: "me" }),
      threadHeaps: async () => [],
    }).metrics();

  it("shows the threads, the blast radius, the slots and the setting and mode in force", async () => {
    const d = new Driver();
    d.step(registrations(names(7).map((c) => reg(c))));
    const text = await metricsOf(placementStatus("auto", BUDGET, d.state));
    assert.match(text, /^fleet_mirror_placement_threads 2$/m);
    assert.match(text, /^fleet_mirror_placement_blast_radius_clusters 4$/m);
    assert.match(text, /^fleet_mirror_placement_packed_threads 2$/m);
    assert.match(text, /^fleet_mirror_placement_info\{setting="auto",mode="packed"\} 1$/m);
  });

  it("a standby (no controller runs) has no actor thread and no placement in force", async () => {
    const text = await metricsOf(undefined);
    assert.match(text, /^fleet_mirror_placement_threads 0$/m);
    assert.match(text, /^fleet_mirror_placement_blast_radius_clusters 0$/m);
    assert.doesNotMatch(text, /^fleet_mirror_placement_info\{/m);
  });
});

describe("default placement in `fleet-mirror status`", () => {
  it("prints the mode, the threads, the blast radius and why under the clusters", () => {
    const d = new Driver();
    d.step(registrations(names(7).map((c) => reg(c))));
    const placement = placementStatus("auto", BUDGET, d.state);
    const table = formatStatusTable(
      {
        source: "controller",
        clusters: [{ cluster: "c0", secret: "fleet-mirror/c0", state: "synced", mirrors: 0, problems: [] }],
        federated: [],
        placement,
      },
      0,
    );
    assert.match(
      table,
      /^placement: packed, 2 actor threads, blast radius 4 clusters \(auto: 7 clusters > 3 → packed on 2 threads \(2 CPUs\)\)$/m,
    );
  });
});
