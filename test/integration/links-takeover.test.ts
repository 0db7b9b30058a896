/**
 * Taking over from linkerd's current service mirror (SPEC §15), proven with the API
 * server's audit log. The local cluster holds exactly what linkerd's own service mirror
 * (the pinned release) wrote for the world of test/fixtures/linkerd/world.json: the
 * mirror Services and Endpoints, the gateway probe Endpoints and the Link's status, as
 * test/fixtures/linkerd/takeover.json recorded them (generated from linkerd's source by
 * test/fixtures/linkerd/generate.ts), the remote Services' real resourceVersions put in
 * place of its tokens. The Link's status also holds one stale entry: what linkerd leaves
 * when a remote Service is deleted while its controller is down (its restart's orphan
 * collection deletes the mirror and leaves the entry).
 *
 * Then, as processes with Pod-bound identities (least-privilege, deploy/links/rbac.yaml):
 * `run --dry-run --links …` plans no write at all; `run --links …` writes nothing to the
 * mirrors and patches the Link's status once (the stale entry goes); restarted, nothing.
 * The gateway answers its probes (probe servers at its addresses), as linkerd's did.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { type LocalRoute, makeLocal } from "../../sandbox/local-addresses.ts";
import { ProbeServer } from "../../sandbox/probe-server.ts";
import type { AdminStatus } from "../../src/admin/source.ts";
import { AuditLog, describeWrites, MIRROR_RESOURCES } from "../helpers/audit.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";
import {
  createLink,
  createLinkSecret,
  installLinks,
  LINKS_NAMESPACE,
  mirroredCondition,
  patchLinkStatus,
  readLink,
  waitForLinkStatus,
} from "../helpers/links.ts";
import { type Replica, Replicas } from "../helpers/replicas.ts";

interface WorldService {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly ports: { name?: string; protocol: string; port: number; targetPort: number | string }[];
}
interface World {
  readonly link: { readonly name: string; readonly namespace: string; readonly spec: Record<string, unknown> };
  readonly namespaces: readonly string[];
  readonly services: readonly WorldService[];
}
interface Written {
  readonly metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  readonly spec?: object;
  readonly subsets?: object[];
}
interface Takeover {
  readonly source: { readonly release: string; readonly commit: string };
  readonly linkerd: { services: Written[]; endpoints: Written[]; linkStatus: { mirrorServices?: object[] } };
}

const read = <T>(file: string): T =>
  JSON.parse(readFileSync(new URL(`../fixtures/linkerd/${file}`, import.meta.url), "utf8")) as T;
const WORLD = read<World>("world.json");
const TAKEOVER = read<Takeover>("takeover.json");
const GATEWAY_IPS = String(WORLD.link.spec["gatewayAddress"]).split(",");
const ARGS = ["--links", LINKS_NAMESPACE, "--endpoints-api", "endpoints"];

/** Every `RV:<ns>/<name>` token in `value` replaced by the remote Service's real resourceVersion. */
function withVersions<T>(value: T, versions: ReadonlyMap<string, string>): T {
  return JSON.parse(
    JSON.stringify(value).replace(/RV:([a-z0-9-]+\/[a-z0-9-]+)/g, (token, key: string) => versions.get(key) ?? token),
  ) as T;
}

