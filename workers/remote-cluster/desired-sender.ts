/**
 * The actor's desired channel to the local writer: computes what the Services that
 * changed ask for (src/core/cluster-desired.ts), coalesces it by key, and sends it as
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
 *   (`sentMembers`): a remote Service may be both exported and a member; so do the
 *   cluster's MCS exports (SPEC §12, `sentMcs`), keyed by their ServiceExport's key;
 * - an exported headless Service with hostnames stands for several mirrors (its
 *   headless mirror and one per host, SPEC §12; `mirrorKeyOf`); while its hostnames are
 *   not known (its slices' first list) nothing new is sent for it, and a complete set
 *   waits until its first list has answered (listed, or failed: at most one request
 *   timeout), then says "hosts unknown" of it (`hostsUnknown`: the writer keeps what it
 *   has), so it never flaps to an ordinary mirror and back, and one read that keeps
 *   failing holds back nothing else;
 * - likewise a complete set waits for the first answer of the ServiceExport read
 *   (`settled`), then carries the exports if they are known, else `mcsExportsUnknown`
 *   (never "no exports" for exports not known: the writer keeps the cluster's parts).
 *   Once they are known, a complete set is sent again (the actor asks for it).
 */
import { type AddressPolicy, DEFAULT_ADDRESS_POLICY } from "../../src/core/address-policy.ts";
import {
  type ClusterObservation,
  desiredOfService,
  type GatewayViews,
  type ServiceDesired,
} from "../../src/core/cluster-desired.ts";
import type { ClusterSettings, DesiredMirror, MirrorProblem } from "../../src/core/desired.ts";
import type { FederatedMember, MemberSelector } from "../../src/core/federated.ts";
import type { HeadlessHosts } from "../../src/core/headless.ts";
import type { McsExport, ServiceExport } from "../../src/core/mcs.ts";
import { objectKey, type Service } from "../../src/core/objects.ts";
import type { LineLogger } from "../../src/log/json-lines.ts";
import { serializeError } from "../../src/protocol/errors.ts";
import { type ChannelPort, decodeToActorFromWriter, type ToWriterFromActor } from "../../src/protocol/messages.ts";
import { acked, type Credits, initialCredits, maySend, sent, settled } from "./credits.ts";
import { MirrorQuota } from "./mirror-quota.ts";
import { SenderProblems } from "./sender-problems.ts";
import { type Changes, diffMany, keepTakenOver, noChanges } from "./sent-diff.ts";

/** The actor's end of its desired channel to the local writer. */
export type DesiredPort = ChannelPort<ToWriterFromActor>;

/** What the sender reads of the watcher's store. */
export interface ServiceSource {
  get(key: string): Service | undefined;
  values(): IterableIterator<Service>;
  readonly hasSynced: boolean;
}

/** What the sender reads of the cluster's ServiceExports (SPEC §12; src/kube/optional-watch.ts). */
export interface ServiceExportSource {
  get(key: string): ServiceExport | undefined;
  keys(): Iterable<string>;
  /** The read has answered (known or not): the complete set waits no longer. */
  readonly settled: boolean;
  /** The exports are known: a complete set carries them; else it says they are unknown. */
  readonly known: boolean;
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
  /** Flushes of a complete set that waited for headless Services' first slice lists (SPEC §12). */
  readonly hostnameWaits: number;
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
  /** Which gateway addresses may be used now (SPEC §10). Default: the built-in policy. */
  readonly addressPolicy?: () => AddressPolicy;
  /** The cluster counts as partitioned (SPEC §14 `--stale-after`). */
  readonly partitioned?: () => boolean;
  /** The hostnames of exported headless Service `key` (SPEC §12, headless-watches.ts). */
  readonly headlessHosts: (key: string) => HeadlessHosts;
  /** The headless Service of `namespace` that keeps per-host name `<hostname>-<c>` (HeadlessWatches). */
  readonly hostClaimant: (namespace: string, hostname: string) => string | undefined;
  /** Some exported headless Service's first slice list has not answered yet: a complete set waits. */
  readonly headlessPending: () => boolean;
  readonly log: LineLogger;
  /** Wraps the sender's callbacks (timer, port messages) in the actor's guard. */
  readonly guard: <A extends unknown[]>(fn: (...args: A) => void) => (...args: A) => void;
  /** Something the status shows changed (a batch sent, a problem set or cleared). */
  readonly statusChanged: () => void;
}

