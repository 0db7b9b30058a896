/**
 * End to end on real API servers: headless Services (SPEC §12). An exported headless
 * Service whose remote endpoints carry hostnames (a StatefulSet) gets a per-host
 * ClusterIP mirror `<h>-<c>` per hostname, through the gateway, and a headless mirror
 * `<svc>-<c>` (clusterIP None) whose endpoints are those Services' cluster IPs with
 * their hostnames, in every `--endpoints-api` mode; CoreDNS, reading the local
 * API server, resolves `<h>.<svc>-<c>.<ns>.svc.cluster.local` to the per-host Service's
 * cluster IP. Scaling converges; a headless Service without hostnames is an ordinary
 * mirror, and a mirror changing sides is replaced (clusterIP is immutable); bad
 * hostnames are reported; a remote whose role cannot read EndpointSlices mirrors its
 * headless Services as ordinary ones and is reported once, its other Services unharmed.
 *
 * The remote slices are written by the test, as the built-in controller would
 * (test/helpers/headless.ts).
 */
import assert from "node:assert/strict";
import type { Resolver } from "node:dns/promises";
import { after, before, describe, it } from "node:test";
import type { V1Secret } from "@kubernetes/client-node";
import type { CoreDns } from "../../sandbox/coredns.ts";
import { HEADLESS_MIRROR_LABEL } from "../../src/core/headless.ts";
import { ENDPOINTS_APIS, type EndpointsApi } from "../../src/core/mirror-kinds.ts";
import { mintServiceAccountToken } from "../../src/kube/service-account.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { lookupA, startDnsFleet, waitForA } from "../helpers/dns.ts";
import { type Fleet, REMOTE_READER_NAMESPACE, REMOTE_READER_RULES } from "../helpers/fleet.ts";
import { createHeadless, localAddresses, setSlice } from "../helpers/headless.ts";
import { eventually } from "../helpers/kube.ts";
import { supervisorMetrics } from "../helpers/metrics.ts";
import { waitForWriterIdle } from "../helpers/settle.ts";

const GATEWAY_IP = "198.18.7.1";
/**
 * How long a host missing from its remote slices keeps its per-host mirror here
 * (`--headless-host-grace`, 5 min by default): long enough for a test to see that a
 * brief absence changes nothing, short enough for scaling down to converge.
 */
const HOST_GRACE_MS = 10_000;

