/**
 * What an actor knows of a headless Service's hosts (SPEC §12), the pure parts: the
 * evidence of a list, the answer from it (unknown is never "none", no endpoint at all
 * keeps the shape last seen), hosts away within their grace period, what a watch keeps
 * of a slice, and the mirrors of each answer (hosts unknown: the ordinary mirror marked
 * so; a complete set's stand-in while pending).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  awayUntil,
  evidenceOf,
  headlessOutcome,
  hostsAnswer,
  hostsAway,
  keepHostnames,
  shapeOf,
} from "../../src/core/headless.ts";
import type { EndpointSlice } from "../../src/core/objects.ts";
import { testMirror } from "../helpers/desired-mirror.ts";

const slice = (hostnames: (string | undefined)[]): EndpointSlice => ({
  metadata: { name: "web-abc", namespace: "shop" },
  endpoints: hostnames.map((hostname, i) => ({ addresses: [`10.0.0.${i + 1}`], ...(hostname ? { hostname } : {}) })),
});
const evidence = (hostnames: string[], endpoints = hostnames.length > 0) => ({ hostnames, endpoints });

describe("the hosts of a headless Service, as an actor knows them", () => {
  it("reads a list as evidence: its hostnames, and whether it has endpoints at all", () => {
    assert.deepEqual(evidenceOf([slice(["web-1", "web-0", undefined]), slice(["web-1"])]), {
      hostnames: ["web-0", "web-1"],
      endpoints: true,
    });
    assert.deepEqual(evidenceOf([slice([undefined])]), { hostnames: [], endpoints: true });
    assert.deepEqual(evidenceOf([slice([])]), { hostnames: [], endpoints: false });
    assert.deepEqual(evidenceOf([]), { hostnames: [], endpoints: false });
    assert.equal(shapeOf(evidence(["web-0"])), "headless");
    assert.equal(shapeOf(evidence([], true)), "ordinary");
    assert.equal(shapeOf(evidence([])), undefined);
  });

  it("keeps of a slice only its hostnames and one endpoint without a hostname, no address", () => {
    const kept = keepHostnames({
      ...slice(["web-0", undefined, undefined]),
      metadata: { name: "s", resourceVersion: "3" },
    });
    assert.deepEqual(kept, {
      metadata: { name: "s", resourceVersion: "3" },
      endpoints: [{ addresses: [], hostname: "web-0" }, { addresses: [] }],
    });
    assert.deepEqual(evidenceOf([kept]), { hostnames: ["web-0"], endpoints: true });
  });

  it("answers pending before any list, unknown when refused before any list (never ordinary)", () => {
    const none = { evidence: undefined, away: [], shape: undefined };
    assert.deepEqual(hostsAnswer({ ...none, denied: false }), { kind: "pending" });
    assert.deepEqual(hostsAnswer({ ...none, denied: true }), { kind: "unknown" });
  });

  it("answers the hosts listed and those away; endpoints without hostnames are an ordinary Service, at once", () => {
    const base = { away: [] as string[], shape: "headless" as const, denied: false };
    assert.deepEqual(hostsAnswer({ ...base, evidence: evidence(["web-1"]), away: ["web-0"] }), {
      kind: "listed",
      hostnames: ["web-0", "web-1"],
    });
    assert.deepEqual(hostsAnswer({ ...base, evidence: evidence([], true), away: ["web-0"] }), { kind: "ordinary" });
    // A refused read keeps what was listed.
    assert.deepEqual(hostsAnswer({ ...base, evidence: evidence(["web-1"]), denied: true }), {
      kind: "listed",
      hostnames: ["web-1"],
    });
  });

  it("answers a list without any endpoint by the shape last seen: headless without hosts, ordinary, or unknown", () => {
    const empty = { evidence: evidence([]), away: [], denied: false };
    assert.deepEqual(hostsAnswer({ ...empty, shape: "headless" }), { kind: "listed", hostnames: [] });
    assert.deepEqual(hostsAnswer({ ...empty, shape: "ordinary" }), { kind: "ordinary" });
    assert.deepEqual(hostsAnswer({ ...empty, shape: undefined }), { kind: "unknown" });
  });

  it("keeps a host away for the grace period from when it went, not from the latest list", () => {
    const first = hostsAway(["web-0", "web-1"], new Map(), evidence(["web-1"]), 1_000, 500);
    assert.deepEqual([...first], [["web-0", 1_000]]);
    assert.equal(awayUntil(first, 500), 1_500);
    const later = hostsAway(["web-0", "web-1"], first, evidence(["web-1"]), 1_400, 500);
    assert.deepEqual([...later], [["web-0", 1_000]], "the same time it went");
    assert.deepEqual([...hostsAway(["web-0", "web-1"], later, evidence(["web-1"]), 1_500, 500)], [], "past the grace");
    assert.deepEqual([...hostsAway(["web-0", "web-1"], later, evidence(["web-0", "web-1"]), 1_200, 500)], [], "back");
    assert.deepEqual([...hostsAway(["web-0"], new Map(), evidence([], true), 1_000, 500)], [], "ordinary now");
    assert.deepEqual([...hostsAway(["web-0"], new Map(), evidence(["web-1"]), 1_000, 0)], [], "no grace");
    assert.equal(awayUntil(new Map(), 500), undefined);
  });
});

describe("the mirrors of each answer", () => {
  const lookups = { exported: () => false, hostClaimant: () => undefined };

  it("hosts unknown: the ordinary mirror marked hostsUnknown, in deltas too", () => {
    const { mirrors, unknown } = headlessOutcome("shop/web", testMirror(), { kind: "unknown" }, lookups);
    assert.deepEqual(mirrors, [{ ...testMirror(), hostsUnknown: true }]);
    assert.equal(unknown, undefined);
  });

  it("pending: nothing in a delta (what was sent stays), the marked ordinary mirror in a complete set", () => {
    const { mirrors, unknown } = headlessOutcome("shop/web", testMirror(), { kind: "pending" }, lookups);
    assert.equal(mirrors, undefined);
    assert.deepEqual(unknown, [{ ...testMirror(), hostsUnknown: true }]);
  });

  it("ordinary: the ordinary mirror, unmarked; listed without hosts: the headless mirror without hosts", () => {
    assert.deepEqual(headlessOutcome("shop/web", testMirror(), { kind: "ordinary" }, lookups).mirrors, [testMirror()]);
    const empty = headlessOutcome("shop/web", testMirror(), { kind: "listed", hostnames: [] }, lookups).mirrors;
    assert.deepEqual(
      empty?.map((m) => [m.name, m.headless]),
      [["web-east", { hosts: [] }]],
    );
  });
});
