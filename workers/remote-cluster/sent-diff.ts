/**
 * What the desired sender remembers of what it sent, and the delta of one remote
 * Service against it: per local key a digest of the value the writer holds, per remote
 * Service the local keys it stands for (one mirror, none, or a headless Service's
 * headless and per-host mirrors, SPEC §12). Shared by mirrors, fleet-wide members and
 * MCS exports (SPEC §12), each keyed by its local key.
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

export const noChanges = (): Changes => ({
  upserts: [],
  deletes: [],
  members: [],
  memberDeletes: [],
  mcsExports: [],
  mcsExportDeletes: [],
});

type Keyed = { readonly namespace: string; readonly name: string };

/**
 * Compares the recomputed values of remote Service `key` (mirrors, a member or an MCS export, each
 * keyed by its local key) with what was last sent; records and returns the upserts and
 * deletes due: a local key the Service no longer stands for is deleted.
 */
export function diffMany<T extends Keyed>(
  key: string,
  values: readonly T[],
  keyOf: Map<string, readonly string[]>,
  sentDigests: Map<string, string>,
  upserts: T[],
  deletes: string[],
): void {
  const previous = keyOf.get(key) ?? [];
  const now = values.map((v) => objectKey(v));
  const keep = new Set(now);
  for (const localKey of previous) {
    if (keep.has(localKey)) continue;
    sentDigests.delete(localKey);
    deletes.push(localKey);
  }
  if (now.length > 0) keyOf.set(key, now);
  else keyOf.delete(key);
  for (const value of values) {
    const localKey = objectKey(value);
    const digest = sentDigest(value);
    if (sentDigests.get(localKey) === digest) continue;
    sentDigests.set(localKey, digest);
    upserts.push(value);
  }
}

/**
 * A local key one remote Service gives up while another takes it in the same batch (a
 * per-host name moving from one headless Service to another, or to the exported Service
 * named like the host): the batch upserts it and must not delete it, whichever of the
 * two was diffed first, and `sentDigests` must hold the upsert's digest (the delete may
 * have dropped it after the upsert set it). Called once per batch, after every diff.
 */
export function keepTakenOver<T extends Keyed>(
  upserts: readonly T[],
  deletes: string[],
  sentDigests: Map<string, string>,
): void {
  if (deletes.length === 0 || upserts.length === 0) return;
  const upserted = new Map(upserts.map((value) => [objectKey(value), value]));
  let kept = 0;
  for (const localKey of deletes) {
    const value = upserted.get(localKey);
    if (value === undefined) deletes[kept++] = localKey;
    else sentDigests.set(localKey, sentDigest(value));
  }
  deletes.length = kept;
}
