/**
 * What the supervisor keeps of the Links and of the Secrets they name (SPEC §15), in
 * their watch stores: each parsed once per version, when it arrives, and without what
 * the registry never reads again (a Link's status, a Secret's data: the kubeconfig is
 * kept only as the connection parsed from it, as stored-secret.ts does for §1's Secrets).
 */
import { createHash } from "node:crypto";
import type { ConnectionSpec } from "../core/connection.ts";
import { KUBECONFIG_KEY } from "../core/labels.ts";
import { type ParsedLink, parseLink } from "../core/link.ts";
import type { KubeObject, ObjectMeta, Secret } from "../core/objects.ts";
import { b64decode, connectionFromKubeconfig, InvalidKubeconfig, type ParseOptions } from "../kube/kubeconfig.ts";
import { LAST_APPLIED_CONFIGURATION } from "../kube/watch-store.ts";

export interface StoredLink extends KubeObject {
  readonly parsed: ParsedLink;
  /** A digest of `spec`: "the Link changed" (SPEC §15) is a change of it. */
  readonly specDigest: string;
}

export type ParsedCredentials =
  | { readonly kind: "valid"; readonly connection: ConnectionSpec }
  | { readonly kind: "invalid"; readonly reason: string; readonly message: string };

export interface StoredCredentials extends KubeObject {
  readonly parsed: ParsedCredentials;
}

const sameVersion = (a: KubeObject, b: KubeObject): boolean =>
  a.metadata.resourceVersion !== undefined &&
  a.metadata.resourceVersion === b.metadata.resourceVersion &&
  a.metadata.uid === b.metadata.uid;

/** Metadata without kubectl's copy of the applied object (a third copy of a Secret's data). */
function lean(metadata: ObjectMeta): ObjectMeta {
  const annotations = metadata.annotations;
  if (annotations === undefined || !(LAST_APPLIED_CONFIGURATION in annotations)) return metadata;
  const { [LAST_APPLIED_CONFIGURATION]: _applied, ...kept } = annotations;
  return { ...metadata, annotations: kept };
}

/** The stored form of a Link as the watcher accepted it (only known to have `metadata.name`). */
export function storedLink(object: KubeObject, current: StoredLink | undefined): StoredLink {
  if (current && sameVersion(current, object)) return current;
  const link = object as KubeObject & { readonly spec?: unknown };
  const specDigest = createHash("sha256")
    .update(JSON.stringify(link.spec ?? null))
    .digest("hex")
    .slice(0, 16);
  return { metadata: lean(link.metadata), parsed: parseLink(link), specDigest };
}

/** The stored form of a credentials Secret a Link names: its metadata and its parsed kubeconfig. */
export function storedCredentials(
  object: KubeObject,
  current: StoredCredentials | undefined,
  options: ParseOptions,
): StoredCredentials {
  if (current && sameVersion(current, object)) return current;
  const secret = object as Secret;
  return { metadata: lean(secret.metadata), parsed: parseLinkCredentials(secret, options) };
}

/** The credentials of a Secret a Link names (also `link`'s check of the Secret it writes). */
export function parseLinkCredentials(secret: Secret, options: ParseOptions): ParsedCredentials {
  const encoded = secret.data?.[KUBECONFIG_KEY];
  if (!encoded)
    return { kind: "invalid", reason: "missing-kubeconfig", message: `data key ${KUBECONFIG_KEY} is missing or empty` };
  if (!/^[A-Za-z0-9+/=\s]*$/.test(encoded))
    return { kind: "invalid", reason: "kubeconfig-not-base64", message: `data key ${KUBECONFIG_KEY} is not base64` };
  try {
    return { kind: "valid", connection: connectionFromKubeconfig(b64decode(encoded), options) };
  } catch (error) {
    if (error instanceof InvalidKubeconfig) return { kind: "invalid", reason: error.reason, message: error.message };
    return { kind: "invalid", reason: "kubeconfig-unparsable", message: (error as Error).message };
  }
}
