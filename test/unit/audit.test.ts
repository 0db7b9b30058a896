/**
 * The audit reader's parsing (test/helpers/audit.ts): a write's identity is the Pod its
 * token is bound to, else the user; only ResponseComplete events count; dry runs and
 * failed writes are told apart; a partial last line is skipped, not an error.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseAuditLine, parseAuditLog, succeeded } from "../helpers/audit.ts";

function event(fields: Record<string, unknown> = {}): string {
  return JSON.stringify({
    kind: "Event",
    apiVersion: "audit.k8s.io/v1",
    level: "Metadata",
    auditID: "a1",
    stage: "ResponseComplete",
    requestURI: "/api/v1/namespaces/shop/services",
    verb: "create",
    user: {
      username: "system:serviceaccount:fleet-mirror:fleet-mirror",
      extra: { "authentication.kubernetes.io/pod-name": ["replica-0"], "authentication.kubernetes.io/pod-uid": ["u"] },
    },
    userAgent: "fleet-mirror/local-writer",
    objectRef: { resource: "services", namespace: "shop", name: "web-east", apiVersion: "v1" },
    responseStatus: { metadata: {}, code: 201 },
    requestReceivedTimestamp: "2026-12-03T12:00:00.123456Z",
    ...fields,
  });
}

describe("audit log parsing", () => {
  it("names a write by the Pod its token is bound to, with its verb, object, code and receive time", () => {
    assert.deepEqual(parseAuditLine(event()), {
      auditId: "a1",
      identity: "replica-0",
      username: "system:serviceaccount:fleet-mirror:fleet-mirror",
      userAgent: "fleet-mirror/local-writer",
      verb: "create",
      resource: "services",
      apiGroup: "",
      namespace: "shop",
      name: "web-east",
      code: 201,
      receivedAt: Date.parse("2026-12-03T12:00:00.123Z") + 0.456,
      dryRun: false,
      leaseHolder: undefined,
    });
  });

  it("falls back to the user name without a Pod-bound token, and joins a subresource to its resource", () => {
    const write = parseAuditLine(
      event({
        user: { username: "fleet-admin", groups: ["system:masters"] },
        objectRef: { resource: "services", subresource: "status", namespace: "gateway", name: "gateway" },
        verb: "update",
      }),
    );
    assert.equal(write?.identity, "fleet-admin");
    assert.equal(write?.resource, "services/status");
  });

  it("reads the holder a Lease write left in the Lease, and orders writes by microseconds", () => {
    const lease = {
      objectRef: { resource: "leases", namespace: "fleet-mirror", name: "fleet-mirror-shard-3" },
      verb: "update",
      responseStatus: { code: 200 },
    };
    const renewed = parseAuditLine(
      event({ ...lease, responseObject: { kind: "Lease", spec: { holderIdentity: "r-1" } } }),
    );
    assert.equal(renewed?.leaseHolder, "r-1");
    const released = parseAuditLine(event({ ...lease, responseObject: { kind: "Lease", spec: {} } }));
    assert.equal(released?.leaseHolder, "");
    const conflict = parseAuditLine(
      event({ ...lease, responseStatus: { code: 409 }, responseObject: { kind: "Status", code: 409 } }),
    );
    assert.equal(conflict?.leaseHolder, undefined);
    const earlier = parseAuditLine(event({ requestReceivedTimestamp: "2026-12-03T12:00:00.123001Z" }));
    const later = parseAuditLine(event({ requestReceivedTimestamp: "2026-12-03T12:00:00.123002Z" }));
    assert.ok((earlier?.receivedAt ?? 0) < (later?.receivedAt ?? 0));
  });

  it("counts only ResponseComplete events with an object", () => {
    assert.equal(parseAuditLine(event({ stage: "RequestReceived" })), undefined);
    assert.equal(parseAuditLine(event({ objectRef: undefined })), undefined);
  });

  it("tells dry runs and rejected writes from writes that changed state", () => {
    const dry = parseAuditLine(event({ requestURI: "/api/v1/namespaces/default/events?dryRun=All" }));
    assert.equal(dry?.dryRun, true);
    assert.equal(dry && succeeded(dry), false);
    const conflict = parseAuditLine(event({ responseStatus: { code: 409 } }));
    assert.equal(conflict?.code, 409);
    assert.equal(conflict && succeeded(conflict), false);
    const created = parseAuditLine(event());
    assert.equal(created && succeeded(created), true);
  });

  it("skips a last line still being written", () => {
    const text = `${event()}\n${event({ auditID: "a2" })}\n${event({ auditID: "a3" }).slice(0, 40)}`;
    assert.deepEqual(
      parseAuditLog(text).map((w) => w.auditId),
      ["a1", "a2"],
    );
  });
});
