/**
 * Records Kubernetes Events for the controller (the writer is the only thing that writes
 * to the local API). Rules:
 * - existing Events first: at start the recorder lists the Events fleet-mirror already
 *   recorded (cluster-wide, field selector `reportingComponent=fleet-mirror`, paginated)
 *   and posts no Event identical to one of them, so a restart with nothing changed posts
 *   nothing. Events asked for meanwhile wait until that list is done. A list refused
 *   with 403 (a deployment whose RBAC lacks `list` on events) is given up, logged once
 *   and reported (the writer's `lastError`): Events then flow without the seed; any other
 *   failure is retried with backoff (1 s doubling to 30 s), reported, while Events wait;
 * - identical = same involved object (its uid, else kind/namespace/name), type, reason
 *   and message (as posted: at most 1 024 characters);
 * - deduplicated: an Event identical to one recorded (or found at start) within
 *   `dedupMs` (default 10 min) is not posted again. The dedup set is bounded: entries
 *   expire after `dedupMs`, and at most `maxDedupEntries` (default 10 000) are kept
 *   (the oldest go first);
 * - bounded sending: at most `concurrency` POSTs at once (a fleet start registers K
 *   clusters at once, and K parallel POSTs opened K TLS connections and starved the
 *   mirror writes), at most `queueMax` waiting; when full, the oldest waiting Event is
 *   dropped and counted (`create/Event/dropped`);
 * - held by the write fence like every write; failures are logged and counted, never thrown.
 */
import { hostname } from "node:os";
import { type BackoffOptions, exponentialBackoff } from "../../src/core/backoff.ts";
import type { Clock, TimerHandle } from "../../src/core/clock.ts";
import { KubeApiError, type KubeClient } from "../../src/kube/client.ts";
import type { Logger } from "../../src/log.ts";
import { type SerializedError, serializeError } from "../../src/protocol/errors.ts";
import type { EventRequest } from "../../src/protocol/messages.ts";

export const REPORTING_COMPONENT = "fleet-mirror";
/** An Event identical to one recorded within this window is not posted again. */
export const EVENT_DEDUP_MS = 10 * 60_000;
export const EVENT_DEDUP_MAX = 10_000;
/** Event POSTs in flight at once, and Events waiting at most. */
export const EVENT_CONCURRENCY = 2;
export const EVENT_QUEUE_MAX = 2_000;
const MESSAGE_MAX = 1_024;
const SEED_PAGE = 500;

/** The Kubernetes Event fields the seed reads. */
interface ExistingEvent {
  readonly involvedObject?: { kind?: string; namespace?: string; name?: string; uid?: string };
  readonly type?: string;
  readonly reason?: string;
  readonly message?: string;
}

/** The identity of an Event for deduplication (see the rules above). */
export function eventKey(event: ExistingEvent): string {
  const o = event.involvedObject ?? {};
  const object = o.uid ? `uid:${o.uid}` : `${o.kind ?? ""}/${o.namespace ?? ""}/${o.name ?? ""}`;
  return [object, event.type ?? "", event.reason ?? "", (event.message ?? "").slice(0, MESSAGE_MAX)].join("\n");
}

function requestKey(event: EventRequest): string {
  return eventKey({ involvedObject: event.involved, type: event.type, reason: event.reason, message: event.message });
}

export interface EventRecorderDeps {
  readonly client: Pick<KubeClient, "request">;
  readonly clock: Clock;
  readonly log: Logger;
  /** Counts an Event POST by `verb/Kind/result` (create/Event/ok|error|dropped). */
  readonly count: (verb: string, kind: string, result: string) => void;
  /** The seed list failed: report it (the writer's status). */
  readonly failed: (error: SerializedError) => void;
  /** The write fence: no POST while it is closed. */
  readonly writable: () => boolean;
}

export interface EventRecorderOptions {
  readonly dedupMs?: number;
  readonly maxDedupEntries?: number;
  readonly concurrency?: number;
  readonly queueMax?: number;
  /** Backoff of the seed list's retries. Default 1 s doubling up to 30 s. */
  readonly seedBackoff?: BackoffOptions;
}

interface Pending {
  readonly event: EventRequest;
  readonly key: string;
  readonly done: () => void;
}

export class EventRecorder {
  readonly #deps: EventRecorderDeps;
  readonly #dedupMs: number;
  readonly #maxDedup: number;
  readonly #concurrency: number;
  readonly #queueMax: number;
  readonly #seedBackoff: BackoffOptions;
  /** Event key → when it was recorded (or found at start); insertion order is age order. */
  readonly #recorded = new Map<string, number>();
  readonly #queue: Pending[] = [];
  #inFlight = 0;
  #seeded = false;
  #seedTimer: TimerHandle | undefined;
  #stopped = false;

  constructor(deps: EventRecorderDeps, options: EventRecorderOptions = {}) {
    this.#deps = deps;
    this.#dedupMs = options.dedupMs ?? EVENT_DEDUP_MS;
    this.#maxDedup = options.maxDedupEntries ?? EVENT_DEDUP_MAX;
    this.#concurrency = options.concurrency ?? EVENT_CONCURRENCY;
    this.#queueMax = options.queueMax ?? EVENT_QUEUE_MAX;
    this.#seedBackoff = options.seedBackoff ?? { initialMs: 1_000, maxMs: 30_000 };
  }

  /** The existing Events have been listed (or the list was given up): Events flow. */
  get seeded(): boolean {
    return this.#seeded;
  }

