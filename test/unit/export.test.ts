import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ClusterSettings, desiredMirrors } from "../../src/core/desired.ts";
import { DEFAULT_GATEWAY, type ExportSettings, exportOf } from "../../src/core/export.ts";
import type { Service } from "../../src/core/objects.ts";
import { deepFreeze } from "../helpers/freeze.ts";

const selector = { key: "mirror.linkerd.io/exported", value: "true" } as const;
const settings: ExportSettings = deepFreeze({
  defaultGateway: { name: "edge", namespace: "mesh" },
  exportSelector: selector,
});

function service(labels: Record<string, string>, annotations: Record<string, string> = {}): Service {
  return deepFreeze({
    metadata: { name: "web", namespace: "shop", labels, annotations },
    spec: { ports: [{ name: "http", protocol: "TCP", port: 80 }] },
  });
}

const ANNOTATED = { "mirror.linkerd.io/gateway-name": "gw", "mirror.linkerd.io/gateway-ns": "mc" };

describe("exportOf (SPEC §2, §12)", () => {
  it("exports a Service labelled with the selector through the cluster's default gateway", () => {
    assert.deepEqual(exportOf(settings, service({ "mirror.linkerd.io/exported": "true" })), {
      kind: "exported",
      mode: "label",
      gateway: { name: "edge", namespace: "mesh" },
    });
  });

  it("lets the §2 annotations win over the label and its default gateway", () => {
    assert.deepEqual(exportOf(settings, service({ "mirror.linkerd.io/exported": "true" }, ANNOTATED)), {
      kind: "exported",
      mode: "annotation",
      gateway: { name: "gw", namespace: "mc" },
    });
    // Annotations export even where the label declines: the label selects, it does not veto.
    assert.equal(exportOf(settings, service({ "mirror.linkerd.io/exported": "false" }, ANNOTATED)).kind, "exported");
  });

  it("does not export with one §2 annotation alone, even with a default gateway", () => {
    const one = { "mirror.linkerd.io/gateway-name": "gw" };
    assert.deepEqual(exportOf(settings, service({}, one)), { kind: "not-exported" });
  });

  it("counts explicit negatives as declined, not as problems", () => {
    for (const value of ["false", "False", "no", "0", "off"])
      assert.deepEqual(exportOf(settings, service({ "mirror.linkerd.io/exported": value })), {
        kind: "declined",
        value,
      });
  });

  it("reports values that only look like the selector's (case, yes/1/on)", () => {
    for (const value of ["True", "TRUE", "yes", "1", "on"]) {
      const decision = exportOf(settings, service({ "mirror.linkerd.io/exported": value }));
      assert.equal(decision.kind, "label-value", value);
      if (decision.kind === "label-value") {
        assert.match(decision.message, new RegExp(`"${value}"`));
        assert.match(decision.message, /only "true" exports/);
      }
    }
  });

  it("ignores other values of a custom selector, and everything when label export is off", () => {
    const custom: ExportSettings = {
      defaultGateway: DEFAULT_GATEWAY,
      exportSelector: { key: "team", value: "payments" },
    };
    assert.deepEqual(exportOf(custom, service({ team: "billing" })), { kind: "not-exported" });
    assert.equal(exportOf(custom, service({ team: "Payments" })).kind, "label-value");
    assert.equal(exportOf(custom, service({ team: "payments" })).kind, "exported");
    const off: ExportSettings = { defaultGateway: DEFAULT_GATEWAY };
    assert.deepEqual(exportOf(off, service({ "mirror.linkerd.io/exported": "true" })), { kind: "not-exported" });
  });
});

describe("desiredMirrors with label export", () => {
  const east: ClusterSettings = deepFreeze({
    name: "east",
    domain: "cluster.local",
    excludedNamespaces: [],
    ...settings,
  });
  const gateway: Service = deepFreeze({
    metadata: { name: "edge", namespace: "mesh", resourceVersion: "5" },
    spec: { ports: [{ name: "incoming-port", protocol: "TCP", port: 4143 }] },
    status: { loadBalancer: { ingress: [{ ip: "198.18.0.7" }] } },
  });
  const desire = (services: readonly Service[]) => {
    const all = [...services, gateway];
    const byKey = new Map(all.map((s) => [`${s.metadata.namespace}/${s.metadata.name}`, s]));
    return desiredMirrors(
      east,
      all,
      (key) => byKey.get(key),
      () => undefined,
    );
  };

  it("mirrors a labelled Service with the default gateway's labels and addresses", () => {
    const state = desire([service({ "mirror.linkerd.io/exported": "true" })]);
    const mirror = state.mirrors.get("shop/web-east");
    assert.ok(mirror);
    assert.equal(mirror.labels["mirror.linkerd.io/remote-gateway-name"], "edge");
    assert.equal(mirror.labels["mirror.linkerd.io/remote-gateway-ns"], "mesh");
    assert.deepEqual(mirror.addresses, ["198.18.0.7"]);
    assert.deepEqual(mirror.endpointPorts, [{ name: "http", protocol: "TCP", port: 4143 }]);
  });

  it("reports a look-alike value as a problem of that Service, and mirrors nothing for it", () => {
    const state = desire([service({ "mirror.linkerd.io/exported": "True" })]);
    assert.equal(state.mirrors.size, 0);
    assert.deepEqual(
      state.problems.map((p) => [p.remote, p.reason]),
      [["shop/web", "export-label-value"]],
    );
  });

  it("mirrors nothing and reports nothing for a declined Service", () => {
    const state = desire([service({ "mirror.linkerd.io/exported": "false" })]);
    assert.equal(state.mirrors.size, 0);
    assert.equal(state.problems.length, 0);
  });
});
