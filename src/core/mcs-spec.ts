/**
 * What a ServiceImport carries of the Services exported to it (SPEC §16), as pure
 * functions: the fields one export contributes (`exportedSpecOf`), and how the exports of
 * one name merge (`mergeExports`): ports by name, every other field from the oldest
 * export, and the conflicts that merge finds, each naming its field and its clusters.
 * No I/O, no clock, no mutation of inputs.
 *
 * Guarantees (unit tested):
 * - the merge depends only on the exporters' order (oldest first) and their fields;
 * - ports: the union by name; a name two exports define differently takes the oldest
 *   definition, and each exporter whose definition differs from it is in conflict with
 *   that oldest one (`PortConflict`) and serves none of that name's traffic
 *   (`portsServed`); exports with different sets of names are in conflict all of them;
 * - any other field differing between exports is a conflict on every exporter of the
 *   name (the oldest included: the MCS API puts the condition on all of them), and the
 *   oldest export's value wins.
 */
import type { Service } from "./objects.ts";

/** A ServiceImport's port: what the MCS API carries of a Service port. */
export interface ImportPort {
  readonly name?: string;
  readonly protocol: string;
  readonly port: number;
  readonly appProtocol?: string;
}

export interface SessionAffinityConfig {
  readonly clientIP?: { readonly timeoutSeconds?: number };
}

/** The fields of one exported Service that its ServiceImport carries (SPEC §16). Plain data. */
export interface ExportedSpec {
  readonly type: "ClusterSetIP" | "Headless";
  readonly ports: readonly ImportPort[];
  readonly sessionAffinity: string;
  readonly sessionAffinityConfig?: SessionAffinityConfig;
  readonly internalTrafficPolicy?: string;
  readonly trafficDistribution?: string;
}

const str = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

/** Only `clientIP.timeoutSeconds` of a Service's session affinity config, when set. */
function affinityConfigOf(value: unknown): SessionAffinityConfig | undefined {
  const clientIP = (value as { clientIP?: { timeoutSeconds?: unknown } } | undefined)?.clientIP;
  if (!clientIP || typeof clientIP !== "object") return undefined;
  const seconds = clientIP.timeoutSeconds;
  return { clientIP: typeof seconds === "number" ? { timeoutSeconds: seconds } : {} };
}

/** What a ServiceImport carries of Service `service` (a headless Service: type Headless). */
export function exportedSpecOf(service: Service): ExportedSpec {
  const spec = service.spec ?? {};
  const affinityConfig = affinityConfigOf(spec["sessionAffinityConfig"]);
  const internalTrafficPolicy = str(spec["internalTrafficPolicy"]);
  const trafficDistribution = str(spec["trafficDistribution"]);
  return {
    type: spec.clusterIP === "None" ? "Headless" : "ClusterSetIP",
    ports: (spec.ports ?? []).map((p) => {
      const appProtocol = str((p as { appProtocol?: unknown }).appProtocol);
      return {
        ...(p.name ? { name: p.name } : {}),
        protocol: p.protocol ?? "TCP",
        port: p.port,
        ...(appProtocol ? { appProtocol } : {}),
      };
    }),
    sessionAffinity: str(spec["sessionAffinity"]) ?? "None",
    ...(affinityConfig ? { sessionAffinityConfig: affinityConfig } : {}),
    ...(internalTrafficPolicy ? { internalTrafficPolicy } : {}),
    ...(trafficDistribution ? { trafficDistribution } : {}),
  };
}

/** The fields a conflict can be about, with the reason the MCS API names for each. */
export const CONFLICT_REASONS = {
  ports: "PortConflict",
  type: "TypeConflict",
  sessionAffinity: "SessionAffinityConflict",
  sessionAffinityConfig: "SessionAffinityConfigConflict",
  internalTrafficPolicy: "InternalTrafficPolicyConflict",
  trafficDistribution: "TrafficDistributionConflict",
} as const;
export type ConflictField = keyof typeof CONFLICT_REASONS;

/** One disagreement between exports of a name. */
export interface ImportConflict {
  readonly field: ConflictField;
  /** The exporter whose value wins (the oldest defining it). */
  readonly winner: string;
  /** The exporters in conflict: for ports, those whose definition differs; else every exporter. */
  readonly clusters: readonly string[];
  /** Names the field and the clusters. */
  readonly message: string;
}

