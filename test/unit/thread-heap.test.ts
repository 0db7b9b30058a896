import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { COSTS, RULE } from "../../src/supervisor/default-placement.ts";
import { NO_LIMIT_CAP_MB, packedHeapCapMb, threadHeapLimitMb } from "../../src/supervisor/thread-heap.ts";

const MIB = 2 ** 20;
const config = (over: Partial<Parameters<typeof packedHeapCapMb>[0]> = {}) => ({
  packedThreadMaxOldGenerationMb: "auto" as const,
  actorMaxOldGenerationMb: 96,
  maxThreads: "auto" as const,
  ...over,
});

describe("thread heap limits", () => {
  it("gives a thread of its own the actor limit, whatever the cap", () => {
    assert.equal(threadHeapLimitMb(96, 1, 16), 96);
    assert.equal(threadHeapLimitMb(96, 0, 16), 96);
  });

  it("gives a packed thread the actor limit per actor, up to the cap and never below one actor's", () => {
    assert.equal(threadHeapLimitMb(96, 3, 1024), 288);
    assert.equal(threadHeapLimitMb(96, 100, 1024), 1024, "100 clusters: the cap, not 9 600 MB");
    assert.equal(threadHeapLimitMb(96, 100, 50), 96, "a cap under one actor's limit still holds one actor");
    assert.equal(threadHeapLimitMb(96, 100, Number.POSITIVE_INFINITY), 9600, "no cap given: as before");
  });

  it("caps packed threads at 1 GiB without a memory limit", () => {
    assert.equal(packedHeapCapMb(config(), { cpus: 2, memoryLimitBytes: undefined }, { threads: 2 }), NO_LIMIT_CAP_MB);
    assert.equal(packedHeapCapMb(config(), undefined, undefined), NO_LIMIT_CAP_MB);
  });

  it("splits the actor threads' share of a memory limit among the packed threads", () => {
    const host = { cpus: 2, memoryLimitBytes: 1024 * MIB };
    const expected = Math.floor(((1024 - COSTS.baseMb) * RULE.threadMemoryShare) / 2);
    assert.equal(packedHeapCapMb(config(), host, { threads: 2 }), expected);
    // Every packed thread at its cap stays inside the limit with the base process.
    assert.ok(2 * expected + COSTS.baseMb < 1024);
    // An explicit --max-threads N: N packed threads share it.
    assert.equal(packedHeapCapMb(config({ maxThreads: 4 }), host, undefined), Math.floor(expected / 2));
    // A tight limit never caps below one actor's limit.
    assert.equal(packedHeapCapMb(config(), { cpus: 2, memoryLimitBytes: 128 * MIB }, { threads: 2 }), 96);
  });

  it("takes an explicit cap as given, but never below the actor limit", () => {
    const host = { cpus: 2, memoryLimitBytes: 1024 * MIB };
    assert.equal(packedHeapCapMb(config({ packedThreadMaxOldGenerationMb: 2048 }), host, { threads: 2 }), 2048);
    assert.equal(packedHeapCapMb(config({ packedThreadMaxOldGenerationMb: 32 }), undefined, undefined), 96);
  });
});
