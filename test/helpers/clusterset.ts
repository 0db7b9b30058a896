/**
 * A clusterset for end-to-end tests (SPEC §16): N real API servers, each running its own
 * fleet-mirror (a Supervisor with real worker threads, least-privilege: its token bound
 * only by `deploy/rbac/local.yaml`) against the other N-1, registered through credentials
 * Secrets with the reader token of `deploy/rbac/remote.yaml`; the MCS CRDs on every
 * cluster, and on every cluster a default gateway (`linkerd-gateway` in
 * `linkerd-multicluster`) with one ingress address, so a remote export has addresses.
 * Each cluster's `--cluster-name` is its own name, so a ServiceExport in any cluster
 * gives every cluster the same ServiceImport, its exporters listed by those names.
 * With `{ pods: true }` every cluster also runs kube-controller-manager and KWOK's fake
 * Node (sandbox/kwok.ts), so a Deployment's Pods become Running with an IP and a selector
 * Service gets its EndpointSlices as in a real cluster (test/helpers/kwok-pods.ts).
 */
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { ControlPlane } from "../../sandbox/control-plane.ts";
import { renderKubeconfig } from "../../sandbox/kubeconfig.ts";
import { installMcsCrds } from "../../sandbox/mcs-crds.ts";
import { applyRbacYaml, controllerToken, rbacManifestPath, serviceAccountToken } from "../../sandbox/rbac.ts";
import { defaultConfig } from "../../src/config.ts";
import { CLUSTER_NAME, REMOTE_CLUSTER_DOMAIN, SECRET_TYPE } from "../../src/core/labels.ts";
import { silentLogger } from "../../src/log.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, REMOTE_READER_NAMESPACE, REMOTE_READER_SERVICE_ACCOUNT } from "./fleet.ts";
import { adminKubeConfig, eventually, statusCode } from "./kube.ts";

/** The default gateway of every cluster (SPEC §12): its address is `198.18.9.<index + 1>`. */
export const CLUSTERSET_GATEWAY = { namespace: "linkerd-multicluster", name: "linkerd-gateway", port: 4143 };

export class Clusterset {
  readonly plane: ControlPlane;
  readonly names: readonly string[];
  readonly controllers = new Map<string, Supervisor>();

  private constructor(plane: ControlPlane, names: readonly string[]) {
    this.plane = plane;
    this.names = names;
  }

  /** Starts the clusters, installs everything above, and each cluster's fleet-mirror. */
  static async start(
    names: readonly string[] = ["c1", "c2", "c3"],
    options: { readonly pods?: boolean } = {},
  ): Promise<Clusterset> {
    const plane = await ControlPlane.start({
      clusters: [...names],
      ...(options.pods ? { controllerManagers: names, kwok: names } : {}),
    });
    const set = new Clusterset(plane, names);
    try {
      const tokens = new Map<string, { controller: string; reader: string }>();
      await Promise.all(
        names.map(async (name, i) => {
          const kc = set.kubeConfig(name);
          await applyRbacYaml(kc, rbacManifestPath("local"));
          await applyRbacYaml(kc, rbacManifestPath("remote"));
          await installMcsCrds(kc);
          await set.#createGateway(name, `198.18.9.${i + 1}`);
          tokens.set(name, {
            controller: await controllerToken(kc, CONTROLLER_NAMESPACE),
            reader: await serviceAccountToken(kc, REMOTE_READER_NAMESPACE, REMOTE_READER_SERVICE_ACCOUNT),
          });
        }),
      );
      for (const local of names)
        for (const remote of names)
          if (remote !== local) await set.#register(local, remote, tokens.get(remote)?.reader ?? "");
      for (const name of names) {
        const c = plane.cluster(name);
        const supervisor = new Supervisor({
          config: defaultConfig({
            namespace: CONTROLLER_NAMESPACE,
            logLevel: "silent",
            clusterName: name,
            endpointsApi: "endpointslices",
            blockedRecheckMs: 2_000,
            adminAddr: "",
          }),
          localConnection: {
            server: c.server,
            caPem: c.caPem,
            auth: { kind: "token", token: tokens.get(name)?.controller ?? "" },
          },
          logger: silentLogger(),
          mcsRecheckMs: 500,
        });
        supervisor.start();
        set.controllers.set(name, supervisor);
      }
      // A conformance run meets a clusterset already running: every fleet-mirror has
      // synced the other clusters and found the MCS API before a test exports anything.
      for (const [name, supervisor] of set.controllers)
        await eventually(
          `${name}'s fleet-mirror synced with the other clusters, its MCS writer active`,
          () => {
            const status = supervisor.status();
            const synced = status.clusters.filter((c) => c.state === "synced").length === names.length - 1;
            return synced && status.writer?.mcs?.state === "active" ? true : undefined;
          },
          120_000,
        );
    } catch (error) {
      await set.stop();
      throw error;
    }
    return set;
  }

  kubeConfig(cluster: string): KubeConfig {
    return adminKubeConfig(this.plane.cluster(cluster));
  }

  api(cluster: string): CoreV1Api {
    return this.kubeConfig(cluster).makeApiClient(CoreV1Api);
  }

  async ensureNamespace(cluster: string, name: string): Promise<void> {
    try {
      await this.api(cluster).createNamespace({ body: { metadata: { name } } });
    } catch (error) {
      if (statusCode(error) !== 409) throw error;
    }
  }

  async stop(): Promise<void> {
    await Promise.all([...this.controllers.values()].map((c) => c.stop()));
    await this.plane.stop();
  }

  async #createGateway(cluster: string, ip: string): Promise<void> {
    const { namespace, name, port } = CLUSTERSET_GATEWAY;
    await this.ensureNamespace(cluster, namespace);
    const api = this.api(cluster);
    await api.createNamespacedService({
      namespace,
      body: {
        metadata: { name },
        spec: { type: "LoadBalancer", ports: [{ name: "incoming-port", port, protocol: "TCP" }] },
      },
    });
    const current = await api.readNamespacedServiceStatus({ name, namespace });
    current.status = { loadBalancer: { ingress: [{ ip }] } };
    await api.replaceNamespacedServiceStatus({ name, namespace, body: current });
  }

  /** Registers `remote` in `local`'s fleet-mirror (a credentials Secret, SPEC §1). */
  async #register(local: string, remote: string, token: string): Promise<void> {
    const c = this.plane.cluster(remote);
    const kubeconfig = renderKubeconfig({
      cluster: remote,
      server: c.server,
      caPem: c.caPem,
      user: "fleet-mirror",
      auth: { token },
    });
    await this.api(local).createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: {
        metadata: {
          name: `cluster-credentials-${remote}`,
          annotations: { [CLUSTER_NAME]: remote, [REMOTE_CLUSTER_DOMAIN]: "cluster.local" },
        },
        type: SECRET_TYPE,
        data: { kubeconfig: Buffer.from(kubeconfig).toString("base64") },
      },
    });
  }
}
