/**
 * Every message that crosses a thread boundary, as one discriminated union per port:
 * the one place listing them. Each union's type and its decoder come from one schema;
 * the data shapes they carry live in status.ts, options.ts, shapes.ts (types declared by
 * the core, with compile-time agreement checks) and error-schema.ts.
 *
 * Topology:
 *   supervisor (main) ⇄ remote-cluster actor   over the worker's parentPort: lifecycle + status
 *   supervisor (main) ⇄ local-writer actor     over the worker's parentPort: lifecycle + registered clusters + status
 *   remote-cluster actor ⇄ local-writer actor  over a dedicated MessageChannel: desired mirrors + acks
 *
 * Invariants:
 * - Messages assert state ("mirror K now looks like X", "cluster C's full set is S",
 *   "the registered clusters are R"); applying one twice, or an older one after a newer
 *   one of the same sequence, changes nothing. Actor incarnations carry an `epoch`;
 *   a receiver ignores data from an epoch older than the newest it has seen.
 * - Flow control: an actor has at most `maxInFlight` un-acknowledged `desired.batch`
 *   messages; meanwhile it coalesces changes by key, so neither side queues more than
 *   one entry per mirror however fast the remote changes. Acks are cumulative (see
 *   `ToActorFromWriter`), so a lost or duplicated ack costs no credit for good.
 * - Every message is decoded deeply with `decode*` at the receiving boundary; anything
 *   malformed is rejected with a `ProtocolError` naming the message type and the path
 *   of the bad field, never trusted. Receivers report and drop it (thread entries count
 *   it in their status as `protocolErrors`); nothing malformed ends a thread.
 */
import { MessagePort } from "node:worker_threads";
import * as v from "valibot";
import { count, type DeepReadonly, decoder, name, ProtocolError } from "./codec.ts";
import { SerializedErrorSchema } from "./error-schema.ts";
import {
  ACTOR_FAULT_KINDS,
  EventRequestSchema,
  LocalRangesSchema,
  RemoteActorOptionsSchema,
  WriterOptionsSchema,
} from "./options.ts";
import {
  ClusterSettingsSchema,
  ConnectionSpecSchema,
  DesiredMirrorSchema,
  FederatedMemberSchema,
  McsExportSchema,
} from "./shapes.ts";
import { ClusterStatusSchema, WriterStatusSchema } from "./status.ts";

export { type DeepReadonly, ProtocolError } from "./codec.ts";
export { MAX_CAUSE_DEPTH } from "./error-schema.ts";
export {
  ACTOR_FAULT_KINDS,
  type ActorFaultKind,
  type EventRequest,
  type GatewayPolicyOptions,
  type LocalRangesMessage,
  type RemoteActorOptions,
  type WriterOptions,
} from "./options.ts";
export {
  CLUSTER_SYNC_STATES,
  type ClusterStatus,
  type ClusterSyncState,
  type FederatedServiceStatus,
  type GatewayProbeCounters,
  type GatewayProbeStatus,
  type GatewayStatus,
  type LatencyHistogram,
  MAX_GATEWAY_SERIES,
  MAX_LISTED_DEAD_ADDRESSES,
  OTHER_GATEWAY,
  type WatchFailureInfo,
  WRITE_DURATION_BUCKETS,
  type WriterClusterStatus,
  type WriterStatus,
} from "./status.ts";

/** A transferred MessagePort: structured clone turns anything else into a plain object. */
const port = v.instance(MessagePort);

// ---------------------------------------------------------------------------------
// supervisor → remote-cluster actor

