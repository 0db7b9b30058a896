import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ClusterSettings, desiredMirrorFor, viewGateway } from "../../src/core/desired.ts";
import { exportOf } from "../../src/core/export.ts";
import { isMember } from "../../src/core/federated.ts";
import { type LinkSettings, parseLink } from "../../src/core/link.ts";
import { linkGatewayRef, linkGatewayService, linkProbeSpec } from "../../src/core/link-gateway.ts";
import { excludedKey } from "../../src/core/link-mirror.ts";
import type { Service } from "../../src/core/objects.ts";
import { serviceBody, serviceMatches } from "../../src/core/plan.ts";
import { deepFreeze } from "../helpers/freeze.ts";

function linkSettings(spec: Record<string, unknown> = {}): LinkSettings {
  const parsed = parseLink({
    metadata: { name: "east", namespace: "linkerd-multicluster" },
    spec: {
      targetClusterName: "east",
      targetClusterDomain: "cluster.local",
      clusterCredentialsSecret: "cluster-credentials-east",
      gatewayAddress: "198.51.100.20,198.51.100.21",
      gatewayPort: "4143",
      gatewayIdentity: "gw.identity",
      selector: { matchLabels: { "mirror.linkerd.io/exported": "true" } },
      remoteDiscoverySelector: { matchLabels: { "mirror.linkerd.io/exported": "remote-discovery" } },
      federatedServiceSelector: { matchExpressions: [{ key: "mirror.linkerd.io/federated", operator: "Exists" }] },
      excludedLabels: ["internal.example.com/*", "team"],
      excludedAnnotations: ["note"],
      ...spec,
    },
  });
  assert.equal(parsed.kind, "valid");
  return (parsed as { spec: { settings: LinkSettings } }).spec.settings;
}

function settings(link: LinkSettings): ClusterSettings {
  return deepFreeze({
    name: "east",
    domain: "cluster.local",
    excludedNamespaces: [],
    defaultGateway: linkGatewayRef(link),
    exportSelector: { key: "mirror.linkerd.io/exported", value: "true" },
    link,
  });
}

const service = (labels: Record<string, string>, annotations: Record<string, string> = {}): Service =>
  deepFreeze({
    metadata: { name: "web", namespace: "shop", resourceVersion: "42", labels, annotations },
    spec: { ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }] },
  });

