import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  mirrorName,
  validateDns1123Label,
  validateDns1123Subdomain,
  validateMirrorName,
} from "../../src/core/naming.ts";

describe("mirrorName", () => {
  it("is the remote Service name, a dash, and the cluster name", () => {
    assert.equal(mirrorName("web", "east"), "web-east");
    assert.equal(mirrorName("web-api", "us-east-1"), "web-api-us-east-1");
  });
});

describe("validateMirrorName", () => {
  it("accepts a name of up to 63 characters", () => {
    assert.equal(validateMirrorName("web-east"), undefined);
    assert.equal(validateMirrorName(`a${"b".repeat(62)}`), undefined);
  });

  it("rejects a name longer than 63 characters and says so", () => {
    const name = `a${"b".repeat(63)}`;
    assert.match(validateMirrorName(name) ?? "", /at most 63 characters \(is 64\)/);
  });

  it("rejects names that are not DNS-1035 labels", () => {
    for (const name of ["", "Web-east", "1web-east", "web-east-", "-web", "web_east", "web.east"]) {
      assert.notEqual(validateMirrorName(name), undefined, name);
    }
  });
});

describe("validateDns1123Label", () => {
  it("accepts lower-case alphanumerics and inner dashes, starting with a digit or a letter", () => {
    for (const name of ["east", "us-east-1", "1cluster", "a", "a".repeat(63)]) {
      assert.equal(validateDns1123Label(name), undefined, name);
    }
  });

  it("rejects an empty name", () => {
    assert.match(validateDns1123Label("") ?? "", /empty/);
  });

  it("rejects a name longer than 63 characters", () => {
    assert.match(validateDns1123Label("a".repeat(64)) ?? "", /at most 63/);
  });

  it("rejects upper case, dots, underscores, and a leading or trailing dash", () => {
    for (const name of ["East", "us.east", "us_east", "-east", "east-"]) {
      assert.notEqual(validateDns1123Label(name), undefined, name);
    }
  });
});

describe("validateDns1123Subdomain", () => {
  it("accepts dotted lower-case names of up to 253 characters", () => {
    for (const name of ["cluster.local", "cluster-credentials-east", "a", `${"a".repeat(63)}.${"b".repeat(189)}`])
      assert.equal(validateDns1123Subdomain(name), undefined, name);
  });

  it("rejects an empty, too long or badly spelled name and says why", () => {
    assert.equal(validateDns1123Subdomain(""), "must not be empty");
    assert.match(validateDns1123Subdomain("a".repeat(254)) ?? "", /at most 253 characters \(is 254\)/);
    for (const name of ["Creds", "a_b", "-a", "a-", "a..b", ".a", "a."])
      assert.match(validateDns1123Subdomain(name) ?? "", /lower case alphanumeric characters, '-' or '\.'/, name);
  });
});
