/**
 * Every message that crosses a thread boundary, as one discriminated union per port.
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
 *   one entry per mirror however fast the remote changes.
 * - Every message is decoded with `decode*` at the receiving boundary; anything
 *   malformed is rejected with a specific error, never trusted.
 */
import type { MessagePort } from "node:worker_threads";
import type { ClusterSettings, DesiredMirror, MirrorProblem } from "../core/desired.ts";
import type { ConnectionSpec } from "../kube/connection.ts";
import type { SerializedError } from "./errors.ts";

// ---------------------------------------------------------------------------------
// Shared shapes

/** A watch failure as the watcher reports it (plain data). */
export interface WatchFailureInfo {
  readonly phase: "list" | "watch";
  readonly reason: string;
  readonly message: string;
  readonly attempt: number;
  readonly retryInMs: number;
}

export type ClusterSyncState = "starting" | "syncing" | "synced" | "stale";

/** What a remote-cluster actor asserts about itself; the latest one replaces the previous. */
export interface ClusterStatus {
  readonly cluster: string;
  readonly epoch: number;
  readonly state: ClusterSyncState;
  /** Epoch ms since when the cluster has been in `state`. */
  readonly since: number;
  readonly lastSyncedAt?: number;
  readonly exportedServices: number;
  readonly mirrors: number;
  readonly problems: readonly MirrorProblem[];
  readonly lastFailure?: WatchFailureInfo;
  /** Gateways (`namespace/name`) in use and why each is unusable, if it is. */
  readonly gateways: readonly { readonly key: string; readonly usable: boolean; readonly reason?: string }[];
  readonly watch: {
    readonly lists: number;
    readonly watchesStarted: number;
    readonly failures: number;
    readonly relistsOnGone: number;
  };
  readonly failuresByReason: Readonly<Record<string, number>>;
  /** `Warning` headers the remote API server sent this incarnation (absent: none). */
  readonly apiWarnings?: number;
}

export interface RemoteActorOptions {
  /** How often ingress hostnames are resolved again (SPEC §2). */
  readonly resolvePeriodMs: number;
  /** Un-acknowledged batches allowed in flight to the writer. */
  readonly maxInFlight: number;
  /** Changes arriving within this window are sent as one batch. */
  readonly batchDelayMs: number;
  readonly logLevel: string;
  /** Append log lines here instead of stdout. */
  readonly logFile?: string;
  readonly watchInactivityTimeoutMs?: number;
  /**
   * Accept `actor.inject-fault` (tests only). Default false: the message is then
   * rejected as a protocol error. Set only by a Supervisor constructed with
   * `testHooks: true`, never from the command line.
   */
  readonly testHooks?: boolean;
}

/**
 * A fault a test asks an actor to suffer: an exception thrown from one of the actor's
 * callbacks ("throw": caught by the actor's guard and reported as that actor's
 * failure, so its neighbours on a shared thread are untouched), and faults of the
 * whole thread: an unhandled promise rejection, `process.exit(3)` (in a worker it ends
 * only the thread), or allocation until the thread's heap limit (ERR_WORKER_OUT_OF_MEMORY).
 */
export type ActorFaultKind = "throw" | "reject" | "exit" | "oom";
export const ACTOR_FAULT_KINDS: readonly ActorFaultKind[] = ["throw", "reject", "exit", "oom"];

export interface WriterOptions {
  readonly createNamespaces: boolean;
  readonly excludedNamespaces: readonly string[];
  readonly concurrency: number;
  /** Client-side write rate limit; qps <= 0 disables it. */
  readonly qps: number;
  readonly burst: number;
  readonly resyncPeriodMs: number;
  /** Re-check period of mirrors blocked by a conflict or a missing namespace. */
  readonly blockedRecheckMs: number;
  readonly logLevel: string;
  /** Append log lines here instead of stdout. */
  readonly logFile?: string;
  /** Where Events for the controller itself (not a mirror) are recorded. */
  readonly namespace: string;
  /** Leader election is on: nothing is written until a `writer.fence` allows it. */
  readonly fenced?: boolean;
}

// ---------------------------------------------------------------------------------
// supervisor → remote-cluster actor

