/**
 * The reduction of one MCS import (SPEC §12, §16): the exports of every cluster of one
 * name, oldest first (`exportOrder`), merged (`mergeExports`: ports by name, the rest from
 * the oldest), then reduced like a fleet-wide Service's members (`reduceFederated`: the
 * unknown clusters kept, nothing deleted while any may still export), and held while a
 * kept cluster might have set other ports (`holdWhileKept`). Pure.
 *
 * Guarantees (unit tested):
 * - every known exporter is a part: none is left out for its ports; a part serves only the
 *   port names its export defines as the merge does (`portsServed`);
 * - the derived Service's ports are the merged ones, each as its winning export defines
 *   it (target port included);
 * - the result depends on the exports and the registration only, never on map order.
 */
import type { MirrorServicePort } from "./desired.ts";
import { type FederatedMember, type Reduction, reduceFederated } from "./federated.ts";
import type { McsExport } from "./mcs.ts";
import { type MergedExports, mergeExports } from "./mcs-spec.ts";
import { type ExportRegistration, exportOrder, holdWhileKept } from "./plan-imports.ts";

export interface ImportReduceInput {
  /** Every cluster's export of the name (the local cluster's included), by cluster. */
  readonly exports: ReadonlyMap<string, McsExport>;
  readonly registration: ExportRegistration;
  /** Clusters whose exports are not known: kept as observed, never the merge's. */
  readonly unknown: ReadonlySet<string>;
  readonly registrationKnown: boolean;
  /** The clusters the observed derived Service and slices name. */
  readonly observedClusters: readonly string[];
  /** The ports of fleet-mirror's derived Service as observed, if it exists. */
  readonly observedPorts: readonly MirrorServicePort[] | undefined;
}

export interface ImportReduction {
  readonly reduction: Reduction;
  /** The known exports merged; undefined when none is known. */
  readonly merged: MergedExports | undefined;
  /** The known exporters, oldest first. */
  readonly order: readonly string[];
}

/** The derived Service's ports: each merged port name as the oldest export defining it has it. */
function derivedPorts(merged: MergedExports, order: readonly string[], exports: ReadonlyMap<string, McsExport>) {
  const ports: MirrorServicePort[] = [];
  for (const port of merged.spec.ports) {
    const name = port.name ?? "";
    for (const cluster of order) {
      const found = exports.get(cluster)?.ports.find((p) => (p.name ?? "") === name);
      if (found) {
        ports.push(found);
        break;
      }
    }
  }
  return ports;
}

export function reduceImport(input: ImportReduceInput): ImportReduction {
  const known = new Map([...input.exports].filter(([cluster]) => !input.unknown.has(cluster)));
  const order = exportOrder(known, input.registration);
  const merged = mergeExports(order.map((cluster) => ({ cluster, spec: (known.get(cluster) as McsExport).spec })));
  const ports = merged ? derivedPorts(merged, order, known) : [];
  const members = new Map<string, FederatedMember>();
  for (const [cluster, e] of known) {
    const served = merged?.portsServed(cluster) ?? new Set<string>();
    members.set(cluster, {
      ...e,
      ports,
      endpointPorts: e.endpointPorts.filter((p) => served.has(p.name ?? "")),
    });
  }
  const reduction = holdWhileKept(
    reduceFederated({
      members,
      order,
      unknown: input.unknown,
      registrationKnown: input.registrationKnown,
      observedClusters: input.observedClusters,
    }),
    input.observedPorts,
  );
  return { reduction, merged, order };
}
