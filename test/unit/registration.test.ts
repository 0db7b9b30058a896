/**
 * parseCredentialsSecret and computeRegistry: every way a credentials Secret can be
 * wrong gets its own specific reason (SPEC §1, §7), and duplicates resolve to the
 * Secret registered first.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { type CertificateFiles, createCa, issueCertificate } from "../../sandbox/pki.ts";
import type { Secret } from "../../src/core/objects.ts";
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

  it("reads the cluster's default gateway from the Secret's annotations, each defaulting on its own (SPEC §12)", () => {
    const base = {
      "mirror.linkerd.io/cluster-name": "east",
      "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
    };
    const gatewayOf = (annotations: Record<string, string>) => {
      const parsed = parseCredentialsSecret(secret({ annotations: { ...base, ...annotations } }), strict);
      assert.equal(parsed.kind, "valid", JSON.stringify(parsed));
      return parsed.kind === "valid" ? parsed.registration.defaultGateway : undefined;
    };
    assert.deepEqual(gatewayOf({}), { name: "linkerd-gateway", namespace: "linkerd-multicluster" });
    assert.deepEqual(gatewayOf({ "mirror.linkerd.io/gateway-name": "edge" }), {
      name: "edge",
      namespace: "linkerd-multicluster",
    });
    assert.deepEqual(gatewayOf({ "mirror.linkerd.io/gateway-name": "edge", "mirror.linkerd.io/gateway-ns": "mesh" }), {
      name: "edge",
      namespace: "mesh",
    });
    // A changed default gateway restarts the actor: the fingerprint covers it.
    const a = parseCredentialsSecret(secret({ annotations: base }), strict);
    const b = parseCredentialsSecret(
      secret({ annotations: { ...base, "mirror.linkerd.io/gateway-name": "edge" } }),
      strict,
    );
    assert.ok(a.kind === "valid" && b.kind === "valid");
    if (a.kind === "valid" && b.kind === "valid")
      assert.notEqual(a.registration.fingerprint, b.registration.fingerprint);
  });

  it("reads the cluster's priority from its Secret; an invalid one registers the cluster at the default and says why (SPEC §14)", () => {
    const base = {
      "mirror.linkerd.io/cluster-name": "east",
      "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
    };
    const parse = (annotations: Record<string, string>) =>
      parseCredentialsSecret(secret({ annotations: { ...base, ...annotations } }), strict);
    const none = parse({});
    const five = parse({ "mirror.linkerd.io/priority": "5" });
    const bad = parse({ "mirror.linkerd.io/priority": "high" });
    assert.ok(none.kind === "valid" && five.kind === "valid" && bad.kind === "valid");
    if (none.kind !== "valid" || five.kind !== "valid" || bad.kind !== "valid") return;
    assert.equal(none.registration.priority, 100);
    assert.equal(five.registration.priority, 5);
    assert.equal(bad.registration.priority, 100);
    assert.match(bad.registration.priorityProblem ?? "", /"high" is not a whole number from 0 to 1000/);
    // Only the writer reads it: a new priority does not restart the cluster's actor.
    assert.equal(five.registration.fingerprint, none.registration.fingerprint);
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
      "the default gateway's name is not a Service name",
      secret({
        annotations: {
          "mirror.linkerd.io/cluster-name": "east",
          "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
          "mirror.linkerd.io/gateway-name": "Edge_Gateway",
        },
      }),
      "invalid-default-gateway",
    ],
    [
      "the default gateway's namespace is empty",
      secret({
        annotations: {
          "mirror.linkerd.io/cluster-name": "east",
          "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
          "mirror.linkerd.io/gateway-ns": "",
        },
      }),
      "invalid-default-gateway",
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

const run = promisify(execFile);

/** A client certificate of `ca` valid only from `start` to `end` (openssl `YYYYMMDDHHMMSSZ`), via `openssl ca`. */
async function certificateValidBetween(
  ca: CertificateFiles,
  dir: string,
  name: string,
  start: string,
  end: string,
): Promise<{ certPem: string; keyPem: string }> {
  const db = mkdtempSync(join(dir, `${name}-`));
  writeFileSync(join(db, "index.txt"), "");
  writeFileSync(join(db, "serial"), "1000\n");
  const config = [
    "[ca]",
    "default_ca = d",
    "[d]",
    `database = ${db}/index.txt`,
    `new_certs_dir = ${db}`,
    `serial = ${db}/serial`,
    "default_md = sha256",
    "policy = p",
    "unique_subject = no",
    "[p]",
    "commonName = supplied",
    "",
  ].join("\n");
  writeFileSync(join(db, "ca.cnf"), config);
  const key = join(db, "c.key");
  const csr = join(db, "c.csr");
  const crt = join(db, "c.crt");
  await run("openssl", [
    "req",
    "-new",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    key,
    "-out",
    csr,
    "-subj",
    `/CN=${name}`,
  ]);
  await run("openssl", [
    "ca",
    "-batch",
    "-config",
    join(db, "ca.cnf"),
    "-cert",
    ca.certPath,
    "-keyfile",
    ca.keyPath,
    "-in",
    csr,
    "-out",
    crt,
    "-notext",
    "-startdate",
    start,
    "-enddate",
    end,
  ]);
  return { certPem: readFileSync(crt, "utf8"), keyPem: readFileSync(key, "utf8") };
}

