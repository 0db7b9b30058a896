/**
 * The actor's desired channel to the local writer: computes the mirrors of the
 * Services that changed (core/desired.ts), coalesces them by key, and sends them as
 * batches under the credit rule (credits.ts).
 *
 * Invariants:
 * - nothing is sent before the first complete list; after every complete list, a new
 *   writer port or a `resend` ack, the FULL desired set is sent as one `complete` batch,
 *   so the writer may garbage-collect only on complete knowledge (SPEC §6);
 * - between complete batches, changes are coalesced by remote Service key and sent as
 *   deltas, with at most `maxInFlight` batches un-acknowledged (`lastSent − lastAcked`);
 * - `sent` holds, per local mirror key, a digest of the mirror last sent (SHA-256 of
 *   its JSON, `sentDigest`): what the writer holds. A mirror with the same digest is
 *   not sent again. A digest, not the JSON itself: a packed thread holds the sets of
 *   its hundred-odd clusters, and ≈ 0.5–1 KB of JSON per mirror was most of what a
 *   sender kept. Members of fleet-wide Services
 *   (SPEC §11) travel the same way, next to the mirrors, keyed by the fleet-wide key
 *   (`sentMembers`): a remote Service may be both exported and a member.
 */
import {
  type ClusterSettings,
  type DesiredMirror,
  desiredMirrorFor,
  type GatewayView,
  type MirrorProblem,
  viewGateway,
} from "../../src/core/desired.ts";
import { exportOf, type GatewayRef } from "../../src/core/export.ts";
import {
  desiredMemberFor,
  type FederatedMember,
  type MemberSelector,
  memberGateway,
} from "../../src/core/federated.ts";
import { type McsExport, mcsExportFor, type ServiceExport } from "../../src/core/mcs.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { type ChannelPort, decodeToActorFromWriter, type ToWriterFromActor } from "../../src/protocol/messages.ts";
import { acked, type Credits, initialCredits, maySend, sent, settled } from "./credits.ts";
import { type Changes, diffOne, sentDigest } from "./sent-set.ts";

/** The actor's end of its desired channel to the local writer. */
export type DesiredPort = ChannelPort<ToWriterFromActor>;

/** What the sender reads of the watcher's store. */
export interface ServiceSource {
  get(key: string): Service | undefined;
  values(): IterableIterator<Service>;
  readonly hasSynced: boolean;
}

/** What the sender reads of the cluster's ServiceExports (SPEC §12; service-exports.ts). */
export interface ServiceExportSource {
  get(key: string): ServiceExport | undefined;
  keys(): Iterable<string>;
  /** The exports are known: the complete set may be sent. */
  readonly settled: boolean;
}

/** The sender's flow control, for status and tests. */
export interface FlowState {
  readonly lastSent: number;
  readonly lastAcked: number;
  /** Remote Services whose mirror is to be recomputed and sent. */
  readonly pendingChanges: number;
  /** A complete set is owed to the writer. */
  readonly snapshotPending: boolean;
  /** Flushes that found changes to send but no credit. */
  readonly refusedFlushes: number;
}

export interface DesiredSenderDeps {
  readonly cluster: ClusterSettings;
  readonly epoch: number;
  readonly batchDelayMs: number;
  readonly maxInFlight: number;
  readonly services: ServiceSource;
  readonly serviceExports: ServiceExportSource;
  /** Remote Services with this label are fleet-wide members (SPEC §11). */
  readonly memberSelector: MemberSelector;
  readonly lookupHostname: (hostname: string) => readonly string[] | undefined;
  /** The dead addresses of gateway `key` (SPEC §10); undefined when it is not probed. */
  readonly deadAddresses: (gatewayKey: string) => ReadonlySet<string> | undefined;
  readonly log: LineLogger;
  /** Wraps the sender's callbacks (timer, port messages) in the actor's guard. */
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  /** Something the status shows changed (a batch sent, a problem set or cleared). */
  readonly statusChanged: () => void;
}

