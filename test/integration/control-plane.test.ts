/**
 * Smoke tests of the sandbox control plane: real etcd and kube-apiserver processes,
 * talked to through @kubernetes/client-node. Nothing here stubs the Kubernetes API.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Watch } from "@kubernetes/client-node";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import { adminKubeConfig, coreApi, eventually, kubeConfigFromString, statusCode } from "../helpers/kube.ts";

describe("sandbox control plane", () => {
  let plane: ControlPlane;

  before(async () => {
    plane = await ControlPlane.start({ clusters: ["local", "east"], ownEtcd: ["east"] });
  });
  after(async () => {
    await plane?.stop();
  });

  it("creates, lists and watches a Service on a remote API server through client-node", async () => {
    const kc = adminKubeConfig(plane.cluster("east"));
    const core = coreApi(kc);
    await core.createNamespace({ body: { metadata: { name: "smoke" } } });

    const seen: string[] = [];
    const watch = new Watch(kc);
    const request = await watch.watch(
      "/api/v1/namespaces/smoke/services",
      {},
      (phase, obj: { metadata?: { name?: string } }) => seen.push(`${phase} ${obj.metadata?.name}`),
      () => {},
    );
    try {
      await core.createNamespacedService({
        namespace: "smoke",
        body: { metadata: { name: "web" }, spec: { ports: [{ name: "http", port: 80 }] } },
      });
      const list = await core.listNamespacedService({ namespace: "smoke" });
      assert.deepEqual(
        list.items.map((s) => s.metadata?.name),
        ["web"],
      );
      assert.match(list.items[0]?.spec?.clusterIP ?? "", /^10\.96\./);
      await eventually("the watch to report the new Service", () => (seen.includes("ADDED web") ? true : undefined));
    } finally {
      request.abort();
    }
  });

  it("denies a write to a token bound to a read-only Role (RBAC is enforced)", async () => {
    const east = plane.cluster("east");
    const token = await mintServiceAccountToken(adminKubeConfig(east), {
      namespace: "rbac-smoke",
      serviceAccount: "reader",
      role: {
        kind: "Role",
        name: "service-reader",
        rules: [{ apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] }],
      },
    });
    const reader = coreApi(
      kubeConfigFromString(
        renderKubeconfig({ cluster: "east", server: east.server, caPem: east.caPem, user: "reader", auth: { token } }),
      ),
    );

    const list = await reader.listNamespacedService({ namespace: "rbac-smoke" });
    assert.deepEqual(list.items, []);
    await assert.rejects(
      reader.createNamespacedService({
        namespace: "rbac-smoke",
        body: { metadata: { name: "nope" }, spec: { ports: [{ port: 80 }] } },
      }),
      (error) => statusCode(error) === 403,
    );
    await assert.rejects(reader.listNamespacedService({ namespace: "default" }), (error) => statusCode(error) === 403);
  });

  it("keeps two API servers with different etcd prefixes apart", async () => {
    const local = coreApi(adminKubeConfig(plane.cluster("local")));
    const east = coreApi(adminKubeConfig(plane.cluster("east")));
    await east.createNamespacedService({
      namespace: "default",
      body: { metadata: { name: "only-in-east" }, spec: { ports: [{ port: 80 }] } },
    });
    await assert.rejects(
      local.readNamespacedService({ namespace: "default", name: "only-in-east" }),
      (e) => statusCode(e) === 404,
    );
    const localNames = (await local.listServiceForAllNamespaces()).items.map((s) => s.metadata?.name);
    assert.ok(!localNames.includes("only-in-east"));
    assert.notEqual(plane.cluster("local").etcdPrefix, plane.cluster("east").etcdPrefix);
  });

  it("stores a cluster named in ownEtcd in an etcd of its own, and nothing of it in the shared one", async () => {
    const east = coreApi(adminKubeConfig(plane.cluster("east")));
    await east.createNamespacedService({
      namespace: "default",
      body: { metadata: { name: "in-easts-etcd" }, spec: { ports: [{ port: 80 }] } },
    });
    const ownPid = plane.ownEtcdProcess("east")?.pid;
    assert.ok(ownPid !== undefined && ownPid !== plane.etcd.pid, "east runs an etcd process of its own");
    assert.equal(plane.ownEtcdProcess("local"), undefined);
    // The shared etcd's keys under each cluster's prefix (etcd's JSON gateway: base64 keys).
    const keysIn = async (prefix: string): Promise<number> => {
      const key = Buffer.from(prefix);
      const end = Buffer.from(key);
      end[end.length - 1] = (end[end.length - 1] ?? 0) + 1;
      const response = await fetch(`${plane.etcdUrl}/v3/kv/range`, {
        method: "POST",
        body: JSON.stringify({ key: key.toString("base64"), range_end: end.toString("base64"), count_only: true }),
      });
      assert.equal(response.status, 200);
      return Number(((await response.json()) as { count?: string }).count ?? 0);
    };
    assert.equal(await keysIn(`${plane.cluster("east").etcdPrefix}/`), 0);
    assert.ok((await keysIn(`${plane.cluster("local").etcdPrefix}/`)) > 0);
  });

  it("restarts one API server on the same port with its data intact", async () => {
    const east = coreApi(adminKubeConfig(plane.cluster("east")));
    await east.createNamespacedService({
      namespace: "default",
      body: { metadata: { name: "survives-restart" }, spec: { ports: [{ port: 80 }] } },
    });
    const pidBefore = plane.apiServerProcess("east").pid;
    await plane.restartApiServer("east", { kill: true });
    assert.notEqual(plane.apiServerProcess("east").pid, pidBefore);
    const svc = await east.readNamespacedService({ namespace: "default", name: "survives-restart" });
    assert.equal(svc.metadata?.name, "survives-restart");
    // The other cluster was never interrupted.
    await coreApi(adminKubeConfig(plane.cluster("local"))).listNamespace();
  });
});
