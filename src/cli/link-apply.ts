/**
 * `link --links NS --apply` on the local cluster: what is there, judged before `link`
 * writes on either cluster, then the writes.
 *
 * Invariant: a refusal is decided from reads alone, so a refused `link` leaves both
 * clusters as they were. The writes carry what was read (create when nothing was there,
 * replace at the resourceVersion read), so a Link or Secret that appears or changes
 * after the check fails the write instead of being replaced unseen.
 */
import { CLUSTER_NAME, SECRET_TYPE } from "../core/labels.ts";
import { linksPath } from "../core/link.ts";
import type { KubeObject, Secret } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { KubeApiError } from "../kube/errors.ts";
import { LINK_CRD } from "../supervisor/link-controller.ts";
import { CommandError, isNotFound, writeOut } from "./common.ts";
import type { LinkObjects } from "./link-resource.ts";

/** The Link and the Secret of those names as they are before anything is written (absent: none). */
export interface LinkTargets {
  readonly link?: KubeObject;
  readonly secret?: Secret;
}

const target = (link: KubeObject): string =>
  String((link as { spec?: Record<string, unknown> }).spec?.["targetClusterName"] ?? "");
const credentialsOf = (link: KubeObject): string =>
  String((link as { spec?: Record<string, unknown> }).spec?.["clusterCredentialsSecret"] ?? "");
const linkRef = (name: string): string => `link.multicluster.linkerd.io/${name}`;

/**
 * Why `objects` must not be written over what the namespace holds (pure), or undefined:
 * the Link of that name registers another cluster; the Secret of that name is of another
 * type (another tool's), registers another cluster by its annotation (SPEC §1), or is
 * the credentials of a Link of another cluster (whether or not it exists yet: written,
 * it would hand that Link this cluster's credentials).
 */
export function linkTargetRefusal(
  objects: LinkObjects,
  links: readonly KubeObject[],
  secret: Secret | undefined,
): string | undefined {
  const cluster = objects.link.spec["targetClusterName"];
  const namespace = objects.link.metadata.namespace ?? "";
  const name = objects.link.metadata.name;
  const current = links.find((l) => l.metadata.name === name);
  if (current && target(current) !== "" && target(current) !== cluster)
    return `${linkRef(name)} in namespace ${namespace} registers cluster ${target(current)}, not ${cluster}: delete it first (kubectl delete links.multicluster.linkerd.io ${name} -n ${namespace})`;
  const secretName = objects.secret.metadata.name;
  const where = `secret/${secretName} in namespace ${namespace}`;
  if (secret && (secret.type ?? "Opaque") !== SECRET_TYPE)
    return `${where} is of type ${secret.type ?? "Opaque"}, not ${SECRET_TYPE}: delete it or give another --secret-name`;
  const annotated = secret?.metadata.annotations?.[CLUSTER_NAME];
  if (annotated !== undefined && annotated !== cluster)
    return `${where} registers cluster ${annotated} (annotation ${CLUSTER_NAME}), not ${cluster}: give another --secret-name`;
  const owner = links.find((l) => credentialsOf(l) === secretName && target(l) !== cluster && l.metadata.name !== name);
  if (owner)
    return `${where} holds the credentials of ${linkRef(owner.metadata.name)} (cluster ${target(owner)}), not ${cluster}: give another --secret-name`;
  return undefined;
}

/** Other Links registering the same cluster: the controller keeps the first (SPEC §15), so this one may be a duplicate. */
export function duplicateLinkWarnings(objects: LinkObjects, links: readonly KubeObject[]): string[] {
  const cluster = objects.link.spec["targetClusterName"];
  return links
    .filter((l) => l.metadata.name !== objects.link.metadata.name && target(l) === cluster)
    .map(
      (l) =>
        `warning: ${linkRef(l.metadata.name)} already registers cluster ${cluster}: the controller keeps the Link registered first and reports the other DuplicateCluster\n`,
    );
}

/**
 * Reads the namespace, its Links and the Secret of that name; refuses (CommandError) a
 * missing namespace, a local cluster without the Link CRD, and what `linkTargetRefusal`
 * refuses; adds what to warn of to `warnings`. Writes nothing.
 */
export async function readLinkTargets(
  client: KubeClient,
  objects: LinkObjects,
  warnings: string[],
): Promise<LinkTargets> {
  const namespace = objects.link.metadata.namespace ?? "";
  try {
    await client.request("GET", `/api/v1/namespaces/${encodeURIComponent(namespace)}`);
  } catch (error) {
    // Not allowed to read namespaces: the writes below say whether it exists.
    if (isNotFound(error))
      throw new CommandError(
        `namespace/${namespace} is not found in the local cluster: create it first, or give another --links`,
      );
  }
  let links: KubeObject[];
  try {
    links = (await client.request<{ items: KubeObject[] }>("GET", linksPath(namespace))).items ?? [];
  } catch (error) {
    // A namespace that exists lists its Links (maybe none): 404 is the resource itself not served.
    if (isNotFound(error))
      throw new CommandError(
        `the local cluster does not serve Links: install linkerd's Link CRD (${LINK_CRD}, v1alpha3) first`,
      );
    throw error;
  }
  let secret: Secret | undefined;
  try {
    secret = await client.request<Secret>(
      "GET",
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(objects.secret.metadata.name)}`,
    );
  } catch (error) {
    if (!isNotFound(error)) throw error;
  }
  const refusal = linkTargetRefusal(objects, links, secret);
  if (refusal) throw new CommandError(refusal);
  warnings.push(...duplicateLinkWarnings(objects, links));
  const link = links.find((l) => l.metadata.name === objects.link.metadata.name);
  return { ...(link ? { link } : {}), ...(secret ? { secret } : {}) };
}

/** Creates `body` when nothing was read, else replaces `current` at the resourceVersion read. */
async function writeAsRead(
  client: KubeClient,
  collection: string,
  body: KubeObject,
  current: KubeObject | undefined,
  what: string,
): Promise<"created" | "updated"> {
  try {
    if (!current) {
      await client.request("POST", collection, { body });
      return "created";
    }
    await client.request("PUT", `${collection}/${encodeURIComponent(body.metadata.name)}`, {
      body: { ...body, metadata: { ...body.metadata, resourceVersion: current.metadata.resourceVersion } },
    });
    return "updated";
  } catch (error) {
    // 409: AlreadyExists on a create, Conflict on a replace at a stale resourceVersion.
    if (error instanceof KubeApiError && error.status === 409)
      throw new CommandError(`${what} was created or changed while link ran: run link again`);
    throw error;
  }
}

/** Writes the Secret, then the Link (so the Link never names a Secret that is not there yet). */
export async function writeLinkObjects(client: KubeClient, objects: LinkObjects, targets: LinkTargets): Promise<void> {
  const namespace = objects.link.metadata.namespace ?? "";
  const secretWhat = `secret/${objects.secret.metadata.name}`;
  const secretOutcome = await writeAsRead(
    client,
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`,
    objects.secret,
    targets.secret,
    `${secretWhat} in namespace ${namespace}`,
  );
  writeOut(`${secretWhat} ${secretOutcome} in namespace ${namespace}\n`);
  const linkWhat = linkRef(objects.link.metadata.name);
  const linkOutcome = await writeAsRead(
    client,
    linksPath(namespace),
    objects.link,
    targets.link,
    `${linkWhat} in namespace ${namespace}`,
  );
  writeOut(`${linkWhat} ${linkOutcome} in namespace ${namespace}\n`);
}