describe("parseCredentialsSecret with real certificates and files", () => {
  let dir: string;
  let ca: CertificateFiles;
  let client: CertificateFiles;
  let other: CertificateFiles;
  let expired: { certPem: string; keyPem: string };
  let future: { certPem: string; keyPem: string };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "fleet-mirror-registration-unit-"));
    ca = await createCa(dir, "ca");
    client = await issueCertificate(ca, dir, "client", { commonName: "reader", usage: "client" });
    other = await issueCertificate(ca, dir, "other", { commonName: "other", usage: "client" });
    expired = await certificateValidBetween(ca, dir, "expired", "20200101000000Z", "20200102000000Z");
    future = await certificateValidBetween(ca, dir, "future", "20990101000000Z", "20991231000000Z");
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const withCert = (certPem: string, keyPem: string, caPem: string = ca.certPem): Secret =>
    secret({
      kubeconfig: renderKubeconfig({
        cluster: "east",
        server: "https://127.0.0.1:6443",
        caPem,
        user: "reader",
        auth: { clientCertPem: certPem, clientKeyPem: keyPem },
      }),
    });

  const expectInvalid = (parsed: ReturnType<typeof parseCredentialsSecret>, reason: string, message: RegExp): void => {
    assert.equal(parsed.kind, "invalid", JSON.stringify(parsed));
    if (parsed.kind !== "invalid") return;
    assert.equal(parsed.reason, reason);
    assert.match(parsed.message, message);
  };

  it("registers a Secret whose kubeconfig has a valid inline client certificate", () => {
    const parsed = parseCredentialsSecret(withCert(client.certPem, client.keyPem), strict);
    assert.equal(parsed.kind, "valid", JSON.stringify(parsed));
    if (parsed.kind === "valid") assert.equal(parsed.registration.connection.auth.kind, "client-certificate");
  });

  it("reports kubeconfig-client-certificate-expired, with the date, when the client certificate has expired", () => {
    expectInvalid(
      parseCredentialsSecret(withCert(expired.certPem, expired.keyPem), strict),
      "kubeconfig-client-certificate-expired",
      /client certificate \(CN=expired\) expired on 2020-01-02T00:00:00\.000Z: issue a new one/,
    );
  });

  it("reports kubeconfig-client-certificate-expired when the client certificate is not valid yet", () => {
    expectInvalid(
      parseCredentialsSecret(withCert(future.certPem, future.keyPem), strict),
      "kubeconfig-client-certificate-expired",
      /not valid before 2099-01-01/,
    );
  });

  it("reports kubeconfig-bad-client-certificate when the client key belongs to another certificate", () => {
    expectInvalid(
      parseCredentialsSecret(withCert(client.certPem, other.keyPem), strict),
      "kubeconfig-bad-client-certificate",
      /client-key-data does not belong to its client certificate \(CN=reader\)/,
    );
  });

  it("reports kubeconfig-bad-client-certificate when client-certificate-data is not a certificate", () => {
    expectInvalid(
      parseCredentialsSecret(withCert("not a certificate", client.keyPem), strict),
      "kubeconfig-bad-client-certificate",
      /client-certificate-data is not a PEM certificate/,
    );
  });

  it("reports kubeconfig-bad-ca when certificate-authority-data holds no PEM certificate", () => {
    expectInvalid(
      parseCredentialsSecret(withCert(client.certPem, client.keyPem, "just some text"), strict),
      "kubeconfig-bad-ca",
      /certificate-authority-data holds no PEM certificate/,
    );
  });

  it("accepts tokenFile and certificate-authority file paths when file paths are allowed, and reads them", () => {
    const tokenPath = join(dir, "token");
    writeFileSync(tokenPath, "file-t0ken\n");
    const parsed = parseCredentialsSecret(
      secret({
        kubeconfig: rawKubeconfig(
          `    tokenFile: ${tokenPath}\n`,
          `    server: https://127.0.0.1:6443\n    certificate-authority: ${ca.certPath}\n`,
        ),
      }),
      { allowFilePaths: true },
    );
    assert.equal(parsed.kind, "valid", JSON.stringify(parsed));
    if (parsed.kind !== "valid") return;
    assert.deepEqual(parsed.registration.connection.auth, { kind: "token", token: "file-t0ken" });
    assert.equal(parsed.registration.connection.caPem, ca.certPem);
  });

  it("accepts client-certificate and client-key file paths when file paths are allowed, and reads them", () => {
    const parsed = parseCredentialsSecret(
      secret({
        kubeconfig: rawKubeconfig(
          `    client-certificate: ${client.certPath}\n    client-key: ${client.keyPath}\n`,
          `    server: https://127.0.0.1:6443\n    certificate-authority-data: ${Buffer.from(ca.certPem).toString("base64")}\n`,
        ),
      }),
      { allowFilePaths: true },
    );
    assert.equal(parsed.kind, "valid", JSON.stringify(parsed));
    if (parsed.kind !== "valid") return;
    assert.deepEqual(parsed.registration.connection.auth, {
      kind: "client-certificate",
      certPem: client.certPem,
      keyPem: client.keyPem,
    });
  });

  it("still refuses exec when file paths are allowed", () => {
    expectInvalid(
      parseCredentialsSecret(
        secret({
          kubeconfig: rawKubeconfig(
            "    exec:\n      command: /bin/true\n      apiVersion: client.authentication.k8s.io/v1\n",
          ),
        }),
        { allowFilePaths: true },
      ),
      "kubeconfig-forbidden-auth",
      /uses exec/,
    );
  });
});

