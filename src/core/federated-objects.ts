/**
 * Which local objects belong to a shared Service (a fleet-wide Service, SPEC §11, or an
 * MCS import's derived Service, SPEC §12), and which of them one replica writes: the
 * flavors' labels, the ownership test, and the shard's share. Pure; plan-federated.ts
 * plans with them, the writer's indexes and `check` read them.
 *
 * Invariants: an object is a shared Service's only when it carries the flavor's labels
 * (and, for a slice, fleet-mirror's `managed-by`); sharded, the Service and Endpoints are
 * written by the owner alone and a part only by the host of its cluster.
 */
import { sliceOwner } from "./endpoint-slices.ts";
import { FEDERATED_CLUSTERS, FEDERATED_LABEL, type FederatedMember } from "./federated.ts";
import {
  CLUSTER_NAME,
  MANAGED_BY_FLEET_MIRROR,
  MANAGED_BY_LABEL,
  MIRRORED_SERVICE,
  SERVICE_IMPORT_LABEL,
} from "./labels.ts";
import { deleteAction, type MirrorObjectKind, type ObservedObject, type WriteAction } from "./mirror-kinds.ts";
import type { KubeObject } from "./objects.ts";

/** The labels every fleet-wide object carries (slices add the cluster of their part). */
export const FEDERATED_LABELS: Readonly<Record<string, string>> = Object.freeze({
  [MIRRORED_SERVICE]: "true",
  [FEDERATED_LABEL]: "true",
});

/** Whether fleet-mirror owns `object` of `kind` as a fleet-wide object (SPEC §5, §11). */
export function isFederatedObject(kind: MirrorObjectKind, object: KubeObject): boolean {
  const labels = object.metadata.labels;
  if (labels?.[MIRRORED_SERVICE] !== "true" || labels[FEDERATED_LABEL] !== "true") return false;
  return kind !== "EndpointSlice" || labels[MANAGED_BY_LABEL] === MANAGED_BY_FLEET_MIRROR;
}

/**
 * What kind of shared Service a plan is for: a fleet-wide Service (SPEC §11), or the
 * derived Service of an MCS import (SPEC §12). The objects and the rules are the same;
 * their labels, and so what counts as fleet-mirror's, differ.
 */
export interface SharedServiceFlavor {
  /** Labels of the Service and the Endpoints; a part's slices add their cluster's and `partLabels`. */
  readonly labels: Readonly<Record<string, string>>;
  readonly partLabels: (cluster: string) => Readonly<Record<string, string>>;
  /** Whether fleet-mirror owns `object` as one of this flavor's objects (SPEC §5). */
  readonly owns: (kind: MirrorObjectKind, object: KubeObject) => boolean;
  /** What its objects are called in a conflict's message. */
  readonly what: string;
}

export const FLEET_WIDE: SharedServiceFlavor = Object.freeze({
  labels: FEDERATED_LABELS,
  partLabels: () => ({}),
  owns: isFederatedObject,
  what: "fleet-wide object",
});

/** One replica's share of a fleet-wide Service across shards (SPEC §11, DESIGN §3 "Across shards"). */
export interface FederatedShard {
  /** This replica holds the Service's owning shard: it writes the Service and its Endpoints. */
  readonly owner: boolean;
  /** Whether this replica hosts `cluster`: only it writes and deletes that cluster's part. */
  readonly hosts: (cluster: string) => boolean;
  /** The known members of the clusters this replica hosts: a part is written for each. */
  readonly members: readonly FederatedMember[];
}

/** The clusters named by an observed fleet-wide Service's annotation. */
export function annotatedClusters(service: KubeObject | undefined): string[] {
  const text = service?.metadata.annotations?.[FEDERATED_CLUSTERS] ?? "";
  return text.split(",").filter((c) => c.length > 0);
}

/** A fleet-wide object's delete is the write of the member cluster its label names. */
export function deleteFederated(observed: ObservedObject): WriteAction {
  return deleteAction(observed, observed.object.metadata.labels?.[CLUSTER_NAME] ?? "");
}

/**
 * A mirror's slice (SPEC §9): fleet-mirror's, of one cluster, and no shared object's
 * part. Under a part's name it gives the name up: a part is written from one cluster's
 * member, but a blocked part would hold up every member of the shared Service, while
 * the mirror is one cluster's and is reported (it cannot have the slice name any more).
 */
export function isMirrorSlice(observed: ObservedObject): boolean {
  const labels = observed.object.metadata.labels;
  return (
    observed.kind === "EndpointSlice" &&
    sliceOwner(labels) !== undefined &&
    labels?.[FEDERATED_LABEL] !== "true" &&
    !labels?.[SERVICE_IMPORT_LABEL]
  );
}

/**
 * Whether this replica writes `observed` (sharded: the Service and Endpoints are the
 * owner's, a part its cluster's host's; a slice without a cluster label the owner's).
 */
export function writesObject(shard: FederatedShard | undefined, observed: ObservedObject): boolean {
  if (!shard) return true;
  const cluster = observed.kind === "EndpointSlice" ? observed.object.metadata.labels?.[CLUSTER_NAME] : undefined;
  return cluster === undefined ? shard.owner : shard.hosts(cluster);
}
