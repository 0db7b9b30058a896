/**
 * The rows of `fleet-mirror status` (pure): from the controller's admin status, from
 * the cluster objects, or from the shard Leases. status.ts reads and calls these;
 * status-table.ts renders them.
 */
import type { AdminStatus } from "../admin/source.ts";
import { FEDERATED_LABEL } from "../core/federated.ts";
import { annotatedClusters } from "../core/federated-objects.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE } from "../core/labels.ts";
import { LEGACY_LAYOUT, parseLeaseName } from "../core/lease-names.ts";
import type { Secret, Service } from "../core/objects.ts";
import { shardOf } from "../core/shards.ts";
import type { ShardingView } from "../leader/leadership.ts";
import type { GatewayProbeStatus } from "../protocol/messages.ts";
import type { ClusterRow } from "../status/fleet-view.ts";
import type { LinkRow, LinksProblem } from "../status/link-row.ts";
import type { PlacementStatus } from "../status/placement-status.ts";
import type { LinkRegistry } from "../supervisor/link-registry.ts";
import { parseCredentialsSecret } from "../supervisor/registration.ts";
import { computeRegistry, withLinks } from "../supervisor/registry.ts";
import type { DryRunView } from "./dry-run-rows.ts";

/** One line of `status`, as printed and as emitted with `-o json|yaml`. */
export interface StatusRow {
  readonly cluster: string;
  readonly secret: string;
  /** syncing / synced / stale / failing / crash-loop / starting / duplicate / invalid / registered */
  readonly state: string;
  readonly since?: string;
  readonly reason?: string;
  readonly mirrors: number;
  readonly exportedServices?: number;
  /** Exported Services by mode, and Services whose export label declines (SPEC §12); absent: unknown. */
  readonly exports?: ClusterRow["exports"];
  /** Whether MCS export is active in the cluster, and why not (SPEC §12); absent: unknown. */
  readonly mcs?: { readonly state: string; readonly message?: string };
  readonly lastSyncedAt?: string;
  readonly restarts?: number;
  /** Each gateway in use, why it is unusable, if it is, and its probe; absent when unknown. */
  readonly gateways?: readonly {
    readonly gateway: string;
    readonly usable: boolean;
    readonly reason?: string;
    /** Present while the gateway is probed (SPEC §10). */
    readonly probe?: GatewayProbeStatus;
    readonly probeProblems?: readonly string[];
    /** Ingress addresses refused by the address policy (SPEC §10, "Gateway addresses"). */
    readonly refused?: ClusterRow["gateways"][number]["refused"];
    /** Why the gateway is not probed (the per-cluster cap). */
    readonly unprobed?: string;
  }[];
  readonly problems?: readonly string[];
}

/** One fleet-wide Service of `status` (SPEC §11); counts and conflicts absent when unknown. */
export interface FederatedRow {
  /** `namespace/<svc>-federated` */
  readonly service: string;
  /** Member clusters, sorted. */
  readonly clusters: readonly string[];
  /** Members unknown since the writer started, whose last part is kept. */
  readonly kept?: readonly string[];
  readonly ready?: number;
  readonly notReady?: number;
  /** `cluster: reason: message` of each conflict. */
  readonly conflicts?: readonly string[];
  /** Its priority tiers, best first, and since when those serving serve (SPEC §14); absent: no tiers. */
  readonly tiers?: readonly { readonly priority: number; readonly ready: number; readonly serving: boolean }[];
  readonly servingSince?: string;
}

/** One shard of a sharded Deployment (`--shards`): who holds it. */
export interface ShardRow {
  readonly shard: number;
  /** "" when free (never held, or released). */
  readonly holder: string;
  /** The Lease's last renewal (its holder's wall clock); absent when read from a controller. */
  readonly renewedAt?: string;
  /** The listed clusters that belong to the shard, sorted. */
  readonly clusters: readonly string[];
}

export interface StatusReport {
  readonly source: "controller" | "cluster-objects";
  /** Why the controller was not used (with source "cluster-objects"). */
  readonly note?: string;
  readonly leading?: boolean;
  readonly clusters: readonly StatusRow[];
  readonly federated: readonly FederatedRow[];
  /** Sharded only: one row per shard. */
  readonly shards?: readonly ShardRow[];
  /** Why the shards could not be read, when they could not. */
  readonly shardsNote?: string;
  /** The controller's placement of actors on threads (source "controller" only). */
  readonly placement?: PlacementStatus;
  /** A controller run with `--dry-run`: its plan (source "controller" only). */
  readonly dryRun?: DryRunView;
  /** With `--links` (SPEC §15): one row per Link, registered or why not. */
  readonly links?: readonly LinkRow[];
  /** Why the Links could not be read (the Link CRD not installed). */
  readonly linksProblem?: LinksProblem;
}