export const ToRemoteActorSchema = v.variant("type", [
  v.object({
    type: v.literal("actor.init"),
    cluster: ClusterSettingsSchema,
    epoch: count,
    connection: ConnectionSpecSchema,
    options: RemoteActorOptionsSchema,
    /** Transferred: the actor's end of its channel to the local writer. */
    writerPort: port,
    /** The local cluster's ranges as the supervisor knows them now (absent: none read yet); see `actor.local-ranges`. */
    localRanges: v.exactOptional(LocalRangesSchema),
  }),
  /**
   * The local cluster's own address ranges changed (SPEC §10: gateway addresses in them
   * are refused). For the whole thread: every actor it hosts, and those it starts later
   * (the newer of this and the init's wins). Asserts state: the highest `seq` wins, so a
   * duplicate or an older message changes nothing; a lost one is superseded by the next,
   * and a new actor's init carries the current ranges.
   */
  v.object({ type: v.literal("actor.local-ranges"), ranges: LocalRangesSchema }),
  /** The writer restarted: `cluster`'s actor sends the full desired set again on this new port. */
  v.object({ type: v.literal("actor.attach-writer"), cluster: name, writerPort: port }),
  /** Stop `cluster`'s actor; a thread whose last actor stopped ends. */
  v.object({ type: v.literal("actor.stop"), cluster: name }),
  /** Tests only: accepted only by an actor whose init carried `options.testHooks: true`. */
  v.object({ type: v.literal("actor.inject-fault"), cluster: name, kind: v.picklist(ACTOR_FAULT_KINDS) }),
]);
export type ToRemoteActor = DeepReadonly<v.InferOutput<typeof ToRemoteActorSchema>>;

// remote-cluster actor → supervisor

export const FromRemoteActorSchema = v.variant("type", [
  /** Incarnation `epoch` of `cluster`'s actor runs (the answer to every `actor.init` of that epoch). */
  v.object({ type: v.literal("actor.ready"), cluster: name, epoch: count }),
  v.object({ type: v.literal("actor.status"), status: ClusterStatusSchema }),
  v.object({ type: v.literal("actor.stopped"), cluster: name, epoch: count }),
  /** Incarnation `epoch` is gone (or was never started); the supervisor's restart policy decides. */
  v.object({ type: v.literal("actor.failed"), cluster: name, epoch: count, error: SerializedErrorSchema }),
  /**
   * Incarnation `epoch` holds `bytes` of API answers being received or decoded now; sent
   * when that passes 8 MiB, at each doubling, and when it falls back below (`bytes` 0).
   * If its shared thread's heap runs out, the heaviest actor is charged (the supervisor's
   * actor-endings.ts). Asserts state: the latest wins, a duplicate changes nothing; lost
   * only with its thread (whose end is then unexplained: nobody is charged).
   */
  v.object({ type: v.literal("actor.load"), cluster: name, epoch: count, bytes: count }),
]);
export type FromRemoteActor = DeepReadonly<v.InferOutput<typeof FromRemoteActorSchema>>;

// ---------------------------------------------------------------------------------
// remote-cluster actor ⇄ local writer (dedicated channel)

/** Local keys are `namespace/name`. */
const localKey = v.pipe(v.string(), v.regex(/^[^/]+\/[^/]+$/, "must be namespace/name"));

export const ToWriterFromActorSchema = v.object({
  type: v.literal("desired.batch"),
  cluster: name,
  epoch: count,
  /** Increases with every batch of the incarnation `epoch` (1, 2, 3, …); acks refer to it. */
  seq: count,
  /**
   * true: after a complete list, `upserts` is the cluster's FULL desired set and
   * `deletes` is empty; anything else the writer holds for the cluster is gone. Only
   * a complete batch allows garbage collection of the cluster's mirrors (SPEC §6).
   */
  complete: v.boolean(),
  /** Every upsert names the batch's `cluster` (checked by the decoder). */
  upserts: v.array(DesiredMirrorSchema),
  /** Local keys (`namespace/name`) whose mirror is no longer desired. */
  deletes: v.array(localKey),
  /**
   * The cluster's members of fleet-wide Services (SPEC §11), keyed by the fleet-wide
   * Service's local key `namespace/<svc>-federated`; they follow the same rules as
   * `upserts` (a complete batch carries them all; absent means none). Every member names
   * the batch's `cluster` (checked by the decoder).
   */
  members: v.exactOptional(v.array(FederatedMemberSchema)),
  /** Fleet-wide keys whose member from this cluster is gone. Absent means none. */
  memberDeletes: v.exactOptional(v.array(localKey)),
  /**
   * The cluster's MCS exports (SPEC §12: one per ServiceExport that exports), keyed by
   * the local ServiceImport's key `namespace/<svc>`; the same rules as `members` (a
   * complete batch carries them all; absent means none). Every export names the
   * batch's `cluster` (checked by the decoder).
   */
  mcsExports: v.exactOptional(v.array(McsExportSchema)),
  /** ServiceImport keys whose export from this cluster is gone. Absent means none. */
  mcsExportDeletes: v.exactOptional(v.array(localKey)),
  /**
   * Only on a complete batch (checked by the decoder), which then carries no
   * `mcsExports`: the cluster's MCS exports are NOT known (SPEC §12: the ServiceExport
   * discovery or list failed, was refused or timed out, and no list of this incarnation
   * says which exist). The writer keeps the exports it holds of the cluster and treats
   * the cluster's import parts as it treats an unknown cluster's (kept as written, never
   * deleted), until a complete batch without this flag. Absent: the exports are known
   * (`mcsExports`, absent meaning none). Loss: as for any batch (a new channel gets a
   * complete batch); duplication: the same assertion again; order: one port keeps it,
   * and the next complete batch replaces it.
   */
  mcsExportsUnknown: v.exactOptional(v.literal(true)),
});
export type ToWriterFromActor = DeepReadonly<v.InferOutput<typeof ToWriterFromActorSchema>>;

