/**
 * End to end on real API servers: a gateway whose ingress is a hostname (SPEC §2) through
 * DNS failures. A transient failure (a timeout) keeps the mirrors' endpoints, for at most
 * 10 resolve periods; an authoritative "no such name" empties them at the next refresh;
 * an AAAA query that is never answered does not hide the A addresses. The actors resolve
 * through a DNS stub on 127.0.0.1 (test/helpers/dns-stub.ts): no query leaves the host.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { V1Endpoints, V1Service } from "@kubernetes/client-node";
import { REMOTE_GATEWAY_RESOURCE_VERSION } from "../../src/core/labels.ts";
import { createLogger } from "../../src/log.ts";
import { Supervisor } from "../../src/supervisor/supervisor.ts";
import { DnsStub, TYPE_AAAA } from "../helpers/dns-stub.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import { readLogFile } from "../helpers/log-file.ts";
import { waitForMarker } from "../helpers/settle.ts";

const ipsOf = (ep: V1Endpoints): string[] => (ep.subsets?.[0]?.addresses ?? []).map((a) => a.ip).sort();
const RESOLVE_PERIOD_MS = 1_000;
/** The staleness bound: MAX_STALE_PERIODS (workers/remote-cluster/hostnames.ts) resolve periods. */
const MAX_STALE_MS = 10 * RESOLVE_PERIOD_MS;

describe("gateway hostnames through DNS failures", () => {
  let fleet: Fleet;
  let dns: DnsStub;
  let controller: Supervisor;
  let scratch: string;
  let logFile: string;

  /** Warn lines about `hostname` logged so far. */
  const warnings = (hostname: string) => readLogFile(logFile).filter((l) => l.hostname === hostname && l.level === 40);

  /** A gateway `dns/<name>` whose ingress is `hostname`, and Service `<namespace>/web` exported through it. */
  async function exportThrough(name: string, hostname: string, namespace: string): Promise<V1Service> {
    const gw = { namespace: "dns", name };
    const gateway = await fleet.createGateway("east", { ...gw, ingress: [{ hostname }] });
    await fleet.createService("east", namespace, "web", { gateway: gw });
    return gateway;
  }

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), "fleet-mirror-gateway-dns-"));
    logFile = join(scratch, "controller.log");
    dns = await DnsStub.start();
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.7.100" }] }); // the marker's gateway
    await fleet.register("east");
    controller = new Supervisor({
      config: fleet.config({ gatewayResolvePeriodMs: RESOLVE_PERIOD_MS, logLevel: "info", logFile }),
      localConnection: fleet.controllerConnection(),
      logger: createLogger("info", { actor: "supervisor" }, logFile),
      gatewayDnsServers: [dns.server],
    });
    controller.start();
  });

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    dns?.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it("keeps a hostname gateway's endpoints through failed refreshes, and drops them after 10 resolve periods", async () => {
    const name = "gw.timeout.fleet-mirror.test";
    dns.set(name, ["198.18.7.1"]);
    const gateway = await exportThrough("timeout", name, "dns-timeout");
    await fleet.waitForEndpoints("dns-timeout", "web-east", (e) => ipsOf(e).join() === "198.18.7.1");
    // The Service records the gateway's resourceVersion in a write of its own, which may
    // land after the Endpoints: the identity is taken once it has.
    await fleet.waitForMirror(
      "dns-timeout",
      "web-east",
      (svc) => svc.metadata?.annotations?.[REMOTE_GATEWAY_RESOURCE_VERSION] === gateway.metadata?.resourceVersion,
    );
    const identity = await fleet.currentMirrorIdentity("dns-timeout", "web-east");

    const warned = warnings(name).length;
    dns.set(name, "drop");
    const droppedAt = Date.now();
    // The positive marker: the actor saw a refresh fail (its warning), and the remote's
    // later changes reached the writer; only then may "nothing changed" be read.
    await eventually("a failed refresh logged", () => (warnings(name).length > warned ? true : undefined), 30_000);
    await waitForMarker(fleet, "east");
    assert.equal(
      await fleet.currentMirrorIdentity("dns-timeout", "web-east"),
      identity,
      "the mirror's Service and Endpoints were not written after the failed refresh",
    );

    const emptied = await fleet.waitForEndpoints("dns-timeout", "web-east", (e) => ipsOf(e).length === 0, 60_000);
    assert.deepEqual(emptied.subsets ?? [], []);
    // The bound runs from the last good answer, which came at most one resolve period
    // (refreshes are not jittered) before the drop.
    assert.ok(
      Date.now() - droppedAt >= MAX_STALE_MS - RESOLVE_PERIOD_MS,
      `kept for the staleness bound (${MAX_STALE_MS} ms from the last good answer), dropped ${Date.now() - droppedAt} ms after the drop`,
    );

    dns.set(name, ["198.18.7.1"]);
    await fleet.waitForEndpoints("dns-timeout", "web-east", (e) => ipsOf(e).join() === "198.18.7.1");
  });

  it("empties the endpoints at the next refresh when the name no longer exists (NXDOMAIN)", async () => {
    const name = "gw.gone.fleet-mirror.test";
    dns.set(name, ["198.18.7.3"]);
    await exportThrough("gone", name, "dns-gone");
    await fleet.waitForEndpoints("dns-gone", "web-east", (e) => ipsOf(e).join() === "198.18.7.3");
    dns.set(name, "nxdomain");
    const removedAt = Date.now();
    await fleet.waitForEndpoints("dns-gone", "web-east", (e) => ipsOf(e).length === 0);
    assert.ok(Date.now() - removedAt < MAX_STALE_MS, "not kept: an authoritative answer");
  });

  it("gives the A addresses of a name whose AAAA query is never answered", async () => {
    const name = "gw.v4only.fleet-mirror.test";
    dns.set(name, ["198.18.7.2"]);
    dns.set(name, "drop", TYPE_AAAA);
    await exportThrough("v4only", name, "dns-v4only");
    const ep = await fleet.waitForEndpoints("dns-v4only", "web-east", (e) => ipsOf(e).length > 0);
    assert.deepEqual(ipsOf(ep), ["198.18.7.2"]);
    assert.ok(dns.count(name, TYPE_AAAA) > 0, "the AAAA query was asked (and never answered)");
  });
});
