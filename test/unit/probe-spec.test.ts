import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Service } from "../../src/core/objects.ts";
import {
  DEFAULT_PROBE_PATH,
  firstProbeDelayMs,
  nextProbeDelayMs,
  PROBE_PATH,
  PROBE_PERIOD,
  probeSpecOf,
} from "../../src/core/probe-spec.ts";

function gateway(opts: { probePort?: number; annotations?: Record<string, string> } = {}): Service {
  return {
    metadata: { name: "gateway", namespace: "linkerd-multicluster", annotations: opts.annotations ?? {} },
    spec: {
      ports: [
        { name: "incoming-port", port: 4143, protocol: "TCP" },
        ...(opts.probePort !== undefined ? [{ name: "mc-probe", port: opts.probePort, protocol: "TCP" }] : []),
      ],
    },
  };
}

describe("probeSpecOf", () => {
  it("does not probe a gateway without an mc-probe port, and reports nothing", () => {
    assert.deepEqual(probeSpecOf(gateway()), { problems: [] });
  });

  it("probes GET /ready every 3 s on the mc-probe port by default", () => {
    assert.deepEqual(probeSpecOf(gateway({ probePort: 4191 })), {
      spec: { port: 4191, path: "/ready", periodMs: 3_000 },
      problems: [],
    });
  });

  it("takes the path and the period (seconds) from the annotations", () => {
    const out = probeSpecOf(
      gateway({ probePort: 4191, annotations: { [PROBE_PATH]: "/health?x=1", [PROBE_PERIOD]: "10" } }),
    );
    assert.deepEqual(out, { spec: { port: 4191, path: "/health?x=1", periodMs: 10_000 }, problems: [] });
  });

  for (const period of ["-1", "abc", "0", "1.5", "", "3601", "1e3"]) {
    it(`reports probe-period ${JSON.stringify(period)} and falls back to 3 s`, () => {
      const out = probeSpecOf(gateway({ probePort: 4191, annotations: { [PROBE_PERIOD]: period } }));
      assert.equal(out.spec?.periodMs, 3_000);
      assert.equal(out.problems.length, 1);
      assert.match(out.problems[0] ?? "", /probe-period .* is not a whole number of seconds in 1-3600: using 3/);
    });
  }

  for (const path of ["ready", "", "/a b", "/\u0000", "/ready#frag", "/é", `/${"x".repeat(1_024)}`]) {
    it(`reports probe-path ${JSON.stringify(path.slice(0, 12))} and falls back to ${DEFAULT_PROBE_PATH}`, () => {
      const out = probeSpecOf(gateway({ probePort: 4191, annotations: { [PROBE_PATH]: path } }));
      assert.equal(out.spec?.path, "/ready");
      assert.equal(out.problems.length, 1);
      assert.match(out.problems[0] ?? "", /probe-path .*: using \/ready/);
    });
  }

  it("reports both bad annotations at once, each with its fallback", () => {
    const out = probeSpecOf(gateway({ probePort: 4191, annotations: { [PROBE_PATH]: "x", [PROBE_PERIOD]: "-1" } }));
    assert.deepEqual(out.spec, { port: 4191, path: "/ready", periodMs: 3_000 });
    assert.equal(out.problems.length, 2);
  });

  for (const port of [0, -1, 70_000, 1.5]) {
    it(`does not probe a gateway whose mc-probe port is ${port}, and says so`, () => {
      const out = probeSpecOf(gateway({ probePort: port }));
      assert.equal(out.spec, undefined);
      assert.equal(out.problems.length, 1);
      assert.match(out.problems[0] ?? "", /port mc-probe has number .* gateway not probed, counts alive/);
    });
  }
});

describe("probe timing", () => {
  it("spreads first probes over [0, period)", () => {
    assert.equal(firstProbeDelayMs(3_000, 0), 0);
    assert.equal(firstProbeDelayMs(3_000, 0.5), 1_500);
    assert.ok(firstProbeDelayMs(3_000, 0.999_999_9) < 3_000);
    assert.ok(firstProbeDelayMs(3_000, 1) < 3_000, "a random() of 1 (out of its range) stays under the period");
    assert.equal(firstProbeDelayMs(3_000, Number.NaN), 0);
  });

  it("starts probes a jittered period apart, within [0.9, 1.1) × period", () => {
    const delays = Array.from({ length: 1_000 }, (_, i) => nextProbeDelayMs(3_000, 0, i / 1_000));
    assert.equal(Math.min(...delays), 2_700);
    assert.ok(Math.max(...delays) < 3_300);
    assert.ok(new Set(delays).size > 500, "delays differ: a fleet does not probe in lockstep");
  });

  it("counts the time the previous probe took, and never waits a negative time", () => {
    assert.equal(nextProbeDelayMs(3_000, 1_000, 0.5), 2_000);
    assert.equal(nextProbeDelayMs(3_000, 3_000, 0), 0, "a probe that timed out is followed at once");
    assert.equal(nextProbeDelayMs(3_000, 10_000, 0.5), 0);
  });
});
