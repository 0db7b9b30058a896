/**
 * End to end on real API servers: no remote can aim the controller's probes or a mirror's
 * endpoints into the local cluster's own address ranges (SPEC §10). A gateway whose
 * ingress is an IP in the local Service CIDR (read from the local API's ServiceCIDRs), in
 * a node's pod CIDR, in a `--gateway-cidr-deny` range, or a hostname resolving into one,
 * is never probed and never written as endpoints, and is reported; `--gateway-cidr-allow`
 * carves an exception; a change of the local ranges re-checks every gateway.
 *
 * The local API server's Service CIDR is 203.0.113.64/26 here, and the gateways' probe
 * servers listen on addresses of a /28 inside it (and of another /28 outside it), made
 * local for the test (sandbox/local-addresses.ts): a probe sent by mistake reaches a
 * server on this machine, never the network. Names resolve through a DNS stub on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { V1Endpoints } from "@kubernetes/client-node";
import { claimLocal, type LocalRoute } from "../../sandbox/local-addresses.ts";
import { ProbeServer } from "../../sandbox/probe-server.ts";
import { PROBE_PERIOD } from "../../src/core/probe-spec.ts";
import { createLogger } from "../../src/log.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { DnsStub } from "../helpers/dns-stub.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { readLogFile } from "../helpers/log-file.ts";
import { supervisorMetrics } from "../helpers/metrics.ts";
import { waitForMarker } from "../helpers/settle.ts";

const SERVICE_CIDR = "203.0.113.64/26";
/** /28s inside the Service CIDR, and outside it (for the pod CIDR case). */
const INSIDE = ["203.0.113.64/28", "203.0.113.80/28", "203.0.113.96/28", "203.0.113.112/28"];
const OUTSIDE = ["203.0.113.128/28", "203.0.113.144/28", "203.0.113.160/28", "203.0.113.176/28"];
const HOSTNAME = "gw.policy.fleet-mirror.test";

const ipsOf = (ep: V1Endpoints): string[] => (ep.subsets?.[0]?.addresses ?? []).map((a) => a.ip).sort();
const nth = (route: LocalRoute, n: number): string => {
  const [a, b, c, d] = route.range.split("/")[0]?.split(".").map(Number) ?? [];
  return `${a}.${b}.${c}.${(d ?? 0) + n}`;
};

