/**
 * The sharded-write checks of test/helpers/shard-audit.ts: a shard's holder over time is
 * read from the Lease writes the server recorded, and a mirror write counts as foreign
 * when the server received it while another replica (or nobody) held its cluster's shard.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AuditedWrite } from "../helpers/audit.ts";
import {
  clusterOfMirror,
  foreignMirrorWrites,
  holderAt,
  leaseHistory,
  type ShardCheck,
  tenures,
  writersByObject,
} from "../helpers/shard-audit.ts";

function write(fields: Partial<AuditedWrite> & Pick<AuditedWrite, "identity" | "receivedAt">): AuditedWrite {
  return {
    auditId: "",
    username: "system:serviceaccount:fleet-mirror:fleet-mirror",
    userAgent: "",
    verb: "update",
    resource: "services",
    apiGroup: "",
    namespace: "shop",
    name: "web-c01",
    code: 200,
    dryRun: false,
    leaseHolder: undefined,
    ...fields,
  };
}

const lease = (identity: string, at: number, holder: string, code = 200): AuditedWrite =>
  write({
    identity,
    receivedAt: at,
    resource: "leases",
    namespace: "fleet-mirror",
    name: "fm-shard-1",
    code,
    leaseHolder: code < 300 ? holder : undefined,
  });

const CHECK: ShardCheck = {
  replicas: ["r-a", "r-b"],
  clusters: ["c01", "c02"],
  shardOf: (cluster) => (cluster === "c01" ? 1 : 0),
  leaseName: (shard) => `fm-shard-${shard}`,
};

describe("sharded writes against the audited Lease history", () => {
  const history = [
    lease("r-a", 10, "r-a"),
    lease("r-a", 20, "r-a"),
    lease("r-b", 30, "r-b"),
    lease("r-a", 31, "", 409),
  ];

  it("reads each shard's holders over time from successful Lease writes only", () => {
    const h = leaseHistory(history, "fm-shard-1");
    assert.equal(h.length, 3, "the rejected write is no record");
    assert.equal(holderAt(h, 5), "");
    assert.equal(holderAt(h, 25), "r-a");
    assert.equal(holderAt(h, 30), "r-a", "a write received at the same instant as a takeover is not after it");
    assert.equal(holderAt(h, 30.001), "r-b");
    assert.deepEqual(tenures(h), [
      { holder: "r-a", from: 10 },
      { holder: "r-b", from: 30 },
    ]);
  });

  it("flags a mirror write of a cluster whose shard another replica held, or nobody, and nothing else", () => {
    const writes = [
      ...history,
      write({ identity: "r-a", receivedAt: 15 }), // held by r-a: fine
      write({ identity: "r-a", receivedAt: 35, code: 409 }), // after r-b took over: foreign, even though rejected
      write({ identity: "r-b", receivedAt: 5, name: "web-c01-ipv4", resource: "endpointslices" }), // before anyone held it
      write({ identity: "fleet-admin", receivedAt: 40 }), // not a replica
      write({ identity: "r-b", receivedAt: 40, resource: "namespaces", name: "shop", namespace: "" }), // not a mirror
    ];
    const foreign = foreignMirrorWrites(writes, CHECK);
    assert.deepEqual(
      foreign.map((f) => [f.write.identity, f.write.receivedAt, f.cluster, f.shard, f.holder]),
      [
        ["r-a", 35, "c01", 1, "r-b"],
        ["r-b", 5, "c01", 1, ""],
      ],
    );
  });

  it("names a mirror's cluster from its Service, Endpoints or slice name", () => {
    const of = (resource: string, name: string) =>
      clusterOfMirror(write({ identity: "r-a", receivedAt: 0, resource, name }), CHECK.clusters);
    assert.equal(of("services", "web-c02"), "c02");
    assert.equal(of("endpoints", "web-c02"), "c02");
    assert.equal(of("endpointslices", "web-c02-ipv4"), "c02");
    assert.equal(of("services", "web-c03"), undefined);
    assert.equal(of("events", "web-c02.1234"), undefined);
  });

  it("groups successful writes by object", () => {
    const writers = writersByObject([
      write({ identity: "r-a", receivedAt: 1, verb: "create", code: 201 }),
      write({ identity: "r-b", receivedAt: 2, verb: "create", code: 409 }),
      write({ identity: "r-b", receivedAt: 3, name: "web-c02" }),
    ]);
    assert.deepEqual(
      [...writers].map(([key, ids]) => [key, [...ids]]),
      [
        ["services shop/web-c01", ["r-a"]],
        ["services shop/web-c02", ["r-b"]],
      ],
    );
  });
});
