/**
 * storedSecret: what the supervisor's Secret store keeps of a credentials Secret (its
 * metadata and type, the parse of its data, not the data), and that the parse follows
 * the Secret's version: reused for the same uid and resourceVersion, made again for any
 * other, so rotation and a fixed or broken Secret still change the registration.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import type { Secret } from "../../src/core/objects.ts";
import { LAST_APPLIED_CONFIGURATION } from "../../src/kube/watch-store.ts";
import { parseCredentialsSecret } from "../../src/supervisor/registration.ts";
import { storedSecret } from "../../src/supervisor/stored-secret.ts";

const strict = { allowFilePaths: false };
const CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

function secret(resourceVersion: string | undefined, token: string, extra: Record<string, string> = {}): Secret {
  const kubeconfig = renderKubeconfig({
    cluster: "east",
    server: "https://127.0.0.1:6443",
    caPem: CA,
    user: "reader",
    auth: { token },
  });
  return {
    metadata: {
      name: "cluster-credentials-east",
      namespace: "fleet-mirror",
      uid: "uid-1",
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
      creationTimestamp: "2026-01-01T00:00:00Z",
      annotations: {
        "mirror.linkerd.io/cluster-name": "east",
        "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
        ...extra,
      },
    },
    type: "mirror.linkerd.io/remote-kubeconfig",
    data: { kubeconfig: Buffer.from(kubeconfig).toString("base64") },
  };
}

describe("storedSecret", () => {
  it("keeps the metadata, the type and the parse of the data, not the data", () => {
    const s = secret("5", "t0ken");
    const stored = storedSecret(s, undefined, strict);
    assert.equal("data" in stored, false);
    assert.deepEqual(stored.metadata, s.metadata);
    assert.equal(stored.type, s.type);
    assert.deepEqual(stored.parsed, parseCredentialsSecret(s, strict));
    assert.equal(stored.parsed.kind, "valid");
  });

  it("drops kubectl's last-applied copy (it holds the data again) and keeps every other annotation", () => {
    const s = secret("5", "t0ken", { [LAST_APPLIED_CONFIGURATION]: JSON.stringify(secret("1", "t0ken")) });
    const stored = storedSecret(s, undefined, strict);
    assert.deepEqual(stored.metadata.annotations, {
      "mirror.linkerd.io/cluster-name": "east",
      "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
    });
    assert.equal(stored.parsed.kind, "valid");
  });

  it("reuses the stored parse for the same uid and resourceVersion, and parses any other version again", () => {
    const first = storedSecret(secret("5", "t0ken"), undefined, strict);
    assert.equal(storedSecret(secret("5", "t0ken"), first, strict).parsed, first.parsed);
    // Rotation: a new version with a new token is a new registration (a new fingerprint).
    const rotated = storedSecret(secret("6", "n3w"), first, strict);
    assert.ok(first.parsed.kind === "valid" && rotated.parsed.kind === "valid");
    assert.notEqual(rotated.parsed.registration.fingerprint, first.parsed.registration.fingerprint);
    // Without a resourceVersion nothing says it is the same version: parsed again.
    const unversioned = storedSecret(
      secret(undefined, "t0ken"),
      storedSecret(secret(undefined, "t0ken"), undefined, strict),
      strict,
    );
    assert.deepEqual(unversioned.parsed, first.parsed);
    const otherUid = storedSecret(
      { ...secret("5", "n3w"), metadata: { ...secret("5", "n3w").metadata, uid: "uid-2" } },
      first,
      strict,
    );
    assert.ok(otherUid.parsed.kind === "valid");
    assert.notEqual(otherUid.parsed.registration.fingerprint, first.parsed.registration.fingerprint);
  });

  it("stores a Secret that does not register with its reason", () => {
    const broken = { ...secret("7", "t0ken"), data: { kubeconfig: "%%%" } };
    const stored = storedSecret(broken, storedSecret(secret("5", "t0ken"), undefined, strict), strict);
    assert.deepEqual(stored.parsed, parseCredentialsSecret(broken, strict));
    assert.equal(stored.parsed.kind === "invalid" ? stored.parsed.reason : undefined, "kubeconfig-not-base64");
  });
});
