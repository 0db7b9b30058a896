/**
 * What a chaos run reads to judge the controller: the remote clusters as they are
 * (Services, EndpointSlices, ServiceExports), the registrations in registration order
 * (the credentials Secrets), and the local objects; then the oracles' diff (oracle.ts
 * for mirrors, oracle-shared.ts for fleet-wide Services and MCS imports).
 */
import {
  type CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  type V1EndpointSlice,
  type V1Secret,
} from "@kubernetes/client-node";
import { CONTROLLER_NAMESPACE, type Fleet } from "../helpers/fleet.ts";
import { actualMirrors, diffMirrors, expectedMirrors } from "./oracle.ts";
import type { RemoteCluster, RemoteServiceExport } from "./oracle-common.ts";
import { actualShared, diffShared, expectedShared, type LocalSharedObject } from "./oracle-shared.ts";
import { retrying } from "./world.ts";

const MIRROR_SELECTOR = "mirror.linkerd.io/mirrored-service=true";
const MCS = { group: "multicluster.x-k8s.io", version: "v1alpha1" } as const;

/** A cluster name registered against a remote API server (mirrors are `<service>-<name>`). */
export interface Registration {
  readonly name: string;
  readonly remote: string;
}

export interface Observation {
  readonly fleet: Fleet;
  readonly remotes: readonly string[];
  readonly registrations: readonly Registration[];
  /** The remotes and the local cluster serve the MCS API (its CRDs are installed). */
  readonly mcs: boolean;
  readonly shards: number;
}

export interface Diff {
  readonly lines: string[];
  readonly mirrors: number;
  readonly notReady: number;
  /** Fleet-wide Services and imports the oracle expects. */
  readonly shared: number;
}

/** The registered clusters as the oracles take them: in registration order, with what each remote holds. */
export async function remoteState(o: Observation): Promise<RemoteCluster[]> {
  const held = new Map(
    await Promise.all(
      o.remotes.map(async (remote) => {
        const api = o.fleet.api(remote);
        const [services, slices, exports] = await Promise.all([
          retrying(`list ${remote}`, () => api.listServiceForAllNamespaces()),
          retrying(`list ${remote} slices`, () =>
            o.fleet.kubeConfig(remote).makeApiClient(DiscoveryV1Api).listEndpointSliceForAllNamespaces(),
          ),
          o.mcs ? retrying(`list ${remote} ServiceExports`, () => listCustom(o.fleet, remote, "serviceexports")) : [],
        ]);
        return [remote, { services: services.items, slices: slices.items as V1EndpointSlice[], exports }] as const;
      }),
    ),
  );
  const secrets = await retrying("list Secrets", () =>
    o.fleet.local.listNamespacedSecret({ namespace: CONTROLLER_NAMESPACE }),
  );
  const order = registrationOrder(secrets.items);
  const registrations = [...o.registrations].sort((a, b) => rank(order, a.name) - rank(order, b.name));
  return registrations.map(({ name, remote }) => {
    const secret = secrets.items.find((s) => s.metadata?.annotations?.["mirror.linkerd.io/cluster-name"] === name);
    const gwName = secret?.metadata?.annotations?.["mirror.linkerd.io/gateway-name"];
    const gwNs = secret?.metadata?.annotations?.["mirror.linkerd.io/gateway-ns"];
    const state = held.get(remote);
    return {
      name,
      domain: "cluster.local",
      services: state?.services ?? [],
      endpointSlices: state?.slices ?? [],
      ...(o.mcs ? { serviceExports: (state?.exports ?? []) as RemoteServiceExport[] } : {}),
      defaultGateway: { name: gwName ?? "linkerd-gateway", namespace: gwNs ?? "linkerd-multicluster" },
    };
  });
}

/** Cluster names in registration order (SPEC §11): the Secrets' creation time, then their name. */
function registrationOrder(secrets: readonly V1Secret[]): string[] {
  return [...secrets]
    .filter((s) => s.type === "mirror.linkerd.io/remote-kubeconfig")
    .sort((a, b) => {
      const ta = new Date(a.metadata?.creationTimestamp ?? 0).getTime();
      const tb = new Date(b.metadata?.creationTimestamp ?? 0).getTime();
      return ta !== tb ? ta - tb : (a.metadata?.name ?? "") < (b.metadata?.name ?? "") ? -1 : 1;
    })
    .map((s) => s.metadata?.annotations?.["mirror.linkerd.io/cluster-name"] ?? "");
}

function rank(order: readonly string[], name: string): number {
  const i = order.indexOf(name);
  return i < 0 ? order.length : i;
}

async function listCustom(fleet: Fleet, cluster: string, plural: string): Promise<LocalSharedObject[]> {
  const list = (await fleet
    .kubeConfig(cluster)
    .makeApiClient(CustomObjectsApi)
    .listClusterCustomObject({ group: MCS.group, version: MCS.version, plural })) as { items?: LocalSharedObject[] };
  return list.items ?? [];
}

/** The oracles' diff against the local state now (no lines: equal). */
export async function diffWorld(
  o: Observation,
  options: { readonly userHeld: ReadonlySet<string>; readonly deadAddresses: ReadonlySet<string> },
): Promise<Diff> {
  const local: CoreV1Api = o.fleet.local;
  const [remotes, services, endpoints, imports] = await Promise.all([
    remoteState(o),
    retrying("list local services", () => local.listServiceForAllNamespaces({ labelSelector: MIRROR_SELECTOR })),
    retrying("list local endpoints", () => local.listEndpointsForAllNamespaces({ labelSelector: MIRROR_SELECTOR })),
    o.mcs ? retrying("list local ServiceImports", () => listCustom(o.fleet, "local", "serviceimports")) : [],
  ]);
  const localClusterIPs = new Map<string, string>();
  for (const s of services.items) {
    const ip = s.spec?.clusterIP;
    if (ip && ip !== "None") localClusterIPs.set(`${s.metadata?.namespace}/${s.metadata?.name}`, ip);
  }
  const common = { deadAddresses: options.deadAddresses, shards: o.shards, localClusterIPs };
  const expected = expectedMirrors(remotes, { ...common, userHeld: options.userHeld });
  const expectedFleet = expectedShared(remotes, { ...common, localMcs: o.mcs });
  const ours = (items: readonly LocalSharedObject[]) =>
    items.filter((i) => i.metadata?.labels?.["mirror.linkerd.io/mirrored-service"] === "true");
  // Endpoints the oracle expects not ready: how much of gateway health the check covered.
  let notReady = 0;
  for (const mirror of expected.values())
    for (const subset of mirror.endpoints?.subsets ?? [])
      notReady += subset.addresses.filter((a) => a.startsWith("notReady:")).length;
  for (const shared of expectedFleet.values())
    notReady += (shared.endpoints?.addresses ?? []).filter((a) => a.includes("|false|")).length;
  return {
    lines: [
      ...diffMirrors(expected, actualMirrors(services.items, endpoints.items)),
      ...diffShared(
        expectedFleet,
        actualShared(services.items as LocalSharedObject[], endpoints.items as LocalSharedObject[], ours(imports)),
      ),
    ],
    mirrors: expected.size,
    notReady,
    shared: expectedFleet.size,
  };
}
