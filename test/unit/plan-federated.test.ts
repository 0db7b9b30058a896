/**
 * The plan of one fleet-wide Service (SPEC §11): what is written from the reduction, in
 * each endpoints API mode, and what is never touched (a user's object, a kept cluster's
 * part).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type FederatedMember, type Reduction, reduceFederated } from "../../src/core/federated.ts";
import type { EndpointsApi, ObservedObject, WriteAction } from "../../src/core/mirror-kinds.ts";
import type { KubeObject } from "../../src/core/objects.ts";
import { type FederatedPlanInput, federatedSubsets, planFederated } from "../../src/core/plan-federated.ts";
import { webMember } from "../helpers/federated-member.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const FLEET = { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/federated": "true" };

const member = webMember;

function reduce(members: FederatedMember[], unknown: string[] = [], observedClusters: string[] = []): Reduction {
  return reduceFederated({
    members: new Map(members.map((m) => [m.cluster, m])),
    order: ["east", "west"],
    unknown: new Set(unknown),
    registrationKnown: true,
    observedClusters,
  });
}

function input(reduction: Reduction, observed: ObservedObject[] = [], mode: EndpointsApi = "endpointslices") {
  const value: FederatedPlanInput = {
    namespace: "shop",
    name: "web-federated",
    reduction,
    observed,
    endpointsApi: mode,
    namespaceExists: true,
    createNamespaces: true,
    excludedNamespaces: ["kube-system"],
  };
  return value;
}

const bodyOf = (action: WriteAction | undefined): Record<string, unknown> =>
  action && "body" in action ? (action.body as Record<string, unknown>) : {};

/** Applies a plan's creates and updates as the API server would (uid, resourceVersion), for a second plan. */
function applied(actions: readonly WriteAction[], observed: ObservedObject[] = []): ObservedObject[] {
  const out = new Map(observed.map((o) => [`${o.kind}/${o.object.metadata.name}`, o]));
  for (const a of actions) {
    if (a.kind === "Namespace") continue;
    if (a.verb === "delete") out.delete(`${a.kind}/${a.name}`);
    else {
      const body = a.body as KubeObject;
      out.set(`${a.kind}/${a.name}`, {
        kind: a.kind,
        object: { ...body, metadata: { ...body.metadata, uid: `uid-${a.name}`, resourceVersion: "1" } },
      });
    }
  }
  return [...out.values()];
}