describe("parseCredentialsSecret with several contexts", () => {
  const twoContexts = (current: string | undefined): string =>
    [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: a",
      "  cluster: {server: https://10.0.0.1:6443}",
      "- name: b",
      "  cluster: {server: https://10.0.0.2:6443}",
      "users:",
      "- name: u",
      "  user: {token: t}",
      "contexts:",
      "- name: ctx-a",
      "  context: {cluster: a, user: u}",
      "- name: ctx-b",
      "  context: {cluster: b, user: u}",
      ...(current ? [`current-context: ${current}`] : []),
      "",
    ].join("\n");

  it("uses the context current-context names when there are several", () => {
    const parsed = parseCredentialsSecret(secret({ kubeconfig: twoContexts("ctx-b") }), strict);
    assert.equal(parsed.kind, "valid", JSON.stringify(parsed));
    if (parsed.kind === "valid") assert.equal(parsed.registration.connection.server, "https://10.0.0.2:6443");
  });

  it("reports kubeconfig-no-context naming every context when there are several and no current-context", () => {
    const parsed = parseCredentialsSecret(secret({ kubeconfig: twoContexts(undefined) }), strict);
    assert.equal(parsed.kind, "invalid");
    if (parsed.kind !== "invalid") return;
    assert.equal(parsed.reason, "kubeconfig-no-context");
    assert.match(parsed.message, /several contexts \(ctx-a, ctx-b\) and no current-context/);
  });

  it("reports kubeconfig-no-context and the context to set when the only context is not current", () => {
    const parsed = parseCredentialsSecret(
      secret({ kubeconfig: goodKubeconfig.replace(/current-context: .*\n/, "") }),
      strict,
    );
    assert.equal(parsed.kind, "invalid");
    if (parsed.kind === "invalid") assert.match(parsed.message, /set current-context to east/);
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

  it("orders the registered clusters by their Secret's creation time, then its name (SPEC §11), not by cluster name", () => {
    const named = (cluster: string, name: string, created: string) =>
      secret({
        name,
        uid: name,
        created,
        annotations: {
          "mirror.linkerd.io/cluster-name": cluster,
          "mirror.linkerd.io/remote-cluster-domain": "cluster.local",
        },
      });
    const state = computeRegistry(
      [
        entry(named("alpha", "s-alpha", "2026-03-01T00:00:00Z")),
        entry(named("west", "s-b", "2026-01-01T00:00:00Z")),
        entry(named("east", "s-a", "2026-01-01T00:00:00Z")),
        entry(named("west", "s-dup", "2025-12-01T00:00:00Z")),
      ],
      new Map([["west", "s-b"]]),
    );
    assert.deepEqual(state.order, ["east", "west", "alpha"]);
    assert.deepEqual(state.keep, ["alpha", "east", "west"]);
    // The winning Secret's creation time: no MCS export of the cluster ranks before it (SPEC §12).
    assert.deepEqual(state.registeredAt, {
      alpha: "2026-03-01T00:00:00Z",
      east: "2026-01-01T00:00:00Z",
      west: "2026-01-01T00:00:00Z",
    });
  });
});