export class DesiredSender {
  readonly #deps: DesiredSenderDeps;
  /** Remote service key → the local mirror key last sent for it. */
  readonly #mirrorKeyOf = new Map<string, string>();
  /** Local mirror key → digest of the mirror last sent (what the writer holds). */
  readonly #sent = new Map<string, string>();
  readonly #problems = new Map<string, MirrorProblem>();
  /** Remote service key → the fleet-wide key of the member last sent for it. */
  readonly #memberKeyOf = new Map<string, string>();
  /** Fleet-wide key → digest of this cluster's member last sent. */
  readonly #sentMembers = new Map<string, string>();
  readonly #memberProblems = new Map<string, MirrorProblem>();
  /** ServiceImport key (the same as its ServiceExport's) → itself, while an export is sent (SPEC §12). */
  readonly #mcsKeyOf = new Map<string, string>();
  /** ServiceImport key → digest of this cluster's export last sent. */
  readonly #sentMcs = new Map<string, string>();
  readonly #mcsProblems = new Map<string, MirrorProblem>();
  #dirty = new Set<string>();
  #needSnapshot = false;
  #writer: DesiredPort | undefined;
  #credits: Credits;
  #refusedFlushes = 0;
  #flushTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(deps: DesiredSenderDeps) {
    this.#deps = deps;
    this.#credits = initialCredits(deps.epoch);
  }

  /**
   * Uses `port` from now on. A new port means a new (or restarted) writer that knows
   * nothing: earlier credits are settled and the full set is sent again once listed.
   */
  attach(port: DesiredPort): void {
    this.#writer?.close();
    this.#writer = port;
    this.#credits = settled(this.#credits);
    port.on(
      "message",
      this.#deps.guard((raw: unknown) => this.#onMessage(raw)),
    );
    if (this.#synced) this.requestSnapshot();
  }

  /** Services listed and ServiceExports known: a complete set can be computed. */
  get #synced(): boolean {
    return this.#deps.services.hasSynced && this.#deps.serviceExports.settled;
  }

  /** The mirror, member and MCS export of remote Service (or ServiceExport) `key` must be recomputed. */
  markDirty(key: string): void {
    this.#dirty.add(key);
  }

  /** The complete set must be sent (after a complete list). */
  requestSnapshot(): void {
    this.#needSnapshot = true;
    this.scheduleFlush();
  }

  scheduleFlush(): void {
    if (this.#stopped || this.#flushTimer) return;
    this.#flushTimer = setTimeout(
      this.#deps.guard(() => {
        this.#flushTimer = undefined;
        this.#flush();
      }),
      this.#deps.batchDelayMs,
    );
  }

  get flowState(): FlowState {
    return {
      lastSent: this.#credits.lastSent,
      lastAcked: this.#credits.lastAcked,
      pendingChanges: this.#dirty.size,
      snapshotPending: this.#needSnapshot,
      refusedFlushes: this.#refusedFlushes,
    };
  }

  /** Mirrors the writer holds (as last sent). */
  get mirrors(): number {
    return this.#sent.size;
  }

  /** Fleet-wide members the writer holds (as last sent). */
  get members(): number {
    return this.#sentMembers.size;
  }

  /** MCS exports the writer holds (as last sent). */
  get mcsExports(): number {
    return this.#sentMcs.size;
  }

  problems(): MirrorProblem[] {
    return [...this.#problems.values(), ...this.#memberProblems.values(), ...this.#mcsProblems.values()];
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#flushTimer);
    this.#writer?.close();
  }

  #onMessage(raw: unknown): void {
    let ack: ReturnType<typeof decodeToActorFromWriter>;
    try {
      ack = decodeToActorFromWriter(raw);
    } catch (error) {
      this.#deps.log.error({ err: serializeError(error) }, "malformed message from the local writer; ignored");
      return;
    }
    const result = acked(this.#credits, ack);
    this.#credits = result.credits;
    if (result.resend) {
      this.#deps.log.info({ seq: ack.seq }, "the local writer asked for the complete desired set again");
      // Only a complete list gives a complete set; before the first, the list sends it anyway.
      if (this.#synced) this.#needSnapshot = true;
    }
    this.scheduleFlush();
  }

  #gatewayView(gw: GatewayRef | undefined, cache: Map<string, GatewayView>): GatewayView {
    const key = gw ? objectKey(gw) : "";
    let view = cache.get(key);
    if (!view) {
      view = viewGateway(this.#deps.services.get(key), this.#deps.lookupHostname, this.#deps.deadAddresses(key));
      cache.set(key, view);
    }
    return view;
  }

  /**
   * Recomputes one remote service's mirror and fleet-wide member, each with this
   * cluster's own view of its gateway; records problems.
   */
  #compute(
    key: string,
    cache: Map<string, GatewayView>,
  ): { mirror: DesiredMirror | undefined; member: FederatedMember | undefined; mcs: McsExport | undefined } {
    const service = this.#deps.services.get(key);
    const settings = this.#deps.cluster;
    const decision = service ? exportOf(settings, service) : undefined;
    const outcome = service
      ? desiredMirrorFor(
          settings,
          service,
          this.#gatewayView(decision?.kind === "exported" ? decision.gateway : undefined, cache),
        )
      : ({ kind: "not-exported" } as const);
    this.#setProblem(this.#problems, "exported", key, outcome.kind === "problem" ? outcome.problem : undefined);
    const membership = service
      ? desiredMemberFor(
          this.#deps.cluster,
          this.#deps.memberSelector,
          service,
          this.#gatewayView(memberGateway(settings, service), cache),
        )
      : ({ kind: "not-member" } as const);
    this.#setProblem(
      this.#memberProblems,
      "member",
      key,
      membership.kind === "problem" ? membership.problem : undefined,
    );
    const serviceExport = this.#deps.serviceExports.get(key);
    const exported = serviceExport
      ? mcsExportFor(settings, serviceExport, service, this.#gatewayView(settings.defaultGateway, cache))
      : undefined;
    this.#setProblem(this.#mcsProblems, "mcs", key, exported?.kind === "problem" ? exported.problem : undefined);
    return {
      mirror: outcome.kind === "mirror" ? outcome.mirror : undefined,
      member: membership.kind === "member" ? membership.member : undefined,
      mcs: exported?.kind === "export" ? exported.export : undefined,
    };
  }

  /** Records (or clears) a problem of one remote Service; a change is logged and published. */
  #setProblem(
    problems: Map<string, MirrorProblem>,
    role: "exported" | "member" | "mcs",
    key: string,
    problem: MirrorProblem | undefined,
  ): void {
    const previous = problems.get(key);
    if (previous?.message === problem?.message && previous?.reason === problem?.reason) return;
    this.#deps.statusChanged();
    const what =
      role === "exported"
        ? `exported Service ${key} is not mirrored`
        : role === "member"
          ? `Service ${key} is not a member`
          : `ServiceExport ${key} does not export`;
    if (problem) {
      problems.set(key, problem);
      this.#deps.log.warn({ remote: key, reason: problem.reason }, `${what}: ${problem.message}`);
    } else {
      problems.delete(key);
      if (previous) this.#deps.log.info({ remote: key }, `${what} any more: the problem is gone`);
    }
  }

  #flush(): void {
    if (!this.#writer || !this.#synced) return;
    if (!this.#needSnapshot && this.#dirty.size === 0) return;
    if (!maySend(this.#credits, this.#deps.maxInFlight)) {
      this.#refusedFlushes += 1; // the next ack reschedules
      return;
    }
    const complete = this.#needSnapshot;
    const changes = complete ? this.#completeSet() : this.#delta();
    const { upserts, deletes, members, memberDeletes, mcsExports, mcsExportDeletes } = changes;
    const empty = Object.values(changes).every((list: readonly unknown[]) => list.length === 0);
    if (!complete && empty) return;
    this.#credits = sent(this.#credits);
    this.#writer.postMessage({
      type: "desired.batch",
      cluster: this.#deps.cluster.name,
      epoch: this.#deps.epoch,
      seq: this.#credits.lastSent,
      complete,
      upserts,
      deletes,
      ...(members.length > 0 ? { members } : {}),
      ...(memberDeletes.length > 0 ? { memberDeletes } : {}),
      ...(mcsExports.length > 0 ? { mcsExports } : {}),
      ...(mcsExportDeletes.length > 0 ? { mcsExportDeletes } : {}),
    });
    this.#deps.statusChanged();
    if (this.#dirty.size > 0 || this.#needSnapshot) this.scheduleFlush();
  }

  /** Every mirror and member of the cluster, with `sent` and `sentMembers` rebuilt to match. */
  #completeSet(): Changes {
    const cache = new Map<string, GatewayView>();
    const changes = noChanges();
    this.#needSnapshot = false;
    this.#dirty.clear();
    const sentSets = [
      this.#sent,
      this.#mirrorKeyOf,
      this.#sentMembers,
      this.#memberKeyOf,
      this.#sentMcs,
      this.#mcsKeyOf,
    ];
    for (const sent of sentSets) sent.clear();
    const keys = new Set<string>(this.#deps.serviceExports.keys());
    for (const service of this.#deps.services.values()) keys.add(objectKey(service.metadata));
    for (const [problems, role] of [
      [this.#problems, "exported"],
      [this.#memberProblems, "member"],
      [this.#mcsProblems, "mcs"],
    ] as const) {
      for (const key of [...problems.keys()]) if (!keys.has(key)) this.#setProblem(problems, role, key, undefined);
    }
    for (const key of keys) {
      const { mirror, member, mcs } = this.#compute(key, cache);
      if (mcs) {
        this.#mcsKeyOf.set(key, key);
        this.#sentMcs.set(key, sentDigest(mcs));
        changes.mcsExports.push(mcs);
      }
      if (mirror) {
        const mirrorKey = objectKey(mirror);
        this.#mirrorKeyOf.set(key, mirrorKey);
        this.#sent.set(mirrorKey, sentDigest(mirror));
        changes.upserts.push(mirror);
      }
      if (member) {
        const fleetKey = objectKey(member);
        this.#memberKeyOf.set(key, fleetKey);
        this.#sentMembers.set(fleetKey, sentDigest(member));
        changes.members.push(member);
      }
    }
    return changes;
  }

  /** The mirrors and members of the changed Services that differ from what was sent, and those gone. */
  #delta(): Changes {
    const cache = new Map<string, GatewayView>();
    const changes = noChanges();
    const dirty = this.#dirty;
    this.#dirty = new Set();
    for (const key of dirty) {
      const { mirror, member, mcs } = this.#compute(key, cache);
      diffOne(key, mirror, this.#mirrorKeyOf, this.#sent, changes.upserts, changes.deletes);
      diffOne(key, member, this.#memberKeyOf, this.#sentMembers, changes.members, changes.memberDeletes);
      diffOne(key, mcs, this.#mcsKeyOf, this.#sentMcs, changes.mcsExports, changes.mcsExportDeletes);
    }
    return changes;
  }
}

function noChanges(): Changes {
  return { upserts: [], deletes: [], members: [], memberDeletes: [], mcsExports: [], mcsExportDeletes: [] };
}
