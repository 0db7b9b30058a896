/**
 * The tables `fleet-mirror status` prints, cell by cell, from the rows of status-rows.ts.
 * Pure: status.ts reads, status-rows.ts builds the rows, this file renders them.
 */
import type { PlacementStatus } from "../status/placement-status.ts";
import { formatAge, formatTable } from "./common.ts";
import { formatDryRun } from "./dry-run-rows.ts";
import { formatLinksTable } from "./link-view.ts";
import type { FederatedRow, ShardRow, StatusReport, StatusRow } from "./status-rows.ts";

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

/** The TIERS cell (SPEC §14): `10 serving (1 ready), 20 standby (2 ready) since <time>`; `-` without tiers. */
export function tiersCell(row: FederatedRow): string {
  if (!row.tiers) return "-";
  const tiers = row.tiers.map((t) => `${t.priority} ${t.serving ? "serving" : "standby"} (${t.ready} ready)`);
  return `${tiers.join(", ")}${row.servingSince ? ` since ${row.servingSince.replace(/\.\d+Z$/, "Z")}` : ""}`;
}

/** The fleet-wide table, after the clusters' (pure); empty when there is no fleet-wide Service. */
export function formatFederatedTable(rows: readonly FederatedRow[]): string {
  if (rows.length === 0) return "";
  const count = (n: number | undefined): string => (n === undefined ? "unknown" : String(n));
  // The TIERS column only once some Service has tiers: a fleet of one priority reads as before.
  const tiered = rows.some((r) => r.tiers !== undefined);
  return formatTable(
    ["fleet-wide service", "members", "ready", "not ready", "conflicts", ...(tiered ? ["tiers"] : [])],
    rows.map((r) => [
      r.service,
      membersCell(r),
      count(r.ready),
      count(r.notReady),
      r.conflicts === undefined ? "unknown" : r.conflicts.length === 0 ? "-" : r.conflicts.join("; "),
      ...(tiered ? [tiersCell(r)] : []),
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
  const links =
    (report.links && report.links.length > 0 ? `\n${formatLinksTable(report.links)}` : "") +
    (report.linksProblem
      ? `\nlinks: ${report.linksProblem.message} (namespace ${report.linksProblem.namespace})\n`
      : "");
  if (report.clusters.length === 0)
    return `${header}No remote clusters registered.\n${links}${federated ? `\n${federated}` : ""}${shards}${report.dryRun ? `\n${formatDryRun(report.dryRun)}` : ""}`;
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
  return header + clusters + placement + links + (federated ? `\n${federated}` : "") + shards + dryRun;
}