const clustersOfShard = (clusters: readonly string[], shard: number, shards: number): string[] =>
  clusters.filter((c) => c !== "" && shardOf(c, shards) === shard).sort();

/** Shard rows from a sharded controller's own view (pure); its clusters are those it runs. */
export function shardRowsFromView(view: ShardingView, clusters: readonly string[]): ShardRow[] {
  return view.holders.map((holder, shard) => ({
    shard,
    holder,
    clusters: clustersOfShard(clusters, shard, view.shards),
  }));
}

/**
 * Shard rows from the Leases of the leader-election namespace (pure): the shard Leases
 * of one layout (core/lease-names.ts: `<lease-id>-s<S>-shard-<i>`, or an earlier
 * version's `<lease-id>-shard-<i>`, whose shard count is taken as the highest shard found
 * + 1). When a layout change left Leases of two layouts, the one with the most Leases
 * held is shown. Empty when there is no shard Lease (not sharded).
 */
export function shardRowsFromLeases(
  leases: readonly { readonly name: string; readonly spec: unknown }[],
  leaseId: string,
  clusters: readonly string[],
): ShardRow[] {
  const layouts = new Map<string, Map<number, { holder: string; renewedAt?: string }>>();
  for (const lease of leases) {
    const parsed = parseLeaseName(leaseId, lease.name);
    if (parsed?.role !== "shard" || parsed.shard === undefined) continue;
    const spec = (typeof lease.spec === "object" && lease.spec !== null ? lease.spec : {}) as Record<string, unknown>;
    const holder = typeof spec["holderIdentity"] === "string" ? spec["holderIdentity"] : "";
    const renewed = spec["renewTime"];
    const found = layouts.get(parsed.layout) ?? new Map<number, { holder: string; renewedAt?: string }>();
    found.set(parsed.shard, { holder, ...(typeof renewed === "string" ? { renewedAt: renewed } : {}) });
    layouts.set(parsed.layout, found);
  }
  const held = (found: ReadonlyMap<number, { holder: string }>): number =>
    [...found.values()].filter((f) => f.holder !== "").length;
  const [layout, found] = [...layouts].sort(([a, x], [b, y]) => held(y) - held(x) || (a < b ? -1 : 1))[0] ?? [];
  if (layout === undefined || found === undefined) return [];
  const shards = layout === LEGACY_LAYOUT ? Math.max(...found.keys()) + 1 : Number(layout.slice(1));
  return Array.from({ length: shards }, (_, shard) => ({
    shard,
    holder: found.get(shard)?.holder ?? "",
    ...(found.get(shard)?.renewedAt ? { renewedAt: found.get(shard)?.renewedAt as string } : {}),
    clusters: clustersOfShard(clusters, shard, shards),
  }));
}

const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

/** Rows from the controller's own status (pure). */
export function rowsFromAdmin(status: AdminStatus): StatusRow[] {
  return (status.clusters ?? []).map((row: ClusterRow) => {
    const since = iso(row.since);
    const lastSyncedAt = iso(row.lastSyncedAt);
    const problems = [
      ...(row.deniedReads ?? []).map((d) => `${d.resource}: read-denied: ${d.message}`),
      ...row.problems.map((p) => `${p.remote ?? p.key ?? ""}: ${p.reason}: ${p.message}`),
    ];
    return {
      cluster: row.cluster,
      secret: row.secret,
      state: row.state,
      ...(since ? { since } : {}),
      ...(row.reason ? { reason: row.reason } : {}),
      mirrors: row.mirrors,
      exportedServices: row.exportedServices,
      ...(row.exports ? { exports: row.exports } : {}),
      ...(row.mcs ? { mcs: { state: row.mcs.state, ...(row.mcs.message ? { message: row.mcs.message } : {}) } } : {}),
      ...(lastSyncedAt ? { lastSyncedAt } : {}),
      restarts: row.restarts,
      gateways: row.gateways.map((g) => ({
        gateway: g.key,
        usable: g.usable,
        ...(g.reason ? { reason: g.reason } : {}),
        ...(g.probe ? { probe: g.probe } : {}),
        ...(g.probeProblems ? { probeProblems: g.probeProblems } : {}),
        ...(g.refused ? { refused: g.refused } : {}),
        ...(g.unprobed ? { unprobed: g.unprobed } : {}),
      })),
      ...(problems.length > 0 ? { problems } : {}),
    };
  });
}

