/**
 * Fleet-wide Services across shards, simulated (test/unit/federated-shards.test.ts,
 * test/unit/sharded-tiers.test.ts): two replicas over one shared store of objects
 * standing for the local API, each planning from what it observes with the pure
 * functions the writer uses, and each applying only its own writes; with `tiers`, the
 * owner decides the serving tiers and the other host follows the Service (SPEC §14).
 */
import assert from "node:assert/strict";
import type { MirrorServicePort } from "../../src/core/desired.ts";
import { type FederatedMember, type Reduction, reduceFederated } from "../../src/core/federated.ts";
import { annotatedClusters } from "../../src/core/federated-objects.ts";
import { shardedMembers } from "../../src/core/federated-shards.ts";
import type { EndpointsApi, ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { EndpointSlice, KubeObject } from "../../src/core/objects.ts";
import { type FederatedPlan, planFederated } from "../../src/core/plan-federated.ts";
import { type FollowedTiers, followTiers, hostedStanding, shardedTiers } from "../../src/core/sharded-tiers.ts";
import {
  SERVING_PRIORITY_ANNOTATION,
  stepTiers,
  type TierSettings,
  type TierState,
  writtenCutoff,
} from "../../src/core/tiers.ts";
import { deepFreeze } from "./freeze.ts";

export const HTTP: MirrorServicePort[] = [{ name: "http", protocol: "TCP", port: 80 }];
export const ALT: MirrorServicePort[] = [{ name: "http", protocol: "TCP", port: 8080 }];
export const ORDER = ["east", "west", "north"];
/** A Service port's targetPort defaults to its port. */
export const filled = (ports: readonly MirrorServicePort[]): MirrorServicePort[] =>
  ports.map((p) => ({ ...p, targetPort: p.targetPort ?? p.port }));

export function member(cluster: string, addresses: string[], ports = HTTP, notReady: string[] = []): FederatedMember {
  return deepFreeze({
    cluster,
    namespace: "shop",
    name: "web-federated",
    remote: "shop/web",
    ports,
    addresses,
    notReadyAddresses: notReady,
    endpointPorts: ports.map((p) => ({ name: p.name ?? "", protocol: p.protocol, port: 4143 })),
  });
}

// ---------------------------------------------------------------------------------
// Two replicas over one simulated local API

export interface Replica {
  readonly name: string;
  readonly owner: boolean;
  readonly hosts: ReadonlySet<string>;
  members: FederatedMember[];
  /** The owner's serving tiers (its TierBook's state), when the World has tiers. */
  tierState?: TierState | undefined;
  /** Another host's memory of the stated tiers it follows. */
  followed?: FollowedTiers | undefined;
}

/** Priority tiers (SPEC §14): each cluster's priority, the settings, and the clock (ms). */
export interface WorldTiers {
  readonly priorities: Readonly<Record<string, number>>;
  readonly settings: TierSettings;
  now: number;
}

/** The local API as a map `Kind/name` → object, with uids, uid preconditions and the garbage collector. */
export class World {
  readonly mode: EndpointsApi;
  readonly objects = new Map<string, ObservedObject>();
  #uid = 0;
  /** Every write, with the replica that made it. */
  readonly writes: { replica: string; action: WriteAction }[] = [];

  readonly tiers: WorldTiers | undefined;

  constructor(mode: EndpointsApi = "endpointslices", tiers?: WorldTiers) {
    this.mode = mode;
    this.tiers = tiers;
  }

  apply(replica: string, actions: readonly WriteAction[]): void {
    for (const action of actions) {
      if (action.kind === "Namespace") continue;
      this.writes.push({ replica, action });
      const key = `${action.kind}/${action.name}`;
      if (action.verb === "delete") {
        const uid = this.objects.get(key)?.object.metadata.uid;
        if (uid !== action.uid) continue; // precondition failed
        this.objects.delete(key);
        // The garbage collector: slices owned by the deleted Service go with it.
        for (const [k, o] of this.objects) {
          const refs = (o.object.metadata["ownerReferences"] ?? []) as { uid: string }[];
          if (refs.some((r) => r.uid === uid)) this.objects.delete(k);
        }
        continue;
      }
      const body = action.body as KubeObject;
      const previous = this.objects.get(key)?.object.metadata.uid;
      const uid = action.verb === "create" ? `uid-${++this.#uid}` : (previous ?? "");
      this.objects.set(key, { kind: action.kind, object: { ...body, metadata: { ...body.metadata, uid } } });
    }
  }

  /** What one replica plans, from the objects it observes (the whole fleet-wide set). */
  plan(replica: Replica): FederatedPlan {
    const observed = [...this.objects.values()];
    const service = observed.find((o) => o.kind === "Service")?.object;
    const slices = observed.filter((o) => o.kind === "EndpointSlice").map((o) => o.object as EndpointSlice);
    const hosts = (cluster: string): boolean => replica.hosts.has(cluster);
    const { members, unreadable, partClusters } = shardedMembers({
      namespace: "shop",
      name: "web-federated",
      hosted: new Map(replica.members.map((m) => [m.cluster, m])),
      slices,
      hosts,
    });
    const reduction = reduceFederated({
      members,
      order: ORDER,
      unknown: new Set(unreadable),
      registrationKnown: true,
      observedClusters: [...annotatedClusters(service), ...partClusters],
    });
    const { standing, parts, servingPriority } = this.#tiered(replica, reduction, slices, service);
    return planFederated({
      namespace: "shop",
      name: "web-federated",
      reduction: reduction.kind === "write" ? { ...reduction, parts } : reduction,
      ...(servingPriority !== undefined ? { servingPriority } : {}),
      observed,
      endpointsApi: this.mode,
      namespaceExists: true,
      createNamespaces: true,
      excludedNamespaces: [],
      shard: { owner: replica.owner, hosts, members: standing },
    });
  }

  /**
   * The tiers as the writer composes them (SPEC §14 "Sharded"): the owner steps its
   * state over the tiers it sees and writes the cutoff; any other host follows the
   * cutoff the Service states.
   */
  #tiered(replica: Replica, reduction: Reduction, slices: readonly EndpointSlice[], service: KubeObject | undefined) {
    const none = { standing: replica.members, parts: reduction.kind === "write" ? reduction.parts : [] };
    if (!this.tiers || reduction.kind !== "write") return { ...none, servingPriority: undefined };
    const { settings, now } = this.tiers;
    const priorityOf = (cluster: string): number => this.tiers?.priorities[cluster] ?? 100;
    const hosts = (cluster: string): boolean => replica.hosts.has(cluster);
    const tiers = shardedTiers({ parts: reduction.parts, kept: reduction.kept, slices, hosts, priorityOf });
    const stated = writtenCutoff(service?.metadata.annotations?.[SERVING_PRIORITY_ANNOTATION]);
    let cutoff: number | undefined;
    if (replica.owner) {
      const step = tiers
        ? stepTiers(settings, replica.tierState, {
            now,
            tiers,
            ...(replica.tierState === undefined && stated !== undefined ? { written: stated } : {}),
          })
        : { state: undefined };
      replica.tierState = step.state;
      cutoff = step.state?.cutoff;
    } else {
      const following = followTiers(settings, replica.followed, { now, tiers, stated });
      replica.followed = following.followed;
      cutoff = following.cutoff;
    }
    return {
      standing: hostedStanding(replica.members, cutoff, priorityOf),
      parts: hostedStanding(reduction.parts, replica.owner ? cutoff : undefined, priorityOf),
      servingPriority: replica.owner ? cutoff : undefined,
    };
  }

  /** Lets the replicas take turns in `turns` order until a whole round writes nothing; returns the last plans. */
  settle(replicas: readonly Replica[]): Map<string, FederatedPlan> {
    const last = new Map<string, FederatedPlan>();
    for (let round = 0; round < 20; round++) {
      let wrote = false;
      for (const replica of replicas) {
        const plan = this.plan(replica);
        last.set(replica.name, plan);
        if (plan.actions.length > 0) wrote = true;
        this.apply(replica.name, plan.actions);
      }
      if (!wrote) return last;
    }
    throw new Error("the replicas did not converge in 20 rounds");
  }

  /**
   * The objects without their uids, as the API server would store them (a Service
   * port's targetPort defaults to its port), as text for comparing two worlds.
   */
  shape(): string {
    const stored = [...this.objects.entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([key, o]) => {
        const { uid: _uid, ownerReferences, ...metadata } = o.object.metadata as Record<string, unknown>;
        const spec = (o.object as { spec?: { ports?: MirrorServicePort[] } }).spec;
        const withSpec = spec ? { spec: { ...spec, ports: filled(spec.ports ?? []) } } : {};
        return [key, { ...o.object, ...withSpec, metadata: { ...metadata, owned: !!ownerReferences } }];
      });
    return JSON.stringify(stored, null, 1);
  }
}