export const ToActorFromWriterSchema = v.object({
  type: v.literal("desired.ack"),
  cluster: name,
  /** The actor incarnation the ack is for; an actor ignores acks of another epoch. */
  epoch: count,
  /**
   * Cumulative: the writer has taken (absorbed or rejected) every batch of `epoch` on
   * this channel up to and including `seq`. The actor keeps `lastAcked = max(lastAcked,
   * seq)`; its batches in flight are `lastSent - lastAcked`. A lost, duplicated or
   * reordered ack is therefore harmless: any later ack restores every credit.
   * For a batch too malformed to read its seq, the writer acks the highest seq it has
   * seen on the channel (0 if none), with `resend: true`.
   */
  seq: count,
  /**
   * The writer did not absorb something it was sent (a batch that did not decode, named
   * another cluster, or could not be kept): the actor treats everything sent so far as
   * settled (`lastAcked = lastSent`) and sends a `complete` batch as soon as it has a
   * complete list. Absent on a plain ack (never `false`).
   */
  resend: v.exactOptional(v.literal(true)),
});
/** The writer's answer to every `desired.batch` it receives; it never acks and drops. */
export type ToActorFromWriter = DeepReadonly<v.InferOutput<typeof ToActorFromWriterSchema>>;

// ---------------------------------------------------------------------------------
// supervisor → local writer

export const ToWriterSchema = v.variant("type", [
  v.object({ type: v.literal("writer.init"), connection: ConnectionSpecSchema, options: WriterOptionsSchema }),
  /** A new actor incarnation's end of the desired channel. */
  v.object({ type: v.literal("writer.attach"), cluster: name, epoch: count, port }),
  /**
   * The full set of cluster names whose mirrors must be kept: registered clusters plus
   * names still claimed by a credentials Secret that is currently invalid. Mirrors of
   * any other cluster are garbage (SPEC §1 Secret deleted / renamed, §6).
   */
  v.object({
    type: v.literal("writer.clusters"),
    keep: v.array(name),
    /**
     * The registered clusters in registration order (Secret creation time, then name):
     * the first member in it sets a fleet-wide Service's ports (SPEC §11). Absent: `keep`'s order.
     */
    order: v.exactOptional(v.array(name)),
    /**
     * When each registered cluster was registered: its credentials Secret's creation
     * time (RFC 3339, set by the local API server). No MCS export of a cluster ranks as
     * older than this (SPEC §12). Absent, or a cluster missing: its exports are not clamped.
     */
    registeredAt: v.exactOptional(v.record(name, v.string())),
    /**
     * Each registered cluster's priority (SPEC §14), 0–1000, lower preferred. Absent, or
     * a cluster missing: the default, 100. The latest message wins, like `keep`.
     */
    priorities: v.exactOptional(v.record(name, v.pipe(count, v.maxValue(1000)))),
  }),
  v.object({ type: v.literal("writer.event"), event: EventRequestSchema }),
  /**
   * Leader election's write fence: no write may be sent at or after `writableUntil`
   * (ms on `systemClock`, which every thread reads alike), the moment the elector would
   * give up the Lease if no renewal succeeded meanwhile. Each successful renewal
   * moves it forward; if the main thread stalls and sends none, the writer stops on its
   * own before another replica can hold the Lease. The latest message wins.
   */
  v.object({ type: v.literal("writer.fence"), writableUntil: v.pipe(v.number(), v.finite()) }),
  /**
   * Sharded (`--shards` > 1): the shards this replica holds now, each with its write
   * deadline (as `writer.fence`, per shard: no write of a key of that shard at or after
   * it). It asserts the whole state: a shard not listed is not held, and the writer
   * plans nothing and writes nothing for its keys, and forgets its clusters' desired
   * state (a later gain waits for their complete sets again). `seq` increases with
   * every message; a message older than the newest seen is ignored (reordering is
   * harmless, a duplicate changes nothing), and a lost one is superseded by the next
   * renewal's. Answered by `writer.shards-fenced` with the same `seq` once no write of a
   * shard it dropped is in flight.
   */
  v.object({
    type: v.literal("writer.shards"),
    seq: count,
    held: v.array(v.object({ shard: count, writableUntil: v.pipe(v.number(), v.finite()) })),
  }),
  v.object({ type: v.literal("writer.stop") }),
]);
export type ToWriter = DeepReadonly<v.InferOutput<typeof ToWriterSchema>>;

