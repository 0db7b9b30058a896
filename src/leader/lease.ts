/**
 * Leader election on a coordination.k8s.io/v1 Lease, the pure part: from the Lease as
 * last observed (and WHEN it was observed, on this process's own monotonic clock) decide
 * whether this replica may acquire or renew it, and build the spec to write. These are
 * the usual semantics of Kubernetes Lease-based leader election; the I/O is in
 * `elector.ts`.
 *
 * Invariants:
 * - expiry is judged ONLY from local observation: a Lease is expired when this process
 *   has seen the same record, unchanged, for longer than the record's
 *   `leaseDurationSeconds`. The timestamps in the record (`renewTime`, written by another
 *   machine's wall clock) are never compared with our clock, so clock skew between
 *   replicas cannot make a live leader look expired;
 * - a Lease held by someone else is never taken before it expired by that rule; a Lease
 *   with an empty holder (released) may be taken at once;
 * - identities must be unique per replica: a record whose holder is our identity is
 *   treated as ours (renewed, not acquired).
 */

/** The LeaseSpec fields leader election reads and writes. */
export interface LeaseRecord {
  /** Empty or absent: nobody holds the Lease (never acquired, or released). */
  readonly holderIdentity?: string;
  readonly leaseDurationSeconds?: number;
  /** MicroTime (RFC 3339 with microseconds), informational only. */
  readonly acquireTime?: string;
  /** MicroTime, informational only: see the module invariants. */
  readonly renewTime?: string;
  readonly leaseTransitions?: number;
}

/** A record as this process saw it. */
export interface Observation {
  readonly record: LeaseRecord;
  /** Canonical form of `record`, to tell a changed record from an unchanged one. */
  readonly key: string;
  /**
   * Local monotonic ms at which this exact record was FIRST seen. It is not moved by
   * later reads of the same record, so `observedAt + leaseDuration` is when the holder
   * last proved to be alive, as far as this process can tell, plus the Lease duration.
   */
  readonly observedAt: number;
}

export type Decision =
  /** No Lease exists: create it, holding it. */
  | { readonly action: "create"; readonly record: Required<LeaseRecord> }
  /**
   * Write `record` over the observed Lease (with its resourceVersion). `acquire`: the
   * holder changes to us (a transition); otherwise we renew a Lease we already hold.
   */
  | { readonly action: "update"; readonly record: Required<LeaseRecord>; readonly acquire: boolean }
  /** Someone else holds a Lease that has not expired: write nothing. `expiresAt` is local monotonic ms. */
  | { readonly action: "wait"; readonly holder: string; readonly expiresAt: number };

export interface DecideInput {
  /** The Lease as last observed; undefined when the GET answered 404. */
  readonly observation: Observation | undefined;
  readonly identity: string;
  /** The duration we write into the Lease when we hold it (rounded up to whole seconds). */
  readonly leaseDurationMs: number;
  /** Local monotonic ms (the same clock as `Observation.observedAt`). */
  readonly now: number;
  /** Wall-clock epoch ms, only for the informational timestamps written. */
  readonly wallNow: number;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The leader-election fields of a Lease's `spec`; fields of the wrong type are treated
 * as absent (a hand-edited Lease must not crash the elector), which makes the Lease
 * look unheld or expired — never held longer than it says.
 */
export function recordFromSpec(spec: unknown): LeaseRecord {
  if (!isRecord(spec)) return {};
  const out: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  } = {};
  const { holderIdentity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions } = spec;
  if (typeof holderIdentity === "string") out.holderIdentity = holderIdentity;
  if (typeof leaseDurationSeconds === "number" && Number.isFinite(leaseDurationSeconds))
    out.leaseDurationSeconds = leaseDurationSeconds;
  if (typeof acquireTime === "string") out.acquireTime = acquireTime;
  if (typeof renewTime === "string") out.renewTime = renewTime;
  if (typeof leaseTransitions === "number" && Number.isInteger(leaseTransitions))
    out.leaseTransitions = leaseTransitions;
  return out;
}

