import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { WriteAction } from "../../src/core/mirror-kinds.ts";
import { writeStages } from "../../src/core/write-stages.ts";

const ns = "shop";
const slice = (verb: "create" | "update", name: string): WriteAction => ({
  verb,
  kind: "EndpointSlice",
  namespace: ns,
  name,
  body: {},
});
const service = (verb: "create" | "update", name = "web-federated"): WriteAction => ({
  verb,
  kind: "Service",
  namespace: ns,
  name,
  body: {},
});
const remove = (kind: "EndpointSlice" | "Service", name: string): WriteAction => ({
  verb: "delete",
  kind,
  namespace: ns,
  name,
  uid: "u",
  cluster: "east",
});
const namespace: WriteAction = { verb: "create", kind: "Namespace", name: ns, body: {} };
const names = (stages: WriteAction[][]) => stages.map((stage) => stage.map((a) => `${a.verb} ${a.kind} ${a.name}`));

describe("writeStages", () => {
  it("sends a tier switch's part writes together and the Service after them", () => {
    const actions = [
      slice("update", "web-federated-near-9-ipv4"),
      slice("update", "web-federated-mid-0-ipv4"),
      slice("update", "web-federated-mid-1-ipv4"),
      service("update"),
    ];
    assert.deepEqual(names(writeStages(actions)), [
      [
        "update EndpointSlice web-federated-near-9-ipv4",
        "update EndpointSlice web-federated-mid-0-ipv4",
        "update EndpointSlice web-federated-mid-1-ipv4",
      ],
      ["update Service web-federated"],
    ]);
  });

  it("keeps a Namespace and a new Service ahead of the slices, and deletes after them, each alone", () => {
    const actions = [
      namespace,
      service("create"),
      slice("create", "web-federated-east-ipv4"),
      slice("create", "web-federated-west-ipv4"),
      remove("EndpointSlice", "web-federated-gone-ipv4"),
      remove("EndpointSlice", "web-federated-left-ipv4"),
    ];
    assert.deepEqual(names(writeStages(actions)), [
      [`create Namespace ${ns}`],
      ["create Service web-federated"],
      ["create EndpointSlice web-federated-east-ipv4", "create EndpointSlice web-federated-west-ipv4"],
      ["delete EndpointSlice web-federated-gone-ipv4"],
      ["delete EndpointSlice web-federated-left-ipv4"],
    ]);
  });

  it("never puts two writes of one slice in a stage, nor slices on either side of another write together", () => {
    const actions = [
      slice("update", "a-ipv4"),
      slice("update", "a-ipv4"),
      slice("update", "b-ipv4"),
      service("update", "a"),
      slice("update", "c-ipv4"),
    ];
    assert.deepEqual(names(writeStages(actions)), [
      ["update EndpointSlice a-ipv4"],
      ["update EndpointSlice a-ipv4", "update EndpointSlice b-ipv4"],
      ["update Service a"],
      ["update EndpointSlice c-ipv4"],
    ]);
  });

  it("keeps every action, in the plan's order", () => {
    const actions = [
      namespace,
      slice("update", "x-ipv4"),
      slice("create", "x-ipv6"),
      service("update", "x"),
      remove("EndpointSlice", "y-ipv4"),
      slice("update", "z-ipv4"),
      remove("Service", "x"),
    ];
    assert.deepEqual(writeStages(actions).flat(), actions);
    assert.deepEqual(writeStages([]), []);
  });
});
