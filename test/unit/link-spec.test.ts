import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseGoDuration } from "../../src/core/go-duration.ts";
import { formatLabelSelector, parseLabelSelector, parseSelectorText, selects } from "../../src/core/label-selector.ts";
import { parseLink } from "../../src/core/link.ts";

describe("label selectors of a Link (SPEC §15)", () => {
  const parse = (raw: unknown) => {
    const s = parseLabelSelector(raw);
    assert.ok(s && typeof s !== "string", `not a selector: ${String(s)}`);
    return s;
  };

  it("matches matchLabels and every matchExpressions operator", () => {
    const s = parse({
      matchLabels: { app: "web" },
      matchExpressions: [
        { key: "tier", operator: "In", values: ["front", "edge"] },
        { key: "env", operator: "NotIn", values: ["dev"] },
        { key: "team", operator: "Exists" },
        { key: "legacy", operator: "DoesNotExist" },
      ],
    });
    assert.equal(selects(s, { app: "web", tier: "front", env: "prod", team: "a" }), true);
    assert.equal(selects(s, { app: "web", tier: "front", team: "a" }), true, "NotIn holds for an absent key");
    assert.equal(selects(s, { app: "web", tier: "back", team: "a" }), false);
    assert.equal(selects(s, { app: "web", tier: "front", env: "dev", team: "a" }), false);
    assert.equal(selects(s, { app: "web", tier: "front" }), false);
    assert.equal(selects(s, { app: "web", tier: "front", team: "a", legacy: "" }), false);
    assert.equal(selects(s, { app: "api", tier: "front", team: "a" }), false);
  });

  it("selects nothing when the selector is empty or missing", () => {
    assert.equal(selects(parse({}), { app: "web" }), false);
    assert.equal(selects(parse({ matchLabels: {}, matchExpressions: [] }), {}), false);
    assert.equal(selects(undefined, { app: "web" }), false);
    assert.equal(parseLabelSelector(null), undefined);
  });

  it("says why a selector is not one", () => {
    assert.match(String(parseLabelSelector({ matchExpressions: [{ key: "a", operator: "Like" }] })), /operator/);
    assert.match(String(parseLabelSelector({ matchExpressions: [{ key: "a", operator: "In" }] })), /at least one/);
    assert.match(
      String(parseLabelSelector({ matchExpressions: [{ key: "a", operator: "Exists", values: ["x"] }] })),
      /takes no values/,
    );
    assert.match(String(parseLabelSelector({ matchLabels: { "bad key": "x" } })), /not a label key/);
    assert.match(String(parseLabelSelector({ matchLabels: { a: "not a value!" } })), /not a label value/);
    assert.match(String(parseLabelSelector(["x"])), /must be an object/);
  });

  it("reads and writes kubectl's -l syntax", () => {
    const raw = parseSelectorText("app=web,env!=dev,tier in (front, edge),team,!legacy");
    assert.deepEqual(raw, {
      matchLabels: { app: "web" },
      matchExpressions: [
        { key: "env", operator: "NotIn", values: ["dev"] },
        { key: "tier", operator: "In", values: ["front", "edge"] },
        { key: "team", operator: "Exists" },
        { key: "legacy", operator: "DoesNotExist" },
      ],
    });
    assert.equal(formatLabelSelector(parse(raw)), "app=web,env notin (dev),tier in (edge,front),team,!legacy");
    assert.match(String(parseSelectorText("a=b=c")), /not a label/);
  });
});

describe("Go durations of a Link's probe spec", () => {
  it("parses what time.ParseDuration parses", () => {
    assert.equal(parseGoDuration("3s"), 3_000);
    assert.equal(parseGoDuration("1m30s"), 90_000);
    assert.equal(parseGoDuration("500ms"), 500);
    assert.equal(parseGoDuration("1.5h"), 5_400_000);
    assert.equal(parseGoDuration("0"), 0);
    // Go's micro: "us" and both of its Unicode spellings (written escaped, as the bundle is).
    for (const micro of ["1500us", "1500\u00b5s", "1500\u03bcs"]) assert.equal(parseGoDuration(micro), 1.5, micro);
    for (const bad of ["3", "", "s", "3x", "3 s", "1m 2s"]) assert.equal(parseGoDuration(bad), undefined, bad);
  });
});