export interface MergedExports {
  /** The ServiceImport's fields: ports merged by name (sorted by name), the rest from the oldest export. */
  readonly spec: ExportedSpec;
  readonly conflicts: readonly ImportConflict[];
  /** The port names `cluster`'s endpoints serve: its own, less those whose definition lost. */
  readonly portsServed: (cluster: string) => ReadonlySet<string>;
}

const portKey = (p: ImportPort): string => JSON.stringify([p.protocol, p.port, p.appProtocol ?? ""]);
const describePort = (p: ImportPort): string =>
  `${p.port}/${p.protocol}${p.appProtocol ? ` (appProtocol ${p.appProtocol})` : ""}`;
const canonical = (value: unknown): string => JSON.stringify(value ?? null);

/**
 * Merges the exports of one name, `ordered` oldest first (`exportOrder`). Empty input:
 * undefined.
 */
export function mergeExports(
  ordered: readonly { readonly cluster: string; readonly spec: ExportedSpec }[],
): MergedExports | undefined {
  const oldest = ordered[0];
  if (!oldest) return undefined;
  const conflicts: ImportConflict[] = [];
  const winners = new Map<string, { cluster: string; port: ImportPort }>();
  const losers = new Map<string, Set<string>>();
  for (const { cluster, spec } of ordered)
    for (const port of spec.ports) {
      const name = port.name ?? "";
      const won = winners.get(name);
      if (!won) winners.set(name, { cluster, port });
      else if (portKey(won.port) !== portKey(port)) {
        const set = losers.get(cluster) ?? new Set<string>();
        set.add(name);
        losers.set(cluster, set);
        conflicts.push({
          field: "ports",
          winner: won.cluster,
          clusters: [won.cluster, cluster],
          message: `port ${name || "(unnamed)"}: ${describePort(port)} in cluster ${cluster} differs from ${describePort(won.port)} in cluster ${won.cluster}, the oldest export; ${cluster}'s endpoints do not serve it`,
        });
      }
    }
  const all = ordered.map((e) => e.cluster);
  // Exports with different sets of port names merge into their union, which is still a
  // disagreement the MCS API reports (on every exporter of the name).
  const names = (spec: ExportedSpec): string => canonical([...new Set(spec.ports.map((p) => p.name ?? ""))].sort());
  const differentSets = ordered.filter((e) => names(e.spec) !== names(oldest.spec)).map((e) => e.cluster);
  if (differentSets.length > 0)
    conflicts.push({
      field: "ports",
      winner: oldest.cluster,
      clusters: all,
      message: `ports: the port names of cluster${differentSets.length > 1 ? "s" : ""} ${differentSets.join(", ")} differ from those of cluster ${oldest.cluster}, the oldest export; the ServiceImport carries their union, each port served by the clusters that define it`,
    });
  const scalar = (field: Exclude<ConflictField, "ports">, describe: (spec: ExportedSpec) => unknown): void => {
    const want = canonical(describe(oldest.spec));
    const differing = ordered.filter((e) => canonical(describe(e.spec)) !== want).map((e) => e.cluster);
    if (differing.length === 0) return;
    conflicts.push({
      field,
      winner: oldest.cluster,
      clusters: all,
      message: `${field}: ${want} in cluster ${oldest.cluster}, the oldest export, differs in cluster${differing.length > 1 ? "s" : ""} ${differing.join(", ")}; ${oldest.cluster}'s wins`,
    });
  };
  scalar("type", (s) => s.type);
  scalar("sessionAffinity", (s) => s.sessionAffinity);
  scalar("sessionAffinityConfig", (s) => s.sessionAffinityConfig);
  scalar("internalTrafficPolicy", (s) => s.internalTrafficPolicy);
  scalar("trafficDistribution", (s) => s.trafficDistribution);
  const ports = [...winners.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, { port }]) => port);
  const own = new Map(ordered.map((e) => [e.cluster, e.spec.ports.map((p) => p.name ?? "")]));
  return {
    spec: { ...oldest.spec, ports },
    conflicts,
    portsServed: (cluster) => {
      const lost = losers.get(cluster);
      return new Set((own.get(cluster) ?? []).filter((name) => !lost?.has(name)));
    },
  };
}

/** The conflicts `cluster` is named in, by field (first of each field), for its ServiceExport's condition. */
export function conflictsOf(conflicts: readonly ImportConflict[], cluster: string): ImportConflict[] {
  const seen = new Set<ConflictField>();
  const out: ImportConflict[] = [];
  for (const c of conflicts) {
    if (!c.clusters.includes(cluster) || seen.has(c.field)) continue;
    seen.add(c.field);
    out.push(c);
  }
  return out;
}