export type ToRemoteActor =
  | {
      readonly type: "actor.init";
      readonly cluster: ClusterSettings;
      readonly epoch: number;
      readonly connection: ConnectionSpec;
      readonly options: RemoteActorOptions;
      /** Transferred: the actor's end of its channel to the local writer. */
      readonly writerPort: MessagePort;
    }
  /** The writer restarted: `cluster`'s actor sends the full desired set again on this new port. */
  | { readonly type: "actor.attach-writer"; readonly cluster: string; readonly writerPort: MessagePort }
  /** Stop `cluster`'s actor; a thread whose last actor stopped ends. */
  | { readonly type: "actor.stop"; readonly cluster: string }
  /** Tests only: accepted only by an actor whose init carried `options.testHooks: true`. */
  | { readonly type: "actor.inject-fault"; readonly cluster: string; readonly kind: ActorFaultKind };

// remote-cluster actor → supervisor
export type FromRemoteActor =
  | { readonly type: "actor.ready"; readonly cluster: string; readonly epoch: number }
  | { readonly type: "actor.status"; readonly status: ClusterStatus }
  | { readonly type: "actor.stopped"; readonly cluster: string; readonly epoch: number }
  | {
      readonly type: "actor.failed";
      readonly cluster: string;
      readonly epoch: number;
      readonly error: SerializedError;
    };

// ---------------------------------------------------------------------------------
// remote-cluster actor ⇄ local writer (dedicated channel)

export type ToWriterFromActor = {
  readonly type: "desired.batch";
  readonly cluster: string;
  readonly epoch: number;
  readonly seq: number;
  /**
   * true: after a complete list, `upserts` is the cluster's FULL desired set and
   * `deletes` is empty; anything else the writer holds for the cluster is gone. Only
   * a complete batch allows garbage collection of the cluster's mirrors (SPEC §6).
   */
  readonly complete: boolean;
  readonly upserts: readonly DesiredMirror[];
  /** Local keys (`namespace/name`) whose mirror is no longer desired. */
  readonly deletes: readonly string[];
};

export type ToActorFromWriter = {
  readonly type: "desired.ack";
  readonly cluster: string;
  readonly epoch: number;
  /** Cumulative: the writer has taken every batch of this epoch on this channel up to `seq`. */
  readonly seq: number;
  /** The writer did not absorb something: every credit is settled and a complete set must follow. */
  readonly resend?: true;
};

// ---------------------------------------------------------------------------------
// supervisor → local writer

export interface EventRequest {
  readonly involved: {
    readonly kind: string;
    readonly namespace: string;
    readonly name: string;
    readonly uid?: string;
    readonly apiVersion: string;
  };
  readonly type: "Normal" | "Warning";
  readonly reason: string;
  readonly message: string;
}

export type ToWriter =
  | { readonly type: "writer.init"; readonly connection: ConnectionSpec; readonly options: WriterOptions }
  /** A new actor incarnation's end of the desired channel. */
  | { readonly type: "writer.attach"; readonly cluster: string; readonly epoch: number; readonly port: MessagePort }
  /**
   * The full set of cluster names whose mirrors must be kept: registered clusters plus
   * names still claimed by a credentials Secret that is currently invalid. Mirrors of
   * any other cluster are garbage (SPEC §1 Secret deleted / renamed, §6).
   */
  | { readonly type: "writer.clusters"; readonly keep: readonly string[] }
  | { readonly type: "writer.event"; readonly event: EventRequest }
  /**
   * Leader election's write fence: no write may be sent at or after `writableUntil`
   * (ms on `systemClock`, which every thread reads alike), the moment the elector would
   * give up the Lease if no renewal succeeded meanwhile. Each successful renewal
   * moves it forward; if the main thread stalls and sends none, the writer stops on its
   * own before another replica can hold the Lease. The latest message wins.
   */
  | { readonly type: "writer.fence"; readonly writableUntil: number }
  | { readonly type: "writer.stop" };

export interface WriterClusterStatus {
  readonly mirrors: number;
  readonly blocked: readonly { readonly key: string; readonly reason: string; readonly message: string }[];
  readonly complete: boolean;
}

/**
 * Upper bounds (seconds) of the write latency histogram, defined once: the writer counts
 * into them and the metrics layer labels them (`le`). Ascending; +Inf is implicit.
 */
