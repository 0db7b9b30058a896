/**
 * The shared objects fleet-mirror observes (fleet-wide Services, SPEC §11; derived
 * Services of MCS imports, SPEC §12; and their parts), by the writer key they belong to
 * and by the clusters they name: a part's cluster label, a Service's
 * `federated-clusters` annotation. Kept from the Service and slice stores' change events.
 *
 * It answers "which shared keys may a change of cluster C's knowledge affect": those
 * whose observed objects name C (a kept part, a cluster in the annotation). With the
 * keys where C has a desired part, that is every key whose reduction depends on C.
 *
 * Invariant: after every change event, `keysOf(c)` holds exactly the keys of the held
 * shared objects naming c, and `keys()` the keys of every held shared object.
 */

import { annotatedClusters, isFederatedObject } from "../../src/core/federated-objects.ts";
import { CLUSTER_NAME } from "../../src/core/labels.ts";
import { type EndpointSlice, type KubeObject, objectKey, type Service } from "../../src/core/objects.ts";
import { isImportObject } from "../../src/core/plan-imports.ts";
import { sliceServiceKey } from "./slice-index.ts";

/** A store's change events, as the index reads them. */
export interface ChangeSource<T> {
  on(event: "change", listener: (key: string, previous: T | undefined, current: T | undefined) => void): unknown;
}

/** The key and the clusters a shared object names, or undefined when it is not a shared object of ours. */
type Contribution = { readonly key: string; readonly clusters: readonly string[] } | undefined;

function serviceContribution(service: Service): Contribution {
  if (!isFederatedObject("Service", service) && !isImportObject("Service", service)) return undefined;
  return { key: objectKey(service.metadata), clusters: annotatedClusters(service) };
}

/** Whether `slice` is a part of a shared object of ours (fleet-wide, import), not a mirror's slice. */
export function isSharedPart(slice: EndpointSlice): boolean {
  return isFederatedObject("EndpointSlice", slice) || isImportObject("EndpointSlice", slice);
}

function sliceContribution(slice: EndpointSlice): Contribution {
  if (!isSharedPart(slice)) return undefined;
  const cluster = slice.metadata.labels?.[CLUSTER_NAME];
  return { key: sliceServiceKey(slice), clusters: cluster ? [cluster] : [] };
}

export class SharedIndex {
  /** cluster → key → how many held objects of the key name the cluster. */
  readonly #byCluster = new Map<string, Map<string, number>>();
  /** key → how many held shared objects belong to it. */
  readonly #keys = new Map<string, number>();

  constructor(services: ChangeSource<Service>, slices: ChangeSource<EndpointSlice>) {
    const follow = <T extends KubeObject>(source: ChangeSource<T>, contribution: (object: T) => Contribution) =>
      source.on("change", (_key, previous, current) => {
        if (previous) this.#count(contribution(previous), -1);
        if (current) this.#count(contribution(current), 1);
      });
    follow(services, serviceContribution);
    follow(slices, sliceContribution);
  }

  /** The shared keys whose held objects name `cluster`. */
  keysOf(cluster: string): Iterable<string> {
    return this.#byCluster.get(cluster)?.keys() ?? [];
  }

  /** The clusters the held shared objects name. */
  clusters(): Iterable<string> {
    return this.#byCluster.keys();
  }

  /** The key of every held shared object (Services and parts). */
  keys(): Iterable<string> {
    return this.#keys.keys();
  }

  #count(contribution: Contribution, delta: 1 | -1): void {
    if (!contribution) return;
    const { key, clusters } = contribution;
    bump(this.#keys, key, delta);
    for (const cluster of clusters) {
      let keys = this.#byCluster.get(cluster);
      if (!keys) {
        keys = new Map();
        this.#byCluster.set(cluster, keys);
      }
      bump(keys, key, delta);
      if (keys.size === 0) this.#byCluster.delete(cluster);
    }
  }
}

function bump(counts: Map<string, number>, key: string, delta: number): void {
  const n = (counts.get(key) ?? 0) + delta;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
