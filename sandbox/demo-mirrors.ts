/**
 * The demo's MIRROR rows: what fleet-mirror made in the local cluster, one row per thing
 * a user exported, read from one list each of the local cluster's mirror Services, their
 * Endpoints, fleet-mirror's EndpointSlices and its ServiceImports.
 *
 * - A mirror (any mode) or a fleet-wide Service (SPEC §11, cluster `fleet`): its row; a
 *   fleet-wide part that stands by (SPEC §14) shows its addresses as `(standby)`.
 * - A headless mirror (SPEC §12): one row naming its hosts, whose addresses are those of
 *   its per-host mirrors (the gateway each host is reached through); the per-host mirrors
 *   have no row of their own (3 hosts, or 300, are one row).
 * - An MCS import (SPEC §12): the ServiceImport's row (cluster `mcs`), naming the clusters
 *   of its status, whose addresses are its derived Service's; the derived Service
 *   (`derived<16 hex>`) has no row of its own.
 */
import type {
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  V1EndpointSlice,
  V1Endpoints,
  V1Service,
} from "@kubernetes/client-node";
import { FEDERATED_LABEL } from "../src/core/federated.ts";
import { HEADLESS_MIRROR_LABEL } from "../src/core/headless.ts";
import {
  CLUSTER_NAME,
  MANAGED_BY_FLEET_MIRROR,
  MANAGED_BY_LABEL,
  MIRRORED_SERVICE,
  SERVICE_IMPORT_LABEL,
  SERVICE_NAME_LABEL,
} from "../src/core/labels.ts";
import { derivedServiceName, MCS_GROUP, MCS_VERSION, SERVICE_IMPORTS } from "../src/core/mcs.ts";
import { STANDBY_ANNOTATION } from "../src/core/tiers.ts";

/** One address of a mirror's endpoints, `ip:port`, and whether it is ready (its gateway alive, SPEC §10). */
export interface MirrorAddress {
  readonly address: string;
  readonly ready: boolean;
  /** A fleet-wide part outside the serving tiers (SPEC §14): not ready because it stands by. */
  readonly standby?: true;
}

export interface MirrorRow {
  readonly key: string;
  /** The remote cluster; `fleet` for a fleet-wide Service, `mcs` for a ServiceImport. */
  readonly cluster: string;
  readonly ports: string;
  readonly addresses: readonly MirrorAddress[];
  /** The row's ENDPOINTS cell: `ip:port`s, one followed by ` (not ready)` when it is not; `<none>`. */
  readonly endpoints: string;
  /** A ServiceImport's row: the clusters its status names. */
  readonly clusters?: readonly string[];
  /** A headless mirror's row: the hostnames its endpoints carry. */
  readonly hosts?: readonly string[];
}

/** The ServiceImport fields the table shows. */
interface ServiceImportItem {
  readonly metadata?: { readonly namespace?: string; readonly name?: string };
  readonly spec?: { readonly ports?: readonly { readonly port: number; readonly protocol?: string }[] };
  readonly status?: { readonly clusters?: readonly { readonly cluster: string }[] };
}

/** The local cluster's lists the rows are made of. */
export interface LocalLists {
  readonly services: readonly V1Service[];
  readonly endpoints: readonly V1Endpoints[];
  /** fleet-mirror's EndpointSlices only. */
  readonly slices: readonly V1EndpointSlice[];
  readonly imports: readonly ServiceImportItem[];
}

const keyOf = (namespace: string | undefined, name: string | undefined) => `${namespace}/${name}`;

function cell(addresses: readonly MirrorAddress[]): string {
  return addresses.length > 0
    ? addresses.map((a) => (a.ready ? a.address : `${a.address} (${a.standby ? "standby" : "not ready"})`)).join(",")
    : "<none>";
}