describe("taking over from linkerd's service mirror (SPEC §15)", () => {
  let fleet: Fleet;
  let audit: AuditLog;
  let replicas: Replicas;
  let route: LocalRoute;
  const probes: ProbeServer[] = [];

  before(async () => {
    route = await makeLocal("198.51.100.0/24");
    for (const ip of GATEWAY_IPS)
      probes.push(await ProbeServer.start(ip, Number((WORLD.link.spec["probeSpec"] as { port: string }).port)));
    fleet = await Fleet.start(["east"], { audit: true });
    const local = fleet.plane.cluster("local");
    assert.ok(local.auditLogPath);
    audit = new AuditLog(local.auditLogPath, fleet.kubeConfig("local"));
    replicas = new Replicas(fleet);
    await installLinks(fleet);
    // The remote world, and the remote Services' real resourceVersions.
    const versions = new Map<string, string>();
    for (const s of WORLD.services) {
      await fleet.ensureNamespace("east", s.namespace);
      const created = await fleet.api("east").createNamespacedService({
        namespace: s.namespace,
        body: { metadata: { name: s.name, labels: s.labels, annotations: s.annotations }, spec: { ports: s.ports } },
      });
      versions.set(`${s.namespace}/${s.name}`, created.metadata?.resourceVersion ?? "");
      // A ready endpoint, as the world linkerd mirrored had (linkerd empties the mirror of a Service without one).
      await fleet.api("east").createNamespacedEndpoints({
        namespace: s.namespace,
        body: {
          metadata: { name: s.name },
          subsets: [
            {
              addresses: [{ ip: "10.1.0.10" }],
              ports: s.ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.port, protocol: p.protocol })),
            },
          ],
        },
      });
    }
    // The local cluster as linkerd left it.
    for (const ns of WORLD.namespaces) await fleet.ensureNamespace("local", ns);
    const linkerd = withVersions(TAKEOVER.linkerd, versions);
    for (const svc of linkerd.services)
      await fleet.local.createNamespacedService({
        namespace: svc.metadata.namespace,
        body: { metadata: svc.metadata, spec: svc.spec as object },
      });
    for (const ep of linkerd.endpoints)
      await fleet.local.createNamespacedEndpoints({
        namespace: ep.metadata.namespace,
        body: { metadata: ep.metadata, subsets: ep.subsets as object[] },
      });
    await createLinkSecret(fleet, "east");
    await createLink(fleet, WORLD.link.name, WORLD.link.spec);
    const stale = {
      controllerName: "linkerd.io/service-mirror",
      remoteRef: { kind: "Service", name: "gone", namespace: "shop" },
      conditions: [
        {
          type: "Mirrored",
          status: "True",
          reason: "Mirrored",
          message: "",
          lastTransitionTime: "2026-01-01T00:00:00Z",
          localRef: { kind: "Service", name: "gone-east", namespace: "shop" },
        },
      ],
    };
    await patchLinkStatus(fleet, WORLD.link.name, {
      mirrorServices: [...(linkerd.linkStatus.mirrorServices ?? []), stale],
    });
  });
  after(async () => {
    await replicas?.stop();
    await fleet?.stop();
    for (const p of probes) await p.stop();
    await route?.release();
  });

  /** The controller's writer is idle over east's complete set, for `holdMs` (a report carries no time). */
  const converged = (status: AdminStatus): AdminStatus | undefined =>
    status.writer?.ready &&
    status.writer.queueDepth === 0 &&
    status.writer.inFlight === 0 &&
    status.writer.clusters["east"]?.complete
      ? status
      : undefined;

  /**
   * A positive marker that a window passed with `replica` running: every gateway address
   * answered `rounds` more probes (one per probe period, 3 s: the probes ran and their
   * results reached the actor), then `replica` is converged in reports made after that
   * (held over one report interval, 1 s: a report carries no time of its own).
   */
  const afterProbeRounds = async (replica: Replica, rounds: number): Promise<AdminStatus> => {
    const before = probes.map((p) => p.received);
    await eventually(`${rounds} more probe(s) answered at every gateway address`, () =>
      probes.every((p, i) => p.received >= (before[i] ?? 0) + rounds) ? true : undefined,
    );
    let since: number | undefined;
    return replica.waitForStatus("converged, held over a report interval", (status) => {
      if (!converged(status)) {
        since = undefined;
        return undefined;
      }
      since ??= Date.now();
      return Date.now() - since >= 1_200 ? status : undefined;
    });
  };

  it(`plans no write beside linkerd's ${TAKEOVER.source.release} mirrors, then takes over writing nothing but the Link's status`, async (t) => {
    try {
      // The dry run: watches and plans everything, writes nothing at all.
      const dry = await replicas.add("dry-run", { args: ["--dry-run", ...ARGS] });
      await dry.waitForStatus("the dry run converged", converged, 120_000);
      // Held: the plan must stay empty across several writer reports and probe rounds.
      for (let i = 0; i < 2; i++) {
        const status = await afterProbeRounds(dry, 1);
        assert.deepEqual(status.writer?.dryRun?.planned, [], "the dry run planned writes");
        assert.deepEqual(status.writer?.clusters["east"]?.blocked, []);
      }
      await audit.flush();
      assert.deepEqual(audit.writes({ identity: dry.name, includeFailed: true }), [], "the dry run wrote");
      await dry.kill();

      // The real run: zero mirror writes; the Link's status patched once, the stale entry gone.
      const real = await replicas.add("real-run", { args: ARGS });
      await real.waitForStatus("the real run converged", converged, 120_000);
      const status = await waitForLinkStatus(
        fleet,
        WORLD.link.name,
        (s) => mirroredCondition(s.mirrorServices, "shop/gone") === undefined,
        60_000,
      );
      assert.equal(mirroredCondition(status.mirrorServices, "shop/web"), "True/Mirrored");
      await afterProbeRounds(real, 1);
      await audit.flush();
      assert.deepEqual(
        audit
          .writes({ identity: real.name, resources: [...MIRROR_RESOURCES, "namespaces"] })
          .map((w) => `${w.verb} ${w.resource} ${w.namespace}/${w.name}`),
        [],
        "the real run wrote to the mirrors",
      );
      assert.deepEqual(
        audit
          .writes({ identity: real.name, resources: ["links/status"] })
          .map((w) => `${w.verb} ${w.namespace}/${w.name}`),
        [`patch ${LINKS_NAMESPACE}/${WORLD.link.name}`],
      );
      const after = (await readLink(fleet, WORLD.link.name))?.metadata.resourceVersion;
      await real.kill();

      // Restarted over a converged world: nothing at all.
      const since = Date.now();
      const again = await replicas.add("restarted", { args: ARGS });
      await again.waitForStatus("the restarted run converged", converged, 120_000);
      await afterProbeRounds(again, 1);
      await audit.flush();
      const writes = audit.writes({ identity: again.name, since }).filter((w) => w.resource !== "events");
      assert.deepEqual(writes, [], describeWrites(writes));
      assert.equal((await readLink(fleet, WORLD.link.name))?.metadata.resourceVersion, after);
    } catch (error) {
      t.diagnostic(replicas.tails());
      t.diagnostic(describeWrites(audit.all().filter((w) => !w.username.startsWith("system:"))));
      throw error;
    }
  });

  it("leaves linkerd's gateway probe Endpoints alone (not a mirror: no mirrored-service label)", async () => {
    const probe = await eventually("probe-gateway-east", () =>
      fleet.local.readNamespacedEndpoints({ namespace: LINKS_NAMESPACE, name: "probe-gateway-east" }),
    );
    assert.equal(probe.metadata?.labels?.["mirror.linkerd.io/cluster-name"], "east");
  });
});
