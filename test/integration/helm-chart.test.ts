/**
 * The Helm chart (charts/fleet-mirror) with the pinned helm, kubectl and API server:
 * `helm lint` (strict too) passes; with its default values the chart renders exactly the
 * objects of `kubectl kustomize deploy/`, and with values-sharded.yaml those of deploy/
 * with deploy/sharded/ on top (this comparison is how the chart and deploy/ stay in
 * step); the schema and the chart refuse bad values with the value's name; both the
 * default and a maximal rendering are accepted server-side by a real API server; helm
 * itself installs, upgrades (to sharded) and uninstalls the release; and a
 * controller running as the chart's ServiceAccount, with the flags the chart renders,
 * mirrors a remote cluster's Service.
 *
 * No kubelet runs here: the controller is started as a process next to the API server
 * with the Deployment's own arguments and a token of the chart's ServiceAccount.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { load, loadAll } from "js-yaml";
import { ensureHelm, ensureKubectl, ensureMonitoringCrds } from "../../sandbox/binaries.ts";
import type { ControlPlane } from "../../sandbox/control-plane.ts";
import { RULES_FILE } from "../../scripts/monitoring/render-prometheusrule.ts";
import { EXPORTED_LABEL } from "../../src/core/export.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { at, idOf, Kubectl, type KubeObject, runTool, type ToolResult } from "../helpers/kubectl.ts";

const chartDir = fileURLToPath(new URL("../../charts/fleet-mirror/", import.meta.url));
const deployDir = fileURLToPath(new URL("../../deploy/", import.meta.url));
const shardedValues = join(chartDir, "values-sharded.yaml");
const maximalValues = fileURLToPath(new URL("../fixtures/helm/values-maximal.yaml", import.meta.url));
/** Labels only a Helm release carries; the comparison with deploy/ ignores them. */
const HELM_LABELS = [
  "app.kubernetes.io/managed-by",
  "app.kubernetes.io/instance",
  "app.kubernetes.io/version",
  "helm.sh/chart",
];
/** Renders the release namespace too, as deploy/ does, so the two renderings hold the same objects. */
const WITH_NAMESPACE = ["--set", "namespace.create=true"];

function parseYaml(text: string): KubeObject[] {
  return (loadAll(text) as unknown[]).filter((o): o is KubeObject => typeof o === "object" && o !== null);
}

/** `objects` by identity, with Helm's own labels dropped (an object left with no labels loses the field). */
function byId(objects: readonly KubeObject[]): Map<string, unknown> {
  const map = new Map<string, unknown>();
  for (const object of objects) {
    const copy = structuredClone(object) as { metadata: { labels?: Record<string, string> } };
    for (const key of HELM_LABELS) delete copy.metadata.labels?.[key];
    if (copy.metadata.labels && Object.keys(copy.metadata.labels).length === 0) delete copy.metadata.labels;
    map.set(idOf(object), copy);
  }
  return map;
}

