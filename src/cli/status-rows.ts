/**
 * The pure part of `fleet-mirror status`: the rows (from the controller's admin status or
 * from the cluster objects) and the tables printed. No I/O: status.ts reads and calls these.
 */

import type { AdminStatus } from "../admin/source.ts";
import { FEDERATED_LABEL } from "../core/federated.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE } from "../core/labels.ts";
import type { Secret, Service } from "../core/objects.ts";
import { annotatedClusters } from "../core/plan-federated.ts";
import { shardOf, shardOfLeaseName } from "../core/shards.ts";
import type { ShardingView } from "../leader/leadership.ts";
import type { GatewayProbeStatus } from "../protocol/messages.ts";
import type { ClusterRow } from "../status/fleet-view.ts";
import type { PlacementStatus } from "../status/placement-status.ts";
import { parseCredentialsSecret } from "../supervisor/registration.ts";
import { computeRegistry } from "../supervisor/registry.ts";
import { formatAge, formatTable } from "./common.ts";
import { type DryRunView, formatDryRun } from "./dry-run-rows.ts";
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
 * Shard rows from the Leases of the leader-election namespace (pure): every
 * `<lease-id>-shard-<i>` Lease. The shard count is taken as the highest shard found + 1
 * (every shard of a running Deployment has a Lease once its first holder took it).
 * Empty when there is no shard Lease (not sharded).
 */
export function shardRowsFromLeases(
  leases: readonly { readonly name: string; readonly spec: unknown }[],
  leaseId: string,
  clusters: readonly string[],
): ShardRow[] {
  const found = new Map<number, { holder: string; renewedAt?: string }>();
  for (const lease of leases) {
    const shard = shardOfLeaseName(leaseId, lease.name, Number.MAX_SAFE_INTEGER);
    if (shard === undefined) continue;
    const spec = (typeof lease.spec === "object" && lease.spec !== null ? lease.spec : {}) as Record<string, unknown>;
    const holder = typeof spec["holderIdentity"] === "string" ? spec["holderIdentity"] : "";
    const renewed = spec["renewTime"];
    found.set(shard, { holder, ...(typeof renewed === "string" ? { renewedAt: renewed } : {}) });
  }
  if (found.size === 0) return [];
  const shards = Math.max(...found.keys()) + 1;
  return Array.from({ length: shards }, (_, shard) => ({
    shard,
    holder: found.get(shard)?.holder ?? "",
    ...(found.get(shard)?.renewedAt ? { renewedAt: found.get(shard)?.renewedAt as string } : {}),
    clusters: clustersOfShard(clusters, shard, shards),
  }));
}

/** The shard table: which replica holds which shard. */
export function formatShardTable(rows: readonly ShardRow[], now: number): string {
  return formatTable(
    ["shard", "holder", "renewed", "clusters"],
    rows.map((r) => [
      String(r.shard),
      r.holder === "" ? "(free)" : r.holder,
      r.renewedAt ? `${formatAge(Math.max(0, now - Date.parse(r.renewedAt)))} ago` : "",
      String(r.clusters.length),
    ]),
  );
}