export const serviceOf = (world: World): KubeObject | undefined => world.objects.get("Service/web-federated")?.object;
/** The Service's ports as the API server stores them. */
export const portsOf = (world: World): unknown =>
  filled((serviceOf(world) as { spec?: { ports?: MirrorServicePort[] } } | undefined)?.spec?.ports ?? []);
export const sliceOf = (world: World, name: string): EndpointSlice | undefined =>
  world.objects.get(`EndpointSlice/${name}`)?.object as EndpointSlice | undefined;

/** No replica wrote an object that is not its own: the Service only its owner, a part only its cluster's host. */
export function assertEachWroteItsOwn(world: World, replicas: readonly Replica[]): void {
  for (const { replica, action } of world.writes) {
    const r = replicas.find((x) => x.name === replica);
    if (action.kind !== "EndpointSlice") assert.ok(r?.owner, `${replica} wrote the ${action.kind} but does not own it`);
    else {
      const cluster = action.name.replace(/^web-federated-/, "").replace(/-ipv[46]$/, "");
      assert.ok(r?.hosts.has(cluster), `${replica} wrote ${action.kind} ${action.name} of a cluster it does not host`);
    }
  }
}

export function replicas(ownerHosts: string[], otherHosts: string[], members: FederatedMember[]): Replica[] {
  return [
    {
      name: "a",
      owner: true,
      hosts: new Set(ownerHosts),
      members: members.filter((m) => ownerHosts.includes(m.cluster)),
    },
    {
      name: "b",
      owner: false,
      hosts: new Set(otherHosts),
      members: members.filter((m) => otherHosts.includes(m.cluster)),
    },
  ];
}
