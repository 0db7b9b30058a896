/**
 * Link status (SPEC §15), written by the local writer: the one component that writes to
 * the local API. The supervisor names the Links that register clusters and the problems
 * their actors report (`writer.links`); the writer knows which mirrors exist, which are
 * blocked and why. From both, `desiredLinkStatus` (core/link-status.ts, pure) gives each
 * Link's status, and a merge patch on the `status` subresource writes it when it differs
 * from the status observed (its own watch of the Links: metadata and status only).
 *
 * Invariants:
 * - a Link's status is computed only once its cluster's complete desired set arrived
 *   (before that, "no entry" would mean "not known", not "not mirrored");
 * - never more than one patch per Link in flight, and the same content is not sent
 *   again before the watch shows it (or 30 s pass): a status is written at most as often
 *   as its content changes; a converged Link is never written;
 * - mirrors first: while the writer has mirror writes queued (`busy`), a Link's status,
 *   which lists its mirrors and so changes with each one written, waits (it is not even
 *   computed); a Link that has waited BUSY_DEFER_MS is computed and written anyway (a
 *   writer that is never idle still keeps every status at most that old). A cold start
 *   of K Links × S Services so makes about one status patch per Link, not one per Link
 *   and second of convergence (which took write capacity from the mirrors themselves);
 * - at most PATCHES_IN_FLIGHT patches are in flight, the others wait in the order the
 *   pass made them;
 * - a patch is sent only for a Link whose cluster this replica hosts, while its fence
 *   is open (checked again when a waiting patch's turn comes); a dry run sends none (it
 *   logs what it would write);
 * - a pass computes the statuses only when one of their inputs may have moved since the
 *   last (the Links named, a Link observed, a desired set absorbed, a key reconciled: the
 *   writer's `stamp`), while a patch waits to be seen or a Link waits for a busy writer,
 *   and at least every FULL_PASS_MS (what no stamp covers: a fence opening). A converged,
 *   idle writer so computes nothing each second: a pass over K Links × S Services built
 *   their whole statuses again, and that garbage alone kept the writer's young
 *   generation, and the process's RSS, grown.
 */
import type { Clock } from "../../src/core/clock.ts";
import type { DesiredMirror } from "../../src/core/desired.ts";
import type { FederatedMember } from "../../src/core/federated.ts";
import { FEDERATED_LABEL } from "../../src/core/federated.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE, ownerCluster } from "../../src/core/labels.ts";
import { linksPath } from "../../src/core/link.ts";
import { desiredLinkStatus, type EntryState, type LinkStatus } from "../../src/core/link-status.ts";
import { type KubeObject, objectKey, type Service } from "../../src/core/objects.ts";
import { hostsCluster, type ShardOwnership, shardOf } from "../../src/core/shards.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { Watcher } from "../../src/kube/watcher.ts";
import type { Logger } from "../../src/log.ts";
import type { ToWriter } from "../../src/protocol/messages.ts";

type LinksMessage = Extract<ToWriter, { type: "writer.links" }>;
type LinkEntry = LinksMessage["links"][number];

/** A Link as the writer keeps it: its metadata and status. */
interface ObservedLink extends KubeObject {
  readonly status?: LinkStatus;
}

export interface LinkStatusDeps {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly log: Logger;
  readonly dryRun: boolean;
  /** `cluster`'s desired mirrors and members, and whether its complete set arrived. */
  readonly mirrorsOf: (cluster: string) => Iterable<DesiredMirror>;
  readonly membersOf: (cluster: string) => Iterable<FederatedMember>;
  readonly known: (cluster: string) => boolean;
  /** Blocked keys by cluster (the reconciler's, with the reason and message reported). */
  readonly blocked: () => ReadonlyMap<string, readonly { key: string; reason: string; message: string }[]>;
  /** The local Service `key` as observed. */
  readonly service: (key: string) => Service | undefined;
  /** Whether a write of `cluster`'s may be sent now (hosted, fence open). */
  readonly writable: (cluster: string) => boolean;
  readonly count: (verb: string, kind: string, result: string) => void;
  /** Whether mirror writes are queued now (the mirrors go first). */
  readonly busy: () => boolean;
  /** A number that moves whenever a desired set is absorbed or a key is reconciled. */
  readonly stamp: () => number;
}

