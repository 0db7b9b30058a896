/**
 * The local cluster's own address ranges (SPEC §10): its Service CIDRs (networking.k8s.io/v1
 * ServiceCIDR objects) and the pod CIDRs of its Nodes (`spec.podCIDRs`), watched on the
 * local API by the main thread and handed to every actor (`actor.local-ranges`), which
 * refuses gateway addresses inside them (core/address-policy.ts).
 *
 * Invariants:
 * - `changed` is called with a new `seq` exactly when the union of ranges changes (a
 *   Node's heartbeat changes nothing);
 * - `settled` turns true once each source has listed or failed once (or after
 *   SETTLE_TIMEOUT_MS): the supervisor starts actors only then, so that a gateway is not
 *   probed in the moment before the local ranges are known;
 * - a read the local role denies (403), or a resource the API server does not serve
 *   (404), is reported once (log line, `status().deniedReads`, metric) and tried again
 *   every `recheckMs`; meanwhile the ranges last read from it are kept (a refused read
 *   says nothing about them) and the flags and built-in ranges still apply.
 */
import type { LocalRanges } from "../core/address-policy.ts";
import type { KubeObject } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import { Watcher, type WatchFailure } from "../kube/watcher.ts";
import type { LocalRangesStatus } from "../status/fleet-view.ts";

/** How long actors wait at most for the first reads of the local ranges. */
export const SETTLE_TIMEOUT_MS = 10_000;
const DEFAULT_RECHECK_MS = 60_000;

/** A source's objects as stored: only their ranges are kept (a Node is large). */
interface RangeHolder extends KubeObject {
  readonly cidrs: readonly string[];
}

interface Source {
  /** The resource as reports name it (`networking.k8s.io/servicecidrs`, `nodes`). */
  readonly resource: string;
  readonly path: string;
  readonly kind: string;
  readonly cidrsOf: (object: KubeObject) => readonly string[];
  watcher: Watcher<RangeHolder> | undefined;
  /** The ranges of its objects, by object key, as last listed or watched. */
  readonly cidrs: Map<string, readonly string[]>;
  settled: boolean;
  denied: string | undefined;
  retry: NodeJS.Timeout | undefined;
}

const stringsAt = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];

/** `spec.cidrs` of a ServiceCIDR. */
export function serviceCidrsOf(object: KubeObject): string[] {
  return stringsAt((object as { spec?: { cidrs?: unknown } }).spec?.cidrs);
}

/** `spec.podCIDRs` of a Node (or its older single `spec.podCIDR`). */
export function podCidrsOf(object: KubeObject): string[] {
  const spec = (object as { spec?: { podCIDRs?: unknown; podCIDR?: unknown } }).spec;
  const list = stringsAt(spec?.podCIDRs);
  return list.length > 0 ? list : stringsAt([spec?.podCIDR]);
}

export interface LocalRangesDeps {
  readonly client: KubeClient;
  readonly log: { info(fields: object, message: string): void; warn(fields: object, message: string): void };
  /** The ranges changed (a newer `seq`). */
  readonly changed: (ranges: LocalRanges) => void;
  /** Both sources were heard from once (or SETTLE_TIMEOUT_MS passed). */
  readonly settled: () => void;
  /** How often a denied read is tried again. Default 60 s. */
  readonly recheckMs?: number;
}

