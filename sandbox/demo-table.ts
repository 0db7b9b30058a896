/**
 * The demo's live table, computed from current state each time it is drawn: the mirrors
 * come from one list of the local cluster, and the MIRRORS column counts that same list,
 * so the two tables never disagree (the controller's own mirror count comes from the
 * writer's status, published once a second: a table drawn right after a change showed
 * the count from before it).
 *
 * Time columns say what a user watching changes needs: WATCHING SINCE is when the
 * cluster's watch started from a complete list (a fixed clock time, not an age that
 * grows while events flow); LAST CHANGE is how long ago this cluster's mirrors last
 * changed in the local cluster, as seen by the demo.
 *
 * The fleet-wide Service's row has a line under it naming its priority tiers, which
 * serve and since when (demo-tiers.ts, from the controller's status).
 */

import type { GatewayStatus } from "../src/protocol/status.ts";
import type { FleetStatus } from "../src/status/fleet-view.ts";
import type { MirrorRow } from "./demo-mirrors.ts";
import { FLEET_WIDE_KEY, searchStatus, tierLine } from "./demo-tiers.ts";
import type { Frame } from "./screen.ts";

export type { MirrorAddress, MirrorRow } from "./demo-mirrors.ts";

/** When each cluster's mirrors last changed, from successive lists of the local cluster. */
export class MirrorActivity {
  readonly #seen = new Map<string, { signature: string; changedAt: number }>();

  /** Records a list taken at `now`; a cluster whose mirrors differ from the last list changed at `now`. */
  observe(mirrors: readonly MirrorRow[], now: number): void {
    const byCluster = new Map<string, string[]>();
    for (const m of mirrors) {
      const rows = byCluster.get(m.cluster) ?? [];
      rows.push(`${m.key} ${m.ports} ${m.endpoints}`);
      byCluster.set(m.cluster, rows);
    }
    for (const cluster of new Set([...byCluster.keys(), ...this.#seen.keys()])) {
      const signature = (byCluster.get(cluster) ?? []).join("\n");
      const before = this.#seen.get(cluster);
      if (before?.signature !== signature) this.#seen.set(cluster, { signature, changedAt: now });
    }
  }

  lastChangeAt(cluster: string): number | undefined {
    return this.#seen.get(cluster)?.changedAt;
  }
}

export interface TableInput {
  readonly status: FleetStatus;
  readonly mirrors: readonly MirrorRow[];
  readonly activity: MirrorActivity;
  readonly lastStep: string;
  readonly kubeconfigPath: string;
  readonly now: number;
  /** The traffic line's source (demo-traffic.ts), when real traffic runs. */
  readonly traffic?: { line(withCounts: boolean, now: number): string } | undefined;
}

function clockTime(t: number | undefined): string {
  return t === undefined ? "-" : new Date(t).toTimeString().slice(0, 8);
}

function age(t: number | undefined, now: number): string {
  return t === undefined ? "-" : `${Math.max(0, Math.round((now - t) / 1000))}s ago`;
}

/** A probed gateway's health after its usability: ` alive`, ` 1/1 dead`; nothing when not probed. */
function probeCell(gateway: GatewayStatus): string {
  const probe = gateway.probe;
  if (!probe) return "";
  return probe.dead > 0 ? ` ${probe.dead}/${probe.alive + probe.dead} dead` : " alive";
}

function render(input: TableInput, withClock: boolean): string {
  const { status, mirrors, activity, now } = input;
  const counts = new Map<string, number>();
  for (const m of mirrors) counts.set(m.cluster, (counts.get(m.cluster) ?? 0) + 1);
  const writer = status.writer;
  const lines = [
    `fleet-mirror demo — local cluster kubeconfig: ${input.kubeconfigPath}`,
    "",
    `${"CLUSTER".padEnd(8)} ${"STATE".padEnd(9)} ${"MIRRORS".padEnd(7)} ${"WATCHING SINCE".padEnd(14)} ${"LAST CHANGE".padEnd(11)} ${"RESTARTS".padEnd(8)} GATEWAYS`,
    ...status.clusters.map((c) => {
      const watching = c.state === "synced" ? clockTime(c.lastSyncedAt) : "-";
      const changed = withClock ? age(activity.lastChangeAt(c.cluster), now) : "";
      const gateways = c.gateways
        .map((g) => `${g.key}:${g.usable ? "usable" : (g.reason ?? "unusable")}${probeCell(g)}`)
        .join(" ");
      return `${c.cluster.padEnd(8)} ${c.state.padEnd(9)} ${String(counts.get(c.cluster) ?? 0).padEnd(7)} ${watching.padEnd(14)} ${changed.padEnd(11)} ${String(c.restarts).padEnd(8)} ${gateways}`;
    }),
    "",
    `${"MIRROR (local namespace/name)".padEnd(32)} ${"CLUSTER".padEnd(8)} ${"PORTS".padEnd(14)} ENDPOINTS`,
    ...mirrors.flatMap((m) => {
      const row = `${m.key.padEnd(32)} ${m.cluster.padEnd(8)} ${m.ports.padEnd(14)} ${m.endpoints}`;
      // The fleet-wide Service's tiers (SPEC §14) on a line of their own, under its row.
      const tiers = m.key === FLEET_WIDE_KEY ? tierLine(searchStatus(status)) : undefined;
      return tiers === undefined ? [row] : [row, tiers];
    }),
    "",
    `last change on a remote: ${input.lastStep}`,
    ...(input.traffic ? [input.traffic.line(withClock, now)] : []),
    // The writer publishes its status once a second: its counters are shown, but, like
    // ages, they are not content (a pipe would get a copy of the table a second later).
    `writer: ${!writer ? "starting" : withClock ? `ready=${writer.ready} queue=${writer.queueDepth} writes=${Object.values(writer.writes).reduce((a, b) => a + b, 0)}` : `ready=${writer.ready}`}`,
    "Ctrl-C stops the demo (controller, probe servers and their route, API servers, etcd, in that order; its directory is removed).",
  ];
  return lines.map((line) => line.trimEnd()).join("\n");
}

/** The table as drawn now, and its content without ages and counters (what decides whether a pipe gets a new copy). */
export function renderTable(input: TableInput): Frame {
  return { text: render(input, true), content: render(input, false) };
}