/** Canonical form of a record: equal for equal field values, whatever the key order. */
export function recordKey(record: LeaseRecord): string {
  return JSON.stringify([
    record.holderIdentity ?? "",
    record.leaseDurationSeconds ?? null,
    record.acquireTime ?? null,
    record.renewTime ?? null,
    record.leaseTransitions ?? null,
  ]);
}

/**
 * Records that `record` was read at local time `now`. When it equals the previous
 * observation the previous `observedAt` is kept (the holder has not renewed since);
 * any change — a renewal, a new holder, a release — restarts the clock.
 */
export function observe(previous: Observation | undefined, record: LeaseRecord, now: number): Observation {
  const key = recordKey(record);
  if (previous && previous.key === key) return previous;
  return { record, key, observedAt: now };
}

/** Local monotonic ms after which the observed record has expired (the holder is presumed dead). */
export function expiresAt(observation: Observation): number {
  const seconds = observation.record.leaseDurationSeconds ?? 0;
  return observation.observedAt + Math.max(0, seconds) * 1_000;
}

/** The holder of the observed record, "" when nobody holds it. */
export function holderOf(observation: Observation | undefined): string {
  return observation?.record.holderIdentity ?? "";
}

/**
 * Kubernetes MicroTime: RFC 3339 in UTC with exactly six fractional digits, e.g.
 * `2026-12-02T15:14:10.123000Z` (JavaScript time has millisecond resolution).
 */
export function formatMicroTime(epochMs: number): string {
  const iso = new Date(epochMs).toISOString(); // 2026-12-02T15:14:10.123Z
  return `${iso.slice(0, -1)}000Z`;
}

/** Whole seconds, at least 1, never shorter than asked (a Lease must not be written shorter than configured). */
export function leaseDurationSeconds(leaseDurationMs: number): number {
  return Math.max(1, Math.ceil(leaseDurationMs / 1_000));
}

/**
 * Whether we may acquire or renew the Lease now, and what to write:
 * - no Lease: create it, holding it, `leaseTransitions` 0;
 * - held by us: renew (`acquireTime` and `leaseTransitions` kept, `renewTime` now);
 * - held by another and not expired by local observation: wait;
 * - unheld (released) or expired: acquire (`leaseTransitions` + 1, acquire and renew time now).
 */
export function decide(input: DecideInput): Decision {
  const now = formatMicroTime(input.wallNow);
  const duration = leaseDurationSeconds(input.leaseDurationMs);
  const observation = input.observation;
  if (!observation) {
    return {
      action: "create",
      record: {
        holderIdentity: input.identity,
        leaseDurationSeconds: duration,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: 0,
      },
    };
  }
  const old = observation.record;
  const holder = holderOf(observation);
  const transitions = Math.max(0, old.leaseTransitions ?? 0);
  if (holder === input.identity) {
    return {
      action: "update",
      acquire: false,
      record: {
        holderIdentity: input.identity,
        leaseDurationSeconds: duration,
        acquireTime: old.acquireTime ?? now,
        renewTime: now,
        leaseTransitions: transitions,
      },
    };
  }
  const expiry = expiresAt(observation);
  if (holder !== "" && input.now < expiry) return { action: "wait", holder, expiresAt: expiry };
  return {
    action: "update",
    acquire: true,
    record: {
      holderIdentity: input.identity,
      leaseDurationSeconds: duration,
      acquireTime: now,
      renewTime: now,
      leaseTransitions: transitions + 1,
    },
  };
}

/**
 * What a leader writes when it gives the Lease up on a graceful stop: no holder, a 1 s duration, so a standby takes it at its next try
 * instead of waiting out the full duration. Undefined when the observed record is not
 * ours: a replica never releases a Lease somebody else holds.
 */
export function releaseRecord(
  observation: Observation | undefined,
  identity: string,
  wallNow: number,
): Required<LeaseRecord> | undefined {
  if (!observation || holderOf(observation) !== identity) return undefined;
  const now = formatMicroTime(wallNow);
  return {
    holderIdentity: "",
    leaseDurationSeconds: 1,
    acquireTime: now,
    renewTime: now,
    leaseTransitions: Math.max(0, observation.record.leaseTransitions ?? 0),
  };
}