/** How long a patch sent counts as "on its way" when the watch does not show it. */
const SENT_TTL_MS = 30_000;
/** The longest a differing Link status waits for the writer's mirror writes. */
export const BUSY_DEFER_MS = 30_000;
/**
 * Status patches in flight at once. A cold start patches every Link in one pass: sent all
 * at once, each would open a connection of its own beside the writer's idle ones (the
 * agent has no socket limit), and the handshakes' buffers stay in the allocator's arenas
 * after the burst. A few at a time reuse the idle connections; a status is small and
 * its patch takes milliseconds.
 */
export const PATCHES_IN_FLIGHT = 4;
/** The longest a pass is skipped for want of a changed input. */
const FULL_PASS_MS = 30_000;
const HEADLESS_HOST_LABEL = "mirror.linkerd.io/headless-mirror-svc-name";
/** Actor problems that are the MCS API's, not a Service's mirror (SPEC §12): not in a Link's status. */
const NOT_MIRRORS = new Set(["service-export-without-service", "export-mode-forbidden"]);
const MEMBER_PREFIX = "fleet-wide member:";

const describe = (namespace: string, entry: LinkEntry): string =>
  `Link ${namespace}/${entry.name} (cluster ${entry.cluster})`;

export class LinkStatusWriter {
  readonly #deps: LinkStatusDeps;
  #watcher: Watcher<ObservedLink> | undefined;
  #message: LinksMessage | undefined;
  /** By Link uid: the status JSON last sent, and when, until the watch shows it. */
  readonly #sent = new Map<string, { readonly json: string; readonly at: number }>();
  /** Link uids with a patch sent or waiting for a slot (one at a time per Link); every backlog entry's is here. */
  readonly #inFlight = new Set<string>();
  /** Patches waiting for one of the PATCHES_IN_FLIGHT slots, in the order the pass made them. */
  readonly #backlog: { readonly namespace: string; readonly entry: LinkEntry; readonly patch: object }[] = [];
  /** By Link uid: since when its differing status has waited for a busy writer. */
  readonly #waiting = new Map<string, number>();
  #stopped = false;
  /** Something a pass reads changed (the Links named or observed, a patch failed) since the last pass. */
  #dirty = true;
  #lastStamp = Number.NaN;
  #lastPassAt = Number.NEGATIVE_INFINITY;

  constructor(deps: LinkStatusDeps) {
    this.#deps = deps;
  }