describe("gateway addresses in the local cluster's own ranges", () => {
  let inside: LocalRoute;
  let outside: LocalRoute;
  let fleet: Fleet;
  let dns: DnsStub;
  let controller: Supervisor;
  let scratch: string;
  let logFile: string;
  const probes = new Map<string, ProbeServer>();

  const row = () => controller.status().clusters.find((r) => r.cluster === "east");
  const gatewayRow = (name: string) => row()?.gateways.find((g) => g.key === `policy/${name}`);
  const served = (name: string): number => probes.get(name)?.received ?? 0;

  /** Gateway `policy/<name>` probed every second at `probe`'s port, ingress `ingress`; Service `<name>/web` exported through it. */
  async function gatewayWithUser(name: string, address: string, ingress: { ip?: string; hostname?: string }) {
    const probe = await ProbeServer.start(address);
    probes.set(name, probe);
    const gw = { namespace: "policy", name };
    await fleet.createGateway("east", {
      ...gw,
      ingress: [ingress],
      probePort: probe.port,
      annotations: { [PROBE_PERIOD]: "1" },
    });
    await fleet.createService("east", name, "web", { gateway: gw });
  }

  /** The allowed gateway answered `n` more probes: the prober ran for a while, on the same thread. */
  async function allowedProbedMore(n: number): Promise<void> {
    const start = served("allowed");
    await eventually(`${n} more probes of the allowed gateway`, () =>
      served("allowed") >= start + n ? true : undefined,
    );
  }

  before(async () => {
    const claimedInside = await claimLocal(INSIDE);
    const claimedOutside = await claimLocal(OUTSIDE);
    assert.ok(claimedInside && claimedOutside, "two /28s of 203.0.113.0/24 can be made local");
    inside = claimedInside;
    outside = claimedOutside;
    scratch = mkdtempSync(join(tmpdir(), "fleet-mirror-address-policy-"));
    logFile = join(scratch, "controller.log");
    dns = await DnsStub.start();
    dns.set(HOSTNAME, [nth(inside, 4)]);
    fleet = await Fleet.start(["east"], { serviceClusterIpRange: SERVICE_CIDR });
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.9.1" }] }); // the marker's gateway
    await gatewayWithUser("allowed", nth(inside, 3), { ip: nth(inside, 3) });
    await gatewayWithUser("in-cidr", nth(inside, 1), { ip: nth(inside, 1) });
    await gatewayWithUser("denied", nth(outside, 2), { ip: nth(outside, 2) });
    await gatewayWithUser("by-name", nth(inside, 4), { hostname: HOSTNAME });
    await gatewayWithUser("pod", nth(outside, 5), { ip: nth(outside, 5) });
    await fleet.register("east");
    controller = new Supervisor({
      config: fleet.config({
        logLevel: "info",
        logFile,
        gatewayCidrAllow: [`${nth(inside, 3)}/32`],
        gatewayCidrDeny: [`${nth(outside, 2)}/32`],
      }),
      localConnection: fleet.controllerConnection(),
      logger: createLogger("info", { actor: "supervisor" }, logFile),
      gatewayDnsServers: [dns.server],
    });
    controller.start();
    await fleet.waitForEndpoints("allowed", "web-east", (e) => ipsOf(e).join() === nth(inside, 3));
  });

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    for (const probe of probes.values()) await probe.stop();
    dns?.close();
    await inside?.release();
    await outside?.release();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it("never probes nor writes as endpoints an address in the local Service CIDR, in a denied range, or a name resolving into one, and reports each", async () => {
    const refused = [
      { name: "in-cidr", reason: "local-service-cidr", address: nth(inside, 1) },
      { name: "denied", reason: "denied", address: nth(outside, 2) },
      { name: "by-name", reason: "local-service-cidr", address: nth(inside, 4) },
    ];
    // Positive markers: the allowed gateway (inside the Service CIDR, allowed by flag) was
    // probed for a few periods, and the remote's later changes were mirrored.
    await allowedProbedMore(3);
    await waitForMarker(fleet, "east");
    for (const r of refused) {
      assert.equal(served(r.name), 0, `${r.name}: no probe ever reached its server`);
      const ep = await fleet.waitForEndpoints(r.name, "web-east", () => true);
      assert.deepEqual(ep.subsets ?? [], [], `${r.name}: no endpoints`);
      const g = await eventually(`gateway ${r.name} reported refused`, () => {
        const gateway = gatewayRow(r.name);
        return gateway?.refused?.byReason[r.reason] === 1 ? gateway : undefined;
      });
      assert.equal(g.usable, false);
      assert.equal(g.probe, undefined, "not probed");
      assert.match(g.refused?.addresses[0] ?? "", new RegExp(`^${r.address.replaceAll(".", "\\.")} `));
    }
    const metrics = await supervisorMetrics(controller);
    assert.match(metrics, /^fleet_mirror_gateway_addresses_refused\{cluster="east",reason="local-service-cidr"\} 2$/m);
    assert.match(metrics, /^fleet_mirror_gateway_addresses_refused\{cluster="east",reason="denied"\} 1$/m);
    const logged = readLogFile(logFile).filter((l) => l.gateway === "policy/in-cidr" && Array.isArray(l.refused));
    assert.equal(logged.length, 1, "logged once");
    assert.deepEqual(controller.status().localRanges?.serviceCidrs, [SERVICE_CIDR]);
  });

  it("re-checks every gateway when the local ranges change: a node's pod CIDR stops its probes and empties its endpoints", async () => {
    await fleet.waitForEndpoints("pod", "web-east", (e) => ipsOf(e).join() === nth(outside, 5));
    assert.ok(served("pod") > 0, "probed while outside every local range");
    await fleet.local.createNode({ body: { metadata: { name: "policy-node" }, spec: { podCIDRs: [outside.range] } } });
    try {
      await eventually("gateway pod refused", () =>
        gatewayRow("pod")?.refused?.byReason["local-pod-cidr"] === 1 ? true : undefined,
      );
      await fleet.waitForEndpoints("pod", "web-east", (e) => ipsOf(e).length === 0);
      await allowedProbedMore(2); // a probe in flight when the ranges changed has ended
      const before = served("pod");
      await allowedProbedMore(3);
      assert.equal(served("pod"), before, "no probe since the pod CIDR was seen");
    } finally {
      await fleet.local.deleteNode({ name: "policy-node" });
    }
    await fleet.waitForEndpoints("pod", "web-east", (e) => ipsOf(e).join() === nth(outside, 5));
  });
});
