/**
 * A credentials Secret's kubeconfig must reach its server over verified TLS (SPEC §7): an
 * http:// server (the bearer token in clear text) and insecure-skip-tls-verify (the
 * credentials to whoever answers) are refused with their own reason, unless the operator
 * allows them (`--allow-insecure-remotes`); the operator's own kubeconfig is not judged so.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import type { Secret } from "../../src/core/objects.ts";
import { connectionFromKubeconfig, InvalidKubeconfig } from "../../src/kube/kubeconfig.ts";
import { parseCredentialsSecret } from "../../src/supervisor/registration.ts";

/** A token kubeconfig for `server`; `skipVerify`: insecure-skip-tls-verify instead of the CA. */
function kubeconfig(server: string, skipVerify = false): string {
  const text = renderKubeconfig({ cluster: "c", server, caPem: CA, user: "u", auth: { token: "t0ken" } });
  return skipVerify ? text.replace(/certificate-authority-data: .*/, "insecure-skip-tls-verify: true") : text;
}

const CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const HTTPS = kubeconfig("https://203.0.113.7:6443");
const HTTP = kubeconfig("http://203.0.113.7:8080");
const SKIP_VERIFY = kubeconfig("https://203.0.113.7:6443", true);

const strict = { allowFilePaths: false };
const insecureAllowed = { allowFilePaths: false, allowInsecure: true };

function refusal(text: string): InvalidKubeconfig {
  try {
    connectionFromKubeconfig(text, strict);
  } catch (error) {
    if (error instanceof InvalidKubeconfig) return error;
    throw error;
  }
  assert.fail("the kubeconfig was accepted");
}

function secretWith(text: string): Secret {
  return {
    metadata: {
      name: "cluster-credentials-east",
      namespace: "fleet-mirror",
      annotations: {
        "mirror.linkerd.io/cluster-name": "east",
        "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
      },
    },
    type: "mirror.linkerd.io/remote-kubeconfig",
    data: { kubeconfig: Buffer.from(text).toString("base64") },
  };
}

describe("a kubeconfig's transport", () => {
  it("accepts an https:// server with its CA", () => {
    assert.equal(connectionFromKubeconfig(HTTPS, strict).server, "https://203.0.113.7:6443");
  });

  it("refuses an http:// server: the credentials would travel in clear text", () => {
    const error = refusal(HTTP);
    assert.equal(error.reason, "kubeconfig-insecure");
    assert.match(error.message, /server http:\/\/203\.0\.113\.7:8080 is plain http:\/\/.*clear text/);
    assert.match(error.message, /--allow-insecure-remotes/);
  });

  it("refuses insecure-skip-tls-verify: the credentials would go to whoever answers", () => {
    const error = refusal(SKIP_VERIFY);
    assert.equal(error.reason, "kubeconfig-insecure");
    assert.match(error.message, /cluster c sets insecure-skip-tls-verify/);
  });

  it("accepts both when the operator allows insecure servers, and keeps skip-verify in the connection", () => {
    assert.equal(connectionFromKubeconfig(HTTP, insecureAllowed).server, "http://203.0.113.7:8080");
    assert.equal(connectionFromKubeconfig(SKIP_VERIFY, insecureAllowed).insecureSkipTlsVerify, true);
  });

  it("reports a Secret with either as invalid with reason kubeconfig-insecure, and registers it once allowed", () => {
    for (const text of [HTTP, SKIP_VERIFY]) {
      const parsed = parseCredentialsSecret(secretWith(text), strict);
      assert.equal(parsed.kind, "invalid");
      if (parsed.kind === "invalid") {
        assert.equal(parsed.reason, "kubeconfig-insecure");
        assert.equal(parsed.cluster, "east", "the report names the cluster the Secret is for");
      }
      assert.equal(parseCredentialsSecret(secretWith(text), insecureAllowed).kind, "valid");
    }
  });
});
