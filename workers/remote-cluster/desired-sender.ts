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
 * - `sent` holds, per local mirror key, the JSON of the mirror last sent: what the
 *   writer holds. A mirror equal to it is not sent again.
 */
import {
  type ClusterSettings,
  type DesiredMirror,
  desiredMirrorFor,
  exportedGateway,
  type GatewayView,
  type MirrorProblem,
  viewGateway,
} from "../../src/core/desired.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import type { Logger } from "../../src/log.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { type ChannelPort, decodeToActorFromWriter, type ToWriterFromActor } from "../../src/protocol/messages.ts";
import { acked, type Credits, initialCredits, maySend, sent, settled } from "./credits.ts";

/** The actor's end of its desired channel to the local writer. */
export type DesiredPort = ChannelPort<ToWriterFromActor>;

/** What the sender reads of the watcher's store. */
export interface ServiceSource {
  get(key: string): Service | undefined;
  values(): IterableIterator<Service>;
  readonly hasSynced: boolean;
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
  readonly lookupHostname: (hostname: string) => readonly string[] | undefined;
  /** The dead addresses of gateway `key` (SPEC §10); undefined when it is not probed. */
  readonly deadAddresses: (gatewayKey: string) => ReadonlySet<string> | undefined;
  readonly log: Logger;
  /** Wraps the sender's callbacks (timer, port messages) in the actor's guard. */
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  /** Something the status shows changed (a batch sent, a problem set or cleared). */
  readonly statusChanged: () => void;
}

export class DesiredSender {
  readonly #deps: DesiredSenderDeps;
  /** Remote service key → the local mirror key last sent for it. */
  readonly #mirrorKeyOf = new Map<string, string>();
  /** Local mirror key → JSON of the mirror last sent (what the writer holds). */
  readonly #sent = new Map<string, string>();
  readonly #problems = new Map<string, MirrorProblem>();
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
    if (this.#deps.services.hasSynced) this.requestSnapshot();
  }

  /** The mirror of remote Service `key` must be recomputed. */
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

  problems(): MirrorProblem[] {
    return [...this.#problems.values()];
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
      if (this.#deps.services.hasSynced) this.#needSnapshot = true;
    }
    this.scheduleFlush();
  }

  #gatewayView(service: Service, cache: Map<string, GatewayView>): GatewayView {
    const gw = exportedGateway(service);
    const key = gw ? objectKey(gw) : "";
    let view = cache.get(key);
    if (!view) {
      view = viewGateway(this.#deps.services.get(key), this.#deps.lookupHostname, this.#deps.deadAddresses(key));
      cache.set(key, view);
    }
    return view;
  }

  /** Recomputes one remote service's mirror; returns the mirror (or undefined) and records problems. */
  #compute(key: string, cache: Map<string, GatewayView>): DesiredMirror | undefined {
    const service = this.#deps.services.get(key);
    const outcome = service
      ? desiredMirrorFor(this.#deps.cluster, service, this.#gatewayView(service, cache))
      : ({ kind: "not-exported" } as const);
    this.#setProblem(key, outcome.kind === "problem" ? outcome.problem : undefined);
    return outcome.kind === "mirror" ? outcome.mirror : undefined;
  }

  /** Records (or clears) the problem of one remote Service; a change is logged and published. */
  #setProblem(key: string, problem: MirrorProblem | undefined): void {
    const previous = this.#problems.get(key);
    if (previous?.message === problem?.message && previous?.reason === problem?.reason) return;
    this.#deps.statusChanged();
    if (problem) {
      this.#problems.set(key, problem);
      this.#deps.log.warn(
        { remote: key, reason: problem.reason },
        `exported Service ${key} is not mirrored: ${problem.message}`,
      );
    } else {
      this.#problems.delete(key);
      if (previous) this.#deps.log.info({ remote: key }, `exported Service ${key} no longer has a mirror problem`);
    }
  }

  #flush(): void {
    if (!this.#writer || !this.#deps.services.hasSynced) return;
    if (!this.#needSnapshot && this.#dirty.size === 0) return;
    if (!maySend(this.#credits, this.#deps.maxInFlight)) {
      this.#refusedFlushes += 1; // the next ack reschedules
      return;
    }
    const complete = this.#needSnapshot;
    const { upserts, deletes } = complete ? this.#completeSet() : this.#delta();
    if (!complete && upserts.length === 0 && deletes.length === 0) return;
    this.#credits = sent(this.#credits);
    this.#writer.postMessage({
      type: "desired.batch",
      cluster: this.#deps.cluster.name,
      epoch: this.#deps.epoch,
      seq: this.#credits.lastSent,
      complete,
      upserts,
      deletes,
    });
    this.#deps.statusChanged();
    if (this.#dirty.size > 0 || this.#needSnapshot) this.scheduleFlush();
  }

  /** Every mirror of the cluster, with `sent` rebuilt to match. */
  #completeSet(): { upserts: DesiredMirror[]; deletes: string[] } {
    const cache = new Map<string, GatewayView>();
    const upserts: DesiredMirror[] = [];
    this.#needSnapshot = false;
    this.#dirty.clear();
    this.#sent.clear();
    this.#mirrorKeyOf.clear();
    for (const key of [...this.#problems.keys()]) if (!this.#deps.services.get(key)) this.#setProblem(key, undefined);
    for (const service of this.#deps.services.values()) {
      const key = objectKey(service.metadata);
      const mirror = this.#compute(key, cache);
      if (!mirror) continue;
      const mirrorKey = objectKey(mirror);
      this.#mirrorKeyOf.set(key, mirrorKey);
      this.#sent.set(mirrorKey, JSON.stringify(mirror));
      upserts.push(mirror);
    }
    return { upserts, deletes: [] };
  }

  /** The mirrors of the changed Services that differ from what was sent, and the mirrors gone. */
  #delta(): { upserts: DesiredMirror[]; deletes: string[] } {
    const cache = new Map<string, GatewayView>();
    const upserts: DesiredMirror[] = [];
    const deletes: string[] = [];
    const dirty = this.#dirty;
    this.#dirty = new Set();
    for (const key of dirty) {
      const mirror = this.#compute(key, cache);
      const previousKey = this.#mirrorKeyOf.get(key);
      const mirrorKey = mirror ? objectKey(mirror) : undefined;
      if (previousKey && previousKey !== mirrorKey) {
        this.#sent.delete(previousKey);
        this.#mirrorKeyOf.delete(key);
        deletes.push(previousKey);
      }
      if (mirror && mirrorKey) {
        const json = JSON.stringify(mirror);
        if (this.#sent.get(mirrorKey) === json) continue;
        this.#sent.set(mirrorKey, json);
        this.#mirrorKeyOf.set(key, mirrorKey);
        upserts.push(mirror);
      }
    }
    return { upserts, deletes };
  }
}
