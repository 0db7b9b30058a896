/**
 * `fleet-mirror link --links NS` refusing, on real API servers (SPEC §15, docs/CLI.md):
 * each refusal exits non-zero with one line naming the object and the fix, and writes
 * nothing on either cluster. "Nothing" is checked against snapshots (name and
 * resourceVersion of every object `link` could write): on the remote, the namespaces,
 * ServiceAccounts, Secrets, ClusterRoles and ClusterRoleBindings; on the local cluster,
 * the Links and Secrets of NS. Each refusal asks for its own `--service-account`, so a
 * refusal that made the remote identity before refusing shows as a new ServiceAccount
 * even after an earlier one made the shared namespace and ClusterRole.
 *
 * The refusals:
 * - flags alone (exit 2): checked before either cluster is reached;
 * - the remote gateway Service missing, without ingress, port or identity annotation,
 *   and a Link or Secret the controller would refuse (exit 1): checked after reading the
 *   remote, before writing anything there;
 * - with `--apply`, the local cluster without the Link CRD, and a Link or Secret of that
 *   name that belongs to another cluster or another tool (exit 1): checked before
 *   writing anything on either cluster; and a Secret created between that check and the
 *   write is not replaced (the write fails).
 * The tests run in order on one fleet: the Link CRD is installed after the first.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CommandError, isNotFound } from "../../src/cli/common.ts";
import { readLinkTargets, writeLinkObjects } from "../../src/cli/link-apply.ts";
import { linkObjects } from "../../src/cli/link-resource.ts";
import { CLUSTER_NAME, SECRET_TYPE } from "../../src/core/labels.ts";
import { linksPath } from "../../src/core/link.ts";
import type { KubeObject } from "../../src/core/objects.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { type CliResult, cli, show } from "../helpers/cli.ts";
import { adminConnection } from "../helpers/connection.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { createLink, installLinks, LINKS_NAMESPACE, linkSpec } from "../helpers/links.ts";

const IDENTITY = "linkerd-gateway.linkerd-multicluster.serviceaccount.identity.linkerd.cluster.local";
const GATEWAYS = "gateways";

/** `name@resourceVersion` of every object at these list paths, sorted; a missing resource lists nothing. */
async function snapshot(client: KubeClient, paths: readonly string[]): Promise<string[]> {
  const rows: string[] = [];
  for (const path of paths) {
    let items: KubeObject[];
    try {
      items = (await client.request<{ items: KubeObject[] }>("GET", path)).items;
    } catch (error) {
      if (isNotFound(error)) continue;
      throw error;
    }
    for (const o of items)
      rows.push(`${path} ${o.metadata.namespace ?? ""}/${o.metadata.name}@${o.metadata.resourceVersion}`);
  }
  return rows.sort();
}

const REMOTE_PATHS = [
  "/api/v1/namespaces",
  "/api/v1/serviceaccounts",
  "/api/v1/secrets",
  "/apis/rbac.authorization.k8s.io/v1/clusterroles",
  "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
];
const SECRETS = `/api/v1/namespaces/${LINKS_NAMESPACE}/secrets`;
const LOCAL_PATHS = [linksPath(LINKS_NAMESPACE), SECRETS];

/** The refusal's output: exactly one line on stderr (the usage help follows a usage error), nothing on stdout. */
function assertOneLine(r: CliResult, code: number, line: RegExp): void {
  assert.equal(r.code, code, show(r));
  assert.equal(r.stdout, "", show(r));
  const [first, ...rest] = r.stderr.split("\n");
  assert.match(first ?? "", line, show(r));
  if (code === 1) assert.deepEqual(rest, [""], show(r));
  else assert.match(rest.join("\n"), /^\nUsage: fleet-mirror link /, show(r));
}

