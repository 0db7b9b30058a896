/**
 * Which gateway addresses may be probed and written as endpoints (SPEC §10), as pure
 * functions: the built-in and local ranges, the operator's allow and deny ranges and
 * their precedence, the per-gateway cap, and a gateway's view built with them.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { addressPolicy, DEFAULT_ADDRESS_POLICY, filterAddresses, refusalOf } from "../../src/core/address-policy.ts";
import { viewGateway } from "../../src/core/desired.ts";
import { cidrContains, numericIp, parseCidr } from "../../src/core/ip.ts";
import type { Service } from "../../src/core/objects.ts";

const LOCAL = { seq: 1, serviceCidrs: ["10.96.0.0/16", "fd00:96::/112"], podCidrs: ["10.244.1.0/24"] };
const withLocal = addressPolicy(undefined, LOCAL);
const reason = (policy = withLocal, ip: string) => refusalOf(policy, ip)?.reason;

function gateway(ingress: { ip?: string; hostname?: string }[]): Service {
  return {
    metadata: { name: "gateway", namespace: "gw", resourceVersion: "7" },
    spec: { ports: [{ name: "incoming-port", port: 4143, protocol: "TCP" }] },
    status: { loadBalancer: { ingress } },
  };
}

describe("CIDR ranges", () => {
  it("parses IPv4 and IPv6 ranges, clearing host bits, and refuses anything else with a reason", () => {
    assert.equal((parseCidr("10.96.0.1/16") as { text: string }).text, "10.96.0.0/16");
    assert.equal((parseCidr("fd00:ec2::254/128") as { text: string }).text, "fd00:ec2::254/128");
    assert.equal((parseCidr("::ffff:10.0.0.0/104") as { text: string }).text, "10.0.0.0/8");
    for (const bad of ["10.96.0.0", "10.96.0.0/33", "fd00::/129", "host/8", "10.0.0.0/8/1", "10.0.0.256/8", ""])
      assert.equal(typeof parseCidr(bad), "string", bad);
  });

  it("holds an address of its family only, an IPv4-mapped IPv6 address counting as IPv4", () => {
    const range = parseCidr("10.96.0.0/16");
    assert.ok(typeof range !== "string");
    const ip = (text: string) => numericIp(text) ?? assert.fail(text);
    assert.ok(cidrContains(range, ip("10.96.255.1")));
    assert.ok(cidrContains(range, ip("::ffff:10.96.0.1")));
    assert.ok(!cidrContains(range, ip("10.97.0.1")));
    assert.ok(!cidrContains(range, ip("fd00::1")));
  });
});

describe("the gateway address policy", () => {
  it("refuses the local Service and pod CIDRs, cloud metadata and non-unicast addresses by default", () => {
    assert.equal(reason(withLocal, "10.96.0.1"), "local-service-cidr");
    assert.equal(reason(withLocal, "::ffff:10.96.0.10"), "local-service-cidr");
    assert.equal(reason(withLocal, "fd00:96::a"), "local-service-cidr");
    assert.equal(reason(withLocal, "10.244.1.7"), "local-pod-cidr");
    assert.equal(reason(withLocal, "fd00:ec2::254"), "metadata");
    assert.equal(reason(withLocal, "100.100.100.200"), "metadata");
    assert.equal(reason(withLocal, "169.254.169.254"), "link-local");
    assert.equal(reason(withLocal, "239.1.1.1"), "not-unicast");
    assert.equal(reason(withLocal, "0.1.2.3"), "unspecified");
    assert.equal(reason(withLocal, "127.0.0.1"), "loopback");
    assert.equal(reason(withLocal, "::1"), "loopback");
    assert.equal(reason(withLocal, "gw.example"), "not-ip");
    for (const ok of ["198.51.100.7", "10.97.0.1", "2001:db8::1", "10.244.2.1"])
      assert.equal(reason(withLocal, ok), undefined, ok);
    assert.equal(
      reason(DEFAULT_ADDRESS_POLICY, "10.96.0.1"),
      undefined,
      "no local range known yet: flags and built-ins only",
    );
  });

  it("lets the operator deny ranges and allow exceptions, the most specific range deciding and deny winning a tie", () => {
    const policy = addressPolicy(
      {
        cidrAllow: ["10.96.5.0/24", "198.51.100.0/24", "fd00:ec2::254/128"],
        cidrDeny: ["198.51.100.128/25", "10.96.5.0/24"],
        maxAddresses: 8,
      },
      LOCAL,
    );
    assert.equal(reason(policy, "198.51.100.7"), undefined, "allowed");
    assert.equal(reason(policy, "198.51.100.200"), "denied", "the more specific deny wins");
    assert.equal(reason(policy, "10.96.5.1"), "denied", "a tie: deny");
    assert.equal(reason(policy, "fd00:ec2::254"), undefined, "an allow range carves an exception from a built-in one");
    assert.equal(reason(policy, "10.96.6.1"), "local-service-cidr");
    assert.match(refusalOf(policy, "198.51.100.200")?.why ?? "", /198\.51\.100\.128\/25 \(--gateway-cidr-deny\)/);
    const loopback = addressPolicy({ cidrAllow: ["127.0.0.0/8"], cidrDeny: [], maxAddresses: 8 });
    assert.equal(reason(loopback, "127.0.0.1"), "loopback", "what the API server refuses, no flag allows");
  });

  it("keeps a gateway's first addresses in sorted order up to the cap, refusing the others as over-cap", () => {
    const policy = addressPolicy({ cidrAllow: [], cidrDeny: [], maxAddresses: 2 }, LOCAL);
    const { accepted, refused } = filterAddresses(policy, [
      "198.51.100.9",
      "10.96.0.1",
      "198.51.100.1",
      "198.51.100.5",
      "198.51.100.1",
    ]);
    assert.deepEqual(accepted, ["198.51.100.1", "198.51.100.5"]);
    assert.deepEqual(
      refused.map((r) => `${r.address}=${r.reason}`),
      ["10.96.0.1=local-service-cidr", "198.51.100.9=over-cap"],
    );
  });
});

describe("a gateway's view under the policy", () => {
  it("leaves refused addresses out, lists them, and is usable with what remains", () => {
    const view = viewGateway(
      gateway([{ ip: "10.96.0.1" }, { ip: "198.51.100.4" }]),
      () => undefined,
      undefined,
      withLocal,
    );
    assert.deepEqual(view.addresses, ["198.51.100.4"]);
    assert.deepEqual(
      view.refused?.map((r) => r.address),
      ["10.96.0.1"],
    );
    assert.equal(view.unusable, undefined);
  });

  it("is unusable when nothing remains, saying which addresses were refused and why", () => {
    const lookup = (hostname: string) =>
      hostname === "kubernetes.default.svc.cluster.local" ? ["10.96.0.1"] : undefined;
    const view = viewGateway(
      gateway([{ hostname: "kubernetes.default.svc.cluster.local" }, { ip: "127.0.0.1" }]),
      lookup,
      undefined,
      withLocal,
    );
    assert.deepEqual(view.addresses, []);
    assert.equal(
      view.unusable,
      "gateway ingress address(es) 127.0.0.1 (loopback) cannot be Endpoints addresses; gateway ingress address(es) 10.96.0.1 (in the local Service CIDR 10.96.0.0/16) are refused",
    );
  });
});
