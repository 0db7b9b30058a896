/**
 * Priority tiers of a fleet-wide Service across shards (SPEC §14 "Sharded"), the pure
 * parts: what a part states of its member's ready endpoints, the owner's tiers from
 * hosted members and parts, a host's standing from the Service's stated cutoff, and two
 * replicas over a simulated local API: the owner decides, the other host follows, a
 * switch writes only the parts whose standing changes and the Service, a settled world
 * (or a restart over it) writes nothing, and a missing or stale decision never leaves
 * the Service without serving endpoints.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { FederatedMember } from "../../src/core/federated.ts";
import { FEDERATED_PORTS, portsAnnotation } from "../../src/core/federated-shards.ts";
import type { EndpointSlice, Endpoints } from "../../src/core/objects.ts";
import {
  followTiers,
  hostedStanding,
  partReady,
  READY_ANNOTATION,
  shardedTiers,
  statedReady,
} from "../../src/core/sharded-tiers.ts";
import { SERVING_PRIORITY_ANNOTATION, STANDBY_ANNOTATION } from "../../src/core/tiers.ts";
import { HTTP, member, type Replica, replicas, sliceOf, World, type WorldTiers } from "../helpers/federated-world.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const PRIORITIES: Record<string, number> = { east: 10, west: 20, north: 30 };
const priorityOf = (cluster: string): number => PRIORITIES[cluster] ?? 100;

function part(cluster: string, ready: boolean[], annotations: Record<string, string> = {}): EndpointSlice {
  return deepFreeze({
    metadata: {
      name: `web-federated-${cluster}-ipv4`,
      namespace: "shop",
      labels: { "mirror.linkerd.io/cluster-name": cluster },
      annotations: { [FEDERATED_PORTS]: portsAnnotation(HTTP), ...annotations },
    },
    addressType: "IPv4",
    endpoints: ready.map((r, i) => ({ addresses: [`198.18.0.${i + 1}`], conditions: { ready: r } })),
  });
}

describe("what a sharded part states of its member's ready endpoints", () => {
  it("a serving part shows them; a standing-by or announced part states them; an unsharded standby part counts none", () => {
    assert.equal(partReady([part("east", [true, false, true])], "east"), 2);
    const standby = part("east", [false, false], { [STANDBY_ANNOTATION]: "true", [READY_ANNOTATION]: "2" });
    assert.equal(partReady([standby], "east"), 2);
    assert.equal(partReady([part("east", [], { [READY_ANNOTATION]: "1" })], "east"), 1, "an announcement");
    assert.equal(partReady([part("east", [false], { [STANDBY_ANNOTATION]: "true" })], "east"), 0);
    assert.equal(partReady([part("west", [true])], "east"), 0, "another cluster's part");
    assert.equal(partReady([part("east", [true], { [READY_ANNOTATION]: "x" })], "east"), 1, "unreadable: as shown");
  });

  it("a part states its count standing by or announced, and not when its endpoints show it or it is excluded", () => {
    const east = member("east", ["a", "b"], HTTP, ["b"]);
    const [standing] = hostedStanding([east], 0, priorityOf);
    assert.equal(statedReady(standing as FederatedMember, false, false), 1);
    assert.equal(statedReady(east, false, true), 1, "announced");
    assert.equal(statedReady(east, false, false), undefined, "serving");
    assert.equal(statedReady(standing as FederatedMember, true, false), undefined, "excluded for its ports");
  });
});

describe("the owner's tiers from hosted members and parts", () => {
  it("counts a hosted member's own state and another host's member as its part states it", () => {
    const east = member("east", ["a"]);
    // West's part stands by: all not ready, stating 2 ready endpoints.
    const west = member("west", ["c", "d"], HTTP, ["c", "d"]);
    const slices = [part("west", [false, false], { [STANDBY_ANNOTATION]: "true", [READY_ANNOTATION]: "2" })];
    const tiers = shardedTiers({
      parts: [east, west],
      kept: ["north"],
      slices: [...slices, part("north", [true])],
      hosts: (c) => c === "east",
      priorityOf,
    });
    assert.deepEqual(tiers, [
      { priority: 10, ready: 1 },
      { priority: 20, ready: 2 },
      { priority: 30, ready: 1 },
    ]);
  });
});

describe("a host's standing from the Service's stated cutoff", () => {
  const SETTINGS = { minReady: 1, failbackDelayMs: 30_000 };
  const tiers = (east: number, west: number) => [
    { priority: 10, ready: east },
    { priority: 20, ready: west },
  ];
  const follow = (stated: number | undefined, observed: ReturnType<typeof tiers> | undefined, now = 0) =>
    followTiers(SETTINGS, undefined, { now, tiers: observed, stated }).cutoff;

  it("follows the stated cutoff while its tiers hold enough ready endpoints", () => {
    assert.equal(follow(10, tiers(1, 1)), 10);
    assert.equal(follow(20, tiers(1, 1)), 20, "a host does not fail back below what is stated");
  });

  it("without a stated cutoff, or without tiers, every member serves", () => {
    assert.equal(follow(undefined, tiers(1, 1)), undefined);
    assert.equal(follow(10, undefined), undefined);
    const hosted = [member("west", ["c"])];
    assert.deepEqual(hostedStanding(hosted, undefined, priorityOf), hosted);
  });

  it("serves from the smallest prefix that reaches the threshold when the stated tiers fall short (the owner's failover, at once)", () => {
    assert.equal(follow(10, tiers(0, 1)), 20);
    assert.equal(follow(10, tiers(0, 0)), 20, "none reaches: every tier");
    assert.equal(follow(5, tiers(1, 1)), 10, "a stated tier that has gone: the next serves");
    assert.equal(follow(30, tiers(0, 0)), 30, "never fewer tiers than stated");
  });

  it("returns to the stated cutoff only after it held for the failback delay; a new statement starts over", () => {
    const short = followTiers(SETTINGS, undefined, { now: 0, tiers: tiers(0, 1), stated: 10 });
    assert.equal(short.cutoff, 20);
    const back = followTiers(SETTINGS, short.followed, { now: 1_000, tiers: tiers(1, 1), stated: 10 });
    assert.deepEqual([back.cutoff, back.wake], [20, 31_000]);
    const flap = followTiers(SETTINGS, back.followed, { now: 2_000, tiers: tiers(0, 1), stated: 10 });
    const again = followTiers(SETTINGS, flap.followed, { now: 3_000, tiers: tiers(1, 1), stated: 10 });
    assert.equal(followTiers(SETTINGS, again.followed, { now: 31_000, tiers: tiers(1, 1), stated: 10 }).cutoff, 20);
    assert.equal(followTiers(SETTINGS, again.followed, { now: 33_000, tiers: tiers(1, 1), stated: 10 }).cutoff, 10);
    // The owner states 20 (its failover): followed at once, whatever was remembered.
    assert.equal(followTiers(SETTINGS, again.followed, { now: 4_000, tiers: tiers(1, 1), stated: 20 }).cutoff, 20);
  });
});

// ---------------------------------------------------------------------------------
// Two replicas over one simulated local API

const DELAY_MS = 30_000;

function tieredWorld(): { world: World; clock: WorldTiers } {
  const clock: WorldTiers = { priorities: PRIORITIES, settings: { minReady: 1, failbackDelayMs: DELAY_MS }, now: 0 };
  return { world: new World("endpointslices", clock), clock };
}

/** The standing and readiness of `cluster`'s part. */
function partState(world: World, cluster: string) {
  const slice = sliceOf(world, `web-federated-${cluster}-ipv4`);
  return {
    standby: slice?.metadata.annotations?.[STANDBY_ANNOTATION] === "true",
    ready: slice?.metadata.annotations?.[READY_ANNOTATION],
    endpoints: (slice?.endpoints ?? []).map((e) => `${e.addresses.join()}:${e.conditions?.ready}`),
  };
}

