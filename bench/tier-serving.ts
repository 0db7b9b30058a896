/**
 * Which members of each fleet-wide Service have ready endpoints, as a local watch on its
 * parts (`<svc>-federated-<cluster>-ipv4` slices) sees them (pure: the caller hands it
 * each change and reads the clock itself). SPEC §14 writes the endpoints of a member
 * outside the serving tiers not ready, so "tier T serves" is read from the slices alone,
 * as kube-proxy reads them: every part of T holds only ready endpoints, and every part
 * that must not serve holds none.
 */
import { CLUSTER_NAME, SERVICE_NAME_LABEL } from "../src/core/labels.ts";
import type { EndpointSlice } from "../src/core/objects.ts";
import { STANDBY_ANNOTATION } from "../src/core/tiers.ts";

interface Part {
  readonly service: string;
  readonly cluster: string;
  /** Some endpoint is ready (an absent condition reads as ready, as the API has it). */
  readonly anyReady: boolean;
  /** It holds endpoints and every one is ready. */
  readonly allReady: boolean;
  /** Annotated as standing by (outside the serving tiers). */
  readonly standby: boolean;
}

export class TierServing {
  /** Slice key → its part. */
  readonly #parts = new Map<string, Part>();
  /** Service → cluster → part. */
  readonly #byService = new Map<string, Map<string, Part>>();

  /**
   * Records slice `key` as it is now (undefined: gone); a slice without the service-name
   * and cluster labels of a part is ignored.
   * @returns the fleet-wide Service whose parts changed, if any.
   */
  update(key: string, slice: EndpointSlice | undefined): string | undefined {
    const before = this.#parts.get(key);
    if (before) {
      this.#parts.delete(key);
      this.#byService.get(before.service)?.delete(before.cluster);
    }
    const service = slice?.metadata.labels?.[SERVICE_NAME_LABEL];
    const cluster = slice?.metadata.labels?.[CLUSTER_NAME];
    if (!slice || !service || !cluster) return before?.service;
    const ready = (slice.endpoints ?? []).map((e) => e.conditions?.ready !== false);
    const part: Part = {
      service,
      cluster,
      anyReady: ready.some(Boolean),
      allReady: ready.length > 0 && ready.every(Boolean),
      standby: slice.metadata.annotations?.[STANDBY_ANNOTATION] === "true",
    };
    this.#parts.set(key, part);
    let members = this.#byService.get(service);
    if (!members) {
      members = new Map();
      this.#byService.set(service, members);
    }
    members.set(cluster, part);
    return service;
  }

  /** The fleet-wide Services seen so far. */
  services(): string[] {
    return [...this.#byService.keys()];
  }

  /**
   * True when `service` has a part of every cluster of `ready` and of `notReady`, each
   * of `ready` holding only ready endpoints and each of `notReady` none.
   */
  serves(service: string, ready: Iterable<string>, notReady: Iterable<string>): boolean {
    const members = this.#byService.get(service);
    if (!members) return false;
    for (const cluster of ready) if (members.get(cluster)?.allReady !== true) return false;
    for (const cluster of notReady) {
      const part = members.get(cluster);
      if (!part || part.anyReady) return false;
    }
    return true;
  }

  /** How many parts of `clusters`, over every Service, are annotated standby. */
  standbyParts(clusters: Iterable<string>): number {
    const wanted = new Set(clusters);
    let n = 0;
    for (const part of this.#parts.values()) if (part.standby && wanted.has(part.cluster)) n += 1;
    return n;
  }
}
