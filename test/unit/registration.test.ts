/**
 * parseCredentialsSecret and computeRegistry: every way a credentials Secret can be
 * wrong gets its own specific reason (SPEC §1, §7), and duplicates resolve to the
 * Secret registered first.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Secret } from "../../src/core/objects.ts";
import { renderKubeconfig } from "../../src/sandbox/kubeconfig.ts";
import { parseCredentialsSecret } from "../../src/supervisor/registration.ts";
import { computeRegistry } from "../../src/supervisor/registry.ts";

const CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const goodKubeconfig = renderKubeconfig({
  cluster: "east",
  server: "https://127.0.0.1:6443",
  caPem: CA,
  user: "reader",
  auth: { token: "t0ken" },
});

function secret(
  overrides: {
    annotations?: Record<string, string>;
    kubeconfig?: string | null;
    type?: string;
    name?: string;
    uid?: string;
    created?: string;
  } = {},
): Secret {
  const annotations = overrides.annotations ?? {
    "mirror.linkerd.io/cluster-name": "east",
    "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
  };
  const kubeconfig = overrides.kubeconfig === undefined ? goodKubeconfig : overrides.kubeconfig;
  return {
    metadata: {
      name: overrides.name ?? "cluster-credentials-east",
      namespace: "fleet-mirror",
      uid: overrides.uid ?? "uid-1",
      creationTimestamp: overrides.created ?? "2026-01-01T00:00:00Z",
      annotations,
    },
    type: overrides.type ?? "mirror.linkerd.io/remote-kubeconfig",
    ...(kubeconfig === null ? {} : { data: { kubeconfig: Buffer.from(kubeconfig).toString("base64") } }),
  };
}

const strict = { allowFilePaths: false };

function rawKubeconfig(
  user: string,
  cluster = "    server: https://127.0.0.1:6443\n    certificate-authority-data: Zm9v\n",
): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
${cluster}users:
- name: u
  user:
${user}contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
`;
}

describe("parseCredentialsSecret", () => {
  it("registers a Secret with a token kubeconfig as a plain connection spec", () => {
    const parsed = parseCredentialsSecret(secret(), strict);
    assert.equal(parsed.kind, "valid");
    if (parsed.kind !== "valid") return;
    assert.equal(parsed.registration.cluster, "east");
    assert.equal(parsed.registration.domain, "cluster.local");
    assert.deepEqual(parsed.registration.connection, {
      server: "https://127.0.0.1:6443",
      caPem: CA,
      auth: { kind: "token", token: "t0ken" },
    });
  });

  it("changes the fingerprint when the credentials change, and only then", () => {
    const a = parseCredentialsSecret(secret(), strict);
    const b = parseCredentialsSecret(secret(), strict);
    const rotated = parseCredentialsSecret(secret({ kubeconfig: goodKubeconfig.replace("t0ken", "n3w") }), strict);
    assert.ok(a.kind === "valid" && b.kind === "valid" && rotated.kind === "valid");
    if (a.kind !== "valid" || b.kind !== "valid" || rotated.kind !== "valid") return;
    assert.equal(a.registration.fingerprint, b.registration.fingerprint);
    assert.notEqual(a.registration.fingerprint, rotated.registration.fingerprint);
  });

  it("ignores Secrets of other types silently", () => {
    assert.deepEqual(parseCredentialsSecret(secret({ type: "Opaque" }), strict), { kind: "ignored" });
  });

  const invalidCases: [string, Secret, string][] = [
    [
      "the cluster-name annotation is missing",
      secret({ annotations: { "mirror.linkerd.io/remote-cluster-domain": "cluster.local" } }),
      "missing-cluster-name",
    ],
    [
      "the cluster name is not a DNS label",
      secret({
        annotations: {
          "mirror.linkerd.io/cluster-name": "East_1",
          "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
        },
      }),
      "invalid-cluster-name",
    ],
    [
      "the cluster name is longer than 63 characters",
      secret({
        annotations: {
          "mirror.linkerd.io/cluster-name": "a".repeat(64),
          "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
        },
      }),
      "invalid-cluster-name",
    ],
    [
      "the cluster domain is missing",
      secret({ annotations: { "mirror.linkerd.io/cluster-name": "east" } }),
      "missing-cluster-domain",
    ],
    [
      "the cluster domain is not a DNS name",
      secret({
        annotations: {
          "mirror.linkerd.io/cluster-name": "east",
          "mirror.linkerd.io/remote-cluster-domain": "cluster local",
        },
      }),
      "invalid-cluster-domain",
    ],
    ["the kubeconfig key is missing", secret({ kubeconfig: null }), "missing-kubeconfig"],
    ["the kubeconfig is empty", secret({ kubeconfig: "   " }), "kubeconfig-unparsable"],
    ["the kubeconfig is not YAML", secret({ kubeconfig: "{ not: [yaml" }), "kubeconfig-unparsable"],
    ["the kubeconfig is a YAML list", secret({ kubeconfig: "- a\n- b\n" }), "kubeconfig-unparsable"],
    [
      "the kubeconfig has no current-context",
      secret({ kubeconfig: goodKubeconfig.replace(/current-context: .*\n/, "") }),
      "kubeconfig-no-context",
    ],
    [
      "the current context does not exist",
      secret({ kubeconfig: goodKubeconfig.replace(/current-context: .*\n/, 'current-context: "nope"\n') }),
      "kubeconfig-no-context",
    ],
    [
      "the server is not an http(s) URL",
      secret({ kubeconfig: goodKubeconfig.replace("https://127.0.0.1:6443", "ftp://x") }),
      "kubeconfig-no-server",
    ],
    [
      "the kubeconfig uses exec",
      secret({
        kubeconfig: rawKubeconfig(
          "    exec:\n      command: /bin/sh\n      apiVersion: client.authentication.k8s.io/v1\n",
        ),
      }),
      "kubeconfig-forbidden-auth",
    ],
    [
      "the kubeconfig uses auth-provider",
      secret({ kubeconfig: rawKubeconfig("    auth-provider:\n      name: gcp\n") }),
      "kubeconfig-forbidden-auth",
    ],
    [
      "the kubeconfig uses tokenFile",
      secret({ kubeconfig: rawKubeconfig("    tokenFile: /etc/passwd\n") }),
      "kubeconfig-forbidden-auth",
    ],
    [
      "the kubeconfig names a client-certificate file",
      secret({ kubeconfig: rawKubeconfig("    client-certificate: /tmp/c.crt\n    client-key: /tmp/c.key\n") }),
      "kubeconfig-forbidden-auth",
    ],
    [
      "the kubeconfig names a certificate-authority file",
      secret({
        kubeconfig: rawKubeconfig(
          '    token: "x"\n',
          "    server: https://127.0.0.1:6443\n    certificate-authority: /etc/ssl/ca.crt\n",
        ),
      }),
      "kubeconfig-forbidden-auth",
    ],
    [
      "the kubeconfig uses basic auth",
      secret({ kubeconfig: rawKubeconfig("    username: admin\n    password: secret\n") }),
      "kubeconfig-forbidden-auth",
    ],
    [
      "the kubeconfig has no credentials",
      secret({ kubeconfig: rawKubeconfig("    {}\n".replace("    {}\n", "    as: nobody\n")) }),
      "kubeconfig-no-credentials",
    ],
    [
      "the client certificate has no key",
      secret({ kubeconfig: rawKubeconfig("    client-certificate-data: Zm9v\n") }),
      "kubeconfig-no-credentials",
    ],
  ];
  for (const [what, input, reason] of invalidCases) {
    it(`reports ${reason} when ${what}`, () => {
      const parsed = parseCredentialsSecret(input, strict);
      assert.equal(parsed.kind, "invalid", JSON.stringify(parsed));
      if (parsed.kind !== "invalid") return;
      assert.equal(parsed.reason, reason);
      assert.ok(parsed.message.length > 10, "the message says what is wrong");
    });
  }

  it("never reads a file named by a Secret unless file paths are allowed", () => {
    const parsed = parseCredentialsSecret(secret({ kubeconfig: rawKubeconfig("    tokenFile: /does/not/exist\n") }), {
      allowFilePaths: true,
    });
    assert.equal(parsed.kind, "invalid");
    if (parsed.kind === "invalid") assert.match(parsed.message, /cannot read tokenFile file \/does\/not\/exist/);
  });
});

describe("computeRegistry", () => {
  const entry = (s: Secret) => ({ secret: s, parsed: parseCredentialsSecret(s, strict) });

  it("lets the Secret registered first win a duplicated cluster name, and reports the other", () => {
    const older = secret({ name: "a-new-name", uid: "old", created: "2026-01-01T00:00:00Z" });
    const newer = secret({ name: "z-other", uid: "new", created: "2026-02-01T00:00:00Z" });
    const state = computeRegistry([entry(newer), entry(older)], new Map());
    assert.equal(state.registered.get("east")?.secretUid, "old");
    assert.deepEqual(state.duplicates, [
      { secretKey: "fleet-mirror/z-other", cluster: "east", winner: "fleet-mirror/a-new-name" },
    ]);
  });

  it("keeps the previous winner even when an older Secret for the same cluster appears later", () => {
    const winner = secret({ name: "winner", uid: "w", created: "2026-03-01T00:00:00Z" });
    const older = secret({ name: "older", uid: "o", created: "2026-01-01T00:00:00Z" });
    const state = computeRegistry([entry(older), entry(winner)], new Map([["east", "w"]]));
    assert.equal(state.registered.get("east")?.secretUid, "w");
  });

  it("keeps the mirrors of a cluster whose Secret is invalid for now, and of registered clusters", () => {
    const broken = secret({
      name: "broken",
      uid: "b",
      kubeconfig: "{",
      annotations: {
        "mirror.linkerd.io/cluster-name": "west",
        "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
      },
    });
    const state = computeRegistry([entry(secret()), entry(broken)], new Map());
    assert.deepEqual(state.keep, ["east", "west"]);
    assert.equal(state.invalid[0]?.reason, "kubeconfig-unparsable");
  });
});
