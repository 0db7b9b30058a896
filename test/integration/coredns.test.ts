/**
 * A real DNS consumer: CoreDNS's kubernetes plugin, reading the local API server as a
 * cluster's DNS does, answers for a mirror at `<mirror>.<ns>.svc.cluster.local` with the
 * mirror's ClusterIP, in every `--endpoints-api` mode (SPEC §9), and stops answering once
 * the mirror is gone.
 */
import assert from "node:assert/strict";
import type { Resolver } from "node:dns/promises";
import { after, before, describe, it } from "node:test";
import type { CoreDns } from "../../sandbox/coredns.ts";
import type { Config } from "../../src/config.ts";
import { ENDPOINTS_APIS, type EndpointsApi } from "../../src/core/mirror-kinds.ts";
import { mirrorName } from "../../src/core/naming.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { lookupA, startDnsFleet, waitForA } from "../helpers/dns.ts";
import type { Fleet } from "../helpers/fleet.ts";

/** Every `--endpoints-api` mode (SPEC §9): the built-in controllers and DNS must work with each. */
const MODES: readonly EndpointsApi[] = ENDPOINTS_APIS;
const modeConfig = (mode: EndpointsApi): Partial<Config> => ({ endpointsApi: mode });

describe("CoreDNS resolves mirrors", () => {
  let fleet: Fleet;
  let dns: CoreDns;
  let resolver: Resolver;

  before(async () => {
    ({ fleet, dns, resolver } = await startDnsFleet("198.18.0.10"));
  });
  after(async () => {
    await dns?.stop();
    await fleet?.stop();
  });

  it("is ready with the local cluster's Services in its cache (kubernetes.default answers)", async () => {
    const kubernetes = await fleet.local.readNamespacedService({ namespace: "default", name: "kubernetes" });
    const clusterIp = kubernetes.spec?.clusterIP;
    assert.ok(clusterIp);
    await waitForA(resolver, "kubernetes.default.svc.cluster.local", [clusterIp]);
  });

  for (const mode of MODES) {
    describe(`--endpoints-api=${mode}`, () => {
      let controller: Supervisor;
      before(() => {
        controller = fleet.startInProcess(modeConfig(mode));
      });
      after(async () => {
        await controller?.stop();
      });

      it("a mirror resolves to its ClusterIP, and stops resolving once it is gone", async () => {
        const namespace = `dns-${mode}`;
        await fleet.createService("east", namespace, "web");
        const name = mirrorName("web", "east");
        const mirror = await fleet.waitForMirror(namespace, name);
        const clusterIp = mirror.spec?.clusterIP;
        assert.ok(clusterIp && clusterIp !== "None", `the mirror has a ClusterIP: ${clusterIp}`);
        const fqdn = `${name}.${namespace}.svc.cluster.local`;
        assert.deepEqual(await waitForA(resolver, fqdn, [clusterIp]), [clusterIp]);

        await fleet.unexport("east", namespace, "web");
        await fleet.waitForNoMirror(namespace, name);
        await waitForA(resolver, fqdn, []);
        assert.deepEqual(await lookupA(resolver, fqdn), []);
      });
    });
  }
});