  /** The Links registering clusters now (`writer.links`): the newest `seq` wins. */
  set(message: LinksMessage): void {
    if (this.#message && message.seq <= this.#message.seq) return;
    const namespaceChanged = this.#message?.namespace !== message.namespace;
    this.#message = message;
    this.#dirty = true;
    if (namespaceChanged) {
      void this.#watcher?.stop();
      this.#watcher = new Watcher<ObservedLink>({
        client: this.#deps.client,
        path: linksPath(message.namespace),
        expectedKind: "Link",
        keep: (link) => ({ metadata: link.metadata, status: (link as ObservedLink).status ?? {} }),
      });
      this.#watcher.on("failure", (f) => this.#deps.log.warn({ failure: f }, `watching Links failed: ${f.message}`));
      this.#watcher.on("change", () => {
        this.#dirty = true;
      });
      this.#watcher.on("listed", () => {
        this.#dirty = true;
      });
      if (!this.#stopped) this.#watcher.start();
    }
  }

  /** One pass over every Link: each differing status is patched (level-triggered; called every second). */
  pass(): void {
    const message = this.#message;
    const watcher = this.#watcher;
    if (this.#stopped || !message || !watcher?.hasSynced) return;
    const now = this.#deps.clock.now();
    const stamp = this.#deps.stamp();
    const pending = this.#sent.size > 0 || this.#waiting.size > 0 || this.#inFlight.size > 0;
    if (!this.#dirty && !pending && stamp === this.#lastStamp && now - this.#lastPassAt < FULL_PASS_MS) return;
    this.#dirty = false;
    this.#lastStamp = stamp;
    this.#lastPassAt = now;
    const blocked = this.#deps.blocked();
    for (const entry of message.links) {
      const observed = watcher.get(`${message.namespace}/${entry.name}`);
      if (!observed || observed.metadata.uid !== entry.uid || this.#inFlight.has(entry.uid)) continue;
      if (!this.#deps.known(entry.cluster) || !this.#deps.writable(entry.cluster)) continue;
      // While mirror writes are queued the status is not even computed: at a cold start
      // it changes with every mirror written, and computing it each second for nothing
      // took the writer's time from the mirrors.
      if (this.#deps.busy()) {
        const since = this.#waiting.get(entry.uid) ?? now;
        this.#waiting.set(entry.uid, since);
        if (now - since < BUSY_DEFER_MS) continue;
      }
      this.#waiting.delete(entry.uid);
      const { changed, patch } = desiredLinkStatus(this.#input(entry, blocked), observed.status, Date.now());
      if (!changed) {
        this.#sent.delete(entry.uid);
        continue;
      }
      const json = JSON.stringify(patch);
      const sent = this.#sent.get(entry.uid);
      if (sent?.json === json && now - sent.at < SENT_TTL_MS) continue;
      this.#sent.set(entry.uid, { json, at: now });
      this.#patch(message.namespace, entry, patch);
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#watcher?.stop();
  }

  #patch(namespace: string, entry: LinkEntry, patch: object): void {
    if (this.#deps.dryRun) {
      this.#deps.log.info(
        { link: entry.name, cluster: entry.cluster },
        `dry run: would patch the status of ${describe(namespace, entry)}`,
      );
      return;
    }
    this.#inFlight.add(entry.uid);
    this.#backlog.push({ namespace, entry, patch });
    this.#drain();
  }

  /**
   * Starts waiting patches while a slot is free. A patch whose cluster can no longer be
   * written (its fence closed, its shard moved) while it waited is dropped and its Link
   * left for a later pass; after stop nothing is sent.
   */
  #drain(): void {
    // Patches sent and not yet answered: the Links in flight that are not waiting.
    const sending = () => this.#inFlight.size - this.#backlog.length;
    while (sending() < PATCHES_IN_FLIGHT && this.#backlog.length > 0 && !this.#stopped) {
      const next = this.#backlog.shift();
      if (!next) return;
      if (!this.#deps.writable(next.entry.cluster)) {
        this.#inFlight.delete(next.entry.uid);
        this.#sent.delete(next.entry.uid);
        this.#dirty = true;
        continue;
      }
      this.#send(next.namespace, next.entry, next.patch);
    }
  }

  #send(namespace: string, entry: LinkEntry, patch: object): void {
    const what = describe(namespace, entry);
    this.#deps.client
      .request("PATCH", linksPath(namespace, entry.name, "status"), {
        body: patch,
        contentType: "application/merge-patch+json",
      })
      .then(
        () => {
          this.#deps.count("patch", "Link", "ok");
          this.#deps.log.info({ link: entry.name, cluster: entry.cluster }, `status of ${what} written`);
        },
        (error: unknown) => {
          this.#sent.delete(entry.uid); // tried again at the next pass
          this.#dirty = true;
          const status = (error as { status?: number }).status;
          this.#deps.count("patch", "Link", status ? String(status) : "error");
          this.#deps.log.warn({ link: entry.name, err: error }, `writing the status of ${what} failed`);
        },
      )
      .finally(() => {
        this.#inFlight.delete(entry.uid);
        this.#drain();
      });
  }

  /** What the writer knows of each remote Service of the Link's cluster. */
  #input(entry: LinkEntry, blocked: ReadonlyMap<string, readonly { key: string; reason: string; message: string }[]>) {
    const { cluster } = entry;
    const blockedKeys = new Map((blocked.get(cluster) ?? []).map((b) => [b.key, b]));
    const stateOf = (key: string, ours: (s: Service) => boolean): EntryState => {
      const b = blockedKeys.get(key);
      if (b)
        return b.reason === "namespace-missing"
          ? { known: true, mirrored: false, reason: "MissingNamespace", message: "Namespace does not exist" }
          : { known: true, mirrored: false, reason: "Error", message: b.message };
      const service = this.#deps.service(key);
      return service && ours(service)
        ? { known: true, mirrored: true, reason: "Mirrored", message: "", local: key }
        : { known: false };
    };
    const mirrorServices = new Map<string, EntryState>();
    for (const m of this.#deps.mirrorsOf(cluster)) {
      if (m.labels[HEADLESS_HOST_LABEL] !== undefined) continue; // a per-host mirror: its Service's entry is the headless one
      mirrorServices.set(
        m.remote,
        stateOf(objectKey(m), (s) => ownerCluster(s.metadata.labels) === cluster),
      );
    }
    const federatedServices = new Map<string, EntryState>();
    for (const m of this.#deps.membersOf(cluster)) {
      const fleetWide = (s: Service) =>
        s.metadata.labels?.[MIRRORED_SERVICE] === "true" &&
        s.metadata.labels[FEDERATED_LABEL] === "true" &&
        s.metadata.labels[CLUSTER_NAME] === undefined;
      federatedServices.set(m.remote, stateOf(objectKey(m), fleetWide));
    }
    for (const p of entry.problems) {
      if (NOT_MIRRORS.has(p.reason)) continue;
      const list = p.message.startsWith(MEMBER_PREFIX) ? federatedServices : mirrorServices;
      if (list.get(p.remote)?.known !== true)
        list.set(p.remote, { known: true, mirrored: false, reason: "InvalidService", message: p.message });
    }
    return { mirrorServices, federatedServices };
  }
}

