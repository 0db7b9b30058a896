/**
 * Headless Services (SPEC §12), the pure parts: the hostnames of remote slices, the
 * mirrors a headless Service stands for (headless mirror + per-host mirrors, bad
 * hostnames and the cap reported), the writer's resolution of per-host cluster IPs,
 * and the plan of a headless mirror (clusterIP None, endpoints with hostnames in both
 * APIs, no write when it matches, a replaced Service deleted alone).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DesiredMirror } from "../../src/core/desired.ts";
import { desiredSliceContents } from "../../src/core/endpoint-slices.ts";
import {
  HEADLESS_MIRROR_LABEL,
  headlessMirrors,
  hostnamesOf,
  isHeadless,
  MAX_HEADLESS_HOSTS,
  resolveHeadless,
} from "../../src/core/headless.ts";
import type { ObservedObject } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, Endpoints, Service } from "../../src/core/objects.ts";
import { desiredSubsets, endpointsMatch, type PlanInput, planMirror, serviceBody } from "../../src/core/plan.ts";
import { MIRROR_LABELS, testMirror } from "../helpers/desired-mirror.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const LABELS = MIRROR_LABELS;
const mirror = testMirror;

const slice = (hostnames: (string | undefined)[]): EndpointSlice => ({
  metadata: { name: `web-${hostnames.length}`, namespace: "shop" },
  endpoints: hostnames.map((hostname, i) => ({ addresses: [`10.0.0.${i + 1}`], ...(hostname ? { hostname } : {}) })),
});

describe("the hostnames of a headless Service's remote slices", () => {
  it("are the union over its slices, sorted and unique; endpoints without one count nothing", () => {
    assert.deepEqual(hostnamesOf([slice(["web-1", "web-0", undefined]), slice(["web-1", "web-2"])]), [
      "web-0",
      "web-1",
      "web-2",
    ]);
    assert.deepEqual(hostnamesOf([slice([undefined]), { metadata: { name: "empty" }, endpoints: null }]), []);
  });

  it("a Service is headless only with clusterIP None", () => {
    assert.equal(isHeadless({ metadata: { name: "a" }, spec: { clusterIP: "None" } }), true);
    assert.equal(isHeadless({ metadata: { name: "a" }, spec: { clusterIP: "10.0.0.1" } }), false);
    assert.equal(isHeadless({ metadata: { name: "a" } }), false);
  });
});

describe("the mirrors of a headless Service", () => {
  it("with no hostname at all (a StatefulSet scaled to 0) it stays the headless mirror, without hosts", () => {
    const { mirrors, problem } = headlessMirrors(mirror(), []);
    assert.equal(problem, undefined);
    assert.equal(mirrors.length, 1);
    assert.deepEqual(mirrors[0]?.headless, { hosts: [] });
    assert.deepEqual(mirrors[0]?.addresses, []);
  });

  it("with hostnames: the headless mirror first, then one ordinary mirror per host through the gateway", () => {
    const { mirrors, problem } = headlessMirrors(mirror(), ["web-0", "web-1"]);
    assert.equal(problem, undefined);
    assert.deepEqual(
      mirrors.map((m) => m.name),
      ["web-east", "web-0-east", "web-1-east"],
    );
    const [headless, host0] = mirrors;
    assert.deepEqual(headless?.headless, {
      hosts: [
        { hostname: "web-0", service: "web-0-east" },
        { hostname: "web-1", service: "web-1-east" },
      ],
    });
    assert.deepEqual(headless?.addresses, []);
    // Clients reach a host at its per-host Service's port.
    assert.deepEqual(headless?.endpointPorts, [{ name: "http", protocol: "TCP", port: 80 }]);
    assert.equal(host0?.headless, undefined);
    assert.deepEqual(host0?.addresses, ["198.18.0.10"]);
    assert.deepEqual(host0?.endpointPorts, [{ name: "http", protocol: "TCP", port: 4143 }]);
    assert.deepEqual(host0?.labels, { ...LABELS, [HEADLESS_MIRROR_LABEL]: "web-east" });
    assert.equal(host0?.serviceAnnotations["mirror.linkerd.io/remote-svc-fq-name"], "web-0.web.shop.svc.cluster.local");
  });

  it("leaves out a hostname that is not a DNS label, or whose mirror name is not a Service name, and reports it", () => {
    const { mirrors, problem } = headlessMirrors(mirror(), ["0-starts-with-digit", "Bad_Host", "web-0"]);
    assert.deepEqual(
      mirrors.map((m) => m.name),
      ["web-east", "web-0-east"],
    );
    assert.equal(problem?.reason, "headless-hostname-invalid");
    assert.equal(problem?.remote, "shop/web");
    assert.match(problem?.message ?? "", /hostname "Bad_Host" is not a DNS label/);
    assert.match(problem?.message ?? "", /per-host mirror name 0-starts-with-digit-east is not a valid Service name/);
  });

  it("leaves out a host named like an exported Service of the namespace (that Service keeps its mirror name)", () => {
    const { mirrors, problem } = headlessMirrors(mirror(), ["web-0", "web-1"], (h) =>
      h === "web-0" ? "the mirror of exported Service shop/web-0" : undefined,
    );
    assert.deepEqual(
      mirrors.map((m) => m.name),
      ["web-east", "web-1-east"],
    );
    assert.match(
      problem?.message ?? "",
      /per-host mirror name web-0-east is the mirror of exported Service shop\/web-0/,
    );
  });

  it("only bad hostnames: the ordinary mirror, and the report", () => {
    const { mirrors, problem } = headlessMirrors(mirror(), ["UPPER"]);
    assert.deepEqual(mirrors, [mirror()]);
    assert.equal(problem?.reason, "headless-hostname-invalid");
  });

  it(`mirrors at most ${MAX_HEADLESS_HOSTS} hosts (one slice holds 1 000 endpoints) and reports the rest`, () => {
    const hostnames = Array.from({ length: 5_000 }, (_, i) => `web-${String(i).padStart(4, "0")}`);
    const { mirrors, problem } = headlessMirrors(mirror(), hostnames);
    assert.equal(mirrors.length, MAX_HEADLESS_HOSTS + 1);
    assert.equal(mirrors[0]?.headless?.hosts.length, MAX_HEADLESS_HOSTS);
    assert.match(problem?.message ?? "", /5000 hostnames, more than the 1000 mirrored: 4000 left out/);
  });
});

const perHostIps: Record<string, string> = { "web-0-east": "10.96.0.20", "web-1-east": "10.96.0.21" };
const headlessMirror = (): DesiredMirror => {
  const [headless] = headlessMirrors(mirror(), ["web-0", "web-1"]).mirrors;
  assert.ok(headless);
  return headless;
};

describe("the writer's headless mirror", () => {
  it("fills each host's address from its per-host Service; a host without one is left out", () => {
    const resolved = resolveHeadless(headlessMirror(), (service) =>
      service === "web-0-east" ? perHostIps[service] : undefined,
    );
    assert.deepEqual(resolved.headless?.hosts, [
      { hostname: "web-0", service: "web-0-east", address: "10.96.0.20" },
      { hostname: "web-1", service: "web-1-east" },
    ]);
    assert.deepEqual(desiredSubsets(resolved), [
      { addresses: [{ ip: "10.96.0.20", hostname: "web-0" }], ports: [{ name: "http", port: 80, protocol: "TCP" }] },
    ]);
    // An address an actor sent is never trusted.
    const forged = {
      ...headlessMirror(),
      headless: { hosts: [{ hostname: "web-0", service: "x", address: "1.2.3.4" }] },
    };
    assert.deepEqual(resolveHeadless(forged, () => undefined).headless?.hosts, [{ hostname: "web-0", service: "x" }]);
  });

  it("gives slices whose endpoints carry the hostnames, ready", () => {
    const resolved = resolveHeadless(headlessMirror(), (service) => perHostIps[service]);
    const [ipv4, ...others] = desiredSliceContents(resolved);
    assert.equal(others.length, 0);
    assert.deepEqual(ipv4?.endpoints, [
      { addresses: ["10.96.0.20"], hostname: "web-0", conditions: { ready: true, serving: true, terminating: false } },
      { addresses: ["10.96.0.21"], hostname: "web-1", conditions: { ready: true, serving: true, terminating: false } },
    ]);
  });

  it("an Endpoints object with another hostname does not match", () => {
    const resolved = resolveHeadless(headlessMirror(), (service) => perHostIps[service]);
    const observed: Endpoints = {
      metadata: { name: "web-east", namespace: "shop", labels: LABELS, annotations: resolved.endpointsAnnotations },
      subsets: desiredSubsets(resolved),
    };
    assert.equal(endpointsMatch(resolved, observed), true);
    const renamed: Endpoints = {
      ...observed,
      subsets: [
        {
          addresses: [
            { ip: "10.96.0.20", hostname: "web-1" },
            { ip: "10.96.0.21", hostname: "web-0" },
          ],
          ports: [{ name: "http", port: 80, protocol: "TCP" }],
        },
      ],
    };
    assert.equal(endpointsMatch(resolved, renamed), false);
  });
});

describe("the plan of a mirror that turns headless or back (clusterIP is immutable)", () => {
  const observedService = (clusterIP: string): Service =>
    deepFreeze({
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "web-east",
        namespace: "shop",
        uid: "uid-1",
        resourceVersion: "5",
        labels: LABELS,
        annotations: mirror().serviceAnnotations,
      },
      spec: { type: "ClusterIP", clusterIP, ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] },
    });
  const input = (desired: DesiredMirror, observed: ObservedObject[]): PlanInput => ({
    key: "shop/web-east",
    desired,
    observed,
    endpointsApi: "endpoints",
    namespaceExists: true,
    createNamespaces: true,
    excludedNamespaces: [],
    gcAllowed: () => true,
  });

  it("a new headless mirror is created with clusterIP None", () => {
    const body = serviceBody(headlessMirror()) as { spec: { clusterIP?: string } };
    assert.equal(body.spec.clusterIP, "None");
    assert.equal((serviceBody(mirror()) as { spec: { clusterIP?: string } }).spec.clusterIP, undefined);
  });

  it("an ordinary Service under a headless mirror's name is deleted alone (its endpoints go with it)", () => {
    const plan = planMirror(input(headlessMirror(), [{ kind: "Service", object: observedService("10.96.0.5") }]));
    assert.deepEqual(
      plan.actions.map((a) => `${a.verb} ${a.kind}`),
      ["delete Service"],
    );
  });

  it("a headless Service under an ordinary mirror's name is deleted alone too", () => {
    const plan = planMirror(input(mirror(), [{ kind: "Service", object: observedService("None") }]));
    assert.deepEqual(
      plan.actions.map((a) => `${a.verb} ${a.kind}`),
      ["delete Service"],
    );
  });

  it("a headless mirror that matches plans nothing", () => {
    const resolved = resolveHeadless(headlessMirror(), (service) => perHostIps[service]);
    const endpoints: Endpoints = {
      metadata: { name: "web-east", namespace: "shop", labels: LABELS, annotations: resolved.endpointsAnnotations },
      subsets: desiredSubsets(resolved),
    };
    const plan = planMirror(
      input(resolved, [
        { kind: "Service", object: observedService("None") },
        { kind: "Endpoints", object: endpoints },
      ]),
    );
    assert.deepEqual(plan.actions, []);
  });
});