/** The rows of `lists`, sorted by key. */
export function mirrorRows(lists: LocalLists): MirrorRow[] {
  const eps = new Map(lists.endpoints.map((e) => [keyOf(e.metadata?.namespace, e.metadata?.name), e]));
  const sliceAddrs = new Map<string, MirrorAddress[]>();
  const sliceHosts = new Map<string, string[]>();
  for (const slice of lists.slices) {
    const key = keyOf(slice.metadata?.namespace, slice.metadata?.labels?.[SERVICE_NAME_LABEL]);
    const port = slice.ports?.[0]?.port ?? "?";
    const standby = slice.metadata?.annotations?.[STANDBY_ANNOTATION] === "true" ? { standby: true as const } : {};
    const addrs = (slice.endpoints ?? []).flatMap((e) =>
      e.addresses.map((ip) => ({ address: `${ip}:${port}`, ready: e.conditions?.ready !== false, ...standby })),
    );
    sliceAddrs.set(key, [...(sliceAddrs.get(key) ?? []), ...addrs]);
    const hosts = (slice.endpoints ?? []).flatMap((e) => (e.hostname ? [e.hostname] : []));
    sliceHosts.set(key, [...(sliceHosts.get(key) ?? []), ...hosts]);
  }
  // Without slices (`--endpoints-api=endpoints`): `addresses` ready, `notReadyAddresses` not.
  const addressesOf = (key: string): MirrorAddress[] =>
    sliceAddrs.get(key) ??
    (eps.get(key)?.subsets ?? []).flatMap((sub) => {
      const port = sub.ports?.[0]?.port ?? "?";
      return [
        ...(sub.addresses ?? []).map((a) => ({ address: `${a.ip}:${port}`, ready: true })),
        ...(sub.notReadyAddresses ?? []).map((a) => ({ address: `${a.ip}:${port}`, ready: false })),
      ];
    });
  const hostsOf = (key: string): string[] => [
    ...new Set(
      sliceHosts.get(key) ??
        (eps.get(key)?.subsets ?? []).flatMap((sub) => (sub.addresses ?? []).flatMap((a) => a.hostname ?? [])),
    ),
  ];
  // The per-host mirrors' addresses, by the key of their headless mirror.
  const perHost = new Map<string, MirrorAddress[]>();
  for (const s of lists.services) {
    const headless = s.metadata?.labels?.[HEADLESS_MIRROR_LABEL];
    if (headless === undefined) continue;
    const key = keyOf(s.metadata?.namespace, headless);
    perHost.set(key, [...(perHost.get(key) ?? []), ...addressesOf(keyOf(s.metadata?.namespace, s.metadata?.name))]);
  }
  const rows: MirrorRow[] = [];
  for (const s of lists.services) {
    const labels = s.metadata?.labels ?? {};
    if (labels[HEADLESS_MIRROR_LABEL] !== undefined || labels[SERVICE_IMPORT_LABEL] !== undefined) continue;
    const key = keyOf(s.metadata?.namespace, s.metadata?.name);
    const ports = (s.spec?.ports ?? []).map((p) => `${p.port}/${p.protocol ?? "TCP"}`).join(",");
    // A fleet-wide Service belongs to no single cluster (SPEC §11).
    const cluster = labels[CLUSTER_NAME] ?? (labels[FEDERATED_LABEL] === "true" ? "fleet" : "");
    if (s.spec?.clusterIP === "None" && labels[CLUSTER_NAME] !== undefined) {
      const hosts = hostsOf(key).sort();
      // One address per gateway, not per host: every host is reached through it.
      const seen = new Map((perHost.get(key) ?? []).map((a) => [a.address, a]));
      const addresses = [...seen.values()];
      const endpoints = `hosts ${hosts.length > 0 ? hosts.join(",") : "-"} via ${cell(addresses)}`;
      rows.push({ key, cluster, ports, addresses, endpoints, hosts });
      continue;
    }
    const addresses = addressesOf(key);
    rows.push({ key, cluster, ports, addresses, endpoints: cell(addresses) });
  }
  for (const si of lists.imports) {
    const namespace = si.metadata?.namespace ?? "";
    const name = si.metadata?.name ?? "";
    const clusters = (si.status?.clusters ?? []).map((c) => c.cluster);
    const addresses = addressesOf(keyOf(namespace, derivedServiceName(namespace, name)));
    rows.push({
      key: keyOf(namespace, name),
      cluster: "mcs",
      ports: (si.spec?.ports ?? []).map((p) => `${p.port}/${p.protocol ?? "TCP"}`).join(","),
      addresses,
      endpoints: `[${clusters.join(",")}] ${cell(addresses)}`,
      clusters,
    });
  }
  return rows.sort((a, b) => (a.key < b.key ? -1 : 1));
}

/** fleet-mirror's ServiceImports in the local cluster; none while the MCS CRDs are not installed there. */
async function listImports(objects: CustomObjectsApi, labelSelector: string): Promise<ServiceImportItem[]> {
  try {
    const list = (await objects.listClusterCustomObject({
      group: MCS_GROUP,
      version: MCS_VERSION,
      plural: SERVICE_IMPORTS.plural,
      labelSelector,
    })) as { items?: ServiceImportItem[] };
    return list.items ?? [];
  } catch (error) {
    if ((error as { code?: number }).code === 404) return [];
    throw error;
  }
}

/**
 * The mirror rows of the local cluster now: from fleet-mirror's EndpointSlices (SPEC §9,
 * the default; an endpoint is ready unless its `ready` condition is false), else from
 * their Endpoints (`--endpoints-api=endpoints`).
 */
export async function localMirrors(
  local: CoreV1Api,
  discovery: DiscoveryV1Api,
  objects: CustomObjectsApi,
): Promise<MirrorRow[]> {
  const labelSelector = `${MIRRORED_SERVICE}=true`;
  const [services, endpoints, slices, imports] = await Promise.all([
    local.listServiceForAllNamespaces({ labelSelector }),
    local.listEndpointsForAllNamespaces({ labelSelector }),
    discovery.listEndpointSliceForAllNamespaces({
      labelSelector: `${labelSelector},${MANAGED_BY_LABEL}=${MANAGED_BY_FLEET_MIRROR}`,
    }),
    listImports(objects, labelSelector),
  ]);
  return mirrorRows({ services: services.items, endpoints: endpoints.items, slices: slices.items, imports });
}