/** "placement: packed, 8 actor threads, blast radius 25 clusters (auto: …)". */
export function placementLine(p: PlacementStatus): string {
  const radius = `blast radius ${p.blastRadius} cluster${p.blastRadius === 1 ? "" : "s"}`;
  return `placement: ${p.mode}, ${p.threads} actor thread${p.threads === 1 ? "" : "s"}, ${radius} (${p.reason})\n`;
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
  options: { readonly allowFilePaths: boolean },
): StatusRow[] {
  const counts = new Map<string, number>();
  for (const mirror of mirrors) {
    const labels = mirror.metadata.labels;
    const cluster = labels?.[CLUSTER_NAME];
    if (labels?.[MIRRORED_SERVICE] !== "true" || !cluster) continue;
    counts.set(cluster, (counts.get(cluster) ?? 0) + 1);
  }
  const registry = computeRegistry(
    secrets.map((secret) => ({ secret, parsed: parseCredentialsSecret(secret, options) })),
    new Map(),
  );
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

/** The STATE cell: `stale since 5m`, `failing: reason`, `invalid: reason`, or the state. */
export function stateCell(row: StatusRow, now: number): string {
  const age = row.since ? ` since ${formatAge(now - Date.parse(row.since))}` : "";
  switch (row.state) {
    case "stale":
      return `stale${age}${row.reason ? `: ${row.reason}` : ""}`;
    case "failing":
    case "crash-loop":
    case "invalid":
      return `${row.state}${row.reason ? `: ${row.reason}` : ""}`;
    case "syncing":
      return `syncing${age}${row.reason ? `: ${row.reason}` : ""}`;
    default:
      return row.state;
  }
}

function gatewayCell(row: StatusRow): string {
  if (row.gateways === undefined) return "unknown";
  if (row.gateways.length === 0) return "-";
  const unusable = row.gateways.filter((g) => !g.usable);
  if (unusable.length === 0) return "usable";
  return unusable.map((g) => `${g.gateway} unusable${g.reason ? `: ${g.reason}` : ""}`).join("; ");
}

/**
 * The HEALTH cell: `-` when no gateway is probed, `alive` when every probed address is,
 * otherwise each gateway with dead addresses (`gw/gateway 1/2 dead`) or bad probe
 * annotations (`gw/gateway: probe problem`).
 */
export function healthCell(row: StatusRow): string {
  if (row.gateways === undefined) return "unknown";
  const parts: string[] = [];
  let probed = 0;
  for (const g of row.gateways) {
    if (g.probe) {
      probed += 1;
      if (g.probe.dead > 0) parts.push(`${g.gateway} ${g.probe.dead}/${g.probe.alive + g.probe.dead} dead`);
    }
    if (g.probeProblems && g.probeProblems.length > 0) parts.push(`${g.gateway}: probe problem`);
  }
  if (parts.length > 0) return parts.join("; ");
  return probed > 0 ? "alive" : "-";
}

/** The MEMBERS cell: `east, west (kept)`. */
function membersCell(row: FederatedRow): string {
  if (row.clusters.length === 0) return "-";
  return row.clusters.map((c) => (row.kept?.includes(c) ? `${c} (kept)` : c)).join(", ");
}

/** The fleet-wide table, after the clusters' (pure); empty when there is no fleet-wide Service. */
export function formatFederatedTable(rows: readonly FederatedRow[]): string {
  if (rows.length === 0) return "";
  const count = (n: number | undefined): string => (n === undefined ? "unknown" : String(n));
  return formatTable(
    ["fleet-wide service", "members", "ready", "not ready", "conflicts"],
    rows.map((r) => [
      r.service,
      membersCell(r),
      count(r.ready),
      count(r.notReady),
      r.conflicts === undefined ? "unknown" : r.conflicts.length === 0 ? "-" : r.conflicts.join("; "),
    ]),
  );
}

/**
 * The EXPORTS cell: `3 annotation, 2 label, 1 mcs (1 declined)`; `-` when none; `unknown`
 * without the actor's counts. MCS export that is not active says so: `(mcs: forbidden)`.
 */
export function exportsCell(row: StatusRow): string {
  const e = row.exports;
  if (!e)
    return row.exportedServices === undefined
      ? "unknown"
      : row.exportedServices === 0
        ? "-"
        : String(row.exportedServices);
  const parts = [
    ...(e.annotation > 0 ? [`${e.annotation} annotation`] : []),
    ...(e.label > 0 ? [`${e.label} label`] : []),
    ...((e.mcs ?? 0) > 0 ? [`${e.mcs} mcs`] : []),
  ];
  const notes = [
    ...(e.declined > 0 ? [`${e.declined} declined`] : []),
    ...(row.mcs && row.mcs.state !== "active" ? [`mcs: ${row.mcs.state.replace("-", " ")}`] : []),
  ];
  const suffix = notes.length > 0 ? ` (${notes.join("; ")})` : "";
  return parts.length === 0 ? `-${suffix}` : `${parts.join(", ")}${suffix}`;
}

/** The tables `status` prints (pure). */
export function formatStatusTable(report: StatusReport, now: number): string {
  const header =
    report.source === "cluster-objects"
      ? `controller not reachable; from cluster objects${report.note ? ` (${report.note})` : ""}\n`
      : "";
  const federated = formatFederatedTable(report.federated);
  const shards =
    (report.shards && report.shards.length > 0 ? `\n${formatShardTable(report.shards, now)}` : "") +
    (report.shardsNote ? `\nshards: ${report.shardsNote}\n` : "");
  if (report.clusters.length === 0)
    return `${header}No remote clusters registered.\n${federated ? `\n${federated}` : ""}${shards}${report.dryRun ? `\n${formatDryRun(report.dryRun)}` : ""}`;
  const rows = report.clusters.map((r) => [
    r.cluster || "(none)",
    stateCell(r, now),
    String(r.mirrors),
    exportsCell(r),
    r.lastSyncedAt
      ? `${formatAge(now - Date.parse(r.lastSyncedAt))} ago`
      : report.source === "controller"
        ? "never"
        : "unknown",
    r.restarts === undefined ? "unknown" : String(r.restarts),
    gatewayCell(r),
    healthCell(r),
  ]);
  const clusters = formatTable(
    ["cluster", "state", "mirrors", "exports", "last sync", "restarts", "gateway", "health"],
    rows,
  );
  const placement = report.placement ? `\n${placementLine(report.placement)}` : "";
  const dryRun = report.dryRun ? `\n${formatDryRun(report.dryRun)}` : "";
  return header + clusters + placement + (federated ? `\n${federated}` : "") + shards + dryRun;
}
