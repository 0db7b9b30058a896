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
