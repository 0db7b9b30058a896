/**
 * A credentials Secret as the supervisor keeps it in its watch store: the Secret less
 * its data, plus the parse of that data (registration.ts). The registry reads a
 * Secret's metadata (key, uid, creation time, the cluster annotations), its type and
 * the parse, never the data again, so keeping the data would hold every cluster's
 * base64 kubeconfig (its CA, token or client key) a second time beside the connection
 * parsed from it, for as long as the Secret exists; kubectl's last-applied annotation
 * (a third copy, for a Secret applied with `kubectl apply`) goes as well.
 *
 * Invariant: `parsed` is the parse of the data of the Secret's version
 * (`metadata.uid` and `metadata.resourceVersion`) stored with it. A version seen again
 * (a relist) reuses the parse kept with it; a changed Secret is parsed once, when it
 * arrives, so rotation and a fixed or broken Secret show in the next registry as
 * before.
 */
import type { KubeObject, Secret } from "../core/objects.ts";
import { LAST_APPLIED_CONFIGURATION } from "../kube/watch-store.ts";
import { type ParsedSecret, type ParseOptions, parseCredentialsSecret } from "./registration.ts";

export interface StoredSecret extends KubeObject {
  readonly type?: string;
  readonly parsed: ParsedSecret;
}

const sameVersion = (a: KubeObject, b: KubeObject): boolean =>
  a.metadata.resourceVersion !== undefined &&
  a.metadata.resourceVersion === b.metadata.resourceVersion &&
  a.metadata.uid === b.metadata.uid;

/**
 * The stored form of `object` (a Secret as the watcher accepted it, only known to have
 * `metadata.name`), given what the store holds under its key now. Total: a Secret that
 * does not parse is stored with its `invalid` parse.
 */
export function storedSecret(
  object: KubeObject,
  current: StoredSecret | undefined,
  options: ParseOptions,
): StoredSecret {
  const secret = object as Secret;
  const parsed = current && sameVersion(current, secret) ? current.parsed : parseCredentialsSecret(secret, options);
  const { data: _data, ...rest } = secret;
  const annotations = secret.metadata.annotations;
  if (annotations === undefined || !(LAST_APPLIED_CONFIGURATION in annotations)) return { ...rest, parsed };
  const { [LAST_APPLIED_CONFIGURATION]: _applied, ...kept } = annotations;
  return { ...rest, metadata: { ...secret.metadata, annotations: kept }, parsed };
}
