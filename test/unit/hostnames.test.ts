/**
 * The gateway hostname cache (SPEC §2) through resolver failures: a transient failure
 * (a timeout, SERVFAIL, a refused connection) keeps the last good addresses for a bounded
 * time; only an authoritative "no such name" or "no data" clears them at once; one
 * address family failing never hides the other. A fake resolver the test scripts, a
 * manual clock; no DNS.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ManualClock } from "../../src/core/clock.ts";
import { silentLogger } from "../../src/log.ts";
import { HostnameCache } from "../../workers/remote-cluster/hostnames.ts";
import type { AddressFamily, Resolver } from "../../workers/remote-cluster/resolver.ts";

const failure = (code: string): Error => Object.assign(new Error(`query ${code} gw.example`), { code });

/** What the fake resolver does for the next lookups: per family, or the same for both. */
type Step =
  | readonly string[]
  | Error
  | { readonly 4: readonly string[] | Error; readonly 6: readonly string[] | Error };

function harness(maxStaleMs = 600_000) {
  const clock = new ManualClock();
  let step: Step = [];
  const changed: string[] = [];
  const resolve: Resolver = async (_hostname: string, family?: AddressFamily) => {
    const answer = Array.isArray(step) || step instanceof Error ? step : step[family ?? 4];
    if (answer instanceof Error) throw answer;
    const list = answer as readonly string[];
    return family === undefined ? [...list] : list.filter((ip) => ip.includes(":") === (family === 6));
  };
  const cache = new HostnameCache(resolve, silentLogger(), (h) => changed.push(h), {
    now: () => clock.now(),
    maxStaleMs,
  });
  return {
    clock,
    cache,
    changed,
    answer(next: Step) {
      step = next;
    },
    async refresh(): Promise<void> {
      await cache.refresh(new Set(["gw.example"]));
    },
  };
}

describe("gateway hostname cache", () => {
  it("keeps the last good addresses when a refresh times out", async () => {
    const h = harness();
    h.answer(["1.2.3.4"]);
    await Promise.all(h.cache.track(["gw.example"]));
    assert.deepEqual(h.cache.lookup("gw.example"), ["1.2.3.4"]);
    h.answer(failure("ETIMEOUT"));
    await h.refresh();
    assert.deepEqual(h.cache.lookup("gw.example"), ["1.2.3.4"]);
    assert.deepEqual(h.changed, ["gw.example"], "no change reported for a kept answer");
  });

  it("keeps them through SERVFAIL and a refused connection too, and takes a new answer at once", async () => {
    const h = harness();
    h.answer(["198.18.0.1"]);
    await Promise.all(h.cache.track(["gw.example"]));
    for (const code of ["ESERVFAIL", "ECONNREFUSED", "EREFUSED", "ETIMEOUT"]) {
      h.answer(failure(code));
      await h.refresh();
      assert.deepEqual(h.cache.lookup("gw.example"), ["198.18.0.1"], code);
    }
    h.answer(["198.18.0.2"]);
    await h.refresh();
    assert.deepEqual(h.cache.lookup("gw.example"), ["198.18.0.2"]);
  });

  it("drops them once the last good answer is older than the staleness bound", async () => {
    const h = harness(10_000);
    h.answer(["198.18.0.1"]);
    await Promise.all(h.cache.track(["gw.example"]));
    h.answer(failure("ETIMEOUT"));
    h.clock.advance(10_000);
    await h.refresh();
    assert.deepEqual(h.cache.lookup("gw.example"), ["198.18.0.1"], "at the bound: kept");
    h.clock.advance(1);
    await h.refresh();
    assert.equal(h.cache.lookup("gw.example"), undefined, "past the bound: unresolved");
    assert.deepEqual(h.changed, ["gw.example", "gw.example"]);
  });

  it("clears them at once on an authoritative no such name or no data", async () => {
    for (const code of ["ENOTFOUND", "ENODATA"]) {
      const h = harness();
      h.answer(["198.18.0.1"]);
      await Promise.all(h.cache.track(["gw.example"]));
      h.answer(failure(code));
      await h.refresh();
      assert.equal(h.cache.lookup("gw.example"), undefined, code);
      assert.deepEqual(h.changed, ["gw.example", "gw.example"], code);
    }
  });

  it("gives the A addresses when the AAAA query times out, on a first lookup too", async () => {
    const h = harness();
    h.answer({ 4: ["1.2.3.4"], 6: failure("ETIMEOUT") });
    await Promise.all(h.cache.track(["gw.example"]));
    assert.deepEqual(h.cache.lookup("gw.example"), ["1.2.3.4"]);
  });

  it("keeps a family's last good addresses while only that family fails, and drops them when it says none", async () => {
    const h = harness();
    h.answer(["198.18.0.1", "2001:db8::1"]);
    await Promise.all(h.cache.track(["gw.example"]));
    h.answer({ 4: ["198.18.0.9"], 6: failure("ETIMEOUT") });
    await h.refresh();
    assert.deepEqual(h.cache.lookup("gw.example"), ["198.18.0.9", "2001:db8::1"]);
    h.answer({ 4: ["198.18.0.9"], 6: [] });
    await h.refresh();
    assert.deepEqual(h.cache.lookup("gw.example"), ["198.18.0.9"]);
  });

  it("leaves a name that never resolved unresolved through transient failures", async () => {
    const h = harness();
    h.answer(failure("ETIMEOUT"));
    await Promise.all(h.cache.track(["gw.example"]));
    assert.equal(h.cache.lookup("gw.example"), undefined);
    assert.deepEqual(h.changed, []);
  });
});