describe("link --links refuses with one line and writes nothing on either cluster (SPEC §15)", () => {
  let fleet: Fleet;
  let remote: KubeClient;
  let local: KubeClient;
  let eastAdmin: string;
  let localAdmin: string;
  let accounts = 0;

  /** Deletes what a test made (whatever of it is there). */
  const removeAll = async (paths: readonly string[]): Promise<void> => {
    for (const path of paths)
      await local.request("DELETE", path).catch((error: unknown) => {
        if (!isNotFound(error)) throw error;
      });
  };
  /** `link --links` for east, with the local kubeconfig, its own ServiceAccount, and `more`. */
  const link = (more: readonly string[]): Promise<CliResult> => {
    const target = ["--cluster-name", "east", "--remote-kubeconfig", eastAdmin, "--links", LINKS_NAMESPACE];
    return cli(["link", ...target, "--kubeconfig", localAdmin, "--service-account", `refusal-${++accounts}`, ...more]);
  };
  /** Runs `link` with `more`, asserts one line matching `line` and exit `code`, and no write on either cluster. */
  const refused = async (more: readonly string[], code: number, line: RegExp): Promise<void> => {
    const remoteBefore = await snapshot(remote, REMOTE_PATHS);
    const localBefore = await snapshot(local, LOCAL_PATHS);
    const r = await link(more);
    assertOneLine(r, code, line);
    assert.deepEqual(await snapshot(remote, REMOTE_PATHS), remoteBefore, `the remote was written: ${more.join(" ")}`);
    assert.deepEqual(
      await snapshot(local, LOCAL_PATHS),
      localBefore,
      `the local cluster was written: ${more.join(" ")}`,
    );
  };

  before(async () => {
    fleet = await Fleet.start(["east"]);
    eastAdmin = fleet.plane.cluster("east").adminKubeconfigPath;
    localAdmin = fleet.plane.cluster("local").adminKubeconfigPath;
    remote = new KubeClient(adminConnection(fleet.plane.cluster("east")));
    local = new KubeClient(adminConnection(fleet.plane.cluster("local")));
    await fleet.ensureNamespace("local", LINKS_NAMESPACE);
    const ingress = [{ ip: "198.51.100.41" }];
    const gateway = { namespace: GATEWAYS, portName: "mc-gateway", identity: IDENTITY, ingress };
    await fleet.createGateway("east", { ...gateway, namespace: "linkerd-multicluster", name: "linkerd-gateway" });
    await fleet.createGateway("east", { ...gateway, name: "no-ingress", ingress: [] });
    await fleet.createGateway("east", { ...gateway, name: "no-port", portName: "http" });
    await fleet.createGateway("east", { ...gateway, name: "no-identity", identity: "" });
  });
  after(async () => {
    remote?.close();
    local?.close();
    await fleet?.stop();
  });

  it("refuses a bad flag with exit 2 before reaching either cluster", async () => {
    const cases: [string[], RegExp][] = [
      [
        ["--cluster-name", "Not_A_Label"],
        /^fleet-mirror link: --cluster-name "Not_A_Label" must consist of lower case/,
      ],
      [["-l", "app in web"], /^fleet-mirror link: --selector "app in web": /],
      [["--remote-discovery-selector", "a=b,=c"], /^fleet-mirror link: --remote-discovery-selector "a=b,=c": /],
      [["--federated-service-selector", "x notin"], /^fleet-mirror link: --federated-service-selector "x notin": /],
      [["--wait"], /^fleet-mirror link: --wait goes with --apply$/],
      [["--token-duration", "soon"], /^fleet-mirror link: --token-duration: /],
      [["--token-duration", "5m"], /^fleet-mirror link: --token-duration: must be at least 10m/],
      [["--gateway-port", "http"], /^fleet-mirror link: --gateway-port "http" is not a port number \(1-65535\)$/],
      [
        ["--secret-name", "Creds_East"],
        /^fleet-mirror link: --secret-name "Creds_East" is not a Secret's name \(a DNS-1123 subdomain\): it must consist/,
      ],
      [["--cluster-domain", "Bad_Domain"], /^fleet-mirror link: --cluster-domain "Bad_Domain" is not a DNS name/],
      [["--links", "Bad_NS"], /^fleet-mirror link: --links "Bad_NS" must consist of lower case/],
    ];
    for (const [more, line] of cases) await refused(more, 2, line);
    // The Link flags without --links (the cluster-name flag given last wins over the helper's).
    const stray = await cli(["link", "--cluster-name", "east", "--remote-kubeconfig", eastAdmin, "-l", "app=web"]);
    assertOneLine(stray, 2, /^fleet-mirror link: --selector goes with --links$/);
  });

  it("refuses a local kubeconfig that is not there, or a remote context that is not, with exit 1 before writing", async () => {
    await refused(
      ["--apply", "--kubeconfig", "/nonexistent/kubeconfig"],
      1,
      /^fleet-mirror link: local cluster: --kubeconfig \/nonexistent\/kubeconfig does not exist$/,
    );
    await refused(["--remote-context", "nope"], 1, /^fleet-mirror link: --remote-kubeconfig: kubeconfig .*nope/);
  });

  it("with --apply and no Link CRD or no namespace NS in the local cluster: exit 1 naming it, and not even the Secret is written", async () => {
    try {
      await refused(
        ["--apply"],
        1,
        /^fleet-mirror link: the local cluster does not serve Links: install linkerd's Link CRD \(links\.multicluster\.linkerd\.io, v1alpha3\) first$/,
      );
    } finally {
      await installLinks(fleet);
      // A CRD just established may answer 429 while its storage initializes.
      await eventually("the Links listed", () =>
        local.request("GET", linksPath(LINKS_NAMESPACE)).catch(() => undefined),
      );
    }
    await refused(
      ["--apply", "--links", "absent"],
      1,
      /^fleet-mirror link: namespace\/absent is not found in the local cluster: create it first, or give another --links$/,
    );
  });

  it("refuses a gateway Service that is missing or has no ingress address, port or identity, naming it and the flag to give", async () => {
    const where = (name: string) => `service/${name} in namespace ${GATEWAYS} of the remote cluster`;
    const gw = (name: string) => ["--gateway-namespace", GATEWAYS, "--gateway-name", name];
    await refused(
      [...gw("nope"), "--gateway-port", "4143", "--apply"],
      1,
      new RegExp(
        `^fleet-mirror link: the gateway ${where("nope")} is not found: give --gateway-addresses, --gateway-port and --gateway-identity, or --gateway-name/--gateway-namespace$`,
      ),
    );
    await refused(
      [...gw("no-ingress"), "--apply"],
      1,
      new RegExp(
        `^fleet-mirror link: the gateway ${where("no-ingress")} has no ingress address yet \\(or give --gateway-addresses\\)$`,
      ),
    );
    await refused(
      [...gw("no-port"), "--apply"],
      1,
      new RegExp(
        `^fleet-mirror link: the gateway ${where("no-port")} has no port named mc-gateway or incoming-port \\(or give --gateway-port\\)$`,
      ),
    );
    await refused(
      [...gw("no-identity")],
      1,
      new RegExp(
        `^fleet-mirror link: the gateway ${where("no-identity")} has no mirror\\.linkerd\\.io/gateway-identity annotation \\(or give --gateway-identity\\)$`,
      ),
    );
  });

  it("--token-source secret without a token controller fails naming it, and deletes the token Secret it made (no token appears later)", async () => {
    const r = await link(["--token-source", "secret", "--timeout", "2s"]);
    assert.equal(r.code, 1, show(r));
    assert.equal(r.stdout, "", show(r));
    const account = `refusal-${accounts}`;
    const left = await snapshot(remote, ["/api/v1/secrets"]);
    assert.deepEqual(
      left.filter((row) => row.includes(`/${account}-token@`)),
      [],
    );
    assert.match(
      r.stderr,
      new RegExp(
        `\\nfleet-mirror link: secret/${account}-token in fleet-mirror-remote on the remote cluster got no token within 2s: the remote cluster's token controller \\(kube-controller-manager\\) does not fill it in \\(the Secret is deleted again\\)\\. Use --token-source request \\(the default\\), or a longer --timeout\\n$`,
      ),
      show(r),
    );
  });

  it("with --apply, refuses a Secret of that name that another tool or cluster owns, and a Link of that name for another cluster", async (t) => {
    t.after(() => removeAll([linksPath(LINKS_NAMESPACE, "east"), linksPath(LINKS_NAMESPACE, "north")]));
    t.after(() => removeAll(["other-tool", "creds-west", "cluster-credentials-north"].map((n) => `${SECRETS}/${n}`)));
    const secretPath = SECRETS;
    // Another tool's Secret (another type) under the name the Link would use.
    await local.request("POST", secretPath, {
      body: { metadata: { name: "other-tool" }, type: "Opaque", data: { token: "eA==" } },
    });
    await refused(
      ["--apply", "--secret-name", "other-tool"],
      1,
      /^fleet-mirror link: secret\/other-tool in namespace linkerd-multicluster is of type Opaque, not mirror\.linkerd\.io\/remote-kubeconfig: delete it or give another --secret-name$/,
    );
    const credentials = (name: string, annotations?: Record<string, string>) =>
      local.request("POST", secretPath, {
        body: {
          metadata: { name, ...(annotations ? { annotations } : {}) },
          type: SECRET_TYPE,
          data: { kubeconfig: "eA==" },
        },
      });
    // An annotated credentials Secret (SPEC §1) registering another cluster.
    await credentials("creds-west", { [CLUSTER_NAME]: "west" });
    await refused(
      ["--apply", "--secret-name", "creds-west"],
      1,
      /^fleet-mirror link: secret\/creds-west in namespace linkerd-multicluster registers cluster west \(annotation mirror\.linkerd\.io\/cluster-name\), not east: give another --secret-name$/,
    );
    // The Secret another Link (of another cluster) names.
    await credentials("cluster-credentials-north");
    await createLink(fleet, "north", linkSpec("north"));
    await refused(
      ["--apply", "--secret-name", "cluster-credentials-north"],
      1,
      /^fleet-mirror link: secret\/cluster-credentials-north in namespace linkerd-multicluster holds the credentials of link\.multicluster\.linkerd\.io\/north \(cluster north\), not east: give another --secret-name$/,
    );
    // A Link named east that registers another cluster.
    await createLink(fleet, "east", linkSpec("south"));
    await refused(
      ["--apply"],
      1,
      /^fleet-mirror link: link\.multicluster\.linkerd\.io\/east in namespace linkerd-multicluster registers cluster south, not east: delete it first \(kubectl delete links\.multicluster\.linkerd\.io east -n linkerd-multicluster\)$/,
    );
  });

  it("writes the Link and its Secret once nothing conflicts, and a second run replaces its own without refusing", async () => {
    const first = await link(["--apply"]);
    assert.equal(first.code, 0, show(first));
    assert.match(first.stdout, /secret\/cluster-credentials-east created in namespace linkerd-multicluster\n/);
    assert.match(first.stdout, /link\.multicluster\.linkerd\.io\/east created in namespace linkerd-multicluster\n/);
    const second = await link(["--apply"]);
    assert.equal(second.code, 0, show(second));
    assert.match(second.stdout, /secret\/cluster-credentials-east updated in namespace linkerd-multicluster\n/);
    assert.match(second.stdout, /link\.multicluster\.linkerd\.io\/east updated in namespace linkerd-multicluster\n/);
  });

  it("with --apply, a Secret created between the check and the write is not replaced: the write fails and says to run link again", async () => {
    const objects = linkObjects({
      resource: {
        namespace: LINKS_NAMESPACE,
        selectors: { selector: {}, remoteDiscoverySelector: {}, federatedServiceSelector: {} },
        excludedLabels: [],
        excludedAnnotations: [],
        given: {},
      },
      cluster: "racer",
      domain: "cluster.local",
      kubeconfig: "apiVersion: v1\n",
      secretName: "cluster-credentials-racer",
      gateway: { gatewayAddress: "198.51.100.42", gatewayPort: "4143", gatewayIdentity: IDENTITY },
    });
    const targets = await readLinkTargets(local, objects, []);
    assert.deepEqual(targets, {});
    // Another writer, in between, with a Secret of the same type for another cluster: it must stay as it wrote it.
    const theirs = await local.request<KubeObject>("POST", SECRETS, {
      body: {
        metadata: { name: "cluster-credentials-racer", annotations: { [CLUSTER_NAME]: "west" } },
        type: SECRET_TYPE,
        data: { kubeconfig: "eA==" },
      },
    });
    await assert.rejects(writeLinkObjects(local, objects, targets), (error: unknown) => {
      assert.ok(error instanceof CommandError, String(error));
      assert.equal(
        error.message,
        `secret/cluster-credentials-racer in namespace ${LINKS_NAMESPACE} was created or changed while link ran: run link again`,
      );
      return true;
    });
    const after = await local.request<KubeObject>("GET", `${SECRETS}/cluster-credentials-racer`);
    assert.equal(after.metadata.resourceVersion, theirs.metadata.resourceVersion);
    assert.equal(after.metadata.annotations?.[CLUSTER_NAME], "west");
    assert.equal((await snapshot(local, [linksPath(LINKS_NAMESPACE)])).filter((r) => r.includes("/racer@")).length, 0);
  });
});
