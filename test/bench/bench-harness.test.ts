/**
 * The pure pieces of the bench harness that decide what a scenario counts: whether a
 * mirror's address object is right in each `--endpoints-api` mode, and whose writes a
 * write breakdown holds.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GATEWAY_PORT, splitWrites } from "../../bench/harness.ts";
import { addressesPointAt, copyAddressesForCreate, slicePointsAt } from "../../bench/mirror-objects.ts";
import type { EndpointSlice, Endpoints } from "../../src/core/objects.ts";

const IP = "198.18.0.10";

function slice(overrides: Partial<EndpointSlice> = {}, labels: Record<string, string> = {}): EndpointSlice {
  return {
    metadata: {
      name: "svc-0-c0-ipv4",
      namespace: "bench",
      labels: {
        "mirror.linkerd.io/mirrored-service": "true",
        "kubernetes.io/service-name": "svc-0-c0",
        "endpointslice.kubernetes.io/managed-by": "fleet-mirror",
        ...labels,
      },
    },
    addressType: "IPv4",
    endpoints: [{ addresses: [IP], conditions: { ready: true, serving: true, terminating: false } }],
    ports: [{ name: "http", protocol: "TCP", port: GATEWAY_PORT }],
    ...overrides,
  };
}

describe("slicePointsAt", () => {
  it("accepts fleet-mirror's IPv4 slice of the mirror with one ready endpoint at the gateway", () => {
    assert.equal(slicePointsAt(slice(), "svc-0-c0", IP), true);
    assert.equal(addressesPointAt("endpointslices", slice(), IP), true);
  });

  it("rejects another address, a not-ready endpoint, another port, another manager, another name", () => {
    assert.equal(slicePointsAt(slice(), "svc-0-c0", "198.18.0.99"), false);
    const notReady = slice({ endpoints: [{ addresses: [IP], conditions: { ready: false } }] });
    assert.equal(slicePointsAt(notReady, "svc-0-c0", IP), false);
    assert.equal(slicePointsAt(slice({ ports: [{ port: 80 }] }), "svc-0-c0", IP), false);
    const builtIn = slice({}, { "endpointslice.kubernetes.io/managed-by": "endpointslicemirroring-controller.k8s.io" });
    assert.equal(slicePointsAt(builtIn, "svc-0-c0", IP), false);
    assert.equal(addressesPointAt("endpointslices", builtIn, IP), false);
    assert.equal(slicePointsAt(slice(), "svc-1-c0", IP), false);
    assert.equal(slicePointsAt(slice({ endpoints: null }), "svc-0-c0", IP), false);
  });

  it("judges Endpoints in endpoints mode", () => {
    const ep: Endpoints = {
      metadata: { name: "svc-0-c0", namespace: "bench" },
      subsets: [{ addresses: [{ ip: IP }], ports: [{ port: GATEWAY_PORT }] }],
    };
    assert.equal(addressesPointAt("endpoints", ep, IP), true);
    assert.equal(addressesPointAt("endpoints", ep, "198.18.0.99"), false);
  });
});

describe("splitWrites", () => {
  const byKind = { "POST services": 25, "POST endpoints": 25, "POST endpointslices": 25, "POST namespaces": 1 };

  it("counts slice writes in endpoints mode as the built-in mirroring controller's", () => {
    assert.deepEqual(splitWrites("endpoints", byKind), { fleetMirror: 51, mirroringController: 25 });
  });

  it("counts every write as fleet-mirror's in endpointslices mode", () => {
    assert.deepEqual(splitWrites("endpointslices", byKind), { fleetMirror: 76, mirroringController: 0 });
  });
});

describe("copyAddressesForCreate", () => {
  const service = { name: "svc-0-c0", uid: "uid-of-the-copy" };

  it("makes a slice copy owned by its Service copy, in the new namespace, keeping labels and content", () => {
    const original = slice();
    const withServerFields = { ...original, metadata: { ...original.metadata, uid: "old", resourceVersion: "9" } };
    const copy = copyAddressesForCreate("endpointslices", withServerFields, "bare-bench", service);
    assert.deepEqual(copy["metadata"], {
      name: "svc-0-c0-ipv4",
      namespace: "bare-bench",
      labels: original.metadata.labels,
      ownerReferences: [
        { apiVersion: "v1", kind: "Service", name: "svc-0-c0", uid: "uid-of-the-copy", controller: true },
      ],
    });
    assert.deepEqual(copy["endpoints"], original.endpoints);
    assert.deepEqual(copy["ports"], original.ports);
  });

  it("adds no owner to Endpoints (their name ties them to the Service)", () => {
    const ep: Endpoints = { metadata: { name: "svc-0-c0", namespace: "bench", uid: "old" }, subsets: [] };
    const copy = copyAddressesForCreate("endpoints", ep, "bare-bench", service);
    assert.deepEqual(copy["metadata"], { name: "svc-0-c0", namespace: "bare-bench" });
  });
});
