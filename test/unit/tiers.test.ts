import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  DEFAULT_PRIORITY,
  idealCutoff,
  parsePriority,
  stepTiers,
  type Tier,
  type TierEffect,
  type TierState,
  tiersOf,
} from "../../src/core/tiers.ts";

const settings = { minReady: 1, failbackDelayMs: 30_000 } as const;
const tiers = (...ready: number[]): Tier[] => ready.map((r, i) => ({ priority: i * 10, ready: r }));
const switches = (effects: readonly TierEffect[]) => effects.filter((e) => e.kind !== "wake");

describe("parsePriority", () => {
  it("reads a whole number from 0 to 1000 and defaults to 100 when the annotation is absent", () => {
    assert.deepEqual(parsePriority("0"), { priority: 0 });
    assert.deepEqual(parsePriority("1000"), { priority: 1000 });
    assert.deepEqual(parsePriority("007"), { priority: 7 });
    assert.deepEqual(parsePriority(undefined), { priority: DEFAULT_PRIORITY });
  });

  it("reports an invalid value and counts it as the default", () => {
    for (const bad of ["-1", "1001", "1.5", "abc", "", " 5", "1e2", "10000"]) {
      const parsed = parsePriority(bad);
      assert.equal(parsed.priority, DEFAULT_PRIORITY, bad);
      assert.match(parsed.problem ?? "", /mirror\.linkerd\.io\/priority .* is not a whole number from 0 to 1000/, bad);
    }
  });
});

describe("tiers", () => {
  it("groups members of equal priority into one tier, best first, adding their ready endpoints", () => {
    assert.deepEqual(
      tiersOf([
        { priority: 100, ready: 2 },
        { priority: 0, ready: 1 },
        { priority: 100, ready: 3 },
      ]),
      [
        { priority: 0, ready: 1 },
        { priority: 100, ready: 5 },
      ],
    );
  });

  it("serves the best tier, adding the next ones until the threshold is reached, and every tier when none reaches it", () => {
    assert.equal(idealCutoff(tiers(1, 5, 5), 1), 0);
    assert.equal(idealCutoff(tiers(1, 1, 5), 3), 20);
    assert.equal(idealCutoff(tiers(0, 2, 5), 2), 10);
    assert.equal(idealCutoff(tiers(0, 0, 0), 1), 20);
    assert.equal(idealCutoff([], 1), undefined);
  });
});

describe("stepTiers", () => {
  it("starts serving the ideal prefix of a new Service, with no switch", () => {
    const step = stepTiers(settings, undefined, { now: 0, tiers: tiers(2, 2) });
    assert.equal(step.state?.cutoff, 0);
    assert.deepEqual(step.effects, []);
  });

  it("keeps the cutoff its objects were written for across a restart, failing back only after the delay", () => {
    const first = stepTiers(settings, undefined, { now: 0, tiers: tiers(2, 2), written: 10 });
    assert.equal(first.state?.cutoff, 10);
    assert.deepEqual(first.effects, [{ kind: "wake", at: 30_000 }]);
    const later = stepTiers(settings, first.state, { now: 30_000, tiers: tiers(2, 2) });
    assert.equal(later.state?.cutoff, 0);
    assert.equal(switches(later.effects)[0]?.kind, "failback");
  });

  it("fails over at once when the serving tiers fall short, to the smallest prefix that reaches the threshold", () => {
    const serving = stepTiers(settings, undefined, { now: 0, tiers: tiers(1, 0, 3) }).state;
    const step = stepTiers(settings, serving, { now: 5, tiers: tiers(0, 0, 3) });
    assert.equal(step.state?.cutoff, 20);
    assert.deepEqual(switches(step.effects), [
      {
        kind: "failover",
        from: 0,
        to: 20,
        message:
          "tiers up to priority 0 fell short of 1 ready endpoint(s); now serving priorities 0 (0 ready), 10 (0 ready), 20 (3 ready)",
      },
    ]);
  });

  it("fails back only after the better tier held enough ready endpoints for the whole delay", () => {
    let state: TierState | undefined = stepTiers(settings, undefined, { now: 0, tiers: tiers(0, 2) }).state;
    assert.equal(state?.cutoff, 10);
    const back = stepTiers(settings, state, { now: 1_000, tiers: tiers(1, 2) });
    state = back.state;
    assert.equal(state?.cutoff, 10);
    assert.deepEqual(back.effects, [{ kind: "wake", at: 31_000 }]);
    const early = stepTiers(settings, state, { now: 30_999, tiers: tiers(1, 2) });
    assert.equal(early.state?.cutoff, 10);
    assert.deepEqual(switches(early.effects), []);
    const ripe = stepTiers(settings, early.state, { now: 31_000, tiers: tiers(1, 2) });
    assert.equal(ripe.state?.cutoff, 0);
    assert.equal(switches(ripe.effects)[0]?.kind, "failback");
  });

  it("never fails back to a tier whose gateway dies and revives every second (one failover, at its first death)", () => {
    let state = stepTiers(settings, undefined, { now: 0, tiers: tiers(1, 2) }).state;
    const kinds: string[] = [];
    for (let second = 1; second <= 120; second++) {
      const alive = second % 2 === 0;
      const step = stepTiers(settings, state, { now: second * 1_000, tiers: tiers(alive ? 1 : 0, 2) });
      state = step.state;
      for (const e of switches(step.effects)) kinds.push(e.kind);
    }
    assert.deepEqual(kinds, ["failover"]);
    assert.equal(state?.cutoff, 10);
  });

  it("leaves the serving prefix alone while a better one still ripens, and starts over after any break", () => {
    let state = stepTiers(settings, undefined, { now: 0, tiers: tiers(0, 0, 2) }).state;
    state = stepTiers(settings, state, { now: 1_000, tiers: tiers(1, 0, 2) }).state;
    state = stepTiers(settings, state, { now: 20_000, tiers: tiers(0, 0, 2) }).state;
    state = stepTiers(settings, state, { now: 21_000, tiers: tiers(1, 0, 2) }).state;
    const step = stepTiers(settings, state, { now: 40_000, tiers: tiers(1, 0, 2) });
    assert.equal(step.state?.cutoff, 20);
    assert.deepEqual(step.effects, [{ kind: "wake", at: 51_000 }]);
  });

  it("serves every tier when none reaches the threshold, and does not switch while that stays so", () => {
    const first = stepTiers({ ...settings, minReady: 5 }, undefined, { now: 0, tiers: tiers(1, 1) });
    assert.equal(first.state?.cutoff, 10);
    const again = stepTiers({ ...settings, minReady: 5 }, first.state, { now: 1, tiers: tiers(0, 0) });
    assert.deepEqual(again.effects, []);
  });

  it("treats a cutoff past the worst tier (a tier left) as the worst tier, without a switch", () => {
    const state: TierState = { cutoff: 50, since: 0, ripening: [] };
    const step = stepTiers(settings, state, { now: 1, tiers: tiers(0, 0) });
    assert.equal(step.state?.cutoff, 10);
    assert.deepEqual(step.effects, []);
  });

  it("has no state once no member is left", () => {
    assert.equal(stepTiers(settings, { cutoff: 0, since: 0, ripening: [] }, { now: 1, tiers: [] }).state, undefined);
  });
});
