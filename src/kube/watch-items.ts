/**
 * What the watcher reads out of a list page or a watch event, as pure functions: the
 * page's items and cursor, the kind list items lack, the resourceVersion an event moves
 * to, and whether an object is of the kind expected. Nothing here stores or emits.
 */
import { WatchFault } from "./watch-fault.ts";

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** One page of a list answer. */
export interface ListPage {
  readonly items: readonly unknown[];
  /** The list's apiVersion and item kind (`ServiceList` → `Service`), to fill into items that lack them. */
  readonly apiVersion: string | undefined;
  readonly kind: string | undefined;
  readonly resourceVersion: string | undefined;
  /** The next page's token; undefined on the last page. */
  readonly continueToken: string | undefined;
}

/** Decodes a list answer of `path`; throws a `decode` fault when it has no items or metadata. */
export function decodeListPage(page: unknown, path: string): ListPage {
  const items = isRecord(page) ? page["items"] : undefined;
  const meta = isRecord(page) ? page["metadata"] : undefined;
  if (!isRecord(page) || !Array.isArray(items) || !isRecord(meta)) {
    throw new WatchFault("decode", `GET ${path}: list answer has no items or metadata`);
  }
  const next = meta["continue"];
  return {
    items,
    apiVersion: typeof page["apiVersion"] === "string" ? page["apiVersion"] : undefined,
    kind: typeof page["kind"] === "string" ? page["kind"].replace(/List$/, "") : undefined,
    resourceVersion: typeof meta["resourceVersion"] === "string" ? meta["resourceVersion"] : undefined,
    continueToken: typeof next === "string" && next !== "" ? next : undefined,
  };
}

/** `object` with the page's apiVersion and kind where it has none, so list items look like watch objects. */
export function withListKind<T extends { readonly apiVersion?: string; readonly kind?: string }>(
  object: T,
  page: ListPage,
): T {
  return {
    ...(page.apiVersion !== undefined && object.apiVersion === undefined ? { apiVersion: page.apiVersion } : {}),
    ...(page.kind !== undefined && object.kind === undefined ? { kind: page.kind } : {}),
    ...object,
  };
}

/** The non-empty `metadata.resourceVersion` of a raw object (a bookmark, a skipped object), else undefined. */
export function rawResourceVersion(object: Record<string, unknown>): string | undefined {
  const meta = object["metadata"];
  const rv = isRecord(meta) ? meta["resourceVersion"] : undefined;
  return typeof rv === "string" && rv !== "" ? rv : undefined;
}

/**
 * The kind and `namespace/name` of `value` when it carries a kind other than `expected`
 * (an object without a kind is taken as expected); undefined otherwise.
 */
export function unexpectedKind(
  value: unknown,
  expected: string | undefined,
): { readonly kind: string; readonly name: string } | undefined {
  if (expected === undefined || !isRecord(value)) return undefined;
  const kind = value["kind"];
  if (typeof kind !== "string" || kind === "" || kind === expected) return undefined;
  const meta = value["metadata"];
  const name = isRecord(meta) ? `${String(meta["namespace"] ?? "")}/${String(meta["name"] ?? "?")}` : "?";
  return { kind, name };
}
