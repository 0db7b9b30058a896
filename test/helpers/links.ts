/**
 * linkerd's Links in a test fleet (SPEC §15): the CRD (linkerd's own, sandbox/link-crd.ts),
 * the Role of deploy/links/rbac.yaml bound to the controller, Links and their credentials
 * Secrets made as `linkerd multicluster link` makes them (a Secret without annotations),
 * and the Links' status and Events read back.
 */
import { fileURLToPath } from "node:url";
import { type CoreV1Event, CustomObjectsApi } from "@kubernetes/client-node";
import { installLinkCrd } from "../../sandbox/link-crd.ts";
import { applyRbacYaml } from "../../sandbox/rbac.ts";
import { SECRET_TYPE } from "../../src/core/labels.ts";
import { LINK_GROUP, LINK_VERSION, linksPath } from "../../src/core/link.ts";
import type { LinkStatus } from "../../src/core/link-status.ts";
import { KubeClient } from "../../src/kube/client.ts";
import { adminConnection } from "./connection.ts";
import type { Fleet } from "./fleet.ts";
import { eventually, statusCode } from "./kube.ts";

export const LINKS_NAMESPACE = "linkerd-multicluster";
export const LINKS_RBAC = fileURLToPath(new URL("../../deploy/links/rbac.yaml", import.meta.url));

export interface LinkObject {
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly uid: string;
    readonly resourceVersion: string;
    readonly creationTimestamp?: string;
  };
  readonly spec: Record<string, unknown>;
  readonly status?: LinkStatus;
}

const objects = (fleet: Fleet): CustomObjectsApi => fleet.kubeConfig("local").makeApiClient(CustomObjectsApi);
const LINKS = { group: LINK_GROUP, version: LINK_VERSION, namespace: LINKS_NAMESPACE, plural: "links" } as const;

/** The Link CRD and the controller's Role in the Links' namespace (deploy/links/rbac.yaml). */
export async function installLinks(fleet: Fleet): Promise<void> {
  await fleet.ensureNamespace("local", LINKS_NAMESPACE);
  await installLinkCrd(fleet.kubeConfig("local"));
  await applyRbacYaml(fleet.kubeConfig("local"), LINKS_RBAC);
}

/** The spec `linkerd multicluster link` writes for `cluster`, with `spec` on top. */
export function linkSpec(cluster: string, spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    targetClusterName: cluster,
    targetClusterDomain: "cluster.local",
    targetClusterLinkerdNamespace: "linkerd",
    clusterCredentialsSecret: `cluster-credentials-${cluster}`,
    gatewayAddress: "198.51.100.20",
    gatewayPort: "4143",
    gatewayIdentity: "linkerd-gateway.linkerd-multicluster.serviceaccount.identity.linkerd.cluster.local",
    selector: { matchLabels: { "mirror.linkerd.io/exported": "true" } },
    remoteDiscoverySelector: { matchLabels: { "mirror.linkerd.io/exported": "remote-discovery" } },
    federatedServiceSelector: { matchLabels: { "mirror.linkerd.io/federated": "member" } },
    ...spec,
  };
}

export async function createLink(fleet: Fleet, name: string, spec: Record<string, unknown>): Promise<LinkObject> {
  return (await objects(fleet).createNamespacedCustomObject({
    ...LINKS,
    body: { apiVersion: `${LINK_GROUP}/${LINK_VERSION}`, kind: "Link", metadata: { name }, spec },
  })) as LinkObject;
}

export async function readLink(fleet: Fleet, name: string): Promise<LinkObject | undefined> {
  try {
    return (await objects(fleet).getNamespacedCustomObject({ ...LINKS, name })) as LinkObject;
  } catch (error) {
    if (statusCode(error) === 404) return undefined;
    throw error;
  }
}

/** Replaces the Link's spec (read, edit, replace; again on a conflict). */
export async function editLink(
  fleet: Fleet,
  name: string,
  edit: (spec: Record<string, unknown>) => void,
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const link = await readLink(fleet, name);
    if (!link) throw new Error(`Link ${name} not found`);
    const spec = structuredClone(link.spec);
    edit(spec);
    try {
      await objects(fleet).replaceNamespacedCustomObject({ ...LINKS, name, body: { ...link, spec } });
      return;
    } catch (error) {
      if (statusCode(error) !== 409 || attempt > 5) throw error;
    }
  }
}

export async function deleteLink(fleet: Fleet, name: string): Promise<void> {
  await objects(fleet).deleteNamespacedCustomObject({ ...LINKS, name });
}

/** Writes a Link's status as another controller would (a merge patch of the status subresource, as admin). */
export async function patchLinkStatus(fleet: Fleet, name: string, status: unknown): Promise<void> {
  const client = new KubeClient(adminConnection(fleet.plane.cluster("local")));
  try {
    await client.request("PATCH", linksPath(LINKS_NAMESPACE, name, "status"), {
      contentType: "application/merge-patch+json",
      body: { status },
    });
  } finally {
    client.close();
  }
}

/** The credentials Secret `linkerd multicluster link` writes: no annotations, type remote-kubeconfig. */
export async function createLinkSecret(fleet: Fleet, remote: string, name = `cluster-credentials-${remote}`) {
  await fleet.local.createNamespacedSecret({
    namespace: LINKS_NAMESPACE,
    body: {
      metadata: { name },
      type: SECRET_TYPE,
      data: { kubeconfig: Buffer.from(await fleet.remoteKubeconfig(remote)).toString("base64") },
    },
  });
}

export async function deleteLinkSecret(fleet: Fleet, name: string): Promise<void> {
  await fleet.local.deleteNamespacedSecret({ namespace: LINKS_NAMESPACE, name });
}

/** Events with `reason` on Link `name`. */
export async function linkEvents(fleet: Fleet, name: string, reason: string): Promise<CoreV1Event[]> {
  const list = await fleet.local.listNamespacedEvent({ namespace: LINKS_NAMESPACE });
  return list.items.filter(
    (e) => e.involvedObject.kind === "Link" && e.involvedObject.name === name && e.reason === reason,
  );
}

export async function waitForLinkEvent(
  fleet: Fleet,
  name: string,
  reason: string,
  match?: RegExp,
): Promise<CoreV1Event> {
  return eventually(`Event ${reason} on Link ${name}`, async () =>
    (await linkEvents(fleet, name, reason)).find((e) => !match || match.test(e.message ?? "")),
  );
}

/** Waits until Link `name`'s status satisfies `check`. */
export async function waitForLinkStatus(
  fleet: Fleet,
  name: string,
  check: (status: LinkStatus) => boolean,
  timeoutMs = 30_000,
): Promise<LinkStatus> {
  return eventually(
    `the status of Link ${name}`,
    async () => {
      const status = (await readLink(fleet, name))?.status;
      return status && check(status) ? status : undefined;
    },
    timeoutMs,
  );
}

/** The `Mirrored` condition of `remote` (`namespace/name`) in a status list, as `status/reason`. */
export function mirroredCondition(list: LinkStatus["mirrorServices"], remote: string): string | undefined {
  const [namespace, name] = remote.split("/");
  const entry = (list ?? []).find((e) => e.remoteRef?.namespace === namespace && e.remoteRef?.name === name);
  const c = entry?.conditions?.find((x) => x.type === "Mirrored");
  return c ? `${c.status}/${c.reason}` : undefined;
}