export const WRITE_DURATION_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * A latency histogram as cumulative counts since the writer started: `buckets[i]` counts
 * observations <= `WRITE_DURATION_BUCKETS[i]` (so it is non-decreasing in i and <= count);
 * `count` is the +Inf bucket; `sum` is in seconds.
 */
export interface LatencyHistogram {
  readonly buckets: readonly number[];
  readonly sum: number;
  readonly count: number;
}

export interface WriterStatus {
  readonly ready: boolean;
  readonly queueDepth: number;
  readonly inFlight: number;
  /** Writes since the writer started, by `verb/Kind/result` (result: ok, an HTTP status, or error). */
  readonly writes: Readonly<Record<string, number>>;
  readonly retries: number;
  /** Latency of every write request (the API call only, not the rate-limit wait). */
  readonly writeDuration: LatencyHistogram;
  readonly clusters: Readonly<Record<string, WriterClusterStatus>>;
  readonly lastError?: SerializedError;
  /** `Warning` headers the local API server sent since the writer started (absent: none). */
  readonly apiWarnings?: number;
}

// local writer → supervisor
export type FromWriter =
  | { readonly type: "writer.ready" }
  | { readonly type: "writer.status"; readonly status: WriterStatus }
  | { readonly type: "writer.stopped" }
  | { readonly type: "writer.failed"; readonly error: SerializedError };

/** The part of a MessagePort an actor uses: a real port, or a fake in tests. */
export interface ChannelPort<Out> {
  postMessage(message: Out): void;
  on(event: "message", listener: (message: unknown) => void): unknown;
  close(): void;
}

// ---------------------------------------------------------------------------------
// Boundary decoding