describe("parseLink (SPEC §15)", () => {
  const link = (spec: Record<string, unknown>) => ({
    metadata: { name: "east", namespace: "linkerd-multicluster" },
    spec: {
      targetClusterName: "east",
      targetClusterDomain: "cluster.local",
      clusterCredentialsSecret: "cluster-credentials-east",
      gatewayAddress: "198.51.100.1, gw.example.com",
      gatewayPort: "4143",
      gatewayIdentity: "gw.id",
      probeSpec: { path: "/ready", port: "4191", period: "3s", timeout: "30s", failureThreshold: "3" },
      selector: { matchLabels: { "mirror.linkerd.io/exported": "true" } },
      excludedLabels: ["team", "internal.example.com/*"],
      ...spec,
    },
  });

  it("reads every field of the spec", () => {
    const parsed = parseLink(link({}));
    assert.equal(parsed.kind, "valid");
    if (parsed.kind !== "valid") return;
    assert.equal(parsed.spec.cluster, "east");
    assert.equal(parsed.spec.domain, "cluster.local");
    assert.equal(parsed.spec.secretName, "cluster-credentials-east");
    assert.deepEqual(parsed.spec.settings.gateway, {
      addresses: ["198.51.100.1", "gw.example.com"],
      port: 4143,
      identity: "gw.id",
      probe: { port: 4191, path: "/ready", periodMs: 3_000, timeoutMs: 30_000, failureThreshold: 3 },
      probeProblems: [],
    });
    assert.deepEqual(parsed.spec.settings.excludedLabels, ["team", "internal.example.com/*"]);
    assert.equal(parsed.spec.settings.link, "linkerd-multicluster/east");
  });

  it("registers nothing for a Link it cannot act on safely, and says why", () => {
    const reason = (spec: Record<string, unknown>) => {
      const parsed = parseLink(link(spec));
      return parsed.kind === "invalid" ? parsed.reason : "valid";
    };
    assert.equal(reason({ targetClusterName: "" }), "missing-cluster-name");
    assert.equal(reason({ targetClusterName: "East_1" }), "invalid-cluster-name");
    assert.equal(reason({ targetClusterDomain: "" }), "missing-cluster-domain");
    assert.equal(reason({ clusterCredentialsSecret: "" }), "missing-credentials-secret");
    // An invalid selector must never read as "selects nothing": that would delete every mirror.
    assert.equal(reason({ selector: { matchExpressions: [{ key: "a", operator: "In" }] } }), "invalid-selector");
    assert.equal(reason({ gatewayPort: "http" }), "invalid-gateway-port");
    assert.equal(reason({ gatewayAddress: "", gatewayPort: "" }), "valid", "a Link without a gateway is valid");
  });

  it("falls back on bad probe fields and reports each", () => {
    const parsed = parseLink(link({ probeSpec: { path: "/ready", port: "4191", period: "3", failureThreshold: "0" } }));
    assert.equal(parsed.kind, "valid");
    if (parsed.kind !== "valid") return;
    assert.deepEqual(parsed.spec.settings.gateway.probe, {
      port: 4191,
      path: "/ready",
      periodMs: 3_000,
      timeoutMs: 30_000,
      failureThreshold: 3,
    });
    assert.equal(parsed.spec.settings.gateway.probeProblems.length, 2);
    const noPort = parseLink(link({ probeSpec: { path: "/ready", port: "x" } }));
    assert.ok(noPort.kind === "valid" && !noPort.spec.settings.gateway.probe);
    const noPath = parseLink(link({ probeSpec: { port: "4191" } }));
    assert.ok(noPath.kind === "valid" && !noPath.spec.settings.gateway.probe, "no path: not probed, as linkerd");
  });
});
