/**
 * `fleet-mirror status`: one row per remote cluster. Reads the running controller's
 * admin endpoint (`/status`, an AdminStatus); when none answers, builds the rows from
 * the cluster objects instead — credentials Secrets validated exactly as the controller
 * validates them, mirrors counted by the SPEC §3 labels — and says so.
 */

import type { AdminStatus } from "../admin/source.ts";
import { CLUSTER_NAME, MIRRORED_SERVICE, SECRET_TYPE } from "../core/labels.ts";
import type { Secret, Service } from "../core/objects.ts";
import type { KubeClient } from "../kube/client.ts";
import type { GatewayProbeStatus } from "../protocol/messages.ts";
import { parseCredentialsSecret } from "../supervisor/registration.ts";
import { computeRegistry } from "../supervisor/registry.ts";
import type { ClusterRow } from "../supervisor/status.ts";
import {
  type CommandDefinition,
  cliClient,
  commandHelp,
  credentialsNamespace,
  EXIT_OK,
  formatAge,
  formatData,
  formatTable,
  listAll,
  localConnection,
  localFlags,
  outputFlag,
  outputFormat,
  runCli,
  stringFlag,
  writeErr,
  writeOut,
} from "./common.ts";

export const DEFAULT_ADMIN_URL = "http://127.0.0.1:9999";

const flags = {
  ...localFlags,
  ...outputFlag,
  "admin-url": {
    type: "string",
    description: `the controller's admin endpoint (default ${DEFAULT_ADMIN_URL}; e.g. after kubectl port-forward)`,
  },
  "allow-kubeconfig-file-paths": {
    type: "boolean",
    description: "validate Secrets as a controller started with the same flag does",
  },
} as const;

const help = commandHelp(
  "status [flags]",
  `One row per remote cluster: its state (syncing, synced, stale since T, failing: reason,
crash-loop, duplicate, invalid: reason), mirrored services, last successful sync,
restarts of its actor, whether its gateways are usable, and their health: the probed
gateways' addresses alive or dead (SPEC §10) and bad probe annotations (-o json|yaml
gives each gateway's probe: port, path, period, dead addresses, last failure).

Reads the running controller's admin endpoint (--admin-url). When it does not answer,
the rows are built from the cluster objects (credentials Secrets, mirror Services) and
the output says "controller not reachable; from cluster objects": the state is then only
valid/invalid/duplicate, and sync times, restarts and gateways are unknown.`,
  flags,
);

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

export interface StatusReport {
  readonly source: "controller" | "cluster-objects";
  /** Why the controller was not used (with source "cluster-objects"). */
  readonly note?: string;
  readonly leading?: boolean;
  readonly clusters: readonly StatusRow[];
}

const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

/** Rows from the controller's own status (pure). */
export function rowsFromAdmin(status: AdminStatus): StatusRow[] {
  return (status.clusters ?? []).map((row: ClusterRow) => {
    const since = iso(row.since);
    const lastSyncedAt = iso(row.lastSyncedAt);
    const problems = row.problems.map((p) => `${p.remote ?? p.key ?? ""}: ${p.reason}: ${p.message}`);
    return {
      cluster: row.cluster,
      secret: row.secret,
      state: row.state,
      ...(since ? { since } : {}),
      ...(row.reason ? { reason: row.reason } : {}),
      mirrors: row.mirrors,
      exportedServices: row.exportedServices,
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

/** The table `status` prints (pure). */
export function formatStatusTable(report: StatusReport, now: number): string {
  const header =
    report.source === "cluster-objects"
      ? `controller not reachable; from cluster objects${report.note ? ` (${report.note})` : ""}\n`
      : "";
  if (report.clusters.length === 0) return `${header}No remote clusters registered.\n`;
  const rows = report.clusters.map((r) => [
    r.cluster || "(none)",
    stateCell(r, now),
    String(r.mirrors),
    r.lastSyncedAt
      ? `${formatAge(now - Date.parse(r.lastSyncedAt))} ago`
      : report.source === "controller"
        ? "never"
        : "unknown",
    r.restarts === undefined ? "unknown" : String(r.restarts),
    gatewayCell(r),
    healthCell(r),
  ]);
  return header + formatTable(["cluster", "state", "mirrors", "last sync", "restarts", "gateway", "health"], rows);
}

/**
 * GETs `<adminUrl>/status`. Resolves undefined with a reason when nothing usable
 * answers within `timeoutMs` (not running, wrong port, not the admin server).
 */
export async function fetchAdminStatus(
  adminUrl: string,
  timeoutMs = 2_000,
): Promise<{ status: AdminStatus } | { unreachable: string }> {
  let url: URL;
  try {
    url = new URL("/status", adminUrl);
  } catch {
    return { unreachable: `--admin-url ${JSON.stringify(adminUrl)} is not a URL` };
  }
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) return { unreachable: `${url.href}: HTTP ${response.status}` };
    const body: unknown = await response.json();
    if (typeof body !== "object" || body === null || !("leadership" in body))
      return { unreachable: `${url.href}: not a fleet-mirror status document` };
    return { status: body as AdminStatus };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    return { unreachable: `${url.href}: ${cause?.code ?? (error as Error).message}` };
  }
}

/** The credentials Secrets and the mirror Services of the local cluster, for the fallback rows. */
export async function readClusterObjects(
  client: KubeClient,
  namespace: string,
): Promise<{ secrets: Secret[]; mirrors: Service[] }> {
  const [secrets, mirrors] = await Promise.all([
    listAll<Secret>(client, `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
      fieldSelector: `type=${SECRET_TYPE}`,
    }),
    listAll<Service>(client, "/api/v1/services", { labelSelector: `${MIRRORED_SERVICE}=true` }),
  ]);
  return { secrets, mirrors };
}

export async function statusReport(
  values: Readonly<Record<string, string | boolean | undefined>>,
): Promise<StatusReport> {
  const adminUrl = stringFlag(values, "admin-url") ?? DEFAULT_ADMIN_URL;
  const admin = await fetchAdminStatus(adminUrl);
  if ("status" in admin) {
    if (admin.status.clusters !== undefined) {
      return { source: "controller", leading: admin.status.leadership.leading, clusters: rowsFromAdmin(admin.status) };
    }
    // A standby replica has no fleet status: the objects are the next best thing.
    return fromObjects(
      values,
      `${adminUrl} is a standby replica (leader: ${admin.status.leadership.holder ?? "unknown"})`,
    );
  }
  return fromObjects(values, admin.unreachable);
}

async function fromObjects(
  values: Readonly<Record<string, string | boolean | undefined>>,
  note: string,
): Promise<StatusReport> {
  const client = cliClient(localConnection(values));
  try {
    const { secrets, mirrors } = await readClusterObjects(client, credentialsNamespace(values));
    return {
      source: "cluster-objects",
      note,
      clusters: rowsFromObjects(secrets, mirrors, { allowFilePaths: values["allow-kubeconfig-file-paths"] === true }),
    };
  } finally {
    client.close();
  }
}

export const statusDefinition: CommandDefinition = {
  name: "status",
  help,
  flags,
  async run({ values }) {
    const format = outputFormat(values);
    const report = await statusReport(values);
    if (format === "table") {
      writeOut(formatStatusTable(report, Date.now()));
    } else {
      if (report.source === "cluster-objects")
        writeErr(`controller not reachable; from cluster objects (${report.note ?? ""})\n`);
      writeOut(formatData(report, format));
    }
    return EXIT_OK;
  },
};

export function statusCommand(argv: readonly string[]): Promise<number> {
  return runCli(statusDefinition, argv);
}
