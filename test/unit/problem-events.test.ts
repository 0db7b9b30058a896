import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Namespace } from "../../src/core/objects.ts";
import { silentLogger } from "../../src/log.ts";
import type { EventRequest } from "../../src/protocol/messages.ts";
import { type FleetProblem, reportProblems } from "../../workers/local-writer/problem-events.ts";

function harness() {
  const namespaces = new Map<string, Namespace>();
  const events: EventRequest[] = [];
  const warnings: string[] = [];
  const log = silentLogger();
  log.warn = ((_fields: unknown, message: string) => {
    warnings.push(message);
  }) as unknown as typeof log.warn;
  const deps = {
    log,
    recordEvent: (e: EventRequest) => events.push(e),
    namespaces: { get: (name: string) => namespaces.get(name) },
  };
  // The book remembers each pass's problems: the next pass is reported against them.
  const book = new Map<string, ReadonlyMap<string, FleetProblem>>();
  const report = (problems: Map<string, FleetProblem>) =>
    reportProblems(deps, book, {
      key: "shop/derived0123456789abcdef",
      problems,
      involved: { kind: "ServiceImport", apiVersion: "multicluster.x-k8s.io/v1alpha1", namespace: "shop", name: "web" },
      eventReasons: { "mcs-not-served": "ServiceImportNotServed" },
      otherReason: "ServiceImportConflict",
    });
  return { namespaces, events, warnings, book, report };
}

describe("reportProblems (the writer's per-cluster problem reports)", () => {
  const notServed = new Map([["east", { reason: "mcs-not-served", message: "not served" }]]);

  it("asks for no Event while the namespace is missing, and for it on the next pass once it exists", () => {
    const h = harness();
    h.report(notServed);
    assert.equal(h.events.length, 0);
    assert.deepEqual(h.warnings, ["not served"]);
    h.namespaces.set("shop", { metadata: { name: "shop" } });
    h.report(notServed);
    assert.equal(h.events.length, 1);
    assert.equal(h.events[0]?.reason, "ServiceImportNotServed");
    assert.equal(h.events[0]?.type, "Warning");
    assert.deepEqual(h.warnings, ["not served"], "an unchanged message is logged once");
  });

  it("asks again on every pass (the recorder drops repeats), logs a new message, maps unknown reasons", () => {
    const h = harness();
    h.namespaces.set("shop", { metadata: { name: "shop" } });
    h.report(notServed);
    h.report(notServed);
    const conflict = new Map([["east", { reason: "user-owned", message: "owned by a user" }]]);
    h.report(conflict);
    assert.deepEqual(
      h.events.map((e) => e.reason),
      ["ServiceImportNotServed", "ServiceImportNotServed", "ServiceImportConflict"],
    );
    assert.deepEqual(h.warnings, ["not served", "owned by a user"]);
  });

  it("records no Event for a missing or excluded namespace", () => {
    const h = harness();
    h.namespaces.set("shop", { metadata: { name: "shop" } });
    h.report(new Map([["east", { reason: "excluded-namespace", message: "excluded" }]]));
    h.report(new Map([["east", { reason: "namespace-missing", message: "missing" }]]));
    assert.deepEqual(h.events, []);
    assert.deepEqual(h.warnings, ["excluded", "missing"]);
    h.report(new Map());
    assert.equal(h.book.size, 0, "a key without problems leaves the book");
  });
});
