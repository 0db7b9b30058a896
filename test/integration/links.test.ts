/**
 * SPEC §15 on real API servers: linkerd's Links (the CRD is linkerd's own, pinned) register
 * clusters: the credentials from the Secret a Link names (without annotations), the
 * domain, the gateway address (an IP or a hostname), port and identity, the probe spec,
 * the selectors (matchLabels, matchExpressions, empty selects nothing), remote
 * discovery, fleet-wide members, excluded labels and annotations (`group/*` too); a Link
 * beside an annotated Secret naming the same cluster; a Link whose Secret is missing or
 * invalid, a Secret deleted, a Link deleted; each Link's status as linkerd writes it.
 * The controller runs least-privilege: deploy/rbac/local.yaml and deploy/links/rbac.yaml.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { V1Endpoints } from "@kubernetes/client-node";
import { type LocalRoute, makeLocal } from "../../sandbox/local-addresses.ts";
import { ProbeServer } from "../../sandbox/probe-server.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { DnsStub } from "../helpers/dns-stub.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import {
  createLink,
  createLinkSecret,
  deleteLink,
  deleteLinkSecret,
  editLink,
  installLinks,
  LINKS_NAMESPACE,
  linkSpec,
  mirroredCondition,
  readLink,
  waitForLinkEvent,
  waitForLinkStatus,
} from "../helpers/links.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const GATEWAY_IP = "203.0.113.5";
const HOSTNAME_IP = "203.0.113.6";
const PROBE_PORT = 4191;
const IDENTITY = "linkerd-gateway.linkerd-multicluster.serviceaccount.identity.linkerd.cluster.local";
const EXPORTED = { "mirror.linkerd.io/exported": "true" };

const ready = (ep: V1Endpoints | undefined): string[] => (ep?.subsets?.[0]?.addresses ?? []).map((a) => a.ip).sort();
const notReady = (ep: V1Endpoints | undefined): string[] =>
  (ep?.subsets?.[0]?.notReadyAddresses ?? []).map((a) => a.ip).sort();

describe("Links register clusters (SPEC §15)", () => {
  let fleet: Fleet;
  let controller: Supervisor;
  let route: LocalRoute;
  let probe: ProbeServer;
  let dns: DnsStub;

  const endpoints = async (namespace: string, name: string): Promise<V1Endpoints | undefined> => {
    try {
      return await fleet.local.readNamespacedEndpoints({ namespace, name });
    } catch {
      return undefined;
    }
  };
  const start = (overrides: Parameters<Fleet["startInProcess"]>[0] = {}): Supervisor =>
    fleet.startInProcess({ linksNamespace: LINKS_NAMESPACE, ...overrides }, { gatewayDnsServers: [dns.server] });

  before(async () => {
    route = await makeLocal("203.0.113.0/24");
    probe = await ProbeServer.start(GATEWAY_IP, PROBE_PORT);
    dns = await DnsStub.start();
    dns.set("gw.east.test", [HOSTNAME_IP]);
    fleet = await Fleet.start(["east", "west"]);
    await installLinks(fleet);
    await fleet.createService("east", "shop", "web", {
      gateway: false,
      labels: { ...EXPORTED, app: "web", team: "a", "internal.example.com/owner": "x", tier: "back" },
      annotations: { "example.com/contact": "web@example.com", note: "not copied", "internal.example.com/cost": "9" },
    });
    await fleet.createService("east", "shop", "api", { gateway: false, labels: { tier: "front" } });
    await fleet.createService("east", "shop", "db", {
      gateway: false,
      labels: { "mirror.linkerd.io/exported": "remote-discovery" },
    });
    await fleet.createService("east", "billing", "pay", {
      gateway: false,
      labels: { "mirror.linkerd.io/federated": "member" },
    });
    await createLinkSecret(fleet, "east");
    await createLink(
      fleet,
      "east",
      linkSpec("east", {
        gatewayAddress: GATEWAY_IP,
        gatewayIdentity: IDENTITY,
        probeSpec: { path: "/live", port: String(PROBE_PORT), period: "1s", timeout: "500ms", failureThreshold: "2" },
        excludedLabels: ["internal.example.com/*", "team"],
        excludedAnnotations: ["note", "internal.example.com/*"],
      }),
    );
    controller = start();
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    await probe?.stop();
    dns?.close();
    await route?.release();
  });

  it("registers the Link's cluster with the Secret it names, and mirrors as linkerd does", async () => {
    const web = await fleet.waitForMirror("shop", "web-east", () => true, 60_000);
    assert.deepEqual(web.metadata?.labels, {
      "mirror.linkerd.io/mirrored-service": "true",
      "mirror.linkerd.io/cluster-name": "east",
      app: "web",
      tier: "back",
    });
    assert.equal(web.metadata?.annotations?.["example.com/contact"], "web@example.com");
    assert.equal(web.metadata?.annotations?.["note"], undefined, "an excluded annotation is not copied");
    assert.equal(web.metadata?.annotations?.["internal.example.com/cost"], undefined, "nor a `group/*` one");
    assert.equal(web.metadata?.annotations?.["mirror.linkerd.io/remote-svc-fq-name"], "web.shop.svc.cluster.local");
    const ep = await eventually("web-east's endpoints at the Link's gateway", async () => {
      const e = await endpoints("shop", "web-east");
      return ready(e).length > 0 ? e : undefined;
    });
    assert.deepEqual(ready(ep), [GATEWAY_IP]);
    assert.deepEqual(
      ep.subsets?.[0]?.ports?.map((p) => p.port),
      [4143],
    );
    assert.equal(ep.metadata?.annotations?.["mirror.linkerd.io/remote-gateway-identity"], IDENTITY);
    assert.equal(await fleet.localService("shop", "api-east"), undefined, "not selected, not mirrored");
    // /status (and `status -o json|yaml`) names the Link as the cluster's registration.
    const row = controller.status().clusters?.find((c) => c.cluster === "east");
    assert.equal(row?.secret, `Link ${LINKS_NAMESPACE}/east`);
  });

  it("mirrors a remote-discovery Service as its Service alone, and a member into its fleet-wide Service", async () => {
    const db = await fleet.waitForMirror("shop", "db-east", () => true, 30_000);
    assert.equal(db.metadata?.labels?.["multicluster.linkerd.io/remote-discovery"], "east");
    assert.equal(db.metadata?.labels?.["multicluster.linkerd.io/remote-service"], "db");
    await waitForWriterIdle(controller);
    assert.equal(await endpoints("shop", "db-east"), undefined, "no Endpoints for remote discovery");
    await fleet.waitForMirror("billing", "pay-federated", () => true, 30_000);
  });

  it("writes the Link's status as linkerd does: one Mirrored condition per remote Service", async () => {
    const status = await waitForLinkStatus(
      fleet,
      "east",
      (s) =>
        mirroredCondition(s.mirrorServices, "shop/web") === "True/Mirrored" &&
        mirroredCondition(s.mirrorServices, "shop/db") === "True/Mirrored" &&
        mirroredCondition(s.federatedServices, "billing/pay") === "True/Mirrored",
    );
    const web = status.mirrorServices?.find((e) => e.remoteRef?.name === "web");
    assert.equal(web?.controllerName, "linkerd.io/service-mirror");
    assert.deepEqual(web?.remoteRef, { group: "core", kind: "Service", name: "web", namespace: "shop" });
    assert.deepEqual(web?.conditions?.[0]?.localRef, {
      group: "core",
      kind: "Service",
      name: "web-east",
      namespace: "shop",
    });
    assert.equal(status.mirrorServices?.length, 2);
  });

  it("probes the Link's gateway with the Link's probe spec: path, port, period, threshold", async () => {
    await eventually("the gateway probed at /live", () => ((probe.requests.get("/live") ?? 0) > 0 ? true : undefined));
    probe.mode = "unavailable";
    await eventually(
      "web-east's gateway address not ready",
      async () => (notReady(await endpoints("shop", "web-east")).includes(GATEWAY_IP) ? true : undefined),
      20_000,
    );
    probe.mode = "ok";
    await eventually(
      "web-east's gateway address ready again",
      async () => (ready(await endpoints("shop", "web-east")).includes(GATEWAY_IP) ? true : undefined),
      20_000,
    );
  });

  it("follows a changed selector (matchExpressions), and an empty selector selects nothing", async () => {
    await editLink(fleet, "east", (spec) => {
      spec["selector"] = { matchExpressions: [{ key: "tier", operator: "In", values: ["front"] }] };
    });
    await fleet.waitForMirror("shop", "api-east", () => true, 60_000);
    await fleet.waitForNoMirror("shop", "web-east", 60_000);
    await editLink(fleet, "east", (spec) => {
      spec["selector"] = {};
    });
    await fleet.waitForNoMirror("shop", "api-east", 60_000);
    assert.ok(await fleet.localService("shop", "db-east"), "remote discovery has its own selector");
    await editLink(fleet, "east", (spec) => {
      spec["selector"] = { matchLabels: EXPORTED };
      spec["gatewayAddress"] = "gw.east.test";
    });
    await eventually(
      "web-east back, at the address the gateway hostname resolves to",
      async () => (ready(await endpoints("shop", "web-east")).join() === HOSTNAME_IP ? true : undefined),
      60_000,
    );
  });

  it("lets a Link win over an annotated Secret naming the same cluster, and reports the Secret", async () => {
    const secretName = await fleet.register("east", { secretName: "old-east" });
    const event = await fleet.waitForSecretEvent(secretName, "DuplicateCluster");
    assert.match(event.message ?? "", /registered by Link linkerd-multicluster\/east/);
    await waitForWriterIdle(controller, { reports: 2 });
    const web = await fleet.localService("shop", "web-east");
    assert.equal(
      web?.metadata?.labels?.["mirror.linkerd.io/remote-gateway-name"],
      undefined,
      "still the Link's mirror",
    );
    await fleet.local.deleteNamespacedSecret({ namespace: CONTROLLER_NAMESPACE, name: secretName });
  });

  it("registers nothing for a Link whose Secret is missing or invalid, until the Secret is there", async () => {
    await fleet.createService("west", "shop", "cart", { gateway: false, labels: EXPORTED });
    await createLink(fleet, "west", linkSpec("west"));
    const missing = await waitForLinkEvent(fleet, "west", "InvalidCredentials");
    assert.match(missing.message ?? "", /cluster-credentials-west .*not found/);
    await fleet.local.createNamespacedSecret({
      namespace: LINKS_NAMESPACE,
      body: {
        metadata: { name: "cluster-credentials-west" },
        type: "mirror.linkerd.io/remote-kubeconfig",
        stringData: { kubeconfig: "users: [{name: u, user: {exec: {command: /bin/true}}}]" },
      },
    });
    await waitForLinkEvent(fleet, "west", "InvalidCredentials", /is invalid/);
    assert.equal(await fleet.localService("shop", "cart-west"), undefined);
    await deleteLinkSecret(fleet, "cluster-credentials-west");
    await createLinkSecret(fleet, "west");
    await fleet.waitForMirror("shop", "cart-west", () => true, 60_000);
  });

  it("keeps the credentials a Link had when its Secret is deleted, until the Link changes", async () => {
    await deleteLinkSecret(fleet, "cluster-credentials-west");
    await waitForLinkEvent(fleet, "west", "CredentialsKept");
    await fleet.createService("west", "shop", "cart2", { gateway: false, labels: EXPORTED });
    await fleet.waitForMirror("shop", "cart2-west", () => true, 60_000);
    await editLink(fleet, "west", (spec) => {
      spec["excludedLabels"] = ["app"];
    });
    await waitForLinkEvent(fleet, "west", "InvalidCredentials");
    await fleet.createService("west", "shop", "cart3", { gateway: false, labels: EXPORTED });
    await waitForWriterIdle(controller, { reports: 2 });
    assert.equal(await fleet.localService("shop", "cart3-west"), undefined, "unregistered: nothing new");
    assert.ok(await fleet.localService("shop", "cart-west"), "its mirrors are kept while the Link names the cluster");
  });

  it("unregisters a deleted Link's cluster: its mirrors are deleted", async () => {
    await deleteLink(fleet, "west");
    await fleet.waitForNoMirror("shop", "cart-west", 60_000);
    await fleet.waitForNoMirror("shop", "cart2-west", 60_000);
    assert.ok(await fleet.localService("shop", "web-east"), "another Link's cluster is untouched");
  });

  it("writes a Link's status only when its content changes: a restart over a converged world writes none", async () => {
    await waitForLinkStatus(fleet, "east", (s) => mirroredCondition(s.mirrorServices, "shop/web") === "True/Mirrored");
    await waitForWriterIdle(controller, { reports: 3 });
    const before = (await readLink(fleet, "east"))?.metadata.resourceVersion;
    await controller.stop();
    controller = start();
    await eventually("the restarted controller's writer idle with east's set", async () => {
      await waitForWriterIdle(controller, { reports: 3 });
      return controller.status().writer?.clusters["east"]?.complete ? true : undefined;
    });
    assert.equal(controller.status().writer?.writes["patch/Link/ok"], undefined);
    assert.equal((await readLink(fleet, "east"))?.metadata.resourceVersion, before);
  });

  it("reports a Service it cannot mirror (InvalidService) and a missing namespace (MissingNamespace) in the status", async () => {
    await controller.stop();
    controller = start({ createNamespaces: false });
    await fleet.createService("east", "nowhere", "lost", { gateway: false, labels: EXPORTED });
    await fleet.api("east").createNamespacedService({
      namespace: "shop",
      body: { metadata: { name: "portless", labels: EXPORTED }, spec: { clusterIP: "None" } },
    });
    await waitForLinkStatus(
      fleet,
      "east",
      (s) =>
        mirroredCondition(s.mirrorServices, "nowhere/lost") === "False/MissingNamespace" &&
        mirroredCondition(s.mirrorServices, "shop/portless") === "False/InvalidService",
      60_000,
    );
  });
});