// local writer → supervisor

export const FromWriterSchema = v.variant("type", [
  v.object({ type: v.literal("writer.ready") }),
  v.object({ type: v.literal("writer.status"), status: WriterStatusSchema }),
  v.object({ type: v.literal("writer.stopped") }),
  /** Every `writer.shards` up to `seq` is applied and no write of a shard they dropped is in flight (cumulative). */
  v.object({ type: v.literal("writer.shards-fenced"), seq: count }),
  v.object({ type: v.literal("writer.failed"), error: SerializedErrorSchema }),
]);
export type FromWriter = DeepReadonly<v.InferOutput<typeof FromWriterSchema>>;

/** The part of a MessagePort an actor uses: a real port, or a fake in tests. */
export interface ChannelPort<Out> {
  postMessage(message: Out): void;
  on(event: "message", listener: (message: unknown) => void): unknown;
  close(): void;
}

// ---------------------------------------------------------------------------------
// Boundary decoding: each throws ProtocolError (message type, field path, what was wrong).

export const decodeToRemoteActor = decoder("to remote actor", ToRemoteActorSchema);
export const decodeFromRemoteActor = decoder("from remote actor", FromRemoteActorSchema);
export const decodeToActorFromWriter = decoder("desired channel", ToActorFromWriterSchema);
export const decodeToWriter = decoder("to writer", ToWriterSchema);
export const decodeFromWriter = decoder("from writer", FromWriterSchema);

const decodeBatch = decoder("desired channel", ToWriterFromActorSchema);
/** Also checks that every upsert and member belongs to the channel's cluster, and where `mcsExportsUnknown` may stand. */
export function decodeToWriterFromActor(value: unknown): ToWriterFromActor {
  const batch = decodeBatch(value);
  batch.upserts.forEach((m, i) => {
    if (m.cluster !== batch.cluster)
      throw new ProtocolError(
        `desired.batch: upserts[${i}].cluster: upsert for cluster ${m.cluster} on ${batch.cluster}'s channel`,
      );
  });
  batch.members?.forEach((m, i) => {
    if (m.cluster !== batch.cluster)
      throw new ProtocolError(
        `desired.batch: members[${i}].cluster: member of cluster ${m.cluster} on ${batch.cluster}'s channel`,
      );
  });
  batch.mcsExports?.forEach((m, i) => {
    if (m.cluster !== batch.cluster)
      throw new ProtocolError(
        `desired.batch: mcsExports[${i}].cluster: export of cluster ${m.cluster} on ${batch.cluster}'s channel`,
      );
  });
  if (batch.mcsExportsUnknown && (!batch.complete || batch.mcsExports || batch.mcsExportDeletes))
    throw new ProtocolError(
      "desired.batch: mcsExportsUnknown: only on a complete batch without mcsExports or mcsExportDeletes",
    );
  return batch;
}

/** Compile-time exhaustiveness check for switches over a union's `type`. */
export function assertNever(value: never): never {
  throw new ProtocolError(`unhandled message ${JSON.stringify(value)}`);
}