export class DesiredSender {
  readonly #deps: DesiredSenderDeps;
  /** What the desired computation reads, over the deps' stores and lookups. */
  readonly #observed: ClusterObservation;
  /** Remote service key → the local mirror keys last sent for it (a headless Service's are several). */
  readonly #mirrorKeyOf = new Map<string, readonly string[]>();
  /** Local mirror key → digest of the mirror last sent (what the writer holds). */
  readonly #sent = new Map<string, string>();
  /** Remote service key → the fleet-wide key of the member last sent for it. */
  readonly #memberKeyOf = new Map<string, readonly string[]>();
  /** Fleet-wide key → digest of this cluster's member last sent. */
  readonly #sentMembers = new Map<string, string>();
  /** ServiceImport key (the same as its ServiceExport's) → itself, while an export is sent (SPEC §12). */
  readonly #mcsKeyOf = new Map<string, readonly string[]>();
  /** ServiceImport key → digest of this cluster's export last sent. */
  readonly #sentMcs = new Map<string, string>();
  /** Problems of mirrors, headless hosts (left out; the Service is mirrored all the same), members, exports. */
  readonly #problems: SenderProblems;
  /** The cluster's quota of local Services (`--max-mirrors-per-cluster`): which keys are refused. */
  readonly #quota: MirrorQuota;
  #dirty = new Set<string>();
  #needSnapshot = false;
  #writer: DesiredPort | undefined;
  #credits: Credits;
  #refusedFlushes = 0;
  #hostnameWaits = 0;
  #flushTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(deps: DesiredSenderDeps) {
    this.#deps = deps;
    this.#observed = {
      settings: deps.cluster,
      memberSelector: deps.memberSelector,
      service: (key) => deps.services.get(key),
      serviceExport: (key) => deps.serviceExports.get(key),
      lookupHostname: deps.lookupHostname,
      deadAddresses: deps.deadAddresses,
      partitioned: () => deps.partitioned?.() === true,
      addressPolicy: () => deps.addressPolicy?.() ?? DEFAULT_ADDRESS_POLICY,
      headlessHosts: deps.headlessHosts,
      hostClaimant: deps.hostClaimant,
    };
    this.#credits = initialCredits(deps.epoch);
    this.#problems = new SenderProblems(deps.log, deps.statusChanged);
    this.#quota = new MirrorQuota(deps.cluster.name, deps.cluster.maxMirrors ?? 0);
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

  /** Services listed and the ServiceExport read answered: a complete set can be computed. */
  get #synced(): boolean {
    return this.#deps.services.hasSynced && this.#deps.serviceExports.settled;
  }

  /** The mirror, member and MCS export of remote Service (or ServiceExport) `key` must be recomputed. */
  markDirty(key: string): void {
    this.#dirty.add(key);
  }

  /** The mirror of remote Service `key` must be recomputed, and sent soon. */
  changed(key: string): void {
    this.markDirty(key);
    this.scheduleFlush();
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
      hostnameWaits: this.#hostnameWaits,
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
    return this.#problems.all();
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

  /**
   * Recomputes one remote key's mirrors, member and MCS export (src/core/cluster-desired.ts)
   * and records their problems. `mirrors` undefined: a headless Service whose hostnames
   * are not known yet, whose mirrors stay as they were sent.
   */
  #compute(key: string, views: GatewayViews): ServiceDesired {
    const desired = desiredOfService(this.#observed, key, views);
    const { exported, member, mcs } = desired.problems;
    this.#problems.set("exported", key, exported);
    if ("headless" in desired.problems) this.#problems.set("headless", key, desired.problems.headless);
    this.#problems.set("member", key, member);
    this.#problems.set("mcs", key, mcs);
    this.#quota.weigh(key, desired);
    return desired;
  }

  #flush(): void {
    if (!this.#writer || !this.#synced) return;
    if (!this.#needSnapshot && this.#dirty.size === 0) return;
    if (!maySend(this.#credits, this.#deps.maxInFlight)) {
      this.#refusedFlushes += 1; // the next ack reschedules
      return;
    }
    const complete = this.#needSnapshot;
    // A complete set waits for the first answer of every exported headless Service's
    // slice list: a Service it cannot describe is sent as "hosts unknown" (SPEC §12),
    // which a first list, a moment later, would usually have made needless.
    if (complete && this.#deps.headlessPending()) {
      this.#hostnameWaits += 1; // the watch's first answer schedules the next flush
      return;
    }
    const changes = complete ? this.#completeSet() : this.#delta();
    keepTakenOver(changes.upserts, changes.deletes, this.#sent);
    keepTakenOver(changes.members, changes.memberDeletes, this.#sentMembers);
    keepTakenOver(changes.mcsExports, changes.mcsExportDeletes, this.#sentMcs);
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
      // Exports not known are not "none": the writer keeps what it holds of them.
      ...(complete && !this.#deps.serviceExports.known ? { mcsExportsUnknown: true as const } : {}),
    });
    this.#deps.statusChanged();
    if (this.#dirty.size > 0 || this.#needSnapshot) this.scheduleFlush();
  }

  /** Every mirror and member of the cluster, with `sent` and `sentMembers` rebuilt to match. */
  #completeSet(): Changes {
    const views: GatewayViews = new Map();
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
    this.#problems.retain(keys);
    this.#quota.retain(keys);
    const computed = new Map([...keys].map((key) => [key, this.#compute(key, views)]));
    // A headless Service whose slices have not listed: "hosts unknown", never "no mirrors".
    this.#admit(computed, views, changes, (d) => d.mirrors ?? d.unknownMirrors ?? []);
    return changes;
  }

  /** The mirrors and members of the changed Services that differ from what was sent, and those gone. */
  #delta(): Changes {
    const views: GatewayViews = new Map();
    const changes = noChanges();
    const dirty = this.#dirty;
    this.#dirty = new Set();
    // Hostnames not known yet: what was sent stays (the watch's first list marks it dirty again).
    this.#admit(new Map([...dirty].map((key) => [key, this.#compute(key, views)])), views, changes, (d) => d.mirrors);
    return changes;
  }

  /**
   * Diffs the computed keys, and every key whose admission under the cluster's quota
   * changed with them (mirror-quota.ts), against what was sent; a refused key as one
   * that asks for nothing, with its problem. `mirrorsOf`: the mirrors a key stands for in
   * this batch (a complete set sends a headless Service's "hosts unknown" mirror where a
   * delta leaves what was sent: undefined).
   */
  #admit(
    computed: Map<string, ServiceDesired>,
    views: GatewayViews,
    changes: Changes,
    mirrorsOf: (desired: ServiceDesired) => readonly DesiredMirror[] | undefined,
  ): void {
    for (const key of this.#quota.decide()) if (!computed.has(key)) computed.set(key, this.#compute(key, views));
    for (const [key, desired] of computed) {
      const refused = this.#quota.refused(key);
      this.#problems.set("quota", key, refused);
      if (refused) this.#diff(key, [], undefined, undefined, changes);
      else this.#diff(key, mirrorsOf(desired), desired.member, desired.mcs, changes);
    }
  }

  /**
   * Records remote Service `key`'s mirrors (undefined: leave them as sent), member and
   * MCS export against what was sent.
   */
  #diff(
    key: string,
    mirrors: readonly DesiredMirror[] | undefined,
    member: FederatedMember | undefined,
    mcs: McsExport | undefined,
    changes: Changes,
  ): void {
    if (mirrors) diffMany(key, mirrors, this.#mirrorKeyOf, this.#sent, changes.upserts, changes.deletes);
    const members = member ? [member] : [];
    diffMany(key, members, this.#memberKeyOf, this.#sentMembers, changes.members, changes.memberDeletes);
    const exports = mcs ? [mcs] : [];
    diffMany(key, exports, this.#mcsKeyOf, this.#sentMcs, changes.mcsExports, changes.mcsExportDeletes);
  }
}
