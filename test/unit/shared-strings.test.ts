/**
 * The local writer's shared strings (workers/local-writer/shared-strings.ts): a stored
 * object keeps every field and value, in order, so a body built from it is the same
 * text (no write changes), while its repeated strings take one table entry each.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { desiredSliceContents, sliceBody } from "../../src/core/endpoint-slices.ts";
import type { EndpointSlice, Service } from "../../src/core/objects.ts";
import { serviceBody } from "../../src/core/plan.ts";
import { SharedStrings } from "../../workers/local-writer/shared-strings.ts";

const fqName = { "mirror.linkerd.io/remote-svc-fq-name": "cart.shop.svc.cluster.local" };
const desired: DesiredMirror = {
  ...{ cluster: "east", namespace: "shop", name: "cart-east", remote: "shop/cart" },
  labels: { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/cluster-name": "east" },
  serviceAnnotations: fqName,
  endpointsAnnotations: fqName,
  ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
  endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
  addresses: ["198.18.0.10"],
  notReadyAddresses: [],
};

/** A mirror Service as the API server returns it, with a user's label, annotation and field on it. */
const observedService = (uid: string, resourceVersion = "812"): Service =>
  JSON.parse(
    JSON.stringify({
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "cart-east",
        namespace: "shop",
        uid,
        resourceVersion,
        creationTimestamp: "2026-12-04T05:00:00Z",
        labels: { ...desired.labels, team: "payments" },
        annotations: { "example.com/owner": "someone", "mirror.linkerd.io/remote-svc-fq-name": "old" },
        finalizers: ["example.com/keep"],
      },
      spec: {
        clusterIP: "10.96.0.17",
        clusterIPs: ["10.96.0.17"],
        ipFamilies: ["IPv4"],
        ipFamilyPolicy: "SingleStack",
        ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: 8080 }],
        sessionAffinity: "None",
        type: "ClusterIP",
        externalName: null,
      },
      status: { loadBalancer: {} },
    }),
  ) as Service;

const observedSlice: EndpointSlice = JSON.parse(
  JSON.stringify({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: "cart-east-ipv4",
      namespace: "shop",
      uid: "slice-uid",
      resourceVersion: "813",
      labels: { "kubernetes.io/service-name": "cart-east" },
      ownerReferences: [{ apiVersion: "example.com/v1", kind: "Keeper", name: "k", uid: "k-uid" }],
    },
    addressType: "IPv4",
    endpoints: [{ addresses: ["198.18.0.9"], conditions: { ready: true } }],
    ports: [{ name: "http", port: 4143, protocol: "TCP" }],
  }),
) as EndpointSlice;

describe("SharedStrings", () => {
  it("keeps every field and value in order, so a stored object serializes to the same text", () => {
    const service = observedService("uid-1");
    const compacted = new SharedStrings().compact(service);
    assert.equal(compacted, service, "shared in place");
    assert.equal(JSON.stringify(compacted), JSON.stringify(observedService("uid-1")));
    assert.deepEqual(compacted, observedService("uid-1"));
  });

  it("copies a frozen object or array instead of writing into it", () => {
    const frozen = Object.freeze({ labels: Object.freeze({ a: "b" }), ports: Object.freeze([{ protocol: "TCP" }]) });
    const compacted = new SharedStrings().compact(frozen);
    assert.notEqual(compacted, frozen);
    assert.equal(JSON.stringify(compacted), JSON.stringify(frozen));
  });

  it("builds the same update bodies from a stored copy: user fields, labels and annotations survive", () => {
    const shared = new SharedStrings();
    assert.equal(
      JSON.stringify(serviceBody(desired, shared.compact(observedService("uid-1")))),
      JSON.stringify(serviceBody(desired, observedService("uid-1"))),
    );
    const [content] = desiredSliceContents(desired);
    assert.ok(content);
    const sliceText = JSON.stringify(sliceBody(desired, content, "svc-uid", observedSlice));
    assert.equal(JSON.stringify(sliceBody(desired, content, "svc-uid", shared.compact(observedSlice))), sliceText);
  });

  it("holds one entry per distinct string, and none for uids, resourceVersions and creation times", () => {
    const shared = new SharedStrings();
    shared.compact(observedService("uid-1"));
    const afterOne = shared.size;
    assert.ok(afterOne > 10, `expected the Service's strings in the table, got ${afterOne}`);
    shared.compact(observedService("uid-2", "913"));
    assert.equal(shared.size, afterOne, "a second Service with another uid and resourceVersion adds nothing");
    assert.equal(new SharedStrings().share("TCP"), "TCP");
  });

  it("never holds more than its bound: a full table starts again", () => {
    const shared = new SharedStrings(3);
    for (let i = 0; i < 10; i++) {
      assert.equal(shared.share(`value-${i}`), `value-${i}`);
      assert.ok(shared.size <= 3, `size ${shared.size}`);
    }
  });

  it("keeps numbers, booleans and null as they are", () => {
    const value = { a: [1, true, null, "x"], b: { c: false, d: 0 } };
    assert.deepEqual(new SharedStrings().compact(value), value);
  });
});
