/**
 * The installation manifests on a real API server: `kubectl apply --server-side -k
 * deploy/` (the pinned kubectl and its built-in kustomize) is accepted object by object,
 * applying again changes nothing, the Deployment carries the settings docs/DEPLOY.md
 * promises, its Pods pass Pod Security `restricted`, and its ServiceAccount may do what
 * the controller does (and not more). The remote side, `deploy/rbac/remote.yaml`, is
 * applied to a second API server and grants read-only access to Services.
 *
 * No kubelet runs here, so the Deployment's Pods are never started: the API server's
 * validation and admission (server-side apply, server dry-run) are what is tested.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { loadAllYaml } from "@kubernetes/client-node";
import { ensureKubectl } from "../../sandbox/binaries.ts";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { installMcsCrds } from "../../sandbox/mcs-crds.ts";
import { adminKubeConfig } from "../helpers/kube.ts";
import { at, idOf, Kubectl, type KubeObject, type ToolResult } from "../helpers/kubectl.ts";

const NAMESPACE = "fleet-mirror";
const SERVICE_ACCOUNT = `system:serviceaccount:${NAMESPACE}:fleet-mirror`;
const REMOTE_READER = "system:serviceaccount:fleet-mirror-remote:fleet-mirror-reader";
const deployDir = fileURLToPath(new URL("../../deploy/", import.meta.url));
const remoteManifest = join(deployDir, "rbac", "remote.yaml");
const shardedDir = join(deployDir, "sharded");

describe("deploy/: the installation manifests on a real API server", () => {
  let plane: ControlPlane;
  let cacheDir: string;
  let kubectlTool: Kubectl;
  type Cluster = "local" | "east";
  const kubectl = (cluster: Cluster, args: readonly string[], input?: string): Promise<ToolResult> =>
    kubectlTool.run(cluster, args, input);
  const kubectlOk = (cluster: Cluster, args: readonly string[], input?: string): Promise<string> =>
    kubectlTool.ok(cluster, args, input);
  const getJson = (cluster: Cluster, args: readonly string[], input?: string): Promise<unknown> =>
    kubectlTool.getJson(cluster, args, input);
  const canI = (cluster: Cluster, user: string, args: readonly string[]): Promise<boolean> =>
    kubectlTool.canI(cluster, user, args);

  let applyStderr = "";

  before(async () => {
    const kubectlPath = await ensureKubectl();
    cacheDir = await mkdtemp(join(tmpdir(), "fleet-mirror-kubectl-"));
    plane = await ControlPlane.start({ clusters: ["local", "east"] });
    // The MCS CRDs where the controller runs: `kubectl auth can-i` maps a resource through
    // discovery, and answers "no" for a type the server does not serve.
    await installMcsCrds(adminKubeConfig(plane.cluster("local")));
    kubectlTool = new Kubectl(kubectlPath, cacheDir, (cluster) => plane.cluster(cluster).adminKubeconfigPath);
  });
  after(async () => {
    await plane?.stop();
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
  });

  it("uses kubectl at the pinned Kubernetes version, the same as the API server", async () => {
    const version = JSON.parse(await kubectlOk("local", ["version", "-o", "json"]));
    assert.equal(at(version, "clientVersion.gitVersion"), at(version, "serverVersion.gitVersion"));
  });

  it("accepts `kubectl apply --server-side -k deploy/`, and every rendered object exists", async () => {
    const result = await kubectl("local", ["apply", "--server-side", "-k", deployDir, "-o", "json"]);
    assert.equal(result.code, 0, result.stderr);
    applyStderr = result.stderr;
    const applied = (JSON.parse(result.stdout) as { items?: KubeObject[] }).items ?? [];

    // Every object kustomize renders was applied ...
    const rendered = loadAllYaml(await kubectlOk("local", ["kustomize", deployDir])) as KubeObject[];
    const ids = applied.map(idOf).sort();
    assert.deepEqual(ids, rendered.map(idOf).sort());

    // ... with at least the objects an installation needs ...
    for (const id of [
      "Namespace//fleet-mirror",
      "ServiceAccount/fleet-mirror/fleet-mirror",
      "ClusterRole//fleet-mirror",
      "ClusterRoleBinding//fleet-mirror",
      "Role/fleet-mirror/fleet-mirror",
      "RoleBinding/fleet-mirror/fleet-mirror",
      "Deployment/fleet-mirror/fleet-mirror",
      "PodDisruptionBudget/fleet-mirror/fleet-mirror",
      "Service/fleet-mirror/fleet-mirror-metrics",
    ]) {
      assert.ok(ids.includes(id), `${id} applied (got ${ids.join(", ")})`);
    }

    // ... and each one reads back by kind and name.
    for (const object of rendered) {
      const { apiVersion, kind, metadata } = object;
      // `get -f` answers with a List, even for one object.
      const list = await getJson("local", ["-f", "-"], JSON.stringify({ apiVersion, kind, metadata }));
      const got = at(list, "kind") === "List" ? at(list, "items.0") : list;
      assert.equal(at(got, "metadata.name"), metadata.name, idOf(object));
      assert.equal((at(got, "metadata.labels") as Record<string, string>)["app.kubernetes.io/part-of"], "fleet-mirror");
    }
  });

  it("gives no Pod Security warning for the Deployment (the namespace enforces `restricted`)", async () => {
    assert.doesNotMatch(applyStderr, /PodSecurity|violate/i, applyStderr);
    const labels = at(await getJson("local", ["namespace", NAMESPACE]), "metadata.labels") as Record<string, string>;
    assert.equal(labels["pod-security.kubernetes.io/enforce"], "restricted");
  });

  it("changes nothing when applied again (server dry-run, then diff)", async () => {
    await kubectlOk("local", ["apply", "--server-side", "--dry-run=server", "-k", deployDir]);
    const diff = await kubectl("local", ["diff", "--server-side", "-k", deployDir]);
    assert.equal(diff.code, 0, `kubectl diff found differences:\n${diff.stdout}${diff.stderr}`);
  });

  it("runs two replicas of the non-root, read-only controller with health probes", async () => {
    const deployment = await getJson("local", ["deployment", "fleet-mirror", "-n", NAMESPACE]);
    const pod = at(deployment, "spec.template.spec");
    const container = at(pod, "containers.0");
    const expected: Record<string, unknown> = {
      "spec.replicas": 2,
      "spec.template.spec.serviceAccountName": "fleet-mirror",
      "spec.template.spec.automountServiceAccountToken": true,
      "spec.template.spec.securityContext.runAsNonRoot": true,
      "spec.template.spec.securityContext.runAsUser": 65532,
      "spec.template.spec.securityContext.seccompProfile.type": "RuntimeDefault",
      "spec.template.spec.topologySpreadConstraints.0.topologyKey": "kubernetes.io/hostname",
      "spec.template.spec.containers.length": 1,
    };
    for (const [path, value] of Object.entries(expected)) assert.equal(at(deployment, path), value, path);

    const containerExpected: Record<string, unknown> = {
      image: "ghcr.io/fleet-mirror/fleet-mirror:0.1.0",
      "ports.0.name": "admin",
      "ports.0.containerPort": 9999,
      "livenessProbe.httpGet.path": "/healthz",
      "livenessProbe.httpGet.port": "admin",
      "readinessProbe.httpGet.path": "/readyz",
      "readinessProbe.httpGet.port": "admin",
      "startupProbe.httpGet.path": "/healthz",
      "startupProbe.httpGet.port": "admin",
      "securityContext.runAsNonRoot": true,
      "securityContext.readOnlyRootFilesystem": true,
      "securityContext.allowPrivilegeEscalation": false,
      "securityContext.capabilities.drop.0": "ALL",
      "securityContext.seccompProfile.type": "RuntimeDefault",
      "volumeMounts.0.mountPath": "/tmp",
    };
    for (const [path, value] of Object.entries(containerExpected)) assert.equal(at(container, path), value, path);
    assert.deepEqual(at(container, "args"), ["run", "--leader-elect", "--admin-addr", ":9999"]);
    assert.deepEqual(at(container, "env"), [
      { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
      { name: "POD_NAMESPACE", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } } },
    ]);
    assert.ok(at(container, "resources.limits.memory"), "a memory limit");
    assert.ok(at(container, "resources.requests.memory"), "a memory request");
    assert.ok(at(pod, "volumes.0.emptyDir"), "/tmp is an emptyDir");
  });

  it("admits the Deployment's Pod under Pod Security `restricted`, and refuses a privileged one", async () => {
    const template = at(await getJson("local", ["deployment", "fleet-mirror", "-n", NAMESPACE]), "spec.template");
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "fleet-mirror-admission-check", namespace: NAMESPACE, labels: at(template, "metadata.labels") },
      spec: at(template, "spec"),
    };
    await kubectlOk("local", ["create", "--dry-run=server", "-f", "-"], JSON.stringify(pod));

    const privileged = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "privileged-check", namespace: NAMESPACE },
      spec: { containers: [{ name: "c", image: "busybox", securityContext: { privileged: true } }] },
    };
    const refused = await kubectl("local", ["create", "--dry-run=server", "-f", "-"], JSON.stringify(privileged));
    assert.notEqual(refused.code, 0, "a privileged Pod is refused in the namespace");
    assert.match(refused.stderr, /PodSecurity "restricted/);
  });

  it("keeps one replica through voluntary disruptions and exposes the metrics port", async () => {
    const deployment = await getJson("local", ["deployment", "fleet-mirror", "-n", NAMESPACE]);
    const pdb = await getJson("local", ["poddisruptionbudget", "fleet-mirror", "-n", NAMESPACE]);
    assert.equal(at(pdb, "spec.minAvailable"), 1);
    assert.deepEqual(at(pdb, "spec.selector.matchLabels"), at(deployment, "spec.selector.matchLabels"));

    const service = await getJson("local", ["service", "fleet-mirror-metrics", "-n", NAMESPACE]);
    assert.deepEqual(at(service, "spec.ports.0"), {
      name: "metrics",
      port: 9999,
      protocol: "TCP",
      targetPort: "admin",
    });
    assert.deepEqual(at(service, "spec.selector"), at(deployment, "spec.selector.matchLabels"));
    const annotations = at(service, "metadata.annotations") as Record<string, string>;
    assert.equal(annotations["prometheus.io/scrape"], "true");
    assert.equal(annotations["prometheus.io/port"], "9999");
  });

  it("lets the Deployment's ServiceAccount do what the controller does, and no more", async () => {
    const allowed: readonly (readonly string[])[] = [
      // credentials Secrets, in its own namespace
      ["get", "secrets", "-n", NAMESPACE],
      ["list", "secrets", "-n", NAMESPACE],
      ["watch", "secrets", "-n", NAMESPACE],
      // mirrors, in any namespace
      ["list", "services", "--all-namespaces"],
      ["watch", "endpoints", "--all-namespaces"],
      ["create", "services", "-n", "shop"],
      ["update", "services", "-n", "shop"],
      ["delete", "services", "-n", "shop"],
      ["create", "endpoints", "-n", "shop"],
      ["update", "endpoints", "-n", "shop"],
      ["delete", "endpoints", "-n", "shop"],
      // mirror EndpointSlices (SPEC §9), in any namespace
      ["watch", "endpointslices.discovery.k8s.io", "--all-namespaces"],
      ["get", "endpointslices.discovery.k8s.io", "-n", "shop"],
      ["create", "endpointslices.discovery.k8s.io", "-n", "shop"],
      ["update", "endpointslices.discovery.k8s.io", "-n", "shop"],
      ["delete", "endpointslices.discovery.k8s.io", "-n", "shop"],
      // a mirror's missing namespace
      ["watch", "namespaces"],
      ["create", "namespaces"],
      // Events on mirrors and on credentials Secrets
      ["create", "events", "-n", "shop"],
      ["create", "events", "-n", NAMESPACE],
      // the Events it recorded before, listed once at start (a restart repeats none)
      ["list", "events", "--all-namespaces"],
      // --leader-elect: the Lease in its own namespace, by name; create (not limitable by
      // name) and list (the Leases of another layout)
      ["get", "leases.coordination.k8s.io/fleet-mirror", "-n", NAMESPACE],
      ["update", "leases.coordination.k8s.io/fleet-mirror", "-n", NAMESPACE],
      ["create", "leases.coordination.k8s.io", "-n", NAMESPACE],
      ["list", "leases.coordination.k8s.io", "-n", NAMESPACE],
      // the local Service and pod CIDRs, where gateway addresses are refused (SPEC §10)
      ["list", "servicecidrs.networking.k8s.io"],
      ["watch", "servicecidrs.networking.k8s.io"],
      ["list", "nodes"],
      ["watch", "nodes"],
      // the local cluster's own ServiceExports and their conditions (SPEC §16)
      ["watch", "serviceexports.multicluster.x-k8s.io", "--all-namespaces"],
      ["update", "serviceexports.multicluster.x-k8s.io", "--subresource=status", "-n", "shop"],
    ];
    const denied: readonly (readonly string[])[] = [
      ["get", "nodes"],
      ["update", "nodes"],
      ["create", "servicecidrs.networking.k8s.io"],
      ["get", "secrets", "-n", "default"],
      ["list", "secrets", "--all-namespaces"],
      ["create", "secrets", "-n", NAMESPACE],
      ["update", "namespaces"],
      ["delete", "namespaces"],
      ["patch", "endpointslices.discovery.k8s.io", "-n", "shop"],
      ["deletecollection", "endpointslices.discovery.k8s.io", "-n", "shop"],
      ["watch", "events", "--all-namespaces"],
      ["delete", "events", "-n", NAMESPACE],
      ["create", "pods", "-n", NAMESPACE],
      ["create", "leases.coordination.k8s.io", "-n", "default"],
      // no other Lease of its namespace, and nothing patched (every write is a create or a replace)
      ["get", "leases.coordination.k8s.io/another-controller", "-n", NAMESPACE],
      ["update", "leases.coordination.k8s.io/another-controller", "-n", NAMESPACE],
      ["delete", "leases.coordination.k8s.io/fleet-mirror", "-n", NAMESPACE],
      ["patch", "services", "-n", "shop"],
      ["patch", "endpoints", "-n", "shop"],
      ["patch", "events", "-n", NAMESPACE],
      ["create", "clusterroles"],
      ["update", "serviceexports.multicluster.x-k8s.io", "-n", "shop"],
      ["delete", "serviceexports.multicluster.x-k8s.io", "-n", "shop"],
    ];
    const wrong: string[] = [];
    for (const args of allowed)
      if (!(await canI("local", SERVICE_ACCOUNT, args))) wrong.push(`denied: ${args.join(" ")}`);
    for (const args of denied) if (await canI("local", SERVICE_ACCOUNT, args)) wrong.push(`allowed: ${args.join(" ")}`);
    assert.deepEqual(wrong, []);
  });

  it("applies the remote side (deploy/rbac/remote.yaml) server-side: read-only access to Services, EndpointSlices and ServiceExports", async () => {
    await kubectlOk("east", ["apply", "--server-side", "-f", remoteManifest]);
    await kubectlOk("east", ["apply", "--server-side", "--dry-run=server", "-f", remoteManifest]);
    const diff = await kubectl("east", ["diff", "--server-side", "-f", remoteManifest]);
    assert.equal(diff.code, 0, `kubectl diff found differences:\n${diff.stdout}${diff.stderr}`);
    await getJson("east", ["clusterrole", "fleet-mirror-remote-reader"]);
    await getJson("east", ["serviceaccount", "fleet-mirror-reader", "-n", "fleet-mirror-remote"]);

    // kubectl resolves a resource through discovery: the MCS CRDs make serviceexports one.
    await installMcsCrds(adminKubeConfig(plane.cluster("east")));
    const wrong: string[] = [];
    for (const verb of ["get", "list", "watch"]) {
      for (const resource of ["services", "endpointslices.discovery.k8s.io", "serviceexports.multicluster.x-k8s.io"])
        if (!(await canI("east", REMOTE_READER, [verb, resource, "--all-namespaces"])))
          wrong.push(`denied: ${verb} ${resource}`);
    }
    for (const args of [
      ["create", "services", "-n", "default"],
      ["update", "services", "-n", "default"],
      ["create", "endpointslices.discovery.k8s.io", "-n", "default"],
      ["get", "secrets", "-n", "fleet-mirror-remote"],
      ["list", "endpoints", "--all-namespaces"],
      ["list", "pods", "--all-namespaces"],
      ["create", "serviceexports.multicluster.x-k8s.io", "-n", "default"],
      ["list", "serviceimports.multicluster.x-k8s.io", "--all-namespaces"],
    ]) {
      if (await canI("east", REMOTE_READER, args)) wrong.push(`allowed: ${args.join(" ")}`);
    }
    assert.deepEqual(wrong, []);
  });

  // Last: it replaces the base's Deployment and PodDisruptionBudget.
  it("applies the sharded variant (deploy/sharded/) on top of the base: 3 replicas, --shards 6, its Lease layout, 2 of 3 kept, Lease list/delete", async () => {
    const render = async (dir: string, kind: string): Promise<Record<string, unknown>> => {
      const found = (loadAllYaml(await kubectlOk("local", ["kustomize", dir])) as KubeObject[]).find(
        (o) => o.kind === kind,
      );
      assert.ok(found, `${dir} renders a ${kind}`);
      return structuredClone(found) as unknown as Record<string, unknown>;
    };
    // The sharded Deployment is the base's but for its replicas and flags.
    const base = await render(deployDir, "Deployment");
    const sharded = await render(shardedDir, "Deployment");
    assert.equal(at(sharded, "spec.replicas"), 3);
    assert.deepEqual(at(sharded, "spec.template.spec.containers.0.args"), [
      "run",
      "--leader-elect",
      "--shards",
      "6",
      "--expected-replicas",
      "3",
      "--admin-addr",
      ":9999",
    ]);
    // The Lease layout, on the Deployment and its Pods: the single leader's, then 6 shards'.
    for (const [d, layout] of [
      [base, "fleet-mirror/leader"],
      [sharded, "fleet-mirror/s6"],
    ] as const) {
      for (const path of ["metadata.annotations", "spec.template.metadata.annotations"])
        assert.deepEqual(at(d, path), { "mirror.linkerd.io/lease-layout": layout }, path);
      delete (d["metadata"] as Record<string, unknown>)["annotations"];
      delete (at(d, "spec.template.metadata") as Record<string, unknown>)["annotations"];
      delete (d["spec"] as Record<string, unknown>)["replicas"];
      delete (at(d, "spec.template.spec.containers.0") as Record<string, unknown>)["args"];
    }
    assert.deepEqual(sharded, base, "deploy/sharded/deployment.yaml drifted from deploy/deployment.yaml");

    await kubectlOk("local", ["apply", "--server-side", "-k", shardedDir]);
    const diff = await kubectl("local", ["diff", "--server-side", "-k", shardedDir]);
    assert.equal(diff.code, 0, `kubectl diff found differences:\n${diff.stdout}${diff.stderr}`);
    const deployment = await getJson("local", ["deployment", "fleet-mirror", "-n", NAMESPACE]);
    assert.equal(at(deployment, "spec.replicas"), 3);
    assert.equal(
      at(await getJson("local", ["poddisruptionbudget", "fleet-mirror", "-n", NAMESPACE]), "spec.minAvailable"),
      2,
    );

    const wrong: string[] = [];
    for (const verb of ["list", "delete", "get", "create", "update"])
      if (!(await canI("local", SERVICE_ACCOUNT, [verb, "leases.coordination.k8s.io", "-n", NAMESPACE])))
        wrong.push(`denied: ${verb} leases`);
    for (const args of [
      ["watch", "leases.coordination.k8s.io", "-n", NAMESPACE],
      ["patch", "leases.coordination.k8s.io", "-n", NAMESPACE],
      ["list", "leases.coordination.k8s.io", "-n", "default"],
      ["delete", "leases.coordination.k8s.io", "-n", "kube-system"],
    ])
      if (await canI("local", SERVICE_ACCOUNT, args)) wrong.push(`allowed: ${args.join(" ")}`);
    assert.deepEqual(wrong, []);
  });
});