/** The writer's parts a LinkStatusWriter reads (actor.ts wires them). */
export interface LinkStatusParts {
  readonly client: KubeClient;
  readonly clock: Clock;
  readonly log: Logger;
  readonly dryRun: boolean;
  readonly desired: {
    readonly version: number;
    mirrorsOf(cluster: string): Iterable<DesiredMirror>;
    membersOf(cluster: string): Iterable<FederatedMember>;
    known(cluster: string): boolean;
  };
  readonly reconciler: {
    blockedByCluster(): ReadonlyMap<string, readonly { key: string; reason: string; message: string }[]>;
  };
  readonly services: { get(key: string): Service | undefined };
  readonly fence: { readonly ownership: ShardOwnership; writableFor(shard: number): boolean };
  readonly stats: { count(verb: string, kind: string, result: string): void };
  /** Keys waiting in the writer's work queue, and keys reconciled so far. */
  readonly queue: { readonly len: number; readonly completed: number };
}

/** A LinkStatusWriter over the writer's parts: a Link's status is its cluster's, so its shard's fence applies. */
export function linkStatusWriter(p: LinkStatusParts): LinkStatusWriter {
  return new LinkStatusWriter({
    client: p.client,
    clock: p.clock,
    log: p.log,
    dryRun: p.dryRun,
    mirrorsOf: (cluster) => p.desired.mirrorsOf(cluster),
    membersOf: (cluster) => p.desired.membersOf(cluster),
    known: (cluster) => p.desired.known(cluster),
    blocked: () => p.reconciler.blockedByCluster(),
    service: (key) => p.services.get(key),
    writable: (cluster) =>
      hostsCluster(p.fence.ownership, cluster) && p.fence.writableFor(shardOf(cluster, p.fence.ownership.shards)),
    count: (verb, kind, result) => p.stats.count(verb, kind, result),
    busy: () => p.queue.len > 0,
    // Both counters only grow: their sum moves whenever either does.
    stamp: () => p.desired.version + p.queue.completed,
  });
}
