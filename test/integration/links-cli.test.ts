/**
 * SPEC §15 through the operator CLI, on real API servers, with a least-privilege
 * `fleet-mirror run --links` process:
 * - started before linkerd's Link CRD is installed: one clear report (a log line naming
 *   the CRD, a `linksProblem` in /status), annotated Secrets keep working, and the CRD
 *   installed later is picked up without a restart;
 * - `link --links NS` writes a Link and its Secret as linkerd's `multicluster link` does,
 *   accepted by linkerd's own CRD, and the controller registers the cluster and mirrors
 *   through the Link's gateway;
 * - `status` and `/status` show each Link (registered, InvalidLink, InvalidCredentials,
 *   DuplicateCluster, CredentialsKept), from the controller and from the cluster objects;
 * - `check --links NS` fails on an invalid Link or a missing Secret, and a Secret no Link
 *   names is fine.
 * The tests run in order on one fleet; each leaves it as the next expects.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import type { AdminStatus } from "../../src/admin/source.ts";
import { SECRET_TYPE } from "../../src/core/labels.ts";
import { linksPath } from "../../src/core/link.ts";
import { KubeClient } from "../../src/kube/client.ts";
import type { LinkRow } from "../../src/status/link-row.ts";
import { cli, show } from "../helpers/cli.ts";
import { adminConnection } from "../helpers/connection.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import {
  createLink,
  deleteLink,
  deleteLinkSecret,
  installLinks,
  LINKS_NAMESPACE,
  LINKS_RBAC,
  linkSpec,
} from "../helpers/links.ts";

const GATEWAY_IP = "198.51.100.31";
const IDENTITY = "linkerd-gateway.linkerd-multicluster.serviceaccount.identity.linkerd.cluster.local";

interface ListOfObjects {
  readonly kind: string;
  readonly items: {
    kind: string;
    metadata: { name: string; namespace: string; annotations?: object };
    [k: string]: unknown;
  }[];
}

describe("Links through the CLI: link --links, status, check (SPEC §15)", () => {
  let fleet: Fleet;
  let controller: ControllerProcess;
  let adminUrl: string;
  let localAdmin: string;
  let eastAdmin: string;

  const adminStatus = async (): Promise<AdminStatus> =>
    (await (await fetch(`${adminUrl}/status`)).json()) as AdminStatus;
  const linkRow = async (link: string): Promise<LinkRow | undefined> =>
    (await adminStatus()).links?.find((r) => r.link === `${LINKS_NAMESPACE}/${link}`);
  const waitForLinkRow = (link: string, state: LinkRow["state"]): Promise<LinkRow> =>
    eventually(`Link ${link} ${state} in /status`, async () => {
      const row = await linkRow(link);
      return row?.state === state ? row : undefined;
    });
  const check = (...more: string[]) =>
    cli(["check", "--kubeconfig", localAdmin, "-n", CONTROLLER_NAMESPACE, "--links", LINKS_NAMESPACE, ...more]);

  before(async () => {
    fleet = await Fleet.start(["east", "west"]);
    localAdmin = fleet.plane.cluster("local").adminKubeconfigPath;
    eastAdmin = fleet.plane.cluster("east").adminKubeconfigPath;
    // The Role of deploy/links/rbac.yaml, but not the CRD yet.
    await fleet.ensureNamespace("local", LINKS_NAMESPACE);
    await applyRbacYaml(fleet.kubeConfig("local"), LINKS_RBAC);
    await fleet.createGateway("east", {
      namespace: "linkerd-multicluster",
      name: "linkerd-gateway",
      portName: "mc-gateway",
      identity: IDENTITY,
      ingress: [{ ip: GATEWAY_IP }],
    });
    await fleet.createService("east", "shop", "web", {
      gateway: false,
      labels: { "mirror.linkerd.io/exported": "true" },
    });
    await fleet.createGateway("west", { ingress: [{ ip: "198.51.100.32" }] });
    await fleet.createService("west", "shop", "cart");
    await fleet.register("west");
    // A Secret of the Links' type that no Link names: the controller never reads it.
    await fleet.local.createNamespacedSecret({
      namespace: LINKS_NAMESPACE,
      body: { metadata: { name: "stray" }, type: SECRET_TYPE, data: { kubeconfig: "" } },
    });
    controller = await fleet.startProcess(["--links", LINKS_NAMESPACE, "--endpoints-api", "endpoints"]);
    adminUrl = await controller.adminUrl(90_000);
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("without the Link CRD: one log line names it, /status says so, annotated Secrets keep working; the CRD installed later is read", async () => {
    await fleet.waitForMirror("shop", "cart-west", () => true, 60_000);
    const problem = await eventually("linksProblem in /status", async () => (await adminStatus()).linksProblem);
    assert.match(problem.message, /Link CRD links\.multicluster\.linkerd\.io \(v1alpha3\) is not installed/);
    assert.equal(problem.namespace, LINKS_NAMESPACE);
    const table = await cli(["status", "--admin-url", adminUrl]);
    assert.match(table.stdout, /links: the Link CRD links\.multicluster\.linkerd\.io/, show(table));
    const noCrd = await check();
    assert.equal(noCrd.code, 1, show(noCrd));
    assert.match(noCrd.stdout, /✗ the Link CRD links\.multicluster\.linkerd\.io \(v1alpha3\) is not installed/);
    await installLinks(fleet);
    await controller.waitForLog(`Links of ${LINKS_NAMESPACE} listed: the Link CRD is served`);
    // The watch retried every few seconds (at most 4 s apart) meanwhile; said once, not per retry.
    assert.equal(controller.logMessages().filter((m) => m.includes("is not installed in the local cluster")).length, 1);
    await eventually("no linksProblem", async () => ((await adminStatus()).linksProblem ? undefined : true));
  });

  it("link --links prints a Link and its Secret as linkerd writes them, which linkerd's CRD accepts", async () => {
    const base = ["link", "--cluster-name", "east", "--remote-kubeconfig", eastAdmin, "--links", LINKS_NAMESPACE];
    const r = await cli([
      ...base,
      "-o",
      "json",
      "-l",
      "app in (web,api),tier!=db",
      "--excluded-labels",
      "team,internal.example.com/*",
    ]);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, /no probe path annotation or mc-probe port: the Link's gateway is not probed/);
    const list = JSON.parse(r.stdout) as ListOfObjects;
    assert.deepEqual(
      list.items.map((i) => i.kind),
      ["Secret", "Link"],
    );
    const [secret, link] = list.items;
    assert.equal(secret?.["type"], SECRET_TYPE);
    assert.equal(secret?.metadata.name, "cluster-credentials-east");
    assert.equal(secret?.metadata.namespace, LINKS_NAMESPACE);
    assert.equal(secret?.metadata.annotations, undefined, "linkerd's Secret carries no annotation");
    assert.equal(link?.["apiVersion"], "multicluster.linkerd.io/v1alpha3");
    assert.deepEqual(link?.metadata, { name: "east", namespace: LINKS_NAMESPACE });
    assert.deepEqual(link?.["spec"], {
      targetClusterName: "east",
      targetClusterDomain: "cluster.local",
      targetClusterLinkerdNamespace: "linkerd",
      clusterCredentialsSecret: "cluster-credentials-east",
      gatewayAddress: GATEWAY_IP,
      gatewayPort: "4143",
      gatewayIdentity: IDENTITY,
      selector: {
        matchExpressions: [
          { key: "app", operator: "In", values: ["web", "api"] },
          { key: "tier", operator: "NotIn", values: ["db"] },
        ],
      },
      remoteDiscoverySelector: { matchLabels: { "mirror.linkerd.io/exported": "remote-discovery" } },
      federatedServiceSelector: { matchLabels: { "mirror.linkerd.io/federated": "member" } },
      excludedLabels: ["team", "internal.example.com/*"],
      excludedAnnotations: [],
    });
    // linkerd's CRD (its schema, its enum of operators) accepts it: a server-side dry run.
    const admin = new KubeClient(adminConnection(fleet.plane.cluster("local")));
    try {
      await admin.request("POST", linksPath(LINKS_NAMESPACE), { query: { dryRun: "All" }, body: link });
    } finally {
      admin.close();
    }
    const yaml = await cli(base);
    assert.equal(yaml.code, 0, show(yaml));
    assert.match(
      yaml.stdout,
      /^apiVersion: v1\n[\s\S]*\nkind: Secret\n[\s\S]*\n---\napiVersion: multicluster\.linkerd\.io\/v1alpha3\nkind: Link\n/,
    );
    const bad = await cli([...base, "-l", "app in web"]);
    assert.equal(bad.code, 2, show(bad));
    const stray = await cli(["link", "--cluster-name", "east", "--remote-kubeconfig", eastAdmin, "-l", "app=web"]);
    assert.equal(stray.code, 2, show(stray));
    assert.match(stray.stderr, /--selector goes with --links/);
  });

  it("link --links --apply registers the cluster through the Link: the controller mirrors through its gateway", async () => {
    const r = await cli([
      "link",
      "--cluster-name",
      "east",
      "--remote-kubeconfig",
      eastAdmin,
      "--links",
      LINKS_NAMESPACE,
      "--kubeconfig",
      localAdmin,
      "--apply",
      "--wait",
      "--admin-url",
      adminUrl,
    ]);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /secret\/cluster-credentials-east created in namespace linkerd-multicluster/);
    assert.match(r.stdout, /link\.multicluster\.linkerd\.io\/east created in namespace linkerd-multicluster/);
    await fleet.waitForEndpoints("shop", "web-east", (ep) => ep.subsets?.[0]?.addresses?.[0]?.ip === GATEWAY_IP);
    const row = await waitForLinkRow("east", "registered");
    assert.deepEqual(row, {
      link: `${LINKS_NAMESPACE}/east`,
      cluster: "east",
      secret: `${LINKS_NAMESPACE}/cluster-credentials-east`,
      state: "registered",
    });
    const table = await cli(["status", "--admin-url", adminUrl]);
    assert.match(table.stdout, /LINK\s+CLUSTER\s+SECRET\s+STATE\n/, show(table));
    assert.match(
      table.stdout,
      /linkerd-multicluster\/east\s+east\s+linkerd-multicluster\/cluster-credentials-east\s+registered\n/,
    );
    const ok = await check();
    assert.equal(ok.code, 0, show(ok));
    assert.match(ok.stdout, /✓ link linkerd-multicluster\/east registers cluster east/);
    assert.match(ok.stdout, /✓ every mirror belongs to a registered cluster/);
    assert.doesNotMatch(ok.stdout, /stray/, "a Secret that no Link names is not judged");
  });

  it("status and check show a Link that registers nothing, and why: InvalidLink, InvalidCredentials, DuplicateCluster, CredentialsKept", async () => {
    await createLink(fleet, "bad-name", linkSpec("Not_A_Label"));
    await createLink(fleet, "no-secret", linkSpec("north", { clusterCredentialsSecret: "cluster-credentials-north" }));
    await createLink(fleet, "east-again", linkSpec("east"));
    assert.equal((await waitForLinkRow("bad-name", "InvalidLink")).reason, "invalid-cluster-name");
    const missing = await waitForLinkRow("no-secret", "InvalidCredentials");
    assert.equal(missing.reason, "credentials-missing");
    assert.match(missing.message ?? "", /Secret linkerd-multicluster\/cluster-credentials-north .* is not found/);
    const duplicate = await waitForLinkRow("east-again", "DuplicateCluster");
    assert.match(duplicate.message ?? "", /already registered by Link linkerd-multicluster\/east/);
    const failed = await check();
    assert.equal(failed.code, 1, show(failed));
    assert.match(failed.stdout, /✗ link linkerd-multicluster\/bad-name: InvalidLink: spec\.targetClusterName/);
    assert.match(failed.stdout, /✗ link linkerd-multicluster\/no-secret \(cluster north\): InvalidCredentials: Secret/);
    assert.match(failed.stdout, /✗ link linkerd-multicluster\/east-again \(cluster east\): DuplicateCluster/);
    // From the cluster objects (no controller at this URL), with the same judgement.
    const objects = await cli([
      "status",
      "--admin-url",
      "http://127.0.0.1:9",
      "--kubeconfig",
      localAdmin,
      "-n",
      CONTROLLER_NAMESPACE,
      "--links",
      LINKS_NAMESPACE,
      "-o",
      "json",
    ]);
    assert.equal(objects.code, 0, show(objects));
    const report = JSON.parse(objects.stdout) as { links: LinkRow[]; clusters: { cluster: string; state: string }[] };
    assert.deepEqual(
      report.links.map((l) => `${l.link} ${l.state}`),
      [
        "linkerd-multicluster/bad-name InvalidLink",
        "linkerd-multicluster/east registered",
        "linkerd-multicluster/east-again DuplicateCluster",
        "linkerd-multicluster/no-secret InvalidCredentials",
      ],
    );
    assert.equal(report.clusters.find((c) => c.cluster === "east")?.state, "registered");
    for (const name of ["bad-name", "no-secret", "east-again"]) await deleteLink(fleet, name);

    // The Secret of a registered Link deleted: the cluster keeps the credentials it had.
    await deleteLinkSecret(fleet, "cluster-credentials-east");
    const kept = await waitForLinkRow("east", "CredentialsKept");
    assert.match(kept.message ?? "", /stays registered with the credentials it had/);
    // `check` judges the objects as they are now: the Link names a Secret that is not there.
    const keptCheck = await check();
    assert.equal(keptCheck.code, 1, show(keptCheck));
    assert.match(
      keptCheck.stdout,
      /✗ link linkerd-multicluster\/east \(cluster east\): InvalidCredentials: Secret .* is not found/,
    );
    const table = await cli(["status", "--admin-url", adminUrl]);
    assert.match(table.stdout, /linkerd-multicluster\/east\s+east\s+\S+\s+CredentialsKept: /, show(table));
  });
});
