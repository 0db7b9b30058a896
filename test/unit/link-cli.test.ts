/**
 * `fleet-mirror link`'s refusals that need no cluster (SPEC §15, docs/CLI.md): its flags,
 * judged before either cluster is reached, and the judgement of what the local cluster
 * holds before `--links NS --apply` writes. Their runs on real API servers (nothing
 * written on either cluster) are test/integration/links-cli-refusals.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseCommandLine, UsageError } from "../../src/cli/common.ts";
import { linkDefinition } from "../../src/cli/link.ts";
import { duplicateLinkWarnings, linkTargetRefusal } from "../../src/cli/link-apply.ts";
import { linkOptions } from "../../src/cli/link-options.ts";
import { type LinkObjects, linkObjects, linkResourceOptions } from "../../src/cli/link-resource.ts";
import { CLUSTER_NAME, SECRET_TYPE } from "../../src/core/labels.ts";
import type { KubeObject, Secret } from "../../src/core/objects.ts";

const BASE = ["--cluster-name", "east", "--remote-kubeconfig", "/nonexistent/kubeconfig"];
const values = (argv: readonly string[]) => {
  const parsed = parseCommandLine([...BASE, ...argv], linkDefinition.flags);
  assert.notEqual(parsed, "help");
  return parsed === "help" ? {} : parsed.values;
};
/** The usage error `link` gives for `argv` (after a valid cluster name and kubeconfig). */
const usageError = (argv: readonly string[]): string => {
  try {
    linkOptions(values(argv));
  } catch (error) {
    assert.ok(error instanceof UsageError, `${argv.join(" ")}: ${String(error)}`);
    return error.message;
  }
  assert.fail(`${argv.join(" ")} was accepted`);
};

