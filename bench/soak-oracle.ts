/**
 * The soak's end-state check: the chaos oracle (test/chaos/oracle.ts, written from the
 * SPEC alone) against the local mirrors, and the uids of the mirrors of Services
 * exported throughout. The soak runs the default `--endpoints-api endpointslices`, the
 * oracle describes Endpoints (SPEC §3): fleet-mirror's slices of a mirror are read as
 * the one Endpoints object they stand for (SPEC §9: the same labels but the slices' own
 * two, the same annotations, each endpoint ready or not).
 */
import { DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import { actualMirrors, diffMirrors, expectedMirrors, type LocalEndpoints } from "../test/chaos/oracle.ts";
import type { Fleet } from "../test/helpers/fleet.ts";
import { MIRROR_SELECTOR } from "./harness.ts";
import { SOAK_NAMESPACE, type SoakRemote, type SoakShape, stableName } from "./soak-world.ts";

const SERVICE_NAME = "kubernetes.io/service-name";
const MANAGED_BY = "endpointslice.kubernetes.io/managed-by";

/** The mirror Service uids of the stable Services (exported throughout), by key. */
export async function stableUids(
  fleet: Fleet,
  remotes: readonly SoakRemote[],
  shape: SoakShape,
): Promise<Map<string, string>> {
  const list = await fleet.local.listNamespacedService({ namespace: SOAK_NAMESPACE, labelSelector: MIRROR_SELECTOR });
  const uids = new Map(list.items.map((s) => [`${SOAK_NAMESPACE}/${s.metadata?.name}`, s.metadata?.uid ?? ""]));
  const out = new Map<string, string>();
  for (const remote of remotes)
    for (const cluster of remote.clusters)
      for (let i = 0; i < shape.stable; i++) {
        const key = `${SOAK_NAMESPACE}/${stableName(i)}-${cluster}`;
        out.set(key, uids.get(key) ?? "missing");
      }
  return out;
}

/** fleet-mirror's slices of each mirror as the Endpoints object the oracle describes. */
export function endpointsFromSlices(slices: readonly V1EndpointSlice[]): LocalEndpoints[] {
  const byMirror = new Map<
    string,
    {
      labels: Record<string, string>;
      annotations: Record<string, string>;
      subsets: NonNullable<LocalEndpoints["subsets"]>[number][];
    }
  >();
  for (const slice of slices) {
    const labels = { ...(slice.metadata?.labels ?? {}) };
    const mirror = labels[SERVICE_NAME];
    if (!mirror || labels[MANAGED_BY] !== "fleet-mirror") continue;
    delete labels[SERVICE_NAME];
    delete labels[MANAGED_BY];
    const key = `${slice.metadata?.namespace}/${mirror}`;
    const entry = byMirror.get(key) ?? { labels, annotations: { ...(slice.metadata?.annotations ?? {}) }, subsets: [] };
    byMirror.set(key, entry);
    const endpoints = slice.endpoints ?? [];
    if (endpoints.length === 0) continue;
    entry.subsets.push({
      addresses: endpoints
        .filter((e) => e.conditions?.ready !== false)
        .flatMap((e) => e.addresses.map((ip) => ({ ip }))),
      notReadyAddresses: endpoints
        .filter((e) => e.conditions?.ready === false)
        .flatMap((e) => e.addresses.map((ip) => ({ ip }))),
      ports: (slice.ports ?? []).map((p) => ({ name: p.name ?? "", protocol: p.protocol ?? "TCP", port: p.port ?? 0 })),
    });
  }
  return [...byMirror].map(([key, e]) => {
    const [namespace = "", name = ""] = key.split("/");
    return { metadata: { namespace, name, labels: e.labels, annotations: e.annotations }, subsets: e.subsets };
  });
}

/** The oracle's diff against the local mirrors now (no lines: equal). */
export async function soakOracleDiff(fleet: Fleet, remotes: readonly SoakRemote[]): Promise<string[]> {
  const held = new Map(
    await Promise.all(
      remotes.map(async (r) => [r.name, (await fleet.api(r.name).listServiceForAllNamespaces()).items] as const),
    ),
  );
  const clusters = remotes.flatMap((r) =>
    r.clusters.map((name) => ({ name, domain: "cluster.local", services: held.get(r.name) ?? [] })),
  );
  const [services, slices] = await Promise.all([
    fleet.local.listServiceForAllNamespaces({ labelSelector: MIRROR_SELECTOR }),
    fleet
      .kubeConfig("local")
      .makeApiClient(DiscoveryV1Api)
      .listEndpointSliceForAllNamespaces({ labelSelector: `${MIRROR_SELECTOR},${MANAGED_BY}=fleet-mirror` }),
  ]);
  return diffMirrors(expectedMirrors(clusters), actualMirrors(services.items, endpointsFromSlices(slices.items)));
}
