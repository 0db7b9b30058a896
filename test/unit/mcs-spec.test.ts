/**
 * SPEC §16, the pure parts: what a ServiceImport carries of an exported Service, how the
 * exports of one name merge (ports by name, the rest from the oldest) and the conflicts
 * they raise; a local Service's slices as a part; the conditions of a local ServiceExport.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { conditionsUpdate, exportConditions, localExportFor } from "../../src/core/local-exports.ts";
import { localPartOf, localPartSliceContents } from "../../src/core/local-part.ts";
import { conflictsOf, exportedSpecOf, mergeExports } from "../../src/core/mcs-spec.ts";
import type { EndpointSlice, Service } from "../../src/core/objects.ts";
import { deepFreeze } from "../helpers/freeze.ts";
import { clusterSetSpec } from "../helpers/mcs-export.ts";

const hello: Service = deepFreeze({
  metadata: { name: "hello", namespace: "ns", creationTimestamp: "2026-12-01T00:00:00Z" },
  spec: {
    clusterIP: "10.96.0.5",
    ports: [
      { name: "tcp", protocol: "TCP", port: 42, appProtocol: "http" },
      { name: "udp", protocol: "UDP", port: 42 },
    ],
    sessionAffinity: "ClientIP",
    sessionAffinityConfig: { clientIP: { timeoutSeconds: 10 } },
    internalTrafficPolicy: "Cluster",
    trafficDistribution: "PreferClose",
  },
});

describe("what a ServiceImport carries of an exported Service (SPEC §16)", () => {
  it("takes type, ports with appProtocol, session affinity and its config, both traffic policies", () => {
    assert.deepEqual(exportedSpecOf(hello), {
      type: "ClusterSetIP",
      ports: [
        { name: "tcp", protocol: "TCP", port: 42, appProtocol: "http" },
        { name: "udp", protocol: "UDP", port: 42 },
      ],
      sessionAffinity: "ClientIP",
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 10 } },
      internalTrafficPolicy: "Cluster",
      trafficDistribution: "PreferClose",
    });
  });

  it("makes a headless Service a Headless import, and a Service without affinity None", () => {
    const headless = exportedSpecOf({ metadata: { name: "h" }, spec: { clusterIP: "None", ports: [] } });
    assert.deepEqual(headless, { type: "Headless", ports: [], sessionAffinity: "None" });
  });
});

describe("merging the exports of one name (SPEC §16)", () => {
  const tcp = { name: "tcp", protocol: "TCP", port: 42 };
  const udp = { name: "udp", protocol: "UDP", port: 42 };

  it("agrees: the oldest's fields, no conflict, every port served by each", () => {
    const merged = mergeExports([
      { cluster: "a", spec: clusterSetSpec([tcp, udp]) },
      { cluster: "b", spec: clusterSetSpec([udp, tcp]) },
    ]);
    assert.deepEqual(merged?.conflicts, []);
    assert.deepEqual(merged?.spec.ports, [tcp, udp]);
    assert.deepEqual([...(merged?.portsServed("b") ?? [])].sort(), ["tcp", "udp"]);
  });

  it("unions different port names, and reports the difference on every exporter", () => {
    const stcp = { name: "stcp", protocol: "SCTP", port: 142 };
    const merged = mergeExports([
      { cluster: "a", spec: clusterSetSpec([tcp, udp]) },
      { cluster: "b", spec: clusterSetSpec([tcp, stcp]) },
    ]);
    assert.deepEqual(merged?.spec.ports, [stcp, tcp, udp]);
    assert.deepEqual(conflictsOf(merged?.conflicts ?? [], "a")[0]?.field, "ports");
    assert.deepEqual(conflictsOf(merged?.conflicts ?? [], "b")[0]?.field, "ports");
    assert.deepEqual([...(merged?.portsServed("b") ?? [])].sort(), ["stcp", "tcp"]);
  });

  it("keeps the oldest definition of a port name: the later exporter serves none of it, both are told", () => {
    const merged = mergeExports([
      { cluster: "a", spec: clusterSetSpec([tcp]) },
      { cluster: "b", spec: clusterSetSpec([{ ...tcp, port: 43 }]) },
    ]);
    assert.deepEqual(merged?.spec.ports, [tcp]);
    assert.deepEqual([...(merged?.portsServed("b") ?? [])], []);
    const [conflict] = merged?.conflicts ?? [];
    assert.deepEqual(conflict?.clusters, ["a", "b"]);
    assert.match(conflict?.message ?? "", /port tcp: 43\/TCP in cluster b differs from 42\/TCP in cluster a/);
  });

  it("takes the oldest's type (headlessness) and reports TypeConflict on every exporter", () => {
    const merged = mergeExports([
      { cluster: "a", spec: clusterSetSpec([tcp]) },
      { cluster: "b", spec: clusterSetSpec([tcp], { type: "Headless" }) },
      { cluster: "c", spec: clusterSetSpec([tcp]) },
    ]);
    assert.equal(merged?.spec.type, "ClusterSetIP");
    const type = merged?.conflicts.find((c) => c.field === "type");
    assert.deepEqual(type?.clusters, ["a", "b", "c"]);
    assert.match(type?.message ?? "", /differs in cluster b/);
  });
});

const slice = (name: string, endpoints: object[], ports = [{ name: "tcp", protocol: "TCP", port: 8042 }]) =>
  deepFreeze({ metadata: { name, namespace: "ns" }, addressType: "IPv4", endpoints, ports }) as EndpointSlice;

describe("a local Service's slices as a part (SPEC §16)", () => {
  it("copies addresses, conditions, hostname, nodeName and zone, sorted, with the ports", () => {
    const part = localPartOf([
      slice("hello-b", [{ addresses: ["10.0.0.9"], conditions: { ready: false }, nodeName: "n2", zone: "z2" }]),
      slice("hello-a", [{ addresses: ["10.0.0.3"], hostname: "h-0", nodeName: "n1", zone: "z1" }]),
    ]);
    assert.deepEqual(part, {
      endpoints: [
        {
          addresses: ["10.0.0.3"],
          conditions: { ready: true, serving: true, terminating: false },
          hostname: "h-0",
          nodeName: "n1",
          zone: "z1",
        },
        {
          addresses: ["10.0.0.9"],
          conditions: { ready: false, serving: false, terminating: false },
          nodeName: "n2",
          zone: "z2",
        },
      ],
      endpointPorts: [{ name: "tcp", protocol: "TCP", port: 8042 }],
    });
    const [content] = localPartSliceContents("d-local", part.endpoints, part.endpointPorts);
    assert.equal(content?.name, "d-local-ipv4");
    assert.equal(content?.endpoints.length, 2);
  });

  it("leaves out the endpoints of a slice whose ports differ, and FQDN slices", () => {
    const part = localPartOf([
      slice("a", [{ addresses: ["10.0.0.1"] }]),
      slice("b", [{ addresses: ["10.0.0.2"] }], [{ name: "tcp", protocol: "TCP", port: 9000 }]),
      deepFreeze({ metadata: { name: "c" }, addressType: "FQDN", endpoints: [{ addresses: ["x.example"] }] }),
    ]);
    assert.deepEqual(
      part.endpoints.map((e) => e.addresses[0]),
      ["10.0.0.1"],
    );
  });
});

describe("a local ServiceExport's conditions (SPEC §16)", () => {
  const se = deepFreeze({ metadata: { name: "hello", namespace: "ns", creationTimestamp: "2026-12-01T00:00:00Z" } });

  it("is Valid False, InvalidServiceType, for an ExternalName Service; NoService without one", () => {
    const external = deepFreeze({ metadata: hello.metadata, spec: { type: "ExternalName", externalName: "x" } });
    const outcome = localExportFor("c1", se, external, []);
    const [valid] = exportConditions({ outcome, imported: false, conflicts: [] });
    assert.deepEqual([valid?.status, valid?.reason], ["False", "InvalidServiceType"]);
    const [none] = exportConditions({
      outcome: localExportFor("c1", se, undefined, []),
      imported: false,
      conflicts: [],
    });
    assert.deepEqual([none?.status, none?.reason], ["False", "NoService"]);
  });

  it("writes only when a condition's content changes, keeping the time of an unchanged status", () => {
    const outcome = localExportFor("c1", se, hello, []);
    const wanted = exportConditions({ outcome, imported: true, conflicts: [] });
    const first = conditionsUpdate(se, wanted, "2026-12-06T00:00:00Z") as { status: { conditions: object[] } };
    assert.equal(first.status.conditions.length, 3);
    const written = deepFreeze({ ...se, status: first.status });
    assert.equal(conditionsUpdate(written, wanted, "2026-12-06T00:01:00Z"), undefined);
    const conflicted = exportConditions({
      outcome,
      imported: true,
      conflicts: [{ field: "type", winner: "c0", clusters: ["c0", "c1"], message: "type differs" }],
    });
    const next = conditionsUpdate(written, conflicted, "2026-12-06T00:02:00Z") as {
      status: { conditions: { type: string; status: string; reason: string; lastTransitionTime: string }[] };
    };
    const byType = Object.fromEntries(next.status.conditions.map((c) => [c.type, c]));
    assert.deepEqual([byType["Conflict"]?.status, byType["Conflict"]?.reason], ["True", "TypeConflict"]);
    assert.equal(byType["Conflict"]?.lastTransitionTime, "2026-12-06T00:02:00Z");
    assert.equal(byType["Valid"]?.lastTransitionTime, "2026-12-06T00:00:00Z");
  });
});
