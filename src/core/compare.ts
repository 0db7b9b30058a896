/**
 * Normalizations shared by every kind of mirror object: compare what the API server
 * returns with what fleet-mirror wants, ignoring what it does not own (foreign
 * annotations, the order of map entries), so an unchanged mirror never causes a write.
 */
import { MIRROR_PREFIX } from "./labels.ts";
import type { ObjectMeta } from "./objects.ts";

const byKey = ([a]: [string, string], [b]: [string, string]): number => (a < b ? -1 : a > b ? 1 : 0);

/** The `mirror.linkerd.io/*` annotations, in key order, as one comparable string. */
export function mirrorAnnotations(annotations: Readonly<Record<string, string>> | undefined): string {
  return JSON.stringify(
    Object.entries(annotations ?? {})
      .filter(([k]) => k.startsWith(MIRROR_PREFIX))
      .sort(byKey),
  );
}

/** kubectl's copy of an applied object: never a mirror's, kept as found (SPEC §15). */
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * The annotations a mirror owns, in key order, as one comparable string: the
 * `mirror.linkerd.io/*` ones, or with `all` (a Link's cluster's Service, SPEC §15) every
 * one but kubectl's last-applied configuration.
 */
export function ownedAnnotations(annotations: Readonly<Record<string, string>> | undefined, all: boolean): string {
  if (!all) return mirrorAnnotations(annotations);
  return JSON.stringify(
    Object.entries(annotations ?? {})
      .filter(([k]) => k !== LAST_APPLIED)
      .sort(byKey),
  );
}

/** `mergeAnnotations`, or with `all` only kubectl's last-applied configuration kept beside ours. */
export function mergeOwnedAnnotations(
  observed: ObjectMeta | undefined,
  ours: Readonly<Record<string, string>>,
  all: boolean,
): Record<string, string> {
  if (!all) return mergeAnnotations(observed, ours);
  const kept = observed?.annotations?.[LAST_APPLIED];
  return { ...(kept !== undefined ? { [LAST_APPLIED]: kept } : {}), ...ours };
}

/** Every label, in key order, as one comparable string (a mirror's labels are exact). */
export function sortedLabels(labels: Readonly<Record<string, string>> | undefined): string {
  return JSON.stringify(Object.entries(labels ?? {}).sort(byKey));
}

/** Foreign annotations (not `mirror.linkerd.io/*`) are kept; ours are replaced exactly. */
export function mergeAnnotations(
  observed: ObjectMeta | undefined,
  ours: Readonly<Record<string, string>>,
): Record<string, string> {
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries(observed?.annotations ?? {})) if (!k.startsWith(MIRROR_PREFIX)) merged[k] = v;
  return Object.assign(merged, ours);
}
