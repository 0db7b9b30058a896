/**
 * Which prefixes the sandbox may make local (sandbox/local-addresses.ts): only inside the
 * documentation ranges, never the test machines' own network 192.0.2.0/24, and a refused
 * prefix is refused before any route is added.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { claimLocal, isDocumentationPrefix, prefixesWithout } from "../../sandbox/local-addresses.ts";

describe("local address prefixes", () => {
  it("accepts a documentation range and any prefix inside one", () => {
    for (const prefix of ["198.51.100.0/24", "198.51.100.64/28", "203.0.113.7/32", "2001:db8::/32", "2001:db8:1::/48"])
      assert.equal(isDocumentationPrefix(prefix), true, prefix);
  });

  it("refuses the machines' own network, wider prefixes, other addresses and malformed text", () => {
    for (const prefix of [
      "192.0.2.0/24",
      "192.0.2.2/32",
      "198.51.100.0/23",
      "198.51.0.0/16",
      "10.0.0.0/8",
      "2001:db9::/32",
      "2001::/16",
      "198.51.100.64/33",
      "198.51.100.64",
      "198.51.100.64/x",
      "",
    ])
      assert.equal(isDocumentationPrefix(prefix), false, prefix);
  });

  it("claims nothing when one prefix of the list is outside the documentation ranges", async () => {
    await assert.rejects(claimLocal(["198.51.100.64/28", "192.0.2.0/28"]), /192\.0\.2\.0\/28: not inside/);
  });
});

describe("prefixesWithout", () => {
  it("covers a range minus the machine's addresses with the fewest prefixes, and the range itself when none is inside", () => {
    assert.deepEqual(prefixesWithout("198.51.100.0/24", ["203.0.113.80", "10.255.255.53"]), ["198.51.100.0/24"]);
    assert.deepEqual(prefixesWithout("203.0.113.0/24", ["203.0.113.80"]), [
      "203.0.113.0/26",
      "203.0.113.64/28",
      "203.0.113.81/32",
      "203.0.113.82/31",
      "203.0.113.84/30",
      "203.0.113.88/29",
      "203.0.113.96/27",
      "203.0.113.128/25",
    ]);
    assert.deepEqual(prefixesWithout("203.0.113.80/32", ["203.0.113.80"]), []);
  });

  it("refuses an IPv6 prefix holding an address the machine needs", () => {
    assert.equal(prefixesWithout("2001:db8::/32", ["2001:db8::53"]), undefined);
    assert.deepEqual(prefixesWithout("2001:db8::/32", ["203.0.113.80"]), ["2001:db8::/32"]);
  });
});
