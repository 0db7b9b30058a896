/**
 * Deployments whose Pods run on a sandbox cluster's KWOK Node (sandbox/kwok.ts): Running
 * and Ready with an IP, no container runtime, so kube-controller-manager's EndpointSlice
 * controller writes the slices a real cluster would. The sandbox runs no scheduler, so
 * the Pod template names its Node; the image is never pulled.
 */
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from "@kubernetes/client-node";
import { kwokNode } from "../../sandbox/kwok.ts";
import { eventually } from "./kube.ts";

export interface KwokDeployment {
  readonly namespace: string;
  readonly name: string;
  /** The Pods' labels (the Service's selector). */
  readonly labels: Readonly<Record<string, string>>;
  readonly replicas: number;
  /** Container ports, by name: what a Service's named targetPort resolves to. */
  readonly ports?: readonly { readonly name: string; readonly containerPort: number; readonly protocol?: string }[];
}

/** Creates the Deployment, its Pods bound to `cluster`'s KWOK Node. */
export async function createKwokDeployment(kc: KubeConfig, cluster: string, d: KwokDeployment): Promise<void> {
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: d.namespace,
    body: {
      metadata: { name: d.name },
      spec: {
        replicas: d.replicas,
        selector: { matchLabels: { ...d.labels } },
        template: {
          metadata: { labels: { ...d.labels } },
          spec: {
            nodeName: kwokNode(cluster),
            containers: [
              {
                name: d.name,
                // Never pulled: KWOK runs no container.
                image: "registry.k8s.io/pause:3.10",
                ports: (d.ports ?? []).map((p) => ({ ...p, protocol: p.protocol ?? "TCP" })),
              },
            ],
          },
        },
      },
    },
  });
}

/** Sets the Deployment's replica count. */
export async function scaleKwokDeployment(kc: KubeConfig, namespace: string, name: string, replicas: number) {
  const apps = kc.makeApiClient(AppsV1Api);
  const current = await apps.readNamespacedDeploymentScale({ name, namespace });
  current.spec = { replicas };
  await apps.replaceNamespacedDeploymentScale({ name, namespace, body: current });
}

const runningReady = (pod: V1Pod): boolean =>
  pod.metadata?.deletionTimestamp === undefined &&
  pod.status?.phase === "Running" &&
  typeof pod.status.podIP === "string" &&
  (pod.status.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");

/**
 * Waits until exactly `count` Pods matching `labels` exist, every one Running and Ready
 * with an IP, and returns them sorted by IP.
 */
export async function waitForKwokPods(
  kc: KubeConfig,
  namespace: string,
  labels: Readonly<Record<string, string>>,
  count: number,
  timeoutMs = 30_000,
): Promise<V1Pod[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const labelSelector = Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(",");
  return eventually(
    `${count} Running, Ready Pods with an IP (${labelSelector}) in ${namespace}`,
    async () => {
      const pods = (await core.listNamespacedPod({ namespace, labelSelector })).items;
      return pods.length === count && pods.every(runningReady)
        ? pods.sort((a, b) => (a.status?.podIP ?? "").localeCompare(b.status?.podIP ?? "", "en"))
        : undefined;
    },
    timeoutMs,
  );
}
