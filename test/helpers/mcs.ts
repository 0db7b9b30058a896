/**
 * The MCS API in a test fleet (SPEC §12): the pinned CRDs on the clusters a test names,
 * ServiceExports on remotes, and the local ServiceImports and derived objects read back.
 */
import { CustomObjectsApi, DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import { installMcsCrds, type McsResource } from "../../sandbox/mcs-crds.ts";
import { derivedServiceName, MCS_GROUP, MCS_VERSION } from "../../src/core/mcs.ts";
import type { Fleet } from "./fleet.ts";
import { eventually, statusCode } from "./kube.ts";

export interface ServiceImportObject {
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly uid: string;
    readonly resourceVersion: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
  readonly spec: {
    readonly type: string;
    readonly ports: { name?: string; protocol?: string; port: number }[];
    readonly ips?: string[];
  };
  readonly status?: { readonly clusters?: { cluster: string }[] };
}

const objects = (fleet: Fleet, cluster: string): CustomObjectsApi =>
  fleet.kubeConfig(cluster).makeApiClient(CustomObjectsApi);

/** Installs the MCS CRDs of `resources` (default both) on each of `clusters`. */
export async function installMcs(fleet: Fleet, clusters: readonly string[], resources?: McsResource[]): Promise<void> {
  await Promise.all(clusters.map((c) => installMcsCrds(fleet.kubeConfig(c), resources)));
}

export async function createServiceExport(fleet: Fleet, cluster: string, namespace: string, name: string) {
  await fleet.ensureNamespace(cluster, namespace);
  await objects(fleet, cluster).createNamespacedCustomObject({
    group: MCS_GROUP,
    version: MCS_VERSION,
    namespace,
    plural: "serviceexports",
    body: { apiVersion: `${MCS_GROUP}/${MCS_VERSION}`, kind: "ServiceExport", metadata: { name } },
  });
}

export async function deleteServiceExport(fleet: Fleet, cluster: string, namespace: string, name: string) {
  await objects(fleet, cluster).deleteNamespacedCustomObject({
    group: MCS_GROUP,
    version: MCS_VERSION,
    namespace,
    plural: "serviceexports",
    name,
  });
}

/** A ServiceImport in the local cluster, as fleet-mirror or a user wrote it. */
export async function serviceImport(fleet: Fleet, namespace: string, name: string) {
  try {
    return (await objects(fleet, "local").getNamespacedCustomObject({
      group: MCS_GROUP,
      version: MCS_VERSION,
      namespace,
      plural: "serviceimports",
      name,
    })) as ServiceImportObject;
  } catch (error) {
    if (statusCode(error) === 404) return undefined;
    throw error;
  }
}

/** A user's own ServiceImport (no fleet-mirror labels). */
export async function createUserServiceImport(fleet: Fleet, namespace: string, name: string) {
  await fleet.ensureNamespace("local", namespace);
  return (await objects(fleet, "local").createNamespacedCustomObject({
    group: MCS_GROUP,
    version: MCS_VERSION,
    namespace,
    plural: "serviceimports",
    body: {
      apiVersion: `${MCS_GROUP}/${MCS_VERSION}`,
      kind: "ServiceImport",
      metadata: { name, labels: { owner: "user" } },
      spec: { type: "ClusterSetIP", ports: [{ name: "http", protocol: "TCP", port: 80 }] },
    },
  })) as ServiceImportObject;
}

/** Waits until ServiceImport `namespace/name` satisfies `match`; returns it. */
export function waitForServiceImport(
  fleet: Fleet,
  namespace: string,
  name: string,
  match: (si: ServiceImportObject) => boolean,
  timeoutMs = 30_000,
): Promise<ServiceImportObject> {
  let last: ServiceImportObject | undefined;
  return eventually(
    () => `ServiceImport ${namespace}/${name} to match (last: ${JSON.stringify(last)})`,
    async () => {
      last = await serviceImport(fleet, namespace, name);
      return last && match(last) ? last : undefined;
    },
    timeoutMs,
  );
}

/** The derived Service of ServiceImport `namespace/name`. */
export const derivedName = (namespace: string, name: string): string => derivedServiceName(namespace, name);

/** The slices of the derived Service of `namespace/name`, by name. */
export async function importSlices(fleet: Fleet, namespace: string, name: string): Promise<V1EndpointSlice[]> {
  const list = await fleet
    .kubeConfig("local")
    .makeApiClient(DiscoveryV1Api)
    .listNamespacedEndpointSlice({
      namespace,
      labelSelector: `kubernetes.io/service-name=${derivedServiceName(namespace, name)}`,
    });
  return list.items.sort((a, b) => ((a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1));
}
