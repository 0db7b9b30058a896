/**
 * The chaos schedule's replica faults (a sharded run, `ScheduleOptions.replicas`): drawn
 * from the seed like every other step, never leaving the Deployment without a running
 * replica, restarting only what a kill left down, and absent from single-controller runs.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Schedule } from "./schedule.ts";
import type { Step } from "./steps.ts";

const REPLICAS = ["fm-0", "fm-1", "fm-2"];
const sharded = (seed: number): Step[] =>
  new Schedule({ seed, clusters: ["east", "west"], proxies: true, replicas: REPLICAS, heavyWeight: 3 }).take(400);

describe("chaos schedule with replicas", () => {
  it("draws the same replica faults for the same seed", () => {
    assert.deepEqual(sharded(11), sharded(11));
    assert.notDeepEqual(sharded(11), sharded(12));
  });

  it("kills only running replicas, keeps one running, and starts only replicas a kill left down", () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const down = new Set<string>();
      const steps = sharded(seed);
      for (const step of steps) {
        if (step.kind === "kill-replica") {
          assert.ok(!down.has(step.replica), `seed ${seed}: ${step.replica} killed while down`);
          down.add(step.replica);
          assert.ok(down.size < REPLICAS.length, `seed ${seed}: every replica down`);
        } else if (step.kind === "start-replica") {
          assert.ok(down.delete(step.replica), `seed ${seed}: ${step.replica} started while running`);
        } else if (step.kind === "term-replica" || step.kind === "partition-replica") {
          assert.ok(!down.has(step.replica), `seed ${seed}: ${step.kind} of ${step.replica} while it is down`);
        }
        if (step.kind === "partition-replica") assert.ok(step.ms >= 2_000 && step.ms <= 20_000, `${step.ms} ms`);
      }
      const kinds = new Set(steps.map((s) => s.kind));
      for (const kind of ["kill-replica", "start-replica", "term-replica", "partition-replica"])
        assert.ok(kinds.has(kind as Step["kind"]), `seed ${seed}: no ${kind} in 400 steps`);
      assert.ok(
        !kinds.has("kill-controller") && !kinds.has("term-controller"),
        `seed ${seed}: a single-controller fault`,
      );
    }
  });

  it("draws no replica fault without replicas, and the controller faults instead", () => {
    const kinds = new Set(
      new Schedule({ seed: 1, clusters: ["east"], proxies: true, heavyWeight: 3 }).take(400).map((s) => s.kind),
    );
    assert.ok(kinds.has("kill-controller") && kinds.has("term-controller"));
    for (const kind of ["kill-replica", "start-replica", "term-replica", "partition-replica"])
      assert.ok(!kinds.has(kind as Step["kind"]), kind);
  });
});
