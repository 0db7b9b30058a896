/**
 * The operator commands (`link`, `unlink`, `export`, `unexport`, `status`, `check`) run
 * as child processes against a real control plane, with a least-privilege controller
 * running as `fleet-mirror run` (its admin endpoint feeds `status` and `link --wait`): what `link` prints is what the controller accepts, and every
 * command's effect is asserted on the API servers and on the controller's mirrors.
 *
 * One fleet for the whole file, and the tests run in order: each one leaves the fleet
 * healthy for the next (a test that breaks something repairs it), so `check` can be
 * shown to pass on a healthy fleet and to fail on each single fault.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import type { AdminStatus } from "../../src/admin/source.ts";
import { CLUSTER_NAME, GATEWAY_NAME, GATEWAY_NS, MIRRORED_SERVICE, SECRET_TYPE } from "../../src/core/labels.ts";
import type { Secret } from "../../src/core/objects.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import { parseCredentialsSecret } from "../../src/supervisor/registration.ts";
import { type CliResult, cli, show } from "../helpers/cli.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { coreApi, eventually, kubeConfigFromString, statusCode } from "../helpers/kube.ts";

const COMMANDS = ["link", "unlink", "export", "unexport", "status", "check"];

describe("the operator CLI", () => {
  let fleet: Fleet;
  let controller: ControllerProcess;
  let adminUrl: string;
  let scratch: string;
  /** The local cluster as the controller sees it (least privilege). */
  let controllerKc: string;
  /** The local cluster as an administrator sees it. */
  let localAdmin: string;
  let eastAdmin: string;
  let westAdmin: string;
  const ns = ["-n", CONTROLLER_NAMESPACE];

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), "fleet-mirror-cli-"));
    fleet = await Fleet.start(["east", "west"]);
    controllerKc = join(scratch, "controller.kubeconfig");
    writeFileSync(controllerKc, fleet.controllerKubeconfig(), { mode: 0o600 });
    localAdmin = fleet.plane.cluster("local").adminKubeconfigPath;
    eastAdmin = fleet.plane.cluster("east").adminKubeconfigPath;
    westAdmin = fleet.plane.cluster("west").adminKubeconfigPath;
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createGateway("west", { ingress: [{ ip: "198.51.100.20" }] });
    await fleet.createService("east", "shop", "web");
    await fleet.createService("west", "shop", "cart");
    controller = await fleet.startProcess();
    adminUrl = await controller.adminUrl(90_000);
  });

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it("prints help for every command with exit 0, and exits 2 on a usage error", async () => {
    for (const command of COMMANDS) {
      const r = await cli([command, "--help"]);
      assert.equal(r.code, 0, show(r));
      assert.match(r.stdout, new RegExp(`^Usage: fleet-mirror ${command}`), command);
      assert.match(r.stdout, /--kubeconfig/, command);
    }
    const unknown = await cli(["status", "--no-such-flag"]);
    assert.equal(unknown.code, 2, show(unknown));
    const badName = await cli(["link", "--cluster-name", "Not_A_Label", "--remote-kubeconfig", eastAdmin]);
    assert.equal(badName.code, 2, show(badName));
    assert.match(badName.stderr, /--cluster-name "Not_A_Label" must consist of lower case/);
    const top = await cli(["help"]);
    for (const command of COMMANDS) assert.match(top.stdout, new RegExp(`\\n  ${command} `));
  });

  it("link prints a credentials Secret the controller's parser accepts, with a read-only token minted by TokenRequest", async () => {
    const r = await cli([
      "link",
      "--cluster-name",
      "east-print",
      "--remote-kubeconfig",
      eastAdmin,
      ...ns,
      "-o",
      "json",
    ]);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, /clusterrole\/fleet-mirror-remote-reader (created|reused)/);
    assert.match(r.stderr, /warning: the token expires at/);
    const secret = JSON.parse(r.stdout) as Secret & { type: string };
    assert.equal(secret.metadata.name, "cluster-credentials-east-print");
    assert.equal(secret.metadata.namespace, CONTROLLER_NAMESPACE);
    assert.equal(secret.type, SECRET_TYPE);
    const parsed = parseCredentialsSecret(secret, { allowFilePaths: false });
    assert.equal(parsed.kind, "valid", JSON.stringify(parsed));
    // The token reads Services and nothing else (deploy/rbac/remote.yaml).
    const kubeconfig = Buffer.from(secret.data?.["kubeconfig"] ?? "", "base64").toString("utf8");
    const api = coreApi(kubeConfigFromString(kubeconfig));
    await api.listServiceForAllNamespaces({ limit: 1 });
    await assert.rejects(api.listSecretForAllNamespaces({ limit: 1 }), (e) => statusCode(e) === 403);
    const yaml = await cli(["link", "--cluster-name", "east-print", "--remote-kubeconfig", eastAdmin, ...ns]);
    assert.equal(yaml.code, 0, show(yaml));
    assert.match(yaml.stdout, /^apiVersion: v1\n/);
    assert.match(yaml.stdout, /\nkind: Secret\n/);
    assert.match(yaml.stderr, /serviceaccount\/fleet-mirror-reader reused/);
    // --gateway-name/--gateway-namespace: the cluster's default gateway (SPEC §12), as annotations.
    const withGateway = await cli([
      "link",
      "--cluster-name",
      "east-print",
      "--remote-kubeconfig",
      eastAdmin,
      "--gateway-name",
      "edge",
      "--gateway-namespace",
      "mesh",
      ...ns,
      "-o",
      "json",
    ]);
    assert.equal(withGateway.code, 0, show(withGateway));
    const gatewaySecret = JSON.parse(withGateway.stdout) as Secret & { type: string };
    const gatewayParse = parseCredentialsSecret(gatewaySecret, { allowFilePaths: false });
    assert.ok(gatewayParse.kind === "valid", JSON.stringify(gatewayParse));
    assert.deepEqual(gatewayParse.registration.defaultGateway, { name: "edge", namespace: "mesh" });
    const badGateway = await cli([
      "link",
      "--cluster-name",
      "east-print",
      "--remote-kubeconfig",
      eastAdmin,
      "--gateway-name",
      "Edge_1",
      ...ns,
    ]);
    assert.equal(badGateway.code, 1, show(badGateway));
    assert.match(
      badGateway.stderr,
      /would be refused by the controller: annotation mirror\.linkerd\.io\/gateway-name "Edge_1"/,
    );
  });

  it("link --token-source secret fails clearly when the remote has no token controller", async () => {
    const r = await cli([
      "link",
      "--cluster-name",
      "east-secret",
      "--remote-kubeconfig",
      eastAdmin,
      "--token-source",
      "secret",
      "--timeout",
      "2s",
      ...ns,
    ]);
    assert.equal(r.code, 1, show(r));
    assert.match(r.stderr, /token controller \(kube-controller-manager\) does not fill it in/);
    assert.equal(r.stdout, "");
  });

  it("link --apply registers the cluster: the controller mirrors its exported Service; a second run reuses everything", async () => {
    const link = [
      "link",
      "--cluster-name",
      "east",
      "--remote-kubeconfig",
      eastAdmin,
      "--kubeconfig",
      localAdmin,
      ...ns,
    ];
    const first = await cli([...link, "--apply"]);
    assert.equal(first.code, 0, show(first));
    assert.match(first.stdout, /secret\/cluster-credentials-east created in namespace fleet-mirror/);
    const mirror = await fleet.waitForMirror("shop", "web-east");
    const second = await cli([...link, "--apply"]);
    assert.equal(second.code, 0, show(second));
    assert.match(second.stdout, /secret\/cluster-credentials-east updated/);
    assert.match(second.stderr, /clusterrolebinding\/fleet-mirror-remote-reader reused/);
    // Rotation keeps the mirror in place (SPEC §1).
    const after = await fleet.waitForMirror("shop", "web-east");
    assert.equal(after.metadata?.uid, mirror.metadata?.uid);

    const west = await cli([
      "link",
      "--cluster-name",
      "west",
      "--remote-kubeconfig",
      westAdmin,
      "--service-account",
      "mirror-reader",
      "--kubeconfig",
      localAdmin,
      ...ns,
      "--apply",
      "--wait",
      "--admin-url",
      adminUrl,
    ]);
    assert.equal(west.code, 0, show(west));
    assert.match(west.stderr, /clusterrolebinding\/fleet-mirror-remote-reader-mirror-reader created/);
    assert.match(west.stderr, /cluster west synced: 1 exported Service\(s\)/);
    await fleet.waitForMirror("shop", "cart-west");
  });

  it("export and unexport set and remove the gateway annotations; the controller mirrors, then unmirrors", async () => {
    await fleet.createService("east", "shop", "api", { gateway: false });
    const exp = await cli([
      "export",
      "api",
      "-n",
      "shop",
      "--gateway",
      "gateway",
      "--gateway-namespace",
      "gateway",
      "--remote-kubeconfig",
      eastAdmin,
    ]);
    assert.equal(exp.code, 0, show(exp));
    assert.equal(exp.stderr, "", "the gateway is usable: no warning");
    const annotated = await fleet.api("east").readNamespacedService({ namespace: "shop", name: "api" });
    assert.equal(annotated.metadata?.annotations?.[GATEWAY_NAME], "gateway");
    assert.equal(annotated.metadata?.annotations?.[GATEWAY_NS], "gateway");
    await fleet.waitForEndpoints("shop", "api-east", (ep) => ep.subsets?.[0]?.addresses?.[0]?.ip === "198.18.0.10");

    const unexp = await cli(["unexport", "service/api", "-n", "shop", "--kubeconfig", eastAdmin]);
    assert.equal(unexp.code, 0, show(unexp));
    const plain = await fleet.api("east").readNamespacedService({ namespace: "shop", name: "api" });
    assert.equal(plain.metadata?.annotations?.[GATEWAY_NAME], undefined);
    assert.equal(plain.metadata?.annotations?.[GATEWAY_NS], undefined);
    await fleet.waitForNoMirror("shop", "api-east");

    const missing = await cli([
      "export",
      "nope",
      "-n",
      "shop",
      "--gateway",
      "g",
      "--gateway-namespace",
      "g",
      "--kubeconfig",
      eastAdmin,
    ]);
    assert.equal(missing.code, 1, show(missing));
    assert.match(missing.stderr, /service\/nope not found in namespace shop/);
    const noGateway = await cli([
      "export",
      "api",
      "-n",
      "shop",
      "--gateway",
      "absent",
      "--gateway-namespace",
      "gateway",
      "--kubeconfig",
      eastAdmin,
    ]);
    assert.equal(noGateway.code, 0, show(noGateway));
    assert.match(noGateway.stderr, /warning: gateway gateway\/absent: gateway Service not found/);
    // Exported again (to a gateway that does not exist), so east has a mirror more and an
    // unusable gateway: undo it and wait until the controller has, or the next test reads it.
    const cleanup = await cli(["unexport", "api", "-n", "shop", "--kubeconfig", eastAdmin]);
    assert.equal(cleanup.code, 0, show(cleanup));
    await fleet.deleteService("east", "shop", "api");
    await fleet.waitForNoMirror("shop", "api-east");
  });

  it("export --mode label sets the export label (SPEC §12); unexport removes it; the controller follows", async () => {
    await fleet.createService("east", "shop", "labelled", { gateway: false });
    const exp = await cli(["export", "labelled", "-n", "shop", "--mode", "label", "--remote-kubeconfig", eastAdmin]);
    assert.equal(exp.code, 0, show(exp));
    assert.match(
      exp.stdout,
      /exported by label mirror\.linkerd\.io\/exported=true, through the cluster's default gateway/,
    );
    // east has no linkerd-multicluster/linkerd-gateway: a hint, not a failure.
    assert.match(exp.stderr, /warning: gateway linkerd-multicluster\/linkerd-gateway: gateway Service not found/);
    const labelled = await fleet.api("east").readNamespacedService({ namespace: "shop", name: "labelled" });
    assert.equal(labelled.metadata?.labels?.["mirror.linkerd.io/exported"], "true");
    assert.equal(labelled.metadata?.annotations?.[GATEWAY_NAME], undefined);
    const mirror = await fleet.waitForMirror("shop", "labelled-east");
    assert.equal(mirror.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"], "linkerd-gateway");
    const bad = await cli(["export", "labelled", "-n", "shop", "--mode", "carrier-pigeon", "--kubeconfig", eastAdmin]);
    assert.equal(bad.code, 2, show(bad));
    assert.match(bad.stderr, /--mode: "carrier-pigeon" is not one of annotation, label/);
    const unexp = await cli(["unexport", "labelled", "-n", "shop", "--kubeconfig", eastAdmin]);
    assert.equal(unexp.code, 0, show(unexp));
    const plain = await fleet.api("east").readNamespacedService({ namespace: "shop", name: "labelled" });
    assert.equal(plain.metadata?.labels?.["mirror.linkerd.io/exported"], undefined);
    await fleet.waitForNoMirror("shop", "labelled-east");
    await fleet.deleteService("east", "shop", "labelled");
  });

  it("status reads the controller's admin endpoint: a table, -o json and -o yaml", async () => {
    // The state the table below must show, read from the same endpoint first: each cluster
    // synced, with its one mirror and a usable gateway.
    const settled = (r: NonNullable<AdminStatus["clusters"]>[number]): boolean =>
      r.state === "synced" && r.mirrors === 1 && r.gateways.length > 0 && r.gateways.every((g) => g.usable);
    let last: AdminStatus | undefined;
    await eventually(
      () => `east and west synced, 1 mirror each, gateways usable (now ${JSON.stringify(last?.clusters)})`,
      async () => {
        last = (await (await fetch(`${adminUrl}/status`)).json()) as AdminStatus;
        const rows = last.clusters ?? [];
        return rows.length === 2 && rows.every(settled) ? true : undefined;
      },
    );
    const table = await cli(["status", "--admin-url", adminUrl]);
    assert.equal(table.code, 0, show(table));
    const lines = table.stdout.trimEnd().split("\n");
    assert.match(lines[0] ?? "", /^CLUSTER\s+STATE\s+MIRRORS\s+EXPORTS\s+LAST SYNC\s+RESTARTS\s+GATEWAY\s+HEALTH$/);
    // No gateway here has an mc-probe port: none is probed (HEALTH "-"). No remote here
    // has the MCS API's CRDs: EXPORTS says so (SPEC §12).
    assert.match(
      table.stdout,
      /\neast\s+synced\s+1\s+1 annotation \(mcs: not installed\)\s+\d+[sm] ago\s+0\s+usable\s+-\n/,
    );
    assert.match(
      table.stdout,
      /\nwest\s+synced\s+1\s+1 annotation \(mcs: not installed\)\s+\d+[sm] ago\s+0\s+usable\s+-\n/,
    );
    const json = await cli(["status", "--admin-url", adminUrl, "-o", "json"]);
    assert.equal(json.code, 0, show(json));
    const report = JSON.parse(json.stdout) as { source: string; clusters: { cluster: string; state: string }[] };
    assert.equal(report.source, "controller");
    assert.deepEqual(
      report.clusters.map((c) => [c.cluster, c.state]),
      [
        ["east", "synced"],
        ["west", "synced"],
      ],
    );
    const yaml = await cli(["status", "--admin-url", adminUrl, "-o", "yaml"]);
    assert.match(yaml.stdout, /^source: controller\n/);
  });

  it("status falls back to the cluster objects when no controller answers, and says so", async () => {
    const r = await cli(["status", "--admin-url", "http://127.0.0.1:1", "--kubeconfig", controllerKc, ...ns]);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /^controller not reachable; from cluster objects/);
    assert.match(r.stdout, /\neast\s+registered\s+1\s+unknown\s+unknown\s+unknown\s+unknown\s+unknown\n/);
    const json = await cli([
      "status",
      "--admin-url",
      "http://127.0.0.1:1",
      "--kubeconfig",
      controllerKc,
      ...ns,
      "-o",
      "json",
    ]);
    assert.equal(json.code, 0, show(json));
    const report = JSON.parse(json.stdout) as { source: string; clusters: { cluster: string; mirrors: number }[] };
    assert.equal(report.source, "cluster-objects");
    assert.deepEqual(
      report.clusters.map((c) => [c.cluster, c.mirrors]),
      [
        ["east", 1],
        ["west", 1],
      ],
    );
    assert.match(json.stderr, /controller not reachable/);
  });

  const check = (...extra: string[]): Promise<CliResult> =>
    cli(["check", "--kubeconfig", controllerKc, ...ns, ...extra]);

  it("check passes on a healthy fleet with the controller's own identity (exit 0, only ✓)", async () => {
    const r = await check();
    assert.equal(r.code, 0, show(r));
    assert.doesNotMatch(r.stdout, /✗/);
    assert.match(r.stdout, /✓ services cluster-wide: get, list, watch, create, update, delete\n/);
    // The Lease by name, as deploy/rbac/local.yaml grants it.
    assert.match(r.stdout, /✓ leases\.coordination\.k8s\.io\/fleet-mirror in namespace fleet-mirror: get, update\n/);
    assert.match(r.stdout, /✓ secrets in namespace fleet-mirror: get, list, watch/);
    assert.match(r.stdout, /✓ secret fleet-mirror\/cluster-credentials-east registers cluster east/);
    assert.match(r.stdout, /✓ gateway gateway\/gateway usable: 198\.18\.0\.10 port 4143/);
    assert.match(r.stdout, /Status check results are ✓/);
    const json = await check("-o", "json");
    assert.equal(json.code, 0, show(json));
    const parsed = JSON.parse(json.stdout) as { ok: boolean; checks: unknown[] };
    assert.equal(parsed.ok, true);
    assert.ok(parsed.checks.length > 10);
  });

  it("check fails on an invalid Secret", async () => {
    await fleet.local.createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: {
        metadata: { name: "broken", annotations: { [CLUSTER_NAME]: "broken" } },
        type: SECRET_TYPE,
        data: {},
      },
    });
    try {
      const r = await check();
      assert.equal(r.code, 1, show(r));
      assert.match(r.stdout, /✗ secret fleet-mirror\/broken is invalid: missing-cluster-domain/);
    } finally {
      await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: "broken" });
    }
  });

  it("check fails on an unreachable remote", async () => {
    const kubeconfig = renderKubeconfig({
      cluster: "gone",
      server: "https://127.0.0.1:1",
      caPem: fleet.plane.cluster("east").caPem,
      user: "u",
      auth: { token: "t" },
    });
    await fleet.local.createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: fleet.secretBody({ secretName: "gone", clusterName: "gone", kubeconfig }),
    });
    try {
      const r = await check("--timeout", "3s");
      assert.equal(r.code, 1, show(r));
      assert.match(r.stdout, /remote cluster gone\n-+\n✗ https:\/\/127\.0\.0\.1:1: .*ECONNREFUSED/);
      assert.match(r.stdout, /✓ https:\/\/127\.0\.0\.1:\d+ reachable; Services readable/);
    } finally {
      await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: "gone" });
    }
  });

  it("check fails on a user's Service holding a mirror's name", async () => {
    await fleet.local.createNamespacedService({
      namespace: "shop",
      body: { metadata: { name: "taken-east" }, spec: { ports: [{ port: 80 }] } },
    });
    await fleet.createService("east", "shop", "taken");
    try {
      const r = await check();
      assert.equal(r.code, 1, show(r));
      assert.match(
        r.stdout,
        /✗ service\/shop\/taken-east is needed for the mirror of shop\/taken from east but is not a mirror/,
      );
    } finally {
      await fleet.deleteService("east", "shop", "taken");
      await fleet.local.deleteNamespacedService({ namespace: "shop", name: "taken-east" });
    }
  });

  it("check fails when the identity lacks a permission the controller needs", async () => {
    const kc = fleet.kubeConfig("local");
    const weakRules = [
      {
        apiGroups: [""],
        resources: ["services"],
        verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
      },
      { apiGroups: [""], resources: ["endpoints"], verbs: ["get", "list", "watch", "create", "update", "patch"] },
      { apiGroups: [""], resources: ["namespaces"], verbs: ["get", "list", "watch", "create"] },
      { apiGroups: [""], resources: ["events"], verbs: ["create", "patch", "list"] },
    ];
    await mintServiceAccountToken(kc, {
      namespace: CONTROLLER_NAMESPACE,
      serviceAccount: "weak",
      role: { kind: "ClusterRole", name: "fleet-mirror-weak", rules: weakRules },
    });
    const token = await mintServiceAccountToken(kc, {
      namespace: CONTROLLER_NAMESPACE,
      serviceAccount: "weak",
      role: {
        kind: "Role",
        name: "fleet-mirror-weak",
        rules: [{ apiGroups: [""], resources: ["secrets"], verbs: ["get", "list", "watch"] }],
      },
    });
    const local = fleet.plane.cluster("local");
    const weak = join(scratch, "weak.kubeconfig");
    writeFileSync(
      weak,
      renderKubeconfig({ cluster: "local", server: local.server, caPem: local.caPem, user: "weak", auth: { token } }),
    );
    const r = await cli(["check", "--kubeconfig", weak, ...ns]);
    assert.equal(r.code, 1, show(r));
    assert.match(r.stdout, /✗ endpoints cluster-wide: missing delete/);
    assert.match(r.stdout, /✓ services cluster-wide/);
  });

  it("unlink --wait deletes the Secret and returns once the controller has deleted the cluster's mirrors", async () => {
    const r = await cli(["unlink", "--cluster-name", "west", "--wait", "--kubeconfig", localAdmin, ...ns]);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /secret\/cluster-credentials-west deleted/);
    assert.match(r.stdout, /every mirror of cluster west is gone/);
    assert.equal(await fleet.localService("shop", "cart-west"), undefined);
    const again = await cli(["unlink", "--cluster-name", "west", "--kubeconfig", localAdmin, ...ns]);
    assert.equal(again.code, 1, show(again));
    assert.match(again.stderr, /no credentials Secret in namespace fleet-mirror registers cluster west/);
  });

  it("with no controller running: check fails on a mirror of an unknown cluster, status shows it, unlink --wait times out", async () => {
    await controller.stop();
    await fleet.local.createNamespacedService({
      namespace: "shop",
      body: {
        metadata: { name: "ghost-svc-ghost", labels: { [MIRRORED_SERVICE]: "true", [CLUSTER_NAME]: "ghost" } },
        spec: { ports: [{ port: 80 }] },
      },
    });
    const r = await check();
    assert.equal(r.code, 1, show(r));
    assert.match(r.stdout, /✗ 1 mirror object\(s\) of unknown cluster ghost .*service\/shop\/ghost-svc-ghost/);
    const status = await cli(["status", "--admin-url", "http://127.0.0.1:1", "--kubeconfig", controllerKc, ...ns]);
    assert.match(status.stdout, /\nghost\s+unknown-cluster\s+1\s/);
    const wait = await cli([
      "unlink",
      "--cluster-name",
      "east",
      "--wait",
      "--timeout",
      "2s",
      "--kubeconfig",
      localAdmin,
      ...ns,
    ]);
    assert.equal(wait.code, 1, show(wait));
    assert.match(wait.stderr, /mirror object\(s\) of cluster east still there after 2s: is the controller running\?/);
  });
});