  /** Entries in the dedup set (bounded by `maxDedupEntries`). */
  get dedupSize(): number {
    return this.#recorded.size;
  }

  /** Lists the existing Events; Events recorded meanwhile wait for it. */
  start(): void {
    void this.#seed(0);
  }

  /** Records an Event (see the rules above). Resolves once sent, dropped or found a duplicate. */
  record(event: EventRequest): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    const key = requestKey(event);
    this.#expire();
    const last = this.#recorded.get(key);
    if (last !== undefined) return Promise.resolve();
    this.#remember(key, this.#deps.clock.now());
    return new Promise<void>((resolve) => {
      if (this.#queue.length >= this.#queueMax) {
        const dropped = this.#queue.shift();
        if (dropped) {
          this.#recorded.delete(dropped.key);
          this.#deps.count("create", "Event", "dropped");
          dropped.done();
        }
      }
      this.#queue.push({ event, key, done: resolve });
      this.pump();
    });
  }

  /** Sends waiting Events while the seed is done, the fence is open and there is room. */
  pump(): void {
    while (this.#seeded && !this.#stopped && this.#inFlight < this.#concurrency && this.#deps.writable()) {
      const next = this.#queue.shift();
      if (!next) return;
      this.#inFlight += 1;
      void this.#send(next).finally(() => {
        this.#inFlight -= 1;
        next.done();
        this.pump();
      });
    }
  }

  /** Stops: waiting Events are best-effort notices, not state, and are not sent. Returns how many. */
  stop(): number {
    this.#stopped = true;
    if (this.#seedTimer !== undefined) this.#deps.clock.clearTimeout(this.#seedTimer);
    const unsent = this.#queue.splice(0);
    for (const pending of unsent) pending.done();
    return unsent.length;
  }

  async #seed(attempt: number): Promise<void> {
    this.#seedTimer = undefined;
    if (this.#stopped) return;
    try {
      const existing = await this.#listExisting();
      const now = this.#deps.clock.now();
      for (const key of existing) this.#remember(key, now);
      // Events asked for before the list was done: an identical one exists already.
      for (let i = this.#queue.length - 1; i >= 0; i--) {
        const pending = this.#queue[i];
        if (pending && existing.has(pending.key)) {
          this.#queue.splice(i, 1);
          pending.done();
        }
      }
      this.#deps.log.debug({ events: existing.size }, "existing Kubernetes Events listed");
      this.#seedDone();
    } catch (error) {
      const serialized = serializeError(error, "local-writer: list existing Events");
      this.#deps.failed(serialized);
      if (error instanceof KubeApiError && error.status === 403) {
        this.#deps.log.error(
          { err: serialized },
          "cannot list existing Kubernetes Events (RBAC lacks list on events): a restart may repeat Events",
        );
        this.#seedDone();
        return;
      }
      const retryInMs = exponentialBackoff(this.#seedBackoff, attempt);
      this.#deps.log.warn(
        { err: serialized, retryInMs },
        "listing existing Kubernetes Events failed; Events wait until it succeeds",
      );
      if (!this.#stopped) this.#seedTimer = this.#deps.clock.setTimeout(() => void this.#seed(attempt + 1), retryInMs);
    }
  }

  #seedDone(): void {
    this.#seeded = true;
    this.pump();
  }

  async #listExisting(): Promise<Set<string>> {
    const keys = new Set<string>();
    let next: string | undefined;
    do {
      const page = await this.#deps.client.request<{ items?: ExistingEvent[]; metadata?: { continue?: string } }>(
        "GET",
        "/api/v1/events",
        {
          query: {
            fieldSelector: `reportingComponent=${REPORTING_COMPONENT}`,
            limit: SEED_PAGE,
            ...(next ? { continue: next } : {}),
          },
        },
      );
      for (const item of page.items ?? []) keys.add(eventKey(item));
      next = page.metadata?.continue || undefined;
    } while (next && !this.#stopped);
    return keys;
  }

  async #send(pending: Pending): Promise<void> {
    const { event } = pending;
    const now = new Date().toISOString();
    try {
      await this.#deps.client.request("POST", `/api/v1/namespaces/${event.involved.namespace}/events`, {
        body: {
          metadata: { generateName: `${event.involved.name}.`, namespace: event.involved.namespace },
          involvedObject: event.involved,
          reason: event.reason,
          message: event.message.slice(0, MESSAGE_MAX),
          type: event.type,
          source: { component: REPORTING_COMPONENT },
          reportingComponent: REPORTING_COMPONENT,
          reportingInstance: hostname(),
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      this.#deps.count("create", "Event", "ok");
    } catch (error) {
      this.#deps.count("create", "Event", "error");
      this.#recorded.delete(pending.key);
      this.#deps.log.warn({ err: serializeError(error), event }, "could not record a Kubernetes Event");
    }
  }

  #remember(key: string, at: number): void {
    this.#recorded.delete(key);
    this.#recorded.set(key, at);
    while (this.#recorded.size > this.#maxDedup) {
      const oldest = this.#recorded.keys().next();
      if (oldest.done) break;
      this.#recorded.delete(oldest.value);
    }
  }

  /** Drops dedup entries older than the window (insertion order is age order). */
  #expire(): void {
    const oldest = this.#deps.clock.now() - this.#dedupMs;
    for (const [key, at] of this.#recorded) {
      if (at > oldest) break;
      this.#recorded.delete(key);
    }
  }
}