describe("headless Services (SPEC §12)", () => {
  let fleet: Fleet;
  let dns: CoreDns;
  let resolver: Resolver;

  before(async () => {
    ({ fleet, dns, resolver } = await startDnsFleet(GATEWAY_IP));
  });
  after(async () => {
    await dns?.stop();
    await fleet?.stop();
  });

  const clusterIp = async (namespace: string, name: string): Promise<string> => {
    const svc = await fleet.waitForMirror(namespace, name, (s) => !!s.spec?.clusterIP);
    return svc.spec?.clusterIP ?? "";
  };

  /** Waits until headless mirror `name` has exactly `hosts` (each `hostname=<its per-host Service's IP>`). */
  const waitForHosts = async (mode: EndpointsApi, namespace: string, name: string, hosts: string[]) => {
    const want = (await Promise.all(hosts.map(async (h) => `${h}=${await clusterIp(namespace, `${h}-east`)}`))).sort();
    let last: string[] = [];
    await eventually(
      () => `${namespace}/${name} to hold ${want.join(",")} (last: ${last.join(",")})`,
      async () => {
        last = await localAddresses(fleet, mode, namespace, name);
        return last.join(",") === want.join(",") ? true : undefined;
      },
    );
  };

  for (const mode of ENDPOINTS_APIS) {
    describe(`--endpoints-api=${mode}`, () => {
      let controller: Supervisor;
      const namespace = `hl-${mode}`;
      before(async () => {
        controller = fleet.startInProcess({ endpointsApi: mode, headlessHostGraceMs: HOST_GRACE_MS });
        await createHeadless(fleet, "east", namespace, "web");
        await setSlice(fleet, "east", namespace, "web", "web-abc12", ["web-0", "web-1"]);
      });
      after(async () => {
        await controller?.stop();
      });

      it("mirrors each hostname as a ClusterIP Service through the gateway", async () => {
        for (const host of ["web-0", "web-1"]) {
          const svc = await fleet.waitForMirror(namespace, `${host}-east`);
          assert.notEqual(svc.spec?.clusterIP, "None");
          assert.equal(svc.metadata?.labels?.[HEADLESS_MIRROR_LABEL], "web-east");
          assert.equal(
            svc.metadata?.annotations?.["mirror.linkerd.io/remote-svc-fq-name"],
            `${host}.web.${namespace}.svc.cluster.local`,
          );
          await eventually(`${host}-east's endpoints: the gateway`, async () =>
            (await localAddresses(fleet, mode, namespace, `${host}-east`)).join() === GATEWAY_IP ? true : undefined,
          );
        }
      });

      it("mirrors the Service as a headless Service whose endpoints are the per-host cluster IPs with their hostnames", async () => {
        const headless = await fleet.waitForMirror(namespace, "web-east");
        assert.equal(headless.spec?.clusterIP, "None");
        await waitForHosts(mode, namespace, "web-east", ["web-0", "web-1"]);
      });

      it("CoreDNS resolves web-0.web-east.<ns>.svc.cluster.local to web-0-east's cluster IP", async () => {
        const ip = await clusterIp(namespace, "web-0-east");
        await waitForA(resolver, `web-0.web-east.${namespace}.svc.cluster.local`, [ip]);
      });

      it("keeps a per-host mirror through its pod's brief absence (a StatefulSet rollout): same uid, same cluster IP", async () => {
        const before = await fleet.waitForMirror(namespace, "web-0-east", (s) => !!s.spec?.clusterIP);
        const headless = await fleet.waitForMirror(namespace, "web-east");
        // web-0's pod is replaced: its endpoint leaves the slice until the new pod has an
        // IP. web-2 joining in the same edit proves the edit was mirrored.
        await setSlice(fleet, "east", namespace, "web", "web-abc12", ["web-1", "web-2"]);
        await fleet.waitForMirror(namespace, "web-2-east");
        await waitForWriterIdle(controller, { reports: 2 });
        const away = await fleet.localService(namespace, "web-0-east");
        assert.equal(away?.metadata?.uid, before.metadata?.uid, "web-0-east kept while its pod is away");
        await setSlice(fleet, "east", namespace, "web", "web-abc12", ["web-0", "web-1", "web-2"]);
        await waitForHosts(mode, namespace, "web-east", ["web-0", "web-1", "web-2"]);
        const back = await fleet.localService(namespace, "web-0-east");
        assert.equal(back?.metadata?.uid, before.metadata?.uid, "the same per-host Service");
        assert.equal(back?.spec?.clusterIP, before.spec?.clusterIP, "the same cluster IP");
        assert.equal((await fleet.localService(namespace, "web-east"))?.metadata?.uid, headless.metadata?.uid);
      });

      it("converges when the StatefulSet scales up and down (a host gone for longer than the grace)", async () => {
        await setSlice(fleet, "east", namespace, "web", "web-abc12", ["web-0", "web-1", "web-2"]);
        await fleet.waitForMirror(namespace, "web-2-east");
        await waitForHosts(mode, namespace, "web-east", ["web-0", "web-1", "web-2"]);
        await setSlice(fleet, "east", namespace, "web", "web-abc12", ["web-1", "web-2"]);
        await fleet.waitForNoMirror(namespace, "web-0-east", HOST_GRACE_MS + 60_000);
        await waitForHosts(mode, namespace, "web-east", ["web-1", "web-2"]);
        await waitForA(resolver, `web-0.web-east.${namespace}.svc.cluster.local`, []);
        assert.deepEqual(await lookupA(resolver, `web-0.web-east.${namespace}.svc.cluster.local`), []);
      });

      it("scaled to 0 and back, the mirror stays headless: no hosts meanwhile, never an ordinary mirror", async () => {
        const headless = await fleet.waitForMirror(namespace, "web-east", (s) => s.spec?.clusterIP === "None");
        await setSlice(fleet, "east", namespace, "web", "web-abc12", []);
        await fleet.waitForNoMirror(namespace, "web-1-east", HOST_GRACE_MS + 60_000);
        await fleet.waitForNoMirror(namespace, "web-2-east");
        await waitForHosts(mode, namespace, "web-east", []);
        await waitForWriterIdle(controller, { reports: 2 });
        const empty = await fleet.localService(namespace, "web-east");
        assert.equal(empty?.metadata?.uid, headless.metadata?.uid, "the same headless mirror");
        assert.equal(empty?.spec?.clusterIP, "None");
        await setSlice(fleet, "east", namespace, "web", "web-abc12", ["web-0"]);
        await waitForHosts(mode, namespace, "web-east", ["web-0"]);
        assert.equal((await fleet.localService(namespace, "web-east"))?.metadata?.uid, headless.metadata?.uid);
      });
    });
  }

  describe("edge cases", () => {
    let controller: Supervisor;
    const namespace = "hl-edges";
    const row = (cluster: string) => controller.status().clusters.find((r) => r.cluster === cluster);
    before(() => {
      // Denied reads are tried again every 2 s instead of 60 s, so a test sees a granted read.
      controller = fleet.startInProcess({ endpointsApi: "endpoints" }, { deniedRetryMs: 2_000 });
    });
    after(async () => {
      await controller?.stop();
    });

    it("a headless Service without hostnames is an ordinary mirror; hostnames appearing make it headless, and back", async () => {
      await createHeadless(fleet, "east", namespace, "db");
      await setSlice(fleet, "east", namespace, "db", "db-x1", [undefined, undefined]);
      const ordinary = await fleet.waitForMirror(namespace, "db-east");
      assert.notEqual(ordinary.spec?.clusterIP, "None");
      assert.ok(ordinary.spec?.clusterIP);
      await fleet.waitForEndpoints(namespace, "db-east", (ep) => ep.subsets?.[0]?.addresses?.[0]?.ip === GATEWAY_IP);

      // clusterIP is immutable: the mirror is deleted and created again as headless.
      await setSlice(fleet, "east", namespace, "db", "db-x1", ["db-0", undefined]);
      const headless = await fleet.waitForMirror(namespace, "db-east", (s) => s.spec?.clusterIP === "None");
      assert.notEqual(headless.metadata?.uid, ordinary.metadata?.uid);
      await waitForHosts("endpoints", namespace, "db-east", ["db-0"]);

      await setSlice(fleet, "east", namespace, "db", "db-x1", [undefined]);
      await fleet.waitForMirror(namespace, "db-east", (s) => !!s.spec?.clusterIP && s.spec.clusterIP !== "None");
      await fleet.waitForNoMirror(namespace, "db-0-east");
      await fleet.waitForEndpoints(namespace, "db-east", (ep) => ep.subsets?.[0]?.addresses?.[0]?.ip === GATEWAY_IP);
    });

    it("a headless Service replaced by a ClusterIP Service of the same name: an ordinary mirror, its hosts' mirrors gone", async () => {
      await createHeadless(fleet, "east", namespace, "cache");
      await setSlice(fleet, "east", namespace, "cache", "cache-x1", ["cache-0"]);
      await fleet.waitForMirror(namespace, "cache-east", (s) => s.spec?.clusterIP === "None");
      await fleet.waitForMirror(namespace, "cache-0-east");
      await fleet.deleteService("east", namespace, "cache");
      await createHeadless(fleet, "east", namespace, "cache", { headless: false });
      await fleet.waitForMirror(namespace, "cache-east", (s) => !!s.spec?.clusterIP && s.spec.clusterIP !== "None");
      await fleet.waitForNoMirror(namespace, "cache-0-east");
    });

    it("reports hostnames that cannot be mirrored and mirrors the others", async () => {
      const long = `h${"x".repeat(59)}`; // a DNS label, but "<h>-east" is 65 characters
      await createHeadless(fleet, "east", namespace, "kv");
      await setSlice(fleet, "east", namespace, "kv", "kv-x1", ["0kv", "kv-0", long]);
      await waitForHosts("endpoints", namespace, "kv-east", ["kv-0"]);
      const problem = await eventually("kv's problem in east's status", () =>
        row("east")?.problems.find((p) => p.remote === `${namespace}/kv`),
      );
      assert.equal(problem.reason, "headless-hostname-invalid");
      assert.match(problem.message, /per-host mirror name 0kv-east is not a valid Service name/);
      assert.match(problem.message, /must be at most 63 characters/);
      const event = await fleet.waitForSecretEvent("cluster-credentials-east", "MirrorSkipped", (e) =>
        (e.message ?? "").includes(`${namespace}/kv`),
      );
      assert.equal(event.type, "Warning");
      assert.equal(await fleet.localService(namespace, "0kv-east"), undefined);
    });

    it("a remote that denies reading EndpointSlices from the start: its headless Services, never read and never mirrored headless, are ordinary mirrors; reported once, the rest unharmed", async () => {
      const token = await mintServiceAccountToken(fleet.kubeConfig("east"), {
        namespace: REMOTE_READER_NAMESPACE,
        serviceAccount: "fleet-mirror-reader-no-slices",
        role: {
          kind: "ClusterRole",
          name: "fleet-mirror-remote-reader-no-slices",
          rules: REMOTE_READER_RULES.filter((r) => !r.resources.includes("endpointslices")),
        },
      });
      await fleet.createSecret(
        fleet.secretBody({
          secretName: "cluster-credentials-noslices",
          clusterName: "noslices",
          kubeconfig: await fleet.remoteKubeconfig("east", token),
        }) as V1Secret,
      );
      const web = await fleet.waitForMirror(namespace, "kv-noslices");
      assert.notEqual(web.spec?.clusterIP, "None");
      await fleet.waitForEndpoints(
        namespace,
        "kv-noslices",
        (ep) => ep.subsets?.[0]?.addresses?.[0]?.ip === GATEWAY_IP,
      );
      const denied = await eventually("noslices' denied read in its status", () => row("noslices")?.deniedReads?.[0]);
      assert.equal(denied.resource, "discovery.k8s.io/endpointslices");
      const event = await fleet.waitForSecretEvent("cluster-credentials-noslices", "RemoteReadDenied");
      assert.equal(event.type, "Warning");
      assert.match(
        event.message ?? "",
        /headless Services keep the hosts last read, and one never read is mirrored as an ordinary Service unless its mirror is headless already/,
      );
      const metrics = await supervisorMetrics(controller);
      assert.match(
        metrics,
        /^fleet_mirror_cluster_reads_denied\{cluster="noslices",resource="discovery.k8s.io\/endpointslices"\} 1$/m,
      );
      // Another headless Service later: still an ordinary mirror, and no second report.
      await createHeadless(fleet, "east", namespace, "late");
      await setSlice(fleet, "east", namespace, "late", "late-x1", ["late-0"]);
      await fleet.waitForMirror(namespace, "late-noslices", (s) => s.spec?.clusterIP !== "None");
      await fleet.waitForMirror(namespace, "late-0-east");
      assert.equal(await fleet.localService(namespace, "late-0-noslices"), undefined);
      assert.equal((await fleet.secretEvents("cluster-credentials-noslices", "RemoteReadDenied")).length, 1);
      // The cluster with the full role is untouched by its neighbour's denial.
      assert.equal((await fleet.waitForMirror(namespace, "kv-east")).spec?.clusterIP, "None");
      assert.equal(row("east")?.deniedReads, undefined);
    });

    it("once the role grants EndpointSlices, the next retry lists them and the Services turn headless", async () => {
      await mintServiceAccountToken(fleet.kubeConfig("east"), {
        namespace: REMOTE_READER_NAMESPACE,
        serviceAccount: "fleet-mirror-reader-no-slices",
        role: { kind: "ClusterRole", name: "fleet-mirror-remote-reader-no-slices", rules: REMOTE_READER_RULES },
      });
      await fleet.waitForMirror(namespace, "kv-noslices", (s) => s.spec?.clusterIP === "None");
      await fleet.waitForMirror(namespace, "kv-0-noslices");
      await eventually("noslices without a denied read", () => (row("noslices")?.deniedReads ? undefined : true));
    });

    it("an actor restarted under a role that lost EndpointSlices keeps the headless mirrors it cannot read: no flip, no per-host mirror lost", async () => {
      const headless = await fleet.waitForMirror(namespace, "kv-noslices", (s) => s.spec?.clusterIP === "None");
      const host = await fleet.waitForMirror(namespace, "kv-0-noslices", (s) => !!s.spec?.clusterIP);
      const rotate = async (rules: typeof REMOTE_READER_RULES): Promise<void> => {
        const token = await mintServiceAccountToken(fleet.kubeConfig("east"), {
          namespace: REMOTE_READER_NAMESPACE,
          serviceAccount: "fleet-mirror-reader-no-slices",
          role: { kind: "ClusterRole", name: "fleet-mirror-remote-reader-no-slices", rules },
        });
        const kubeconfig = Buffer.from(await fleet.remoteKubeconfig("east", token)).toString("base64");
        await fleet.editSecret("cluster-credentials-noslices", (secret) => {
          secret.data = { ...secret.data, kubeconfig };
        });
      };
      // A credentials rotation: the new incarnation's very first slice read is refused.
      await rotate(REMOTE_READER_RULES.filter((r) => !r.resources.includes("endpointslices")));
      await eventually("noslices' new incarnation denied", () => row("noslices")?.deniedReads?.[0]);
      await eventually("noslices synced", () => (row("noslices")?.state === "synced" ? true : undefined));
      await waitForWriterIdle(controller, { reports: 2 });
      const kept = await fleet.localService(namespace, "kv-noslices");
      assert.equal(kept?.metadata?.uid, headless.metadata?.uid, "the headless mirror kept");
      assert.equal(kept?.spec?.clusterIP, "None");
      const keptHost = await fleet.localService(namespace, "kv-0-noslices");
      assert.equal(keptHost?.metadata?.uid, host.metadata?.uid, "its per-host mirror kept");
      // The read granted again: listed, and still the same objects.
      await rotate(REMOTE_READER_RULES);
      await eventually("noslices without a denied read", () => (row("noslices")?.deniedReads ? undefined : true));
      await waitForWriterIdle(controller, { reports: 2 });
      assert.equal((await fleet.localService(namespace, "kv-0-noslices"))?.metadata?.uid, host.metadata?.uid);
      assert.equal((await fleet.localService(namespace, "kv-noslices"))?.metadata?.uid, headless.metadata?.uid);
    });
  });
});
