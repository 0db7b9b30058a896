/**
 * Events about the registry are reported on changes of state only: a pass that
 * changes nothing reports nothing, and ClusterRegistered is reported once per
 * (Secret uid, registration fingerprint).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { RegisteredCluster, RegistryState } from "../../src/supervisor/registry.ts";
import { NOTHING_REPORTED, type ReportedRegistry, registryReports } from "../../src/supervisor/registry-reports.ts";

function registered(cluster: string, uid: string, fingerprint = "f1"): RegisteredCluster {
  return {
    cluster,
    domain: "example.test",
    connection: { server: `https://${cluster}.test:6443`, auth: { kind: "token", token: "t" } },
    defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
    priority: 100,
    fingerprint,
    secretKey: `fleet/${cluster}`,
    secretUid: uid,
  };
}

function registry(rs: RegisteredCluster[], extra: Partial<RegistryState> = {}): RegistryState {
  return {
    registered: new Map(rs.map((r) => [r.cluster, r])),
    duplicates: [],
    invalid: [],
    keep: [],
    order: [],
    registeredAt: {},
    priorities: {},
    ...extra,
  };
}

/** Runs the passes in order; returns the reasons reported by each. */
function passes(steps: { registry: RegistryState; uids: string[] }[]): string[][] {
  let reported: ReportedRegistry = NOTHING_REPORTED;
  return steps.map((s) => {
    const r = registryReports(reported, s.registry, new Set(s.uids));
    reported = r.reported;
    return r.reports.map((x) => `${x.reason}:${x.secretKey}`);
  });
}

describe("registry reports", () => {
  it("reports InvalidPriority once for a registered cluster whose priority annotation is invalid, and again when it changes", () => {
    const east = registered("east", "u1");
    const bad = (problem: string): RegisteredCluster => ({ ...east, priorityProblem: problem });
    const out = passes([
      { registry: registry([bad("p1")]), uids: ["u1"] },
      { registry: registry([bad("p1")]), uids: ["u1"] },
      { registry: registry([bad("p2")]), uids: ["u1"] },
      { registry: registry([east]), uids: ["u1"] },
      { registry: registry([bad("p2")]), uids: ["u1"] },
    ]);
    assert.deepEqual(out, [
      ["InvalidPriority:fleet/east", "ClusterRegistered:fleet/east"],
      [],
      ["InvalidPriority:fleet/east"],
      [],
      ["InvalidPriority:fleet/east"],
    ]);
  });

  it("reports ClusterRegistered once, and nothing on passes that change nothing", () => {
    const east = registered("east", "u1");
    const out = passes([
      { registry: registry([east]), uids: ["u1"] },
      { registry: registry([east]), uids: ["u1"] },
      { registry: registry([{ ...east }]), uids: ["u1"] },
    ]);
    assert.deepEqual(out, [["ClusterRegistered:fleet/east"], [], []]);
  });

  it("reports ClusterRegistered again for new credentials, and for a recreated Secret (new uid)", () => {
    const out = passes([
      { registry: registry([registered("east", "u1")]), uids: ["u1"] },
      { registry: registry([registered("east", "u1", "f2")]), uids: ["u1"] },
      { registry: registry([]), uids: [] },
      { registry: registry([registered("east", "u2", "f2")]), uids: ["u2"] },
    ]);
    assert.deepEqual(out, [
      ["ClusterRegistered:fleet/east"],
      ["ClusterRegistered:fleet/east"],
      [],
      ["ClusterRegistered:fleet/east"],
    ]);
  });

  it("a Secret that was invalid for a while and is fixed back to the same registration is not announced again", () => {
    const invalid = registry([], {
      invalid: [{ secretKey: "fleet/east", cluster: "east", reason: "missing-kubeconfig", message: "bad YAML" }],
    });
    const out = passes([
      { registry: registry([registered("east", "u1")]), uids: ["u1"] },
      { registry: invalid, uids: ["u1"] },
      { registry: invalid, uids: ["u1"] },
      { registry: registry([registered("east", "u1")]), uids: ["u1"] },
    ]);
    assert.deepEqual(out, [["ClusterRegistered:fleet/east"], ["InvalidCredentials:fleet/east"], [], []]);
  });

  it("logs an invalid Secret as an error naming the Secret's reason", () => {
    const invalid = registry([], {
      invalid: [
        { secretKey: "fleet/east", cluster: "east", reason: "missing-kubeconfig", message: "no kubeconfig key" },
      ],
    });
    const [report] = registryReports(NOTHING_REPORTED, invalid, new Set(["u1"])).reports;
    assert.equal(report?.log.level, "error");
    assert.deepEqual(report?.log.fields, { reason: "missing-kubeconfig" });
    assert.match(report?.log.message ?? "", /credentials Secret fleet\/east registers nothing/);
  });
});