/**
 * Fleet-wide rows from the controller's own status (pure): the writer's fleet-wide
 * Services, with the problems the member clusters' rows hold under the same key.
 */
export function federatedRowsFromAdmin(status: AdminStatus): FederatedRow[] {
  return (status.writer?.federated ?? []).map((f) => {
    const conflicts = (status.clusters ?? []).flatMap((row) =>
      row.problems.filter((p) => p.key === f.key).map((p) => `${row.cluster}: ${p.reason}: ${p.message}`),
    );
    return {
      service: f.key,
      clusters: f.clusters,
      ...(f.kept.length > 0 ? { kept: f.kept } : {}),
      ready: f.ready,
      notReady: f.notReady,
      conflicts,
      ...(f.tiers ? { tiers: f.tiers } : {}),
      ...(f.servingSince ? { servingSince: f.servingSince } : {}),
    };
  });
}

/** Fleet-wide rows from the fleet-wide Services on the local cluster: members by their annotation (pure). */
export function federatedRowsFromObjects(services: readonly Service[]): FederatedRow[] {
  return services
    .filter((s) => s.metadata.labels?.[FEDERATED_LABEL] === "true")
    .map((s) => ({ service: `${s.metadata.namespace ?? ""}/${s.metadata.name}`, clusters: annotatedClusters(s) }))
    .sort((a, b) => a.service.localeCompare(b.service));
}

/**
 * Rows from the cluster objects (pure): the Secrets go through the controller's own
 * parser and registry, so valid/duplicate/invalid mean what they mean to the controller;
 * mirrors are counted per cluster label. Mirrors of a cluster no Secret names get a row
 * of their own, state `unknown-cluster` (the controller deletes them once it runs).
 */
export function rowsFromObjects(
  secrets: readonly Secret[],
  mirrors: readonly Service[],
  options: { readonly allowFilePaths: boolean; readonly allowInsecure?: boolean },
  links?: LinkRegistry,
): StatusRow[] {
  const counts = new Map<string, number>();
  for (const mirror of mirrors) {
    const labels = mirror.metadata.labels;
    const cluster = labels?.[CLUSTER_NAME];
    if (labels?.[MIRRORED_SERVICE] !== "true" || !cluster) continue;
    counts.set(cluster, (counts.get(cluster) ?? 0) + 1);
  }
  // As the controller merges them (SPEC §15): a Link wins over a Secret naming its cluster.
  const fromSecrets = computeRegistry(
    secrets.map((secret) => ({ secret, parsed: parseCredentialsSecret(secret, options) })),
    new Map(),
    links ? { clusters: links.claimed, secrets: links.claimedSecrets } : undefined,
  );
  const registry = links ? withLinks(fromSecrets, links) : fromSecrets;
  const rows: StatusRow[] = [];
  const named = new Set<string>();
  for (const [cluster, reg] of registry.registered) {
    named.add(cluster);
    rows.push({ cluster, secret: reg.secretKey, state: "registered", mirrors: counts.get(cluster) ?? 0 });
  }
  for (const d of registry.duplicates) {
    rows.push({
      cluster: d.cluster,
      secret: d.secretKey,
      state: "duplicate",
      reason: `cluster already registered by ${d.winner}`,
      mirrors: 0,
    });
  }
  for (const i of registry.invalid) {
    if (i.cluster) named.add(i.cluster);
    rows.push({
      cluster: i.cluster ?? "",
      secret: i.secretKey,
      state: "invalid",
      reason: `${i.reason}: ${i.message}`,
      mirrors: i.cluster ? (counts.get(i.cluster) ?? 0) : 0,
    });
  }
  for (const [cluster, count] of counts) {
    if (named.has(cluster)) continue;
    rows.push({
      cluster,
      secret: "",
      state: "unknown-cluster",
      reason: "mirrors of a cluster no credentials Secret registers",
      mirrors: count,
    });
  }
  rows.sort((a, b) =>
    a.cluster === b.cluster ? a.secret.localeCompare(b.secret) : a.cluster.localeCompare(b.cluster),
  );
  return rows;
}
