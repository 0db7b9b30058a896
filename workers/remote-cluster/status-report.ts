/**
 * The actor's `ClusterStatus`: what its parts hold now, as one plain-data report (the
 * latest replaces the previous one at the supervisor).
 */
import { type McsAvailability, mcsForbiddenProblem } from "../../src/core/mcs.ts";
import type { Service } from "../../src/core/objects.ts";
import type { Watcher } from "../../src/kube/watcher.ts";
import type { ClusterStatus } from "../../src/protocol/messages.ts";
import type { DesiredSender } from "./desired-sender.ts";
import type { GatewayHealth } from "./gateway-health.ts";
import type { GatewayIndex } from "./gateway-index.ts";
import type { SyncTracker } from "./status-state.ts";

export interface StatusParts {
  readonly cluster: string;
  readonly epoch: number;
  readonly sync: SyncTracker;
  readonly gateways: GatewayIndex;
  readonly services: Pick<Watcher<Service>, "get" | "stats">;
  readonly health: GatewayHealth;
  readonly sender: DesiredSender;
  /** Whether MCS export is active (SPEC §12); a refused read is also one of the problems (reported once). */
  readonly exports: { readonly availability: McsAvailability; readonly discoveries: number };
  /** The headless watches' status fields (SPEC §12: reads the remote's role denies). */
  readonly headless: Pick<ClusterStatus, "deniedReads">;
  readonly apiWarnings: number;
}

export function clusterStatus(parts: StatusParts): ClusterStatus {
  const gateways = parts.health.rows(parts.gateways.gateways(), (key) => parts.services.get(key));
  const gatewayProbes = parts.health.counters();
  const { state, message } = parts.exports.availability;
  const forbidden = mcsForbiddenProblem(parts.cluster, parts.exports.availability);
  return {
    cluster: parts.cluster,
    epoch: parts.epoch,
    ...parts.sync.report(),
    exportedServices: parts.gateways.exportedCount,
    exports: { ...parts.gateways.exportCounts, mcs: parts.sender.mcsExports },
    mcs: { state, ...(message ? { message } : {}), discoveries: parts.exports.discoveries },
    mirrors: parts.sender.mirrors,
    problems: [...parts.sender.problems(), ...(forbidden ? [forbidden] : [])],
    gateways,
    watch: { ...parts.services.stats },
    ...(Object.keys(gatewayProbes).length > 0 ? { gatewayProbes } : {}),
    ...(parts.apiWarnings > 0 ? { apiWarnings: parts.apiWarnings } : {}),
    ...parts.headless,
  };
}
