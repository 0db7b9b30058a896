/**
 * What the desired sender remembers of what it sent (the writer's copy), and the delta
 * of one recomputed value against it: shared by mirrors, fleet-wide members and MCS
 * exports, each keyed by its local key.
 */
import { createHash } from "node:crypto";
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { FederatedMember } from "../../src/core/federated.ts";
import type { McsExport } from "../../src/core/mcs.ts";
import { objectKey } from "../../src/core/objects.ts";

/**
 * What `sent` keeps of a mirror or member: SHA-256 of its JSON (44 characters; the JSON
 * is built from the same code path each time, so equal values give equal JSON). Two
 * different mirrors would have to collide in SHA-256 for a change to go unsent.
 */
export function sentDigest(value: object): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("base64");
}

/** What one batch carries. */
export interface Changes {
  readonly upserts: DesiredMirror[];
  readonly deletes: string[];
  readonly members: FederatedMember[];
  readonly memberDeletes: string[];
  readonly mcsExports: McsExport[];
  readonly mcsExportDeletes: string[];
}

/**
 * Compares the recomputed value of remote Service `key` (a mirror or a member, keyed by
 * its local key) with what was last sent; records and returns the upsert or delete due.
 */
export function diffOne<T extends { readonly namespace: string; readonly name: string }>(
  key: string,
  value: T | undefined,
  keyOf: Map<string, string>,
  sentDigests: Map<string, string>,
  upserts: T[],
  deletes: string[],
): void {
  const previousKey = keyOf.get(key);
  const localKey = value ? objectKey(value) : undefined;
  if (previousKey && previousKey !== localKey) {
    sentDigests.delete(previousKey);
    keyOf.delete(key);
    deletes.push(previousKey);
  }
  if (!value || !localKey) return;
  const digest = sentDigest(value);
  if (sentDigests.get(localKey) === digest) return;
  sentDigests.set(localKey, digest);
  keyOf.set(key, localKey);
  upserts.push(value);
}