describe("planFederated", () => {
  it("a new fleet-wide Service is created first, with its labels, ports and sorted clusters annotation", () => {
    const plan = planFederated(input(reduce([member("west", ["198.18.2.1"]), member("east", ["198.18.1.1"])])));
    assert.deepEqual(
      plan.actions.map((a) => `${a.verb} ${a.kind}`),
      ["create Service"],
    );
    const metadata = bodyOf(plan.actions[0])["metadata"] as KubeObject["metadata"];
    assert.deepEqual(metadata.labels, FLEET);
    assert.deepEqual(metadata.annotations, { "mirror.linkerd.io/federated-clusters": "east,west" });
  });

  it("once the Service exists, one slice per member cluster, labelled with it, dead addresses not ready", () => {
    const reduction = reduce([
      member("east", ["198.18.1.1", "198.18.1.2"], ["198.18.1.2"]),
      member("west", ["fd00::1"]),
    ]);
    const first = planFederated(input(reduction));
    const second = planFederated(input(reduction, applied(first.actions)));
    assert.deepEqual(
      second.actions.map((a) => `${a.verb} ${a.kind} ${a.kind === "Namespace" ? "" : a.name}`),
      ["create EndpointSlice web-federated-east-ipv4", "create EndpointSlice web-federated-west-ipv6"],
    );
    const east = bodyOf(second.actions[0]);
    assert.deepEqual((east["metadata"] as KubeObject["metadata"]).labels, {
      ...FLEET,
      "mirror.linkerd.io/cluster-name": "east",
      "kubernetes.io/service-name": "web-federated",
      "endpointslice.kubernetes.io/managed-by": "fleet-mirror",
    });
    assert.deepEqual(
      (east["endpoints"] as { addresses: string[]; conditions: { ready: boolean } }[]).map((e) => [
        e.addresses[0],
        e.conditions.ready,
      ]),
      [
        ["198.18.1.1", true],
        ["198.18.1.2", false],
      ],
    );
    // And then nothing: the objects match.
    assert.deepEqual(planFederated(input(reduction, applied(second.actions, applied(first.actions)))).actions, []);
  });

  it("a user's Service under the name blocks everything and is never planned on", () => {
    const users: ObservedObject = {
      kind: "Service",
      object: deepFreeze({ metadata: { name: "web-federated", namespace: "shop", uid: "u", labels: { app: "x" } } }),
    };
    const plan = planFederated(input(reduce([member("east", ["198.18.1.1"])]), [users]));
    assert.equal(plan.blocked?.reason, "user-owned");
    assert.deepEqual(plan.actions, []);
  });

  it("a mirror of a cluster under the name (not fleet-wide) blocks as well", () => {
    const mirror: ObservedObject = {
      kind: "Service",
      object: deepFreeze({
        metadata: {
          name: "web-federated",
          namespace: "shop",
          labels: { "mirror.linkerd.io/mirrored-service": "true", "mirror.linkerd.io/cluster-name": "federated" },
        },
      }),
    };
    assert.equal(
      planFederated(input(reduce([member("east", ["198.18.1.1"])]), [mirror])).blocked?.reason,
      "user-owned",
    );
  });

  it("the part of a cluster that left is deleted; the part of an unknown cluster is kept as observed", () => {
    const both = reduce([member("east", ["198.18.1.1"]), member("west", ["198.18.2.1"])]);
    const world = applied(
      planFederated(input(both, applied(planFederated(input(both)).actions))).actions,
      applied(planFederated(input(both)).actions),
    );
    const westGone = planFederated(input(reduce([member("east", ["198.18.1.1"])], [], ["east", "west"]), world));
    assert.deepEqual(
      westGone.actions.map((a) => `${a.verb} ${a.kind} ${a.kind === "Namespace" ? "" : a.name}`),
      ["update Service web-federated", "delete EndpointSlice web-federated-west-ipv4"],
    );
    const westUnknown = planFederated(
      input(reduce([member("east", ["198.18.1.1"])], ["west"], ["east", "west"]), world),
    );
    assert.deepEqual(westUnknown.actions, []);
  });

  it("delete removes every fleet-wide object, the Service last, with uid preconditions", () => {
    const both = reduce([member("east", ["198.18.1.1"])]);
    const world = applied(
      planFederated(input(both, applied(planFederated(input(both)).actions))).actions,
      applied(planFederated(input(both)).actions),
    );
    const plan = planFederated(input({ kind: "delete" }, world));
    assert.deepEqual(
      plan.actions.map(
        (a) => `${a.verb} ${a.kind} ${a.kind === "Namespace" ? "" : a.name} ${a.verb === "delete" ? a.uid : ""}`,
      ),
      [
        "delete EndpointSlice web-federated-east-ipv4 uid-web-federated-east-ipv4",
        "delete Service web-federated uid-web-federated",
      ],
    );
    assert.deepEqual(planFederated(input({ kind: "wait", kept: [] }, world)).actions, []);
  });

  it("endpoints mode: one Endpoints object, a subset per member cluster; it waits while a cluster is unknown", () => {
    const reduction = reduce([member("east", ["198.18.1.1"], ["198.18.1.1"]), member("west", ["198.18.2.1"])]);
    const plan = planFederated(input(reduction, [], "endpoints"));
    assert.deepEqual(
      plan.actions.map((a) => `${a.verb} ${a.kind}`),
      ["create Service", "create Endpoints"],
    );
    assert.deepEqual(
      bodyOf(plan.actions[1])["subsets"],
      federatedSubsets(reduction.kind === "write" ? reduction.parts : []),
    );
    assert.deepEqual(bodyOf(plan.actions[1])["subsets"], [
      { notReadyAddresses: [{ ip: "198.18.1.1" }], ports: [{ name: "http", port: 4143, protocol: "TCP" }] },
      { addresses: [{ ip: "198.18.2.1" }], ports: [{ name: "http", port: 4143, protocol: "TCP" }] },
    ]);
    // The API server repacks subsets with equal ports into one: still a match.
    const world = applied(plan.actions).map((o) =>
      o.kind === "Endpoints"
        ? {
            ...o,
            object: {
              ...o.object,
              subsets: [
                {
                  addresses: [{ ip: "198.18.2.1" }],
                  notReadyAddresses: [{ ip: "198.18.1.1" }],
                  ports: [{ name: "http", port: 4143, protocol: "TCP" }],
                },
              ],
            } as KubeObject,
          }
        : o,
    );
    assert.deepEqual(planFederated(input(reduction, world, "endpoints")).actions, []);
    const unknownWest = reduce([member("east", ["198.18.1.9"])], ["west"], ["east", "west"]);
    assert.deepEqual(planFederated(input(unknownWest, world, "endpoints")).actions, []);
  });
});