export class LocalRangesWatch {
  readonly #deps: LocalRangesDeps;
  readonly #sources: Source[];
  #ranges: LocalRanges = { seq: 0, serviceCidrs: [], podCidrs: [] };
  #settled = false;
  #settleTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(deps: LocalRangesDeps) {
    this.#deps = deps;
    const source = (resource: string, path: string, kind: string, cidrsOf: Source["cidrsOf"]): Source => ({
      resource,
      path,
      kind,
      cidrsOf,
      watcher: undefined,
      cidrs: new Map(),
      settled: false,
      denied: undefined,
      retry: undefined,
    });
    this.#sources = [
      source(
        "networking.k8s.io/servicecidrs",
        "/apis/networking.k8s.io/v1/servicecidrs",
        "ServiceCIDR",
        serviceCidrsOf,
      ),
      source("nodes", "/api/v1/nodes", "Node", podCidrsOf),
    ];
  }

  get ranges(): LocalRanges {
    return this.#ranges;
  }

  get settled(): boolean {
    return this.#settled;
  }

  start(): void {
    for (const source of this.#sources) this.#watch(source);
    this.#settleTimer = setTimeout(() => this.#settle(), SETTLE_TIMEOUT_MS);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#settleTimer);
    for (const source of this.#sources) clearTimeout(source.retry);
    await Promise.all(this.#sources.map((s) => s.watcher?.stop()));
  }

  status(): LocalRangesStatus {
    return {
      serviceCidrs: this.#ranges.serviceCidrs,
      podCidrs: this.#ranges.podCidrs.length,
      deniedReads: this.#sources.flatMap((s) => (s.denied ? [{ resource: s.resource, message: s.denied }] : [])),
    };
  }

  #watch(source: Source): void {
    if (this.#stopped) return;
    const watcher = new Watcher<RangeHolder>({
      client: this.#deps.client,
      path: source.path,
      expectedKind: source.kind,
      keep: (object) => ({
        metadata: { name: object.metadata.name, resourceVersion: object.metadata.resourceVersion ?? "" },
        cidrs: source.cidrsOf(object),
      }),
    });
    source.watcher = watcher;
    watcher.on("change", (key, _previous, current) => {
      const before = source.cidrs.get(key);
      if (current) source.cidrs.set(key, current.cidrs);
      else source.cidrs.delete(key);
      if (JSON.stringify(before) !== JSON.stringify(current?.cidrs) && source.settled) this.#recompute();
    });
    watcher.on("listed", () => {
      if (source.denied) this.#deps.log.info({ resource: source.resource }, `local ${source.resource}: readable again`);
      source.denied = undefined;
      source.settled = true;
      this.#recompute();
      this.#maybeSettled();
    });
    watcher.on("failure", (failure: WatchFailure) => this.#failed(source, watcher, failure));
    watcher.start();
  }

  #failed(source: Source, watcher: Watcher<RangeHolder>, failure: WatchFailure): void {
    source.settled = true;
    this.#maybeSettled();
    if (failure.reason !== "http-403" && failure.reason !== "http-404") return; // the watcher retries
    if (source.watcher !== watcher) return;
    source.watcher = undefined;
    void watcher.stop();
    if (source.denied === undefined)
      this.#deps.log.warn(
        { resource: source.resource, reason: failure.reason },
        `local ${source.resource} cannot be read (${failure.message}); gateway addresses are checked against the flags, the built-in ranges and the local ranges read so far; trying again every ${Math.round((this.#deps.recheckMs ?? DEFAULT_RECHECK_MS) / 1000)} s`,
      );
    source.denied = `${failure.reason}: ${failure.message}`.slice(0, 512);
    source.retry = setTimeout(() => this.#watch(source), this.#deps.recheckMs ?? DEFAULT_RECHECK_MS);
  }

  #maybeSettled(): void {
    if (this.#sources.every((s) => s.settled)) this.#settle();
  }

  #settle(): void {
    clearTimeout(this.#settleTimer);
    if (this.#settled || this.#stopped) return;
    this.#settled = true;
    this.#deps.settled();
  }

  #recompute(): void {
    const union = (source: Source | undefined): string[] =>
      [...new Set([...(source?.cidrs.values() ?? [])].flat())].sort();
    const serviceCidrs = union(this.#sources[0]);
    const podCidrs = union(this.#sources[1]);
    const before = this.#ranges;
    if (before.serviceCidrs.join() === serviceCidrs.join() && before.podCidrs.join() === podCidrs.join()) return;
    this.#ranges = { seq: before.seq + 1, serviceCidrs, podCidrs };
    this.#deps.log.info(
      { serviceCidrs, podCidrs: podCidrs.length },
      `local address ranges: Service CIDRs ${serviceCidrs.join(", ") || "none"}; ${podCidrs.length} pod CIDR(s); gateway addresses in them are refused`,
    );
    if (!this.#stopped) this.#deps.changed(this.#ranges);
  }
}