describe("link: flags refused before either cluster is reached", () => {
  it("accepts the defaults and a full --links command line", () => {
    const options = linkOptions(values(["--links", "linkerd-multicluster", "-l", "app=web", "--gateway-port", "4143"]));
    assert.equal(options.secretName, "cluster-credentials-east");
    assert.equal(options.domain, "cluster.local");
    assert.equal(options.tokenSeconds, 8760 * 3600);
    assert.deepEqual(options.links?.given, { port: "4143" });
    assert.deepEqual(options.links?.selectors.selector, { matchLabels: { app: "web" } });
    assert.equal(linkOptions(values([])).links, undefined);
  });

  it("refuses each bad flag with one message naming the flag and its value", () => {
    const cases: [string[], RegExp][] = [
      [["--cluster-name", "Not_A_Label"], /^--cluster-name "Not_A_Label" must consist of lower case/],
      [["--cluster-name", ""], /^--cluster-name is required$/],
      [["--token-source", "vault"], /^--token-source: "vault" must be request or secret$/],
      [["-o", "xml"], /^-o\/--output: must be yaml or json$/],
      [["--wait"], /^--wait goes with --apply$/],
      [["--token-duration", "soon"], /^--token-duration: /],
      [["--token-duration", "5m"], /^--token-duration: must be at least 10m \(the API server's minimum\)$/],
      [["--timeout", "0s"], /^--timeout: /],
      [["--secret-name", "Creds_East"], /^--secret-name "Creds_East" is not a Secret's name \(a DNS-1123 subdomain\)/],
      [["--cluster-domain", "Bad_Domain"], /^--cluster-domain "Bad_Domain" is not a DNS name: it must consist/],
      [["--service-account", "Reader!"], /^--service-account "Reader!" is not a ServiceAccount's name/],
      [["--links", "Bad_NS"], /^--links "Bad_NS" must consist of lower case/],
      [["--links", ""], /^--links "" must not be empty$/],
      [["--links", "ns", "-l", "app in web"], /^--selector "app in web": /],
      [["--links", "ns", "--remote-discovery-selector", "a=b,=c"], /^--remote-discovery-selector "a=b,=c": /],
      [["--links", "ns", "--federated-service-selector", "x notin"], /^--federated-service-selector "x notin": /],
      [["--links", "ns", "--gateway-port", "http"], /^--gateway-port "http" is not a port number \(1-65535\)$/],
      [["--links", "ns", "--gateway-port", "70000"], /^--gateway-port "70000" is not a port number/],
      [["--links", "ns", "--gateway-addresses", " , "], /^--gateway-addresses: names no address$/],
      [["--links", "ns", "--gateway-identity", ""], /^--gateway-identity: must not be empty$/],
    ];
    for (const [argv, message] of cases) assert.match(usageError(argv), message, argv.join(" "));
  });

  it("refuses every Link flag given without --links (it would be ignored silently)", () => {
    for (const flag of [
      "selector",
      "remote-discovery-selector",
      "federated-service-selector",
      "excluded-labels",
      "excluded-annotations",
      "gateway-addresses",
      "gateway-port",
      "gateway-identity",
    ])
      assert.throws(
        () => linkResourceOptions({ [flag]: "x" }),
        (error: unknown) => error instanceof UsageError && error.message === `--${flag} goes with --links`,
        flag,
      );
  });
});

const NS = "linkerd-multicluster";
const objects: LinkObjects = linkObjects({
  resource: {
    namespace: NS,
    selectors: { selector: {}, remoteDiscoverySelector: {}, federatedServiceSelector: {} },
    excludedLabels: [],
    excludedAnnotations: [],
    given: {},
  },
  cluster: "east",
  domain: "cluster.local",
  kubeconfig: "apiVersion: v1\n",
  secretName: "cluster-credentials-east",
  gateway: { gatewayAddress: "198.51.100.1", gatewayPort: "4143", gatewayIdentity: "gw" },
});
const link = (name: string, cluster: string, secret = `cluster-credentials-${cluster}`): KubeObject =>
  ({
    metadata: { name, namespace: NS },
    spec: { targetClusterName: cluster, clusterCredentialsSecret: secret },
  }) as KubeObject;
const secret = (type: string | undefined, annotations?: Record<string, string>): Secret => ({
  metadata: { name: "cluster-credentials-east", namespace: NS, ...(annotations ? { annotations } : {}) },
  ...(type !== undefined ? { type } : {}),
});

describe("link --links --apply: what the local cluster holds, judged before anything is written", () => {
  it("replaces its own Link and Secret, a Link of that name that names no valid cluster, and an annotated Secret of the same cluster", () => {
    assert.equal(linkTargetRefusal(objects, [], undefined), undefined);
    assert.equal(linkTargetRefusal(objects, [link("east", "east")], secret(SECRET_TYPE)), undefined);
    assert.equal(linkTargetRefusal(objects, [link("east", "")], undefined), undefined);
    assert.equal(linkTargetRefusal(objects, [], secret(SECRET_TYPE, { [CLUSTER_NAME]: "east" })), undefined);
    // Another Link of the same cluster may share the Secret: same credentials.
    assert.equal(
      linkTargetRefusal(objects, [link("east-old", "east", "cluster-credentials-east")], undefined),
      undefined,
    );
  });

  it("refuses a Link of that name for another cluster, naming it and how to delete it", () => {
    assert.equal(
      linkTargetRefusal(objects, [link("east", "south")], undefined),
      `link.multicluster.linkerd.io/east in namespace ${NS} registers cluster south, not east: delete it first (kubectl delete links.multicluster.linkerd.io east -n ${NS})`,
    );
  });

  it("refuses a Secret of that name of another type, or registering another cluster by annotation or by a Link", () => {
    assert.equal(
      linkTargetRefusal(objects, [], secret("Opaque")),
      `secret/cluster-credentials-east in namespace ${NS} is of type Opaque, not ${SECRET_TYPE}: delete it or give another --secret-name`,
    );
    assert.match(linkTargetRefusal(objects, [], secret(undefined)) ?? "", /is of type Opaque, not /);
    assert.equal(
      linkTargetRefusal(objects, [], secret(SECRET_TYPE, { [CLUSTER_NAME]: "west" })),
      `secret/cluster-credentials-east in namespace ${NS} registers cluster west (annotation ${CLUSTER_NAME}), not east: give another --secret-name`,
    );
    const north = link("north", "north", "cluster-credentials-east");
    const refusal = `secret/cluster-credentials-east in namespace ${NS} holds the credentials of link.multicluster.linkerd.io/north (cluster north), not east: give another --secret-name`;
    assert.equal(linkTargetRefusal(objects, [north], secret(SECRET_TYPE)), refusal);
    // Not written yet: writing it would hand Link north this cluster's credentials.
    assert.equal(linkTargetRefusal(objects, [north], undefined), refusal);
  });

  it("warns of another Link registering the same cluster, which the controller keeps", () => {
    assert.deepEqual(duplicateLinkWarnings(objects, [link("east", "east"), link("west", "west")]), []);
    assert.deepEqual(duplicateLinkWarnings(objects, [link("east-old", "east")]), [
      "warning: link.multicluster.linkerd.io/east-old already registers cluster east: the controller keeps the Link registered first and reports the other DuplicateCluster\n",
    ]);
  });
});