describe("a Link's cluster: what is exported and how it is mirrored (SPEC §15)", () => {
  const link = linkSettings();
  const s = settings(link);
  const gateway = viewGateway(linkGatewayService(link), () => undefined);

  it("exports by the Link's selectors only, never by the §2 annotations or --export-selector", () => {
    assert.equal(exportOf(s, service({ "mirror.linkerd.io/exported": "true" })).kind, "exported");
    assert.equal(exportOf(s, service({ "mirror.linkerd.io/exported": "remote-discovery" })).kind, "exported");
    const annotated = service({}, { "mirror.linkerd.io/gateway-name": "gw", "mirror.linkerd.io/gateway-ns": "mc" });
    assert.equal(exportOf(s, annotated).kind, "not-exported");
    assert.equal(exportOf(settings(linkSettings({ selector: {} })), service({ a: "b" })).kind, "not-exported");
  });

  it("makes fleet-wide members by the Link's federatedServiceSelector (matchExpressions)", () => {
    const selector = link.federatedSelector;
    assert.ok(selector);
    assert.equal(isMember(selector, service({ "mirror.linkerd.io/federated": "member" })), true);
    assert.equal(isMember(selector, service({})), false);
  });

  it("copies the remote's labels and annotations as linkerd does, less the excluded and linkerd's own keys", () => {
    const out = desiredMirrorFor(
      s,
      service(
        {
          "mirror.linkerd.io/exported": "true",
          app: "web",
          team: "a",
          "internal.example.com/owner": "x",
          "internal.example.community/x": "y",
        },
        {
          "config.linkerd.io/opaque-ports": "8080",
          note: "n",
          "service.kubernetes.io/topology-mode": "Auto",
          "kubectl.kubernetes.io/last-applied-configuration": "{}",
        },
      ),
      gateway,
    );
    assert.equal(out.kind, "mirror");
    if (out.kind !== "mirror") return;
    const m = out.mirror;
    assert.deepEqual(m.labels, {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/cluster-name": "east",
      app: "web",
    });
    assert.deepEqual(m.serviceAnnotations, {
      "config.linkerd.io/opaque-ports": "8080",
      "mirror.linkerd.io/remote-svc-fq-name": "web.shop.svc.cluster.local",
      "mirror.linkerd.io/remote-resource-version": "42",
    });
    assert.deepEqual(m.endpointsAnnotations, {
      "mirror.linkerd.io/remote-svc-fq-name": "web.shop.svc.cluster.local",
      "mirror.linkerd.io/remote-gateway-identity": "gw.identity",
    });
    assert.deepEqual(m.addresses, ["198.51.100.20", "198.51.100.21"]);
    assert.deepEqual(m.endpointPorts, [{ name: "http", protocol: "TCP", port: 4143 }]);
    assert.equal(m.serviceAnnotationsExact, true);
  });

  it("mirrors a remote-discovery Service as its Service alone, labelled for linkerd's discovery", () => {
    const out = desiredMirrorFor(s, service({ "mirror.linkerd.io/exported": "remote-discovery" }), gateway);
    assert.ok(out.kind === "mirror");
    assert.equal(out.mirror.serviceOnly, true);
    assert.deepEqual(out.mirror.addresses, []);
    assert.equal(out.mirror.labels["multicluster.linkerd.io/remote-discovery"], "east");
    assert.equal(out.mirror.labels["multicluster.linkerd.io/remote-service"], "web");
  });

  it("owns every annotation of the Service but kubectl's last-applied configuration", () => {
    const out = desiredMirrorFor(s, service({ "mirror.linkerd.io/exported": "true" }, { a: "1" }), gateway);
    assert.ok(out.kind === "mirror");
    const body = serviceBody(out.mirror) as Service;
    const observed = (annotations: Record<string, string>): Service => ({
      ...body,
      metadata: { ...body.metadata, annotations },
    });
    const ours = out.mirror.serviceAnnotations;
    assert.equal(serviceMatches(out.mirror, observed({ ...ours })), true);
    assert.equal(
      serviceMatches(out.mirror, observed({ ...ours, "kubectl.kubernetes.io/last-applied-configuration": "{}" })),
      true,
    );
    assert.equal(serviceMatches(out.mirror, observed({ ...ours, stale: "x" })), false, "a stale copy is removed");
    const updated = serviceBody(
      out.mirror,
      observed({ "kubectl.kubernetes.io/last-applied-configuration": "{}", stale: "x" }),
    );
    assert.deepEqual((updated as Service).metadata.annotations, {
      "kubectl.kubernetes.io/last-applied-configuration": "{}",
      ...ours,
    });
  });

  it("excludes `<prefix>/*` keys as linkerd matches them, by prefix", () => {
    assert.equal(excludedKey("example.com/a", ["example.com/*"]), true);
    assert.equal(excludedKey("example.community/a", ["example.com/*"]), true);
    assert.equal(excludedKey("example.org/a", ["example.com/*"]), false);
    assert.equal(excludedKey("team", ["team"]), true);
    assert.equal(excludedKey("teams", ["team"]), false);
  });

  it("gives the Link's gateway to the prober with the Link's probe", () => {
    const probed = linkSettings({
      probeSpec: { path: "/live", port: "4191", period: "2s", timeout: "500ms", failureThreshold: "5" },
    });
    assert.deepEqual(linkProbeSpec(probed), {
      spec: { port: 4191, path: "/live", periodMs: 2_000, timeoutMs: 500, failureThreshold: 5 },
      problems: [],
    });
    const view = viewGateway(linkGatewayService(linkSettings({ gatewayAddress: "gw.example.com" })), (h) =>
      h === "gw.example.com" ? ["198.51.100.7"] : undefined,
    );
    assert.deepEqual(view.addresses, ["198.51.100.7"], "a hostname resolves like an ingress hostname");
    assert.equal(view.identity, "gw.identity");
    assert.equal(view.resourceVersion, undefined);
  });
});