describe("charts/fleet-mirror: the Helm chart", () => {
  let helmPath: string;
  let homeDir: string;
  let kubectl: Kubectl;
  let fleet: Fleet;
  let controller: ControllerProcess | undefined;

  /** helm with its cache, config and data in a private directory (nothing from ~ is read). */
  const helm = (args: readonly string[]): Promise<ToolResult> =>
    runTool(helmPath, args, {
      env: {
        ...process.env,
        HELM_CACHE_HOME: join(homeDir, "cache"),
        HELM_CONFIG_HOME: join(homeDir, "config"),
        HELM_DATA_HOME: join(homeDir, "data"),
      },
    });
  const helmOk = async (args: readonly string[]): Promise<string> => {
    const result = await helm(args);
    assert.equal(result.code, 0, `helm ${args.join(" ")} exited ${result.code}:\n${result.stderr}${result.stdout}`);
    return result.stdout;
  };
  /** `helm template` of release fleet-mirror in namespace fleet-mirror, as YAML text. */
  const template = (args: readonly string[] = []): Promise<string> =>
    helmOk(["template", "fleet-mirror", chartDir, "--namespace", CONTROLLER_NAMESPACE, ...args]);

  /** Applies `yaml` to `plane`'s local cluster; `kubectl` is bound to `plane` from then on. */
  const applyServerSide = async (plane: ControlPlane, kubectlPath: string, yaml: string): Promise<void> => {
    kubectl = new Kubectl(kubectlPath, join(homeDir, "kubectl"), (c) => plane.cluster(c).adminKubeconfigPath);
    const result = await kubectl.run("local", ["apply", "--server-side", "-f", "-"], yaml);
    assert.equal(result.code, 0, result.stderr);
    assert.doesNotMatch(result.stderr, /PodSecurity|violate/i, result.stderr);
  };

  before(async () => {
    helmPath = await ensureHelm();
    homeDir = await mkdtemp(join(tmpdir(), "fleet-mirror-helm-"));
    const kubectlPath = await ensureKubectl();
    const rendered = await template(WITH_NAMESPACE);
    // The controller's namespace, ServiceAccount and RBAC come from the chart, not deploy/rbac/local.yaml.
    fleet = await Fleet.start(["east"], { installIdentity: (plane) => applyServerSide(plane, kubectlPath, rendered) });
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    if (homeDir) await rm(homeDir, { recursive: true, force: true });
  });

  it("is built from the pinned helm.sh/helm/v4 module", async () => {
    assert.match((await helmOk(["version", "--template", "{{.Version}}"])).trim(), /^v4\.\d+\.\d+$/);
  });

  it("passes `helm lint`, strict too, with the default, sharded and maximal values", async () => {
    await helmOk(["lint", chartDir]);
    await helmOk(["lint", "--strict", chartDir]);
    await helmOk(["lint", "--strict", chartDir, "-f", shardedValues]);
    await helmOk(["lint", "--strict", chartDir, "-f", maximalValues]);
  });

  it("renders with its default values exactly the objects of `kubectl kustomize deploy/`", async () => {
    const chart = byId(parseYaml(await template(WITH_NAMESPACE)));
    const kustomize = byId(parseYaml(await kubectl.ok("local", ["kustomize", deployDir])));
    assert.deepEqual([...chart.keys()].sort(), [...kustomize.keys()].sort());
    for (const [id, object] of kustomize) assert.deepEqual(chart.get(id), object, `${id} differs from deploy/`);
  });

  it("renders with values-sharded.yaml exactly the objects of deploy/ with deploy/sharded/ on top", async () => {
    const chart = byId(parseYaml(await template([...WITH_NAMESPACE, "-f", shardedValues])));
    const expected = byId(parseYaml(await kubectl.ok("local", ["kustomize", deployDir])));
    for (const [id, object] of byId(parseYaml(await kubectl.ok("local", ["kustomize", join(deployDir, "sharded")]))))
      expected.set(id, object);
    assert.deepEqual([...chart.keys()].sort(), [...expected.keys()].sort());
    for (const [id, object] of expected) assert.deepEqual(chart.get(id), object, `${id} differs from deploy/sharded/`);
  });

  it("renders with links.enabled exactly the objects of deploy/ with the deploy/links component", async () => {
    const chart = byId(parseYaml(await template([...WITH_NAMESPACE, "--set", "links.enabled=true"])));
    const overlay = await mkdtemp(join(tmpdir(), "fleet-mirror-links-overlay-"));
    try {
      const rel = (dir: string) => relative(overlay, dir);
      writeFileSync(
        join(overlay, "kustomization.yaml"),
        `resources: [${rel(deployDir)}]\ncomponents: [${rel(join(deployDir, "links"))}]\n`,
      );
      const args = ["kustomize", "--load-restrictor", "LoadRestrictionsNone", overlay];
      const expected = byId(parseYaml(await kubectl.ok("local", args)));
      assert.deepEqual([...chart.keys()].sort(), [...expected.keys()].sort());
      for (const [id, object] of expected) assert.deepEqual(chart.get(id), object, `${id} differs from deploy/links/`);
    } finally {
      await rm(overlay, { recursive: true, force: true });
    }
  });

  it("renders every value of the maximal values file where it belongs", async () => {
    const objects = parseYaml(await template(["-f", maximalValues]));
    const find = (kind: string): unknown => objects.find((o) => o.kind === kind);
    const deployment = find("Deployment");
    const container = at(deployment, "spec.template.spec.containers.0");
    assert.equal(at(deployment, "spec.replicas"), 3);
    assert.equal(at(container, "image"), "registry.example.com/mirrors/fleet-mirror:0.1.0-rc.1");
    assert.equal(at(container, "imagePullPolicy"), "Always");
    assert.deepEqual(at(container, "args"), [
      ...["run", "--leader-elect", "--shards", "4", "--expected-replicas", "3", "--admin-addr", ":9999"],
      ...["--leader-election-id", "fleet-mirror-blue", "--leader-election-lease-duration", "15s"],
      ...["--leader-election-renew-deadline", "10s", "--leader-election-retry-period", "3s"],
      ...["--max-threads", "4", "--max-concurrent-starts", "2", "--actor-max-old-space-mb", "128"],
      ...["--endpoints-api", "both", "--export-selector", "example.com/exported=yes"],
      ...["--federated-selector", "example.com/federated=member", "--links", "mesh-links"],
      ...["--write-qps", "100", "--log-level", "debug"],
    ]);
    assert.deepEqual(at(container, "resources"), {
      requests: { cpu: "200m", memory: "768Mi" },
      limits: { cpu: "4", memory: "2Gi" },
    });
    assert.deepEqual(at(deployment, "spec.template.spec.nodeSelector"), { "kubernetes.io/os": "linux" });
    assert.equal(at(deployment, "spec.template.spec.tolerations.0.key"), "dedicated");
    assert.ok(at(deployment, "spec.template.spec.affinity.nodeAffinity"));
    assert.deepEqual(at(deployment, "spec.template.metadata.annotations"), {
      "mirror.linkerd.io/lease-layout": "fleet-mirror-blue/s4",
      "example.com/owner": "platform",
    });
    assert.equal(at(find("PodDisruptionBudget"), "spec.minAvailable"), 2);
    const namespaceLabels = at(find("Namespace"), "metadata.labels") as Record<string, string>;
    assert.equal(namespaceLabels["pod-security.kubernetes.io/enforce"], "restricted");
    const monitor = find("ServiceMonitor");
    assert.equal(at(monitor, "apiVersion"), "monitoring.coreos.com/v1");
    assert.equal((at(monitor, "metadata.labels") as Record<string, string>)["release"], "prometheus");
    assert.deepEqual(at(monitor, "spec.endpoints"), [
      { port: "metrics", path: "/metrics", interval: "30s", scrapeTimeout: "10s" },
    ]);
    assert.deepEqual(at(monitor, "spec.selector.matchLabels"), at(deployment, "spec.selector.matchLabels"));
    assert.ok(objects.some((o) => o.kind === "Role" && o.metadata.name === "fleet-mirror-shards"));
    // links.enabled: the Role of deploy/links/rbac.yaml, in the Links' namespace.
    const linksRole = objects.find((o) => o.kind === "Role" && o.metadata.name === "fleet-mirror-links");
    assert.equal(at(linksRole, "metadata.namespace"), "mesh-links");
    assert.deepEqual(
      (at(linksRole, "rules") as { resources: string[] }[]).map((r) => r.resources.join()),
      ["links", "links/status", "secrets"],
    );
    // The PrometheusRule carries deploy/monitoring's alert rules unchanged ({{ $labels.* }} left to Prometheus).
    const rule = find("PrometheusRule");
    assert.equal((at(rule, "metadata.labels") as Record<string, string>)["release"], "prometheus");
    assert.deepEqual(at(rule, "spec"), load(readFileSync(RULES_FILE, "utf8")));
    // Off by default: no ServiceMonitor or PrometheusRule without the operator's CRDs.
    assert.ok(!parseYaml(await template()).some((o) => o.kind === "ServiceMonitor" || o.kind === "PrometheusRule"));
  });

  it("renders a shadow (dryRun) as one replica running `run --dry-run`, without a Lease", async () => {
    const shadow = ["dryRun=true", "leaderElection.enabled=false", "replicas=1", "podDisruptionBudget.enabled=false"];
    const objects = parseYaml(await template(shadow.flatMap((v) => ["--set", v])));
    const deployment = objects.find((o) => o.kind === "Deployment");
    assert.equal(at(deployment, "spec.replicas"), 1);
    assert.deepEqual(at(deployment, "spec.template.spec.containers.0.args"), [
      "run",
      "--dry-run",
      "--admin-addr",
      ":9999",
    ]);
    assert.ok(!objects.some((o) => o.kind === "PodDisruptionBudget"));
  });

  it("refuses bad values before rendering, naming the value", async () => {
    const cases: readonly (readonly [string, RegExp])[] = [
      ["replicas=-1", /replicas/],
      ["image.pullPolicy=Sometimes", /pullPolicy/],
      ["endpointsApi=slices", /endpointsApi/],
      ["placement.maxThreads=lots", /maxThreads/],
      ["leaderElection.leaseDuration=ten", /leaseDuration/],
      ["export.gatewaySelector=no-equals-sign", /gatewaySelector/],
      ["sharding.shards=0", /shards/],
      ["replica=3", /replica/],
      ["serviceMonitor.enabled=maybe", /enabled/],
      ["dryRun=maybe", /dryRun/],
    ];
    for (const [value, message] of cases) {
      const result = await helm(["template", "fleet-mirror", chartDir, "--set", value]);
      assert.notEqual(result.code, 0, `--set ${value} was accepted`);
      assert.match(result.stderr, /schema/, `--set ${value}: ${result.stderr}`);
      assert.match(result.stderr, message, `--set ${value}: ${result.stderr}`);
    }
    for (const [values, message] of [
      [["replicas=2", "leaderElection.enabled=false"], /need leaderElection.enabled/],
      [["sharding.shards=3", "replicas=1", "leaderElection.enabled=false"], /needs leaderElection.enabled/],
      [["podDisruptionBudget.minAvailable=2"], /would block every voluntary disruption/],
      [["dryRun=true"], /dryRun needs leaderElection.enabled=false/],
    ] as const) {
      const result = await helm(["template", "fleet-mirror", chartDir, ...values.flatMap((v) => ["--set", v])]);
      assert.notEqual(result.code, 0, `${values.join(", ")} was accepted`);
      assert.match(result.stderr, message, result.stderr);
    }
  });

  it("is accepted server-side with its default values, and applying again changes nothing", async () => {
    const rendered = await template(WITH_NAMESPACE);
    await kubectl.ok("local", ["apply", "--server-side", "--dry-run=server", "-f", "-"], rendered);
    const diff = await kubectl.run("local", ["diff", "--server-side", "-f", "-"], rendered);
    assert.equal(diff.code, 0, `kubectl diff found differences:\n${diff.stdout}${diff.stderr}`);
    const namespace = await kubectl.getJson("local", ["namespace", CONTROLLER_NAMESPACE]);
    assert.equal(
      (at(namespace, "metadata.labels") as Record<string, string>)["pod-security.kubernetes.io/enforce"],
      "restricted",
    );
  });

  it("is accepted server-side with the maximal values, ServiceMonitor and PrometheusRule included", async () => {
    const crds = await ensureMonitoringCrds();
    for (const [file, crd] of [
      [crds.serviceMonitors, "servicemonitors"],
      [crds.prometheusRules, "prometheusrules"],
    ] as const) {
      await kubectl.ok("local", ["apply", "--server-side", "-f", file]);
      await kubectl.ok("local", [
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        `crd/${crd}.monitoring.coreos.com`,
      ]);
    }
    // The Links' namespace is linkerd's (links.namespace): it exists before the chart is installed.
    await kubectl.ok("local", ["create", "namespace", "mesh-links"]);
    const rendered = await template(["-f", maximalValues]);
    const result = await kubectl.run("local", ["apply", "--server-side", "-f", "-"], rendered);
    assert.equal(result.code, 0, result.stderr);
    assert.doesNotMatch(result.stderr, /PodSecurity|violate/i, result.stderr);
    const monitor = await kubectl.getJson("local", [
      "servicemonitors.monitoring.coreos.com",
      "fleet-mirror",
      "-n",
      CONTROLLER_NAMESPACE,
    ]);
    assert.equal(at(monitor, "spec.endpoints.0.port"), "metrics");
    const rule = await kubectl.getJson("local", [
      "prometheusrules.monitoring.coreos.com",
      "fleet-mirror",
      "-n",
      CONTROLLER_NAMESPACE,
    ]);
    assert.ok(
      (at(rule, "spec.groups.0.rules") as readonly unknown[]).length > 0,
      "the PrometheusRule was stored without its rules",
    );
    const diff = await kubectl.run("local", ["diff", "--server-side", "-f", "-"], rendered);
    assert.equal(diff.code, 0, `kubectl diff found differences:\n${diff.stdout}${diff.stderr}`);
  });

  it("installs, upgrades to sharded and uninstalls as a Helm release (on remote `east`, where nothing else is installed)", async () => {
    const kubeconfig = fleet.plane.cluster("east").adminKubeconfigPath;
    const release = ["fleet-mirror", chartDir, "--namespace", "fleet-mirror", "--kubeconfig", kubeconfig];
    await helmOk(["install", ...release, "--create-namespace"]);
    const deployment = await kubectl.getJson("east", ["deployment", "fleet-mirror", "-n", CONTROLLER_NAMESPACE]);
    assert.equal(
      (at(deployment, "metadata.annotations") as Record<string, string>)["meta.helm.sh/release-name"],
      "fleet-mirror",
    );
    assert.equal(at(deployment, "spec.replicas"), 2);

    await helmOk(["upgrade", ...release, "-f", shardedValues]);
    const sharded = await kubectl.getJson("east", ["deployment", "fleet-mirror", "-n", CONTROLLER_NAMESPACE]);
    assert.equal(at(sharded, "spec.replicas"), 3);
    await kubectl.getJson("east", ["role", "fleet-mirror-shards", "-n", CONTROLLER_NAMESPACE]);
    const history = JSON.parse(
      await helmOk(["history", "fleet-mirror", "-n", "fleet-mirror", "--kubeconfig", kubeconfig, "-o", "json"]),
    );
    assert.deepEqual(
      (history as { revision: number }[]).map((r) => r.revision),
      [1, 2],
    );

    await helmOk(["uninstall", "fleet-mirror", "-n", "fleet-mirror", "--kubeconfig", kubeconfig, "--wait"]);
    for (const args of [
      ["clusterrole", "fleet-mirror"],
      ["deployment", "fleet-mirror", "-n", CONTROLLER_NAMESPACE],
    ]) {
      const result = await kubectl.run("east", ["get", ...args, "--ignore-not-found", "-o", "name"]);
      assert.equal(result.stdout.trim(), "", `${args.join(" ")} left behind by helm uninstall`);
    }
  });

  it("makes an upgrade that changes the Lease layout a Recreate, and one that keeps it a RollingUpdate (on remote `east`)", async () => {
    const kubeconfig = fleet.plane.cluster("east").adminKubeconfigPath;
    const release = ["fleet-mirror", chartDir, "--namespace", "fleet-mirror", "--kubeconfig", kubeconfig];
    const live = async (): Promise<[unknown, unknown]> => {
      const d = await kubectl.getJson("east", ["deployment", "fleet-mirror", "-n", CONTROLLER_NAMESPACE]);
      const layout = (at(d, "metadata.annotations") as Record<string, string>)["mirror.linkerd.io/lease-layout"];
      assert.equal(
        (at(d, "spec.template.metadata.annotations") as Record<string, string>)["mirror.linkerd.io/lease-layout"],
        layout,
      );
      return [at(d, "spec.strategy.type"), layout];
    };
    // Without a cluster to read, the same layout as ever: RollingUpdate (the controller keeps layouts apart).
    const offline = parseYaml(await template(["-f", shardedValues])).find((o) => o.kind === "Deployment");
    assert.equal(at(offline, "spec.strategy.type"), "RollingUpdate");
    try {
      await helmOk(["install", ...release, "--create-namespace"]);
      assert.deepEqual(await live(), ["RollingUpdate", "fleet-mirror/leader"]);
      await helmOk(["upgrade", ...release, "-f", shardedValues]);
      assert.deepEqual(await live(), ["Recreate", "fleet-mirror/s6"], "turning sharding on");
      await helmOk(["upgrade", ...release, "-f", shardedValues, "--set", "podAnnotations.rollout=again"]);
      assert.deepEqual(await live(), ["RollingUpdate", "fleet-mirror/s6"], "the same layout");
      await helmOk(["upgrade", ...release, "-f", shardedValues, "--set", "sharding.shards=4"]);
      assert.deepEqual(await live(), ["Recreate", "fleet-mirror/s4"], "another shard count");
      await helmOk(["upgrade", ...release, "-f", shardedValues, "--set", "sharding.shards=4"]);
      assert.deepEqual(await live(), ["RollingUpdate", "fleet-mirror/s4"]);
      await helmOk(["upgrade", ...release, "--set", "leaderElection.leaseName=fleet-mirror-green"]);
      assert.deepEqual(await live(), ["Recreate", "fleet-mirror-green/leader"], "another Lease id, sharding off");
      // A release of an earlier chart carries no layout: its sharded Leases had other names.
      await kubectl.ok("east", [
        "annotate",
        "deployment",
        "fleet-mirror",
        "-n",
        CONTROLLER_NAMESPACE,
        "mirror.linkerd.io/lease-layout-",
      ]);
      await helmOk(["upgrade", ...release, "--set", "leaderElection.leaseName=fleet-mirror-green"]);
      assert.deepEqual(await live(), ["Recreate", "fleet-mirror-green/leader"], "no layout recorded");
    } finally {
      await helmOk(["uninstall", "fleet-mirror", "-n", "fleet-mirror", "--kubeconfig", kubeconfig, "--wait"]);
    }
  });

  // After the maximal rendering: its RBAC (sharding's Lease get/update/delete included) is in place.
  it("lets a controller running as the chart's ServiceAccount, with the chart's flags, mirror a remote cluster", async () => {
    const deployment = await kubectl.getJson("local", ["deployment", "fleet-mirror", "-n", CONTROLLER_NAMESPACE]);
    const args = at(deployment, "spec.template.spec.containers.0.args") as string[];
    // The Deployment's arguments but the admin address (the sandbox listens on loopback only).
    const adminAt = args.indexOf("--admin-addr");
    const chartArgs = args.filter((_, i) => i > 0 && i !== adminAt && i !== adminAt + 1);
    assert.ok(chartArgs.includes("--shards") && chartArgs.includes("--leader-elect"), chartArgs.join(" "));

    await fleet.createGateway("east", {
      namespace: "linkerd-multicluster",
      name: "linkerd-gateway",
      ingress: [{ ip: "198.18.7.1" }],
    });
    await fleet.createService("east", "shop", "cart", { gateway: false, labels: { "example.com/exported": "yes" } });
    await fleet.createService("east", "shop", "ignored", { gateway: false, labels: { [EXPORTED_LABEL]: "true" } });
    await fleet.register("east");
    controller = await fleet.startProcess(chartArgs, { env: { POD_NAME: "fleet-mirror-chart-0" } });
    // Label export with the chart's --export-selector, addresses in both APIs (--endpoints-api both).
    await fleet.waitForMirror("shop", "cart-east", () => true, 120_000);
    await fleet.waitForEndpoints("shop", "cart-east", (ep) => (ep.subsets ?? []).length > 0, 60_000);
    // The controller's default label does not export: the chart's selector replaced it.
    assert.equal(await fleet.localService("shop", "ignored-east"), undefined);
    const lease = await kubectl.getJson("local", ["lease", "fleet-mirror-blue-s4-shard-0", "-n", CONTROLLER_NAMESPACE]);
    assert.equal(at(lease, "spec.holderIdentity"), "fleet-mirror-chart-0");
  });
});
