/**
 * The demo's exports in the modes of SPEC §12 beyond the annotations and the label:
 * - MCS: the MCS CRDs on every cluster of the demo (the remotes serve ServiceExports,
 *   the local cluster ServiceImports), and `shop/orders` exported by a ServiceExport
 *   from east and west, which the local cluster sees as ServiceImport `shop/orders`
 *   (status.clusters [east, west]) with its derived Service;
 * - headless: `shop/db` on east, `clusterIP: None`, whose pods `db-0`..`db-2` have
 *   hostnames. The sandbox remotes run no controllers, so the demo writes the Service's
 *   EndpointSlice itself, as the built-in endpointslice controller would for a
 *   StatefulSet's pods; the local cluster gets the headless `shop/db-east` and one
 *   per-host mirror `db-<i>-east` each.
 */
import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api, type KubeConfig } from "@kubernetes/client-node";
import { GATEWAY_NAME, GATEWAY_NS } from "../src/core/labels.ts";
import { MCS_API_VERSION, MCS_GROUP, MCS_VERSION, SERVICE_EXPORTS } from "../src/core/mcs.ts";
import type { ControlPlane } from "./control-plane.ts";
import { installMcsCrds } from "./mcs-crds.ts";
import { podSlice } from "./pod-slice.ts";

/** The MCS import the demo shows: `shop/orders`, exported by a ServiceExport from both remotes. */
export const MCS_IMPORT_KEY = "shop/orders";
/** The headless mirror the demo shows (east's `shop/db`), and its hosts. */
export const HEADLESS_KEY = "shop/db-east";
export const HEADLESS_HOSTS = ["db-0", "db-1", "db-2"] as const;

/**
 * The remote reader role's rules: what each export mode reads (deploy/rbac/remote.yaml):
 * Services (every mode), EndpointSlices (the hostnames of headless Services),
 * ServiceExports (MCS).
 */
export const REMOTE_READER_RULES = [
  { apiGroups: [""], resources: ["services"], verbs: ["get", "list", "watch"] },
  { apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["get", "list", "watch"] },
  { apiGroups: [MCS_GROUP], resources: [SERVICE_EXPORTS.plural], verbs: ["get", "list", "watch"] },
];

async function ensureNamespace(kc: KubeConfig, name: string): Promise<void> {
  try {
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
}

/** The ServiceExport of `shop/orders` in the cluster of `kc`: created by `restore`, deleted by `withdraw`. */
function serviceExport(kc: KubeConfig): WestExport {
  const [namespace, name] = MCS_IMPORT_KEY.split("/") as [string, string];
  const api = kc.makeApiClient(CustomObjectsApi);
  const where = { group: MCS_GROUP, version: MCS_VERSION, namespace, plural: SERVICE_EXPORTS.plural };
  return {
    restore: async (): Promise<void> => {
      await api.createNamespacedCustomObject({
        ...where,
        body: { apiVersion: MCS_API_VERSION, kind: SERVICE_EXPORTS.kind, metadata: { name } },
      });
    },
    withdraw: async (): Promise<void> => {
      await api.deleteNamespacedCustomObject({ ...where, name });
    },
  };
}

/** Service `shop/orders` and its ServiceExport, in the cluster of `kc` (exported through the cluster's default gateway). */
async function exportByServiceExport(kc: KubeConfig): Promise<void> {
  const [namespace, name] = MCS_IMPORT_KEY.split("/") as [string, string];
  await ensureNamespace(kc, namespace);
  await kc.makeApiClient(CoreV1Api).createNamespacedService({
    namespace,
    body: {
      metadata: { name },
      spec: { selector: { app: name }, ports: [{ name: "http", port: 8080, targetPort: 8080 }] },
    },
  });
  await serviceExport(kc).restore();
}

/** Headless `shop/db` (exported by the §2 annotations) and the EndpointSlice of its three pods. */
async function exportHeadless(kc: KubeConfig): Promise<void> {
  const namespace = "shop";
  const name = "db";
  await ensureNamespace(kc, namespace);
  await kc.makeApiClient(CoreV1Api).createNamespacedService({
    namespace,
    body: {
      metadata: { name, annotations: { [GATEWAY_NAME]: "gateway", [GATEWAY_NS]: "gateway" } },
      spec: { clusterIP: "None", selector: { app: name }, ports: [{ name: "tcp", port: 5432, targetPort: 5432 }] },
    },
  });
  await kc.makeApiClient(DiscoveryV1Api).createNamespacedEndpointSlice({
    namespace,
    body: podSlice(namespace, name, `${name}-pods`, HEADLESS_HOSTS, { name: "tcp", port: 5432 }),
  });
}

/** The scripted change of the MCS export: west deletes its ServiceExport of `shop/orders`, and creates it again. */
export interface WestExport {
  readonly withdraw: () => Promise<void>;
  readonly restore: () => Promise<void>;
}

/**
 * Installs the MCS CRDs on local, east and west, and creates the MCS and headless
 * exports on the remotes; returns west's ServiceExport, for the script to withdraw.
 */
export async function shapeModes(plane: ControlPlane, kubeConfig: (text: string) => KubeConfig): Promise<WestExport> {
  const kc = (name: string) => kubeConfig(plane.cluster(name).adminKubeconfig);
  await Promise.all(["local", "east", "west"].map((name) => installMcsCrds(kc(name))));
  await exportByServiceExport(kc("east"));
  await exportByServiceExport(kc("west"));
  await exportHeadless(kc("east"));
  return serviceExport(kc("west"));
}
