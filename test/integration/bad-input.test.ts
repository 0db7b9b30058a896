/**
 * End to end on real API servers: bad and hostile input (issue "Survive faults", §3).
 * Every case is one test, named after it, and asserts two things:
 * - a specific, actionable error: a log line, a Kubernetes Event on the Secret and/or a
 *   status entry (row state, reason, problem, gateway reason);
 * - nothing changes that should not: the healthy cluster registered throughout keeps
 *   mirroring (its mirrors keep their uids, new Services are still mirrored), the bad
 *   input creates no mirror, and a user's own local objects are never touched.
 *
 * One control plane and one in-process controller for the whole file. Remote `west`
 * backs the healthy cluster `healthy`; remote `east` holds the hostile remote objects,
 * registered as cluster `hostile`. Secrets that register nothing point at `east` when
 * they need a real server (an invalid Secret must not mirror anything anyway).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import type { V1Secret } from "@kubernetes/client-node";
import { type FaultProxy, startFaultProxyFor } from "../../sandbox/fault-proxy.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { createCa } from "../../sandbox/pki.ts";
import {
  CLUSTER_NAME,
  GATEWAY_NAME,
  GATEWAY_NS,
  KUBECONFIG_KEY,
  MIRRORED_SERVICE,
  REMOTE_CLUSTER_DOMAIN,
  SECRET_TYPE,
} from "../../src/core/labels.ts";
import { createLogger } from "../../src/log.ts";
import type { ClusterRow } from "../../src/status/fleet-view.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually, sleep, statusCode } from "../helpers/kube.ts";
import { waitForMarker, waitForWriterIdle } from "../helpers/settle.ts";
import { waitForSecretRow } from "../helpers/supervision.ts";

const run = promisify(execFile);
const b64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");
interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

describe("bad and hostile input", () => {
  let fleet: Fleet;
  let controller: Supervisor;
  let scratch: string;
  let logFile: string;
  const servers: (Server | HttpServer)[] = [];
  const proxies: FaultProxy[] = [];
  /** uids of the healthy cluster's mirrors and of a user's local objects, taken before any case ran. */
  let healthyBefore: Record<string, string | undefined>;
  let userBefore: { service: string | undefined; resourceVersion: string | undefined };
  let guard: { stop(): Promise<{ reads: number; problems: string[] }> };

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), "fleet-mirror-bad-input-"));
    logFile = join(scratch, "controller.log");
    fleet = await Fleet.start(["east", "west"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createGateway("west", { ingress: [{ ip: "198.51.100.20" }] });
    // The healthy cluster, registered throughout, and a user's own local Service.
    await fleet.createService("west", "steady", "web");
    await fleet.createService("west", "steady", "api");
    await fleet.register("west", { clusterName: "healthy" });
    await fleet.ensureNamespace("local", "users");
    await fleet.local.createNamespacedService({
      namespace: "users",
      body: { metadata: { name: "own" }, spec: { ports: [{ name: "http", port: 80 }], selector: { app: "own" } } },
    });
    await fleet.register("east", { clusterName: "hostile" });

    controller = new Supervisor({
      // The "not Kubernetes" cases serve plain http:// pages, which a Secret may name only
      // with --allow-insecure-remotes (refused without it: insecure-remotes.test.ts).
      config: fleet.config({ logLevel: "info", logFile, allowInsecureRemotes: true }),
      localConnection: fleet.controllerConnection(),
      logger: createLogger("info", { actor: "supervisor" }, logFile),
    });
    controller.start();
    await fleet.waitForEndpoints("steady", "web-healthy", (ep) => (ep.subsets?.length ?? 0) > 0);
    await fleet.waitForEndpoints("steady", "api-healthy", (ep) => (ep.subsets?.length ?? 0) > 0);
    healthyBefore = await healthyUids();
    const own = await fleet.local.readNamespacedService({ namespace: "users", name: "own" });
    userBefore = { service: own.metadata?.uid, resourceVersion: own.metadata?.resourceVersion };
    guard = guardHealthy(healthyBefore);
  });

  after(async () => {
    await guard?.stop();
    await controller?.stop();
    await Promise.all(proxies.map((p) => p.stop()));
    await fleet?.stop();
    await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  // -- helpers ---------------------------------------------------------------------

  async function healthyUids(): Promise<Record<string, string | undefined>> {
    const out: Record<string, string | undefined> = {};
    for (const name of ["web-healthy", "api-healthy"]) {
      for (const kind of ["Service", "Endpoints"] as const) {
        try {
          const obj =
            kind === "Service"
              ? await fleet.local.readNamespacedService({ namespace: "steady", name })
              : await fleet.local.readNamespacedEndpoints({ namespace: "steady", name });
          out[`${kind} steady/${name}`] = obj.metadata?.uid;
        } catch (error) {
          if (statusCode(error) !== 404) throw error;
          out[`${kind} steady/${name}`] = undefined;
        }
      }
    }
    return out;
  }

  /** Polls the healthy mirrors every 200 ms and records any moment one was missing or replaced. */
  function guardHealthy(expected: Record<string, string | undefined>): {
    stop(): Promise<{ reads: number; problems: string[] }>;
  } {
    let stopped = false;
    let reads = 0;
    const problems: string[] = [];
    const loop = (async () => {
      while (!stopped) {
        try {
          const now = await healthyUids();
          reads += 1;
          for (const [key, uid] of Object.entries(expected)) {
            if (now[key] !== uid) problems.push(`${key} uid ${String(now[key])}`);
          }
        } catch {
          // a transient read error of the test itself is not a finding
        }
        await sleep(200);
      }
    })();
    return {
      async stop() {
        stopped = true;
        await loop;
        return { reads, problems };
      },
    };
  }

  function secretOf(
    name: string,
    opts: { cluster?: string | undefined; domain?: string | undefined; kubeconfig?: string | undefined },
  ): V1Secret {
    return {
      metadata: {
        name,
        namespace: CONTROLLER_NAMESPACE,
        annotations: {
          ...(opts.cluster !== undefined ? { [CLUSTER_NAME]: opts.cluster } : {}),
          ...(opts.domain !== undefined ? { [REMOTE_CLUSTER_DOMAIN]: opts.domain } : {}),
        },
      },
      type: SECRET_TYPE,
      ...(opts.kubeconfig !== undefined ? { data: { [KUBECONFIG_KEY]: b64(opts.kubeconfig) } } : {}),
    };
  }

  function clusterRow(cluster: string): ClusterRow | undefined {
    return controller.status().clusters.find((r) => r.cluster === cluster && r.state !== "duplicate");
  }

  function logLines(): LogLine[] {
    let text = "";
    try {
      text = readFileSync(logFile, "utf8");
    } catch {
      return [];
    }
    const lines: LogLine[] = [];
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      try {
        lines.push(JSON.parse(line) as LogLine);
      } catch {
        // a line cut by a concurrent write: ignore
      }
    }
    return lines;
  }

  async function waitForLog(what: string, match: (line: LogLine) => boolean): Promise<LogLine> {
    return eventually(`log line: ${what}`, () => logLines().find(match));
  }

  /** Every local Service and Endpoints labelled as a mirror of `cluster`. */
  async function mirrorsOf(cluster: string): Promise<string[]> {
    const labelSelector = `${MIRRORED_SERVICE}=true,${CLUSTER_NAME}=${cluster}`;
    const services = await fleet.local.listServiceForAllNamespaces({ labelSelector });
    const endpoints = await fleet.local.listEndpointsForAllNamespaces({ labelSelector });
    return [
      ...services.items.map((s) => `Service ${s.metadata?.namespace}/${s.metadata?.name}`),
      ...endpoints.items.map((e) => `Endpoints ${e.metadata?.namespace}/${e.metadata?.name}`),
    ].sort();
  }

  /** The healthy cluster still mirrors: a Service exported now shows up locally. */
  async function healthyStillMirrors(tag: string): Promise<void> {
    await fleet.createService("west", "steady", `probe-${tag}`);
    await fleet.waitForMirror("steady", `probe-${tag}-healthy`);
    assert.equal(clusterRow("healthy")?.state, "synced");
  }

  /** An invalid Secret: row `invalid` with the reason, an InvalidCredentials Event, an error log line, nothing registered. */
  async function expectInvalid(
    secretName: string,
    reason: string,
    mentions: RegExp,
    cluster: string | undefined,
  ): Promise<void> {
    const row = await waitForSecretRow(controller, secretName, (r) => r.state === "invalid", "to be invalid");
    assert.ok(row.reason?.startsWith(`${reason}: `), `row reason ${row.reason} starts with ${reason}`);
    assert.match(row.reason ?? "", mentions);
    const event = await fleet.waitForSecretEvent(secretName, "InvalidCredentials");
    assert.equal(event.type, "Warning");
    assert.match(event.message ?? "", mentions);
    const line = await waitForLog(
      `credentials Secret ${secretName} registers nothing`,
      (l) => l.secret === `${CONTROLLER_NAMESPACE}/${secretName}` && l.reason === reason,
    );
    assert.equal(line.level, 50, "logged as an error");
    if (cluster !== undefined) {
      assert.equal(controller.registry.registered.has(cluster), false);
      assert.equal(controller.actorThread(cluster), undefined);
      assert.deepEqual(await mirrorsOf(cluster), []);
    }
  }

  /**
   * A registered cluster whose remote API fails: its row stays syncing (never synced),
   * the row's reason names the failure, the actor logs a warning with the failure's
   * metric-friendly reason, and it mirrors nothing.
   */
  async function expectRemoteFailing(cluster: string, rowReason: RegExp, failureReason: RegExp): Promise<void> {
    await eventually(`cluster ${cluster} to be registered`, () =>
      controller.registry.registered.has(cluster) ? true : undefined,
    );
    const row = await eventually(
      () => `status row of ${cluster} to be syncing with a reason (now ${JSON.stringify(clusterRow(cluster))})`,
      () => {
        const r = clusterRow(cluster);
        return r && (r.state === "syncing" || r.state === "stale") && r.reason !== undefined ? r : undefined;
      },
    );
    assert.match(row.reason ?? "", rowReason);
    const line = await waitForLog(`remote API failure of ${cluster}`, (l) => {
      const failure = l.failure as { reason?: unknown } | undefined;
      return l.cluster === cluster && typeof failure?.reason === "string" && failureReason.test(failure.reason);
    });
    assert.equal(line.level, 40, "logged as a warning");
    assert.deepEqual(await mirrorsOf(cluster), []);
  }

  async function closedPort(): Promise<number> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address && typeof address === "object");
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return address.port;
  }

  /** A plain HTTP server (not Kubernetes) answering every request with `status` and an HTML page. */
  async function htmlServer(status: number): Promise<string> {
    const server = createHttpServer((_req, res) => {
      res.writeHead(status, { "content-type": "text/html" });
      res.end("<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>\n");
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    assert.ok(address && typeof address === "object");
    return `http://127.0.0.1:${address.port}`;
  }

  async function eastTokenKubeconfig(overrides: { server?: string; caPem?: string } = {}): Promise<string> {
    const east = fleet.plane.cluster("east");
    return renderKubeconfig({
      cluster: "east",
      server: overrides.server ?? east.server,
      caPem: overrides.caPem ?? east.caPem,
      user: "fleet-mirror",
      auth: { token: await fleet.remoteToken("east") },
    });
  }

  /** A kubeconfig with a raw `user:` block (indented 4) and a valid east cluster entry. */
  function rawKubeconfig(userLines: string[], clusterExtra: string[] = []): string {
    const east = fleet.plane.cluster("east");
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: east",
      "  cluster:",
      `    server: ${JSON.stringify(east.server)}`,
      ...(clusterExtra.length > 0 ? clusterExtra : [`    certificate-authority-data: ${b64(east.caPem)}`]),
      "users:",
      "- name: u",
      "  user:",
      ...userLines,
      "contexts:",
      "- name: east",
      "  context:",
      "    cluster: east",
      "    user: u",
      "current-context: east",
      "",
    ].join("\n");
  }

  /** A client certificate for east's CA that expired in 2020, issued with `openssl ca -startdate/-enddate`. */
  async function expiredClientCertificate(): Promise<{ certPem: string; keyPem: string }> {
    const ca = fleet.plane.ca;
    const dir = mkdtempSync(join(scratch, "expired-"));
    writeFileSync(join(dir, "index.txt"), "");
    writeFileSync(join(dir, "serial"), "1000\n");
    writeFileSync(
      join(dir, "ca.cnf"),
      [
        "[ca]",
        "default_ca = CA_default",
        "[CA_default]",
        `dir = ${dir}`,
        `database = ${dir}/index.txt`,
        `new_certs_dir = ${dir}`,
        `serial = ${dir}/serial`,
        "default_md = sha256",
        "policy = policy_any",
        "unique_subject = no",
        "copy_extensions = none",
        "x509_extensions = client_ext",
        "[policy_any]",
        "commonName = supplied",
        "organizationName = optional",
        "[client_ext]",
        "basicConstraints = critical,CA:FALSE",
        "keyUsage = critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage = clientAuth",
        "",
      ].join("\n"),
    );
    const key = join(dir, "client.key");
    const csr = join(dir, "client.csr");
    const crt = join(dir, "client.crt");
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
      "/O=system:masters/CN=expired-admin",
    ]);
    await run("openssl", [
      "ca",
      "-batch",
      "-config",
      join(dir, "ca.cnf"),
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
      "20200101000000Z",
      "-enddate",
      "20200102000000Z",
    ]);
    return { certPem: readFileSync(crt, "utf8"), keyPem: readFileSync(key, "utf8") };
  }

  /** Registers remote east through a fault proxy as `cluster`, waits for it to be synced with a first mirror. */
  async function registerThroughProxy(cluster: string, namespace: string): Promise<FaultProxy> {
    const proxy = await startFaultProxyFor(fleet.plane, "east");
    proxies.push(proxy);
    const east = fleet.plane.cluster("east");
    const kubeconfig = renderKubeconfig({
      cluster: "east-proxy",
      server: proxy.url,
      caPem: east.caPem,
      user: "fleet-mirror",
      auth: { token: await fleet.remoteToken("east") },
    });
    await fleet.createService("east", namespace, "before");
    await fleet.createSecret(secretOf(cluster, { cluster, domain: "cluster.local", kubeconfig }));
    await fleet.waitForEndpoints(namespace, `before-${cluster}`, (ep) => (ep.subsets?.length ?? 0) > 0);
    return proxy;
  }

  function problemOf(cluster: string, remote: string) {
    return clusterRow(cluster)?.problems.find((p) => p.remote === remote);
  }

  async function expectSkipped(remote: string, reason: string, mentions: RegExp): Promise<void> {
    const problem = await eventually(`problem ${reason} for ${remote}`, () => {
      const p = problemOf("hostile", remote);
      return p?.reason === reason ? p : undefined;
    });
    assert.match(problem.message, mentions);
    const event = await fleet.waitForSecretEvent("cluster-credentials-hostile", "MirrorSkipped", (e) =>
      (e.message ?? "").includes(remote),
    );
    assert.equal(event.type, "Warning");
    assert.match(event.message ?? "", new RegExp(reason));
    await waitForLog(`warning: ${remote} is not mirrored`, (l) => l.cluster === "hostile" && l.remote === remote);
  }

  // -- the cases -------------------------------------------------------------------

  interface Case {
    readonly name: string;
    readonly run: () => Promise<void>;
  }

  const invalidSecret = (
    name: string,
    id: string,
    secret: () => Promise<V1Secret> | V1Secret,
    reason: string,
    mentions: RegExp,
    cluster: string | undefined = id,
  ): Case => ({
    name,
    run: async () => {
      await fleet.createSecret(await secret());
      await expectInvalid(id, reason, mentions, cluster);
    },
  });

  const cases: Case[] = [
    // Secrets ----------------------------------------------------------------------
    invalidSecret(
      "a Secret without the cluster-name annotation is invalid: missing-cluster-name",
      "bad-noname",
      async () => secretOf("bad-noname", { domain: "cluster.local", kubeconfig: await eastTokenKubeconfig() }),
      "missing-cluster-name",
      /mirror\.linkerd\.io\/cluster-name/,
      undefined,
    ),
    invalidSecret(
      "a Secret without the remote-cluster-domain annotation is invalid: missing-cluster-domain",
      "bad-nodomain",
      async () => secretOf("bad-nodomain", { cluster: "bad-nodomain", kubeconfig: await eastTokenKubeconfig() }),
      "missing-cluster-domain",
      /mirror\.linkerd\.io\/remote-cluster-domain/,
    ),
    invalidSecret(
      "a Secret without the kubeconfig key is invalid: missing-kubeconfig",
      "bad-nokubeconfig",
      () => secretOf("bad-nokubeconfig", { cluster: "bad-nokubeconfig", domain: "cluster.local" }),
      "missing-kubeconfig",
      /kubeconfig is missing/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig is not YAML is invalid: kubeconfig-unparsable",
      "bad-yaml",
      () =>
        secretOf("bad-yaml", {
          cluster: "bad-yaml",
          domain: "cluster.local",
          kubeconfig: "apiVersion: v1\nclusters: [ {server: \n",
        }),
      "kubeconfig-unparsable",
      /not valid YAML/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig is empty is invalid: kubeconfig-unparsable",
      "bad-empty",
      () => secretOf("bad-empty", { cluster: "bad-empty", domain: "cluster.local", kubeconfig: " \n" }),
      "kubeconfig-unparsable",
      /kubeconfig is empty/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig has no current-context is invalid: kubeconfig-no-context",
      "bad-nocontext",
      async () =>
        secretOf("bad-nocontext", {
          cluster: "bad-nocontext",
          domain: "cluster.local",
          kubeconfig: (await eastTokenKubeconfig()).replace(/current-context: .*\n/, ""),
        }),
      "kubeconfig-no-context",
      /no current-context: set current-context to east/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig has several contexts and no current-context is invalid: kubeconfig-no-context",
      "bad-contexts",
      async () => {
        const kubeconfig = (await eastTokenKubeconfig())
          .replace(/current-context: .*\n/, "")
          .replace(
            "contexts:\n",
            'contexts:\n- name: "other"\n  context:\n    cluster: "east"\n    user: "fleet-mirror"\n',
          );
        return secretOf("bad-contexts", { cluster: "bad-contexts", domain: "cluster.local", kubeconfig });
      },
      "kubeconfig-no-context",
      /several contexts \(other, east\) and no current-context/,
    ),
    {
      name: "a Secret whose kubeconfig has several contexts and a current-context uses that context (valid)",
      run: async () => {
        // The other context points at a closed port: using it would never sync.
        const west = fleet.plane.cluster("west");
        const refused = await closedPort();
        const kubeconfig = [
          "apiVersion: v1",
          "kind: Config",
          "clusters:",
          "- name: dead",
          "  cluster:",
          `    server: "https://127.0.0.1:${refused}"`,
          `    certificate-authority-data: ${b64(west.caPem)}`,
          "- name: west",
          "  cluster:",
          `    server: ${JSON.stringify(west.server)}`,
          `    certificate-authority-data: ${b64(west.caPem)}`,
          "users:",
          "- name: reader",
          "  user:",
          `    token: ${JSON.stringify(await fleet.remoteToken("west"))}`,
          "contexts:",
          "- name: dead",
          "  context: {cluster: dead, user: reader}",
          "- name: west",
          "  context: {cluster: west, user: reader}",
          "current-context: west",
          "",
        ].join("\n");
        await fleet.createSecret(secretOf("multi-ctx", { cluster: "multi-ctx", domain: "cluster.local", kubeconfig }));
        await fleet.waitForEndpoints("steady", "web-multi-ctx", (ep) => (ep.subsets?.length ?? 0) > 0);
        const row = await waitForSecretRow(controller, "multi-ctx", (r) => r.state === "synced", "to be synced");
        assert.equal(row.reason, undefined);
        await fleet.waitForSecretEvent("multi-ctx", "ClusterRegistered", (e) =>
          (e.message ?? "").includes(west.server),
        );
        assert.deepEqual(await fleet.secretEvents("multi-ctx", "InvalidCredentials"), []);
      },
    },
    {
      name: "a Secret whose server refuses connections registers, stays syncing with reason ECONNREFUSED, and mirrors nothing",
      run: async () => {
        const port = await closedPort();
        const kubeconfig = await eastTokenKubeconfig({ server: `https://127.0.0.1:${port}` });
        await fleet.createSecret(secretOf("unreach", { cluster: "unreach", domain: "cluster.local", kubeconfig }));
        await expectRemoteFailing("unreach", /ECONNREFUSED/, /^ECONNREFUSED$/);
      },
    },
    {
      name: "a Secret whose server is not Kubernetes (HTML page, 200) stays syncing with reason decode",
      run: async () => {
        const server = await htmlServer(200);
        const kubeconfig = await eastTokenKubeconfig({ server });
        await fleet.createSecret(secretOf("html-200", { cluster: "html-200", domain: "cluster.local", kubeconfig }));
        await expectRemoteFailing("html-200", /DECODE.*not valid JSON|list answer has no items/, /^decode$/);
      },
    },
    {
      name: "a Secret whose server is not Kubernetes (HTML page, 404) stays syncing with reason http-404",
      run: async () => {
        const server = await htmlServer(404);
        const kubeconfig = await eastTokenKubeconfig({ server });
        await fleet.createSecret(secretOf("html-404", { cluster: "html-404", domain: "cluster.local", kubeconfig }));
        await expectRemoteFailing("html-404", /404/, /^http-404$/);
      },
    },
    {
      name: "a Secret whose CA is of another PKI stays syncing with a TLS reason naming the certificate problem",
      run: async () => {
        const other = await createCa(scratch, "other-pki");
        const kubeconfig = await eastTokenKubeconfig({ caPem: other.certPem });
        await fleet.createSecret(secretOf("bad-ca", { cluster: "bad-ca", domain: "cluster.local", kubeconfig }));
        await expectRemoteFailing(
          "bad-ca",
          /TLS: the server's certificate is not trusted.*(UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT)/,
          /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)$/,
        );
      },
    },
    invalidSecret(
      "a Secret with an expired client certificate is invalid: kubeconfig-client-certificate-expired",
      "bad-expired",
      async () => {
        const east = fleet.plane.cluster("east");
        const { certPem, keyPem } = await expiredClientCertificate();
        const kubeconfig = renderKubeconfig({
          cluster: "east",
          server: east.server,
          caPem: east.caPem,
          user: "expired",
          auth: { clientCertPem: certPem, clientKeyPem: keyPem },
        });
        return secretOf("bad-expired", { cluster: "bad-expired", domain: "cluster.local", kubeconfig });
      },
      "kubeconfig-client-certificate-expired",
      /expired on 2020-01-02T00:00:00\.000Z/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig uses exec is refused: kubeconfig-forbidden-auth",
      "bad-exec",
      () =>
        secretOf("bad-exec", {
          cluster: "bad-exec",
          domain: "cluster.local",
          kubeconfig: rawKubeconfig([
            "    exec:",
            "      apiVersion: client.authentication.k8s.io/v1",
            "      command: /bin/true",
            "      interactiveMode: Never",
          ]),
        }),
      "kubeconfig-forbidden-auth",
      /uses exec/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig uses auth-provider is refused: kubeconfig-forbidden-auth",
      "bad-authprovider",
      () =>
        secretOf("bad-authprovider", {
          cluster: "bad-authprovider",
          domain: "cluster.local",
          kubeconfig: rawKubeconfig(["    auth-provider:", "      name: oidc"]),
        }),
      "kubeconfig-forbidden-auth",
      /uses auth-provider/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig uses tokenFile is refused: kubeconfig-forbidden-auth",
      "bad-tokenfile",
      () =>
        secretOf("bad-tokenfile", {
          cluster: "bad-tokenfile",
          domain: "cluster.local",
          kubeconfig: rawKubeconfig(["    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"]),
        }),
      "kubeconfig-forbidden-auth",
      /uses tokenFile/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig names a client-certificate file is refused: kubeconfig-forbidden-auth",
      "bad-certfile",
      () =>
        secretOf("bad-certfile", {
          cluster: "bad-certfile",
          domain: "cluster.local",
          kubeconfig: rawKubeconfig(["    client-certificate: /etc/ssl/c.crt", "    client-key: /etc/ssl/c.key"]),
        }),
      "kubeconfig-forbidden-auth",
      /uses client-certificate, client-key/,
    ),
    invalidSecret(
      "a Secret whose kubeconfig names a certificate-authority file is refused: kubeconfig-forbidden-auth",
      "bad-cafile",
      () =>
        secretOf("bad-cafile", {
          cluster: "bad-cafile",
          domain: "cluster.local",
          kubeconfig: rawKubeconfig(['    token: "x"'], ["    certificate-authority: /etc/ssl/certs/ca.crt"]),
        }),
      "kubeconfig-forbidden-auth",
      /uses certificate-authority/,
    ),
    invalidSecret(
      "a Secret whose cluster name is not a DNS label is invalid: invalid-cluster-name",
      "bad-dnsname",
      async () =>
        secretOf("bad-dnsname", {
          cluster: "East_Cluster",
          domain: "cluster.local",
          kubeconfig: await eastTokenKubeconfig(),
        }),
      "invalid-cluster-name",
      /East_Cluster/,
      undefined,
    ),
    invalidSecret(
      "a Secret whose cluster name is 64 characters long is invalid: invalid-cluster-name",
      "bad-longname",
      async () =>
        secretOf("bad-longname", {
          cluster: "c".repeat(64),
          domain: "cluster.local",
          kubeconfig: await eastTokenKubeconfig(),
        }),
      "invalid-cluster-name",
      /63/,
      undefined,
    ),
    {
      name: "a second Secret for an already registered cluster name is a duplicate: DuplicateCluster, the winner untouched",
      run: async () => {
        const before = await healthyUids();
        await fleet.createSecret(
          secretOf("healthy-again", {
            cluster: "healthy",
            domain: "cluster.local",
            kubeconfig: await eastTokenKubeconfig(),
          }),
        );
        const row = await waitForSecretRow(
          controller,
          "healthy-again",
          (r) => r.state === "duplicate",
          "to be duplicate",
        );
        assert.match(row.reason ?? "", /already registered by fleet-mirror\/cluster-credentials-healthy/);
        const event = await fleet.waitForSecretEvent("healthy-again", "DuplicateCluster");
        assert.equal(event.type, "Warning");
        await waitForLog(
          "duplicate cluster",
          (l) => l.secret === `${CONTROLLER_NAMESPACE}/healthy-again` && l.level === 50,
        );
        assert.equal(
          controller.registry.registered.get("healthy")?.secretKey,
          `${CONTROLLER_NAMESPACE}/cluster-credentials-healthy`,
        );
        // The registry change reached the writer (two reports after it, nothing queued or in
        // flight): a wrong write to the healthy cluster's mirrors would have been made.
        await waitForWriterIdle(controller, { reports: 2 });
        assert.deepEqual(await healthyUids(), before);
        // Nothing of east is mirrored under the healthy cluster's name.
        assert.deepEqual(
          (await mirrorsOf("healthy")).filter((m) => !m.includes(" steady/")),
          [],
        );
      },
    },

    // Remote objects ---------------------------------------------------------------
    {
      name: "a remote Service whose mirror name would exceed 63 characters is skipped: mirror-name-invalid, MirrorSkipped",
      run: async () => {
        const name = `s${"x".repeat(56)}`; // 57 + "-hostile" = 65
        await fleet.createService("east", "hostile-long", name);
        await expectSkipped(`hostile-long/${name}`, "mirror-name-invalid", /not a valid Service name/);
        assert.deepEqual(await mirrorsOf("hostile").then((m) => m.filter((x) => x.includes("hostile-long/"))), []);
      },
    },
    {
      name: "a remote Service without ports (headless, no ports) is skipped: no-ports, MirrorSkipped",
      run: async () => {
        await fleet.ensureNamespace("east", "hostile-noports");
        await fleet.api("east").createNamespacedService({
          namespace: "hostile-noports",
          body: {
            metadata: { name: "bare", annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gateway" } },
            spec: { clusterIP: "None", selector: { app: "bare" } },
          },
        });
        await expectSkipped("hostile-noports/bare", "no-ports", /no ports/);
        assert.equal(await fleet.localService("hostile-noports", "bare-hostile"), undefined);
      },
    },
    {
      name: "a remote Service with 1000 ports is mirrored with all 1000 ports (the API server sets no limit)",
      run: async () => {
        const ports = Array.from({ length: 1000 }, (_, i) => ({
          name: `p${i}`,
          port: 10_000 + i,
          protocol: "TCP",
        }));
        await fleet.createService("east", "hostile-ports", "many", { ports });
        const svc = await fleet.waitForMirror(
          "hostile-ports",
          "many-hostile",
          (s) => (s.spec?.ports?.length ?? 0) === 1000,
          60_000,
        );
        assert.deepEqual(
          (svc.spec?.ports ?? []).map((p) => p.port).sort((a, b) => a - b),
          ports.map((p) => p.port),
        );
        const ep = await fleet.waitForEndpoints(
          "hostile-ports",
          "many-hostile",
          (e) => (e.subsets?.[0]?.ports?.length ?? 0) === 1000,
          60_000,
        );
        assert.ok(ep.subsets?.[0]?.ports?.every((p) => p.port === 4143));
      },
    },
    {
      name: "a remote Service with duplicate port names is rejected by the remote API server (422) and so never mirrored",
      run: async () => {
        await assert.rejects(
          fleet.createService("east", "hostile-dupports", "dup", {
            ports: [
              { name: "http", port: 80, protocol: "TCP" },
              { name: "http", port: 81, protocol: "TCP" },
            ],
          }),
          (error: unknown) => {
            assert.equal(statusCode(error), 422);
            assert.match(String((error as { body?: unknown }).body ?? error), /Duplicate value/);
            return true;
          },
        );
        // A later change on the same remote is mirrored: everything before it was seen.
        await waitForMarker(fleet, "east", { cluster: "hostile" });
        assert.equal(await fleet.localService("hostile-dupports", "dup-hostile"), undefined);
        assert.equal(problemOf("hostile", "hostile-dupports/dup"), undefined);
      },
    },
    {
      name: "a remote Service with a 200 KB annotation and many labels is mirrored without copying its foreign annotations or labels",
      run: async () => {
        const blob = "x".repeat(200 * 1024);
        const labels = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`example.com/l${i}`, `v${i}`]));
        await fleet.createService("east", "hostile-huge", "big", { annotations: { "example.com/blob": blob } });
        await fleet.patchService("east", "hostile-huge", "big", (svc) => {
          if (svc.metadata) svc.metadata.labels = labels;
        });
        const mirror = await fleet.waitForMirror("hostile-huge", "big-hostile");
        const ep = await fleet.waitForEndpoints("hostile-huge", "big-hostile", (e) => (e.subsets?.length ?? 0) > 0);
        for (const obj of [mirror.metadata, ep.metadata]) {
          const annotations = Object.keys(obj?.annotations ?? {});
          assert.deepEqual(
            annotations.filter((k) => !k.startsWith("mirror.linkerd.io/")),
            [],
            "no foreign annotation",
          );
          const foreignLabels = Object.keys(obj?.labels ?? {}).filter((k) => !k.startsWith("mirror.linkerd.io/"));
          assert.deepEqual(foreignLabels, [], "no foreign label");
        }
        assert.ok(JSON.stringify(mirror).length < 10_000, "the mirror stays small");
      },
    },
    {
      name: "an exported remote Service in kube-system is excluded by default: excluded-namespace, MirrorSkipped",
      run: async () => {
        await fleet.createService("east", "kube-system", "sys");
        await expectSkipped("kube-system/sys", "excluded-namespace", /kube-system is excluded/);
        assert.equal(await fleet.localService("kube-system", "sys-hostile"), undefined);
      },
    },
    {
      name: "a remote Service whose gateway annotations point at a namespace that does not exist gets a mirror with empty Endpoints and a gateway reason",
      run: async () => {
        await fleet.createService("east", "hostile-gw1", "web", { gateway: { name: "gw", namespace: "no-such-ns" } });
        await fleet.waitForMirror("hostile-gw1", "web-hostile");
        const ep = await fleet.waitForEndpoints("hostile-gw1", "web-hostile", () => true);
        assert.equal(ep.subsets?.length ?? 0, 0);
        const gw = await eventually("gateway no-such-ns/gw reported unusable", () =>
          clusterRow("hostile")?.gateways.find((g) => g.key === "no-such-ns/gw"),
        );
        assert.equal(gw.usable, false);
        assert.match(gw.reason ?? "", /gateway Service not found/);
      },
    },
    {
      name: "a remote Service whose gateway has no ingress gets a mirror with empty Endpoints and the reason no ingress",
      run: async () => {
        const gw = { name: "gw-noingress", namespace: "hostile-gw2-gateway" };
        await fleet.createGateway("east", gw);
        await fleet.createService("east", "hostile-gw2", "web", { gateway: gw });
        await fleet.waitForMirror("hostile-gw2", "web-hostile");
        const ep = await fleet.waitForEndpoints("hostile-gw2", "web-hostile", () => true);
        assert.equal(ep.subsets?.length ?? 0, 0);
        const view = await eventually("gateway without ingress reported", () =>
          clusterRow("hostile")?.gateways.find((g) => g.key === `${gw.namespace}/${gw.name}` && !g.usable),
        );
        assert.match(view.reason ?? "", /no ingress/);
      },
    },
    {
      name: "a remote Service whose gateway's ingress hostname does not resolve gets a mirror with empty Endpoints, a gateway reason and a warning",
      run: async () => {
        const gw = { name: "gw-nxdomain", namespace: "hostile-gw3-gateway" };
        const hostname = "gateway.does-not-exist.invalid";
        await fleet.createGateway("east", { ...gw, ingress: [{ hostname }] });
        await fleet.createService("east", "hostile-gw3", "web", { gateway: gw });
        await fleet.waitForMirror("hostile-gw3", "web-hostile");
        const ep = await fleet.waitForEndpoints("hostile-gw3", "web-hostile", () => true);
        assert.equal(ep.subsets?.length ?? 0, 0);
        const view = await eventually(
          "gateway with an unresolvable hostname reported",
          () =>
            clusterRow("hostile")?.gateways.find(
              (g) => g.key === `${gw.namespace}/${gw.name}` && !g.usable && g.reason !== undefined,
            ),
          40_000,
        );
        assert.match(view.reason ?? "", new RegExp(hostname.replace(/\./g, "\\.")));
        await waitForLog(`${hostname} does not resolve`, (l) => l.cluster === "hostile" && l.hostname === hostname);
      },
    },
    {
      name: "a remote object that is not valid JSON in the middle of a watch stream is reported (decode), the watch resumes and mirroring goes on",
      run: async () => {
        const proxy = await registerThroughProxy("proxied-json", "proxied-json");
        proxy.setRules({ corruptWatch: "invalid-json" });
        proxy.cutWatches(); // the corruption applies to new watch streams
        await fleet.createService("east", "proxied-json", "during");
        await waitForLog("decode failure through the proxy", (l) => {
          const failure = l.failure as { reason?: unknown } | undefined;
          return l.cluster === "proxied-json" && failure?.reason === "decode";
        });
        proxy.setRules({});
        await fleet.createService("east", "proxied-json", "after");
        await fleet.waitForMirror("proxied-json", "after-proxied-json");
        await fleet.waitForMirror("proxied-json", "during-proxied-json");
        assert.ok(await fleet.localService("proxied-json", "before-proxied-json"), "the first mirror stayed");
      },
    },
    {
      name: "a watch event of the wrong kind is rejected (wrong-kind), not stored, and mirroring goes on",
      run: async () => {
        const proxy = await registerThroughProxy("proxied-kind", "proxied-kind");
        const firstMirror = await fleet.localService("proxied-kind", "before-proxied-kind");
        proxy.setRules({ corruptWatch: "wrong-kind" });
        proxy.cutWatches(); // the corruption applies to new watch streams
        await fleet.createService("east", "proxied-kind", "during");
        const line = await waitForLog("wrong-kind failure through the proxy", (l) => {
          const failure = l.failure as { reason?: unknown } | undefined;
          return l.cluster === "proxied-kind" && failure?.reason === "wrong-kind";
        });
        assert.match(JSON.stringify(line), /has kind \\"Pod\\", expected Service; skipped/);
        proxy.setRules({});
        await fleet.createService("east", "proxied-kind", "after");
        await fleet.waitForMirror("proxied-kind", "after-proxied-kind");
        const still = await fleet.localService("proxied-kind", "before-proxied-kind");
        assert.equal(still?.metadata?.uid, firstMirror?.metadata?.uid, "the first mirror was not touched");
      },
    },
  ];

  for (const [index, c] of cases.entries()) {
    it(c.name, async () => {
      await c.run();
      await healthyStillMirrors(String(index));
    });
  }

  it("left the healthy cluster's mirrors and a user's own local Service untouched throughout", async () => {
    const { reads, problems } = await guard.stop();
    assert.ok(reads > 10, `the healthy mirrors were read ${reads} times`);
    assert.deepEqual(problems, [], "no healthy mirror disappeared or was recreated");
    assert.deepEqual(await healthyUids(), healthyBefore);
    const own = await fleet.local.readNamespacedService({ namespace: "users", name: "own" });
    assert.equal(own.metadata?.uid, userBefore.service);
    assert.equal(own.metadata?.resourceVersion, userBefore.resourceVersion, "the user's Service was never written");
    assert.equal(clusterRow("healthy")?.state, "synced");
    assert.equal(clusterRow("healthy")?.restarts, 0);
  });
});