const stated = (world: World) =>
  world.objects.get("Service/web-federated")?.object.metadata.annotations?.[SERVING_PRIORITY_ANNOTATION];

/** Writes since `from` as `replica verb name`. */
const writesSince = (world: World, from: number) =>
  world.writes.slice(from).map(({ replica, action }) => `${replica} ${action.verb} ${action.name}`);

describe("two replicas, one fleet-wide Service with tiers (simulated local API)", () => {
  const east = member("east", ["198.18.1.1"]);
  const west = member("west", ["198.18.2.1"]);
  const eastDead = member("east", ["198.18.1.1"], HTTP, ["198.18.1.1"]);

  it("the owner decides and the other host stands its member by, whichever hosts which tier, its part stating its ready count", () => {
    for (const [ownerHosts, otherHosts] of [
      [["east"], ["west"]],
      [["west"], ["east"]],
      [[], ["east", "west"]],
    ] as const)
      for (const reverse of [false, true]) {
        const { world } = tieredWorld();
        const rs = replicas([...ownerHosts], [...otherHosts], [east, west]);
        world.settle(reverse ? [...rs].reverse() : rs);
        const where = `owner hosts ${ownerHosts.join() || "nothing"}${reverse ? ", other moves first" : ""}`;
        assert.equal(stated(world), "10", where);
        assert.deepEqual(partState(world, "east"), {
          standby: false,
          ready: undefined,
          endpoints: ["198.18.1.1:true"],
        });
        assert.deepEqual(
          partState(world, "west"),
          { standby: true, ready: "1", endpoints: ["198.18.2.1:false"] },
          where,
        );
      }
  });

  it("fails over at once and back after the delay; each switch writes the Service and the parts whose standing changes", () => {
    for (const [ownerHosts, otherHosts] of [
      [["west"], ["east"]],
      [["east"], ["west"]],
    ] as const) {
      const { world, clock } = tieredWorld();
      const rs = replicas([...ownerHosts], [...otherHosts], [east, west]);
      const eastHost = (rs.find((r) => r.hosts.has("east")) ?? rs[0]) as Replica;
      world.settle(rs);
      // East's gateway dies: its own part turns not ready (a health write), west serves, the Service states 20.
      eastHost.members = [eastDead];
      const before = world.writes.length;
      world.settle(rs);
      assert.equal(stated(world), "20");
      assert.deepEqual(partState(world, "west"), { standby: false, ready: undefined, endpoints: ["198.18.2.1:true"] });
      assert.deepEqual(
        writesSince(world, before)
          .map((w) => w.split(" ").slice(1).join(" "))
          .sort(),
        ["update web-federated", "update web-federated-east-ipv4", "update web-federated-west-ipv4"],
        "one write each: east's health, west's standing, the Service",
      );
      // East revives: it serves beside west until the delay has passed, then west stands by again.
      eastHost.members = [east];
      clock.now += 1_000;
      world.settle(rs);
      assert.equal(stated(world), "20", "no failback before the delay");
      assert.deepEqual(partState(world, "east").endpoints, ["198.18.1.1:true"]);
      clock.now += DELAY_MS;
      const failback = world.writes.length;
      world.settle(rs);
      assert.equal(stated(world), "10");
      assert.deepEqual(partState(world, "west"), { standby: true, ready: "1", endpoints: ["198.18.2.1:false"] });
      assert.deepEqual(
        writesSince(world, failback)
          .map((w) => w.split(" ").slice(1).join(" "))
          .sort(),
        ["update web-federated", "update web-federated-west-ipv4"],
      );
    }
  });

  it("while the owner is missing a host fails over on its own when the stated tiers fall short, and returns only after the failback delay", () => {
    const { world, clock } = tieredWorld();
    const rs = replicas(["west"], ["east"], [east, west]);
    const other = rs[1] as Replica;
    world.settle(rs);
    // The owner (hosting west) is gone: its shard not yet taken. East's gateway dies.
    other.members = [eastDead];
    world.settle([other]);
    assert.equal(stated(world), "10", "no decision without the owner");
    // West's new host (the owner's shard still missing) follows the Service, but the
    // stated tier is observed short: west serves rather than nothing.
    const westHost: Replica = { name: "c", owner: false, hosts: new Set(["west"]), members: [west] };
    world.settle([other, westHost]);
    assert.deepEqual(partState(world, "west"), { standby: false, ready: undefined, endpoints: ["198.18.2.1:true"] });
    // East revives: west's host returns to the stated cutoff only with the owner's patience.
    other.members = [east];
    clock.now += 1_000;
    world.settle([other, westHost]);
    assert.equal(partState(world, "west").standby, false, "not before the failback delay");
    clock.now += DELAY_MS;
    world.settle([other, westHost]);
    assert.equal(partState(world, "west").standby, true, "back to the stated cutoff after it");
    // A new owner takes the stated cutoff as its start: east has held for a whole delay only from now on.
    const newOwner: Replica = { name: "a2", owner: true, hosts: new Set(), members: [] };
    world.settle([newOwner, other, westHost]);
    assert.equal(stated(world), "10", "the stated cutoff still holds: nothing to switch");
    assert.equal(newOwner.tierState?.cutoff, 10);
  });

  it("in both mode the owner's Endpoints object holds the serving tier ready and the standby tier not ready", () => {
    for (const [ownerHosts, otherHosts] of [
      [["west"], ["east"]],
      [["east"], ["west"]],
    ] as const) {
      const world = new World("both", tieredWorld().clock);
      world.settle(replicas([...ownerHosts], [...otherHosts], [east, west]));
      const endpoints = world.objects.get("Endpoints/web-federated")?.object as Endpoints | undefined;
      const ips = (key: "addresses" | "notReadyAddresses") =>
        (endpoints?.subsets ?? []).flatMap((s) => (s[key] ?? []).map((a) => a.ip)).sort();
      assert.deepEqual([ips("addresses"), ips("notReadyAddresses")], [["198.18.1.1"], ["198.18.2.1"]]);
    }
  });

  it("over settled tiers neither replica plans a write, nor does a restart of both (the owner's state starts from the Service)", () => {
    const { world } = tieredWorld();
    const rs = replicas(["west"], ["east"], [east, west]);
    world.settle(rs);
    for (const replica of rs) assert.deepEqual(world.plan(replica).actions, []);
    const before = world.writes.length;
    world.settle(rs.map((r) => ({ ...r, tierState: undefined })));
    assert.deepEqual(writesSince(world, before), []);
  });
});