export class ProtocolError extends Error {
  override name = "ProtocolError";
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typeOf(value: unknown, where: string): string {
  if (!isRecord(value) || typeof value["type"] !== "string") throw new ProtocolError(`${where}: message has no type`);
  return value["type"];
}

function requireFields(
  value: Record<string, unknown>,
  where: string,
  fields: Record<string, "string" | "number" | "boolean" | "object" | "array">,
): void {
  for (const [key, kind] of Object.entries(fields)) {
    const v = value[key];
    const ok = kind === "array" ? Array.isArray(v) : kind === "object" ? isRecord(v) : typeof v === kind;
    if (!ok) throw new ProtocolError(`${where}: field ${key} must be ${kind}`);
  }
}

const remoteActorTypes = new Set(["actor.init", "actor.attach-writer", "actor.stop", "actor.inject-fault"]);
export function decodeToRemoteActor(value: unknown): ToRemoteActor {
  const type = typeOf(value, "to remote actor");
  if (!remoteActorTypes.has(type)) throw new ProtocolError(`to remote actor: unknown type ${type}`);
  const v = value as Record<string, unknown>;
  if (type === "actor.init")
    requireFields(v, type, {
      cluster: "object",
      epoch: "number",
      connection: "object",
      options: "object",
      writerPort: "object",
    });
  if (type === "actor.attach-writer") requireFields(v, type, { cluster: "string", writerPort: "object" });
  if (type === "actor.stop" || type === "actor.inject-fault") requireFields(v, type, { cluster: "string" });
  if (type === "actor.inject-fault" && !ACTOR_FAULT_KINDS.includes(v["kind"] as ActorFaultKind))
    throw new ProtocolError(`${type}: unknown fault kind ${String(v["kind"])}`);
  return value as ToRemoteActor;
}

const fromRemoteActorTypes = new Set(["actor.ready", "actor.status", "actor.stopped", "actor.failed"]);
export function decodeFromRemoteActor(value: unknown): FromRemoteActor {
  const type = typeOf(value, "from remote actor");
  if (!fromRemoteActorTypes.has(type)) throw new ProtocolError(`from remote actor: unknown type ${type}`);
  const v = value as Record<string, unknown>;
  if (type === "actor.status") {
    requireFields(v, type, { status: "object" });
    requireFields(v["status"] as Record<string, unknown>, `${type} status`, { cluster: "string", epoch: "number" });
  } else requireFields(v, type, { cluster: "string", epoch: "number" });
  if (type === "actor.failed") requireFields(v, type, { error: "object" });
  return value as FromRemoteActor;
}

export function decodeToWriterFromActor(value: unknown): ToWriterFromActor {
  const type = typeOf(value, "desired channel");
  if (type !== "desired.batch") throw new ProtocolError(`desired channel: unknown type ${type}`);
  const v = value as Record<string, unknown>;
  requireFields(v, type, {
    cluster: "string",
    epoch: "number",
    seq: "number",
    complete: "boolean",
    upserts: "array",
    deletes: "array",
  });
  for (const m of v["upserts"] as unknown[]) {
    if (!isRecord(m)) throw new ProtocolError(`${type}: upsert is not an object`);
    requireFields(m, `${type} upsert`, {
      cluster: "string",
      namespace: "string",
      name: "string",
      labels: "object",
      ports: "array",
      addresses: "array",
    });
    if (m["cluster"] !== v["cluster"])
      throw new ProtocolError(
        `${type}: upsert for cluster ${String(m["cluster"])} on ${String(v["cluster"])}'s channel`,
      );
  }
  for (const k of v["deletes"] as unknown[]) {
    if (typeof k !== "string" || !k.includes("/"))
      throw new ProtocolError(`${type}: delete key must be namespace/name`);
  }
  return value as ToWriterFromActor;
}

export function decodeToActorFromWriter(value: unknown): ToActorFromWriter {
  const type = typeOf(value, "desired channel");
  if (type !== "desired.ack") throw new ProtocolError(`desired channel: unknown type ${type}`);
  requireFields(value as Record<string, unknown>, type, { cluster: "string", epoch: "number", seq: "number" });
  return value as ToActorFromWriter;
}

const toWriterTypes = new Set([
  "writer.init",
  "writer.attach",
  "writer.clusters",
  "writer.event",
  "writer.fence",
  "writer.stop",
]);
export function decodeToWriter(value: unknown): ToWriter {
  const type = typeOf(value, "to writer");
  if (!toWriterTypes.has(type)) throw new ProtocolError(`to writer: unknown type ${type}`);
  const v = value as Record<string, unknown>;
  if (type === "writer.init") requireFields(v, type, { connection: "object", options: "object" });
  if (type === "writer.attach") requireFields(v, type, { cluster: "string", epoch: "number", port: "object" });
  if (type === "writer.clusters") requireFields(v, type, { keep: "array" });
  if (type === "writer.event") requireFields(v, type, { event: "object" });
  if (type === "writer.fence") requireFields(v, type, { writableUntil: "number" });
  return value as ToWriter;
}

const fromWriterTypes = new Set(["writer.ready", "writer.status", "writer.stopped", "writer.failed"]);
export function decodeFromWriter(value: unknown): FromWriter {
  const type = typeOf(value, "from writer");
  if (!fromWriterTypes.has(type)) throw new ProtocolError(`from writer: unknown type ${type}`);
  const v = value as Record<string, unknown>;
  if (type === "writer.status") {
    requireFields(v, type, { status: "object" });
    const status = v["status"] as Record<string, unknown>;
    requireFields(status, `${type} status`, { writes: "object", retries: "number", writeDuration: "object" });
    decodeLatencyHistogram(status["writeDuration"], `${type} writeDuration`);
  }
  if (type === "writer.failed") requireFields(v, type, { error: "object" });
  return value as FromWriter;
}

function decodeLatencyHistogram(value: unknown, where: string): LatencyHistogram {
  if (!isRecord(value)) throw new ProtocolError(`${where}: must be an object`);
  requireFields(value, where, { buckets: "array", sum: "number", count: "number" });
  const buckets = value["buckets"] as unknown[];
  if (buckets.length !== WRITE_DURATION_BUCKETS.length || !buckets.every((b) => typeof b === "number"))
    throw new ProtocolError(`${where}: buckets must be ${WRITE_DURATION_BUCKETS.length} numbers`);
  return value as unknown as LatencyHistogram;
}

/** Compile-time exhaustiveness check for switches over a union's `type`. */
export function assertNever(value: never): never {
  throw new ProtocolError(`unhandled message ${JSON.stringify(value)}`);
}
