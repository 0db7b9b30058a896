/**
 * Shadow mode (`run --dry-run`) on real API servers, judged by the local API server's
 * audit log: a local cluster whose mirrors were written by another controller (another
 * fleet-mirror, as its own Pod-bound identity, then edited by hand as linkerd's service
 * mirror or a person would: some equal to what fleet-mirror writes, one changed, one
 * missing, one extra, one name held by a user's object, one in a namespace that does
 * not exist). The dry run reports exactly the writes that differ (status, metric, a log
 * line per object), follows the world as it changes, and the API server records no
 * write of any kind by its identity. Then a real run starts: what it writes is exactly
 * what the dry run said it would. Again in the default EndpointSlice mode, where a
 * missing mirror's slices can only be planned with a Service the dry run imagines, and
 * the linkerd-shaped Endpoints are converted: the real run writes exactly that plan too.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { V1Service } from "@kubernetes/client-node";
import type { AdminStatus } from "../../src/admin/source.ts";
import { AuditLog, describeWrites, MIRROR_RESOURCES } from "../helpers/audit.ts";
import { cli, show } from "../helpers/cli.ts";
import { Fleet } from "../helpers/fleet.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { Replicas } from "../helpers/replicas.ts";

const NS = "shop";
const ENDPOINTS = ["--endpoints-api", "endpoints"];
const MIRROR_LABELS = {
  "mirror.linkerd.io/mirrored-service": "true",
  "mirror.linkerd.io/cluster-name": "east",
  "mirror.linkerd.io/remote-gateway-name": "gateway",
  "mirror.linkerd.io/remote-gateway-ns": "gateway",
};

/** The dry run's plan as `verb Kind namespace/name` lines, sorted; undefined before it is ready. */
function planOf(status: AdminStatus): string[] | undefined {
  const dryRun = status.writer?.dryRun;
  if (!status.writer?.ready || !dryRun) return undefined;
  return dryRun.planned.map((w) => `${w.verb} ${w.kind} ${w.object}`).sort();
}

const KINDS: Record<string, string> = {
  services: "Service",
  endpoints: "Endpoints",
  endpointslices: "EndpointSlice",
  namespaces: "Namespace",
};

/** The mirror writes `identity` made since `since`, as `verb Kind namespace/name` lines, sorted. */
function writtenBy(audit: AuditLog, identity: string, since: number): string[] {
  return audit
    .writes({ identity, since, resources: [...MIRROR_RESOURCES, "namespaces"] })
    .map((w) => `${w.verb} ${KINDS[w.resource] ?? w.resource} ${w.namespace ? `${w.namespace}/` : ""}${w.name}`)
    .sort();
}

describe("run --dry-run beside mirrors another controller wrote", () => {
  let fleet: Fleet;
  let audit: AuditLog;
  let replicas: Replicas;

  before(async () => {
    fleet = await Fleet.start(["east"], { audit: true });
    const local = fleet.plane.cluster("local");
    assert.ok(local.auditLogPath, "the local API server writes an audit log");
    audit = new AuditLog(local.auditLogPath, fleet.kubeConfig("local"));
    replicas = new Replicas(fleet);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.register("east");
  });
  after(async () => {
    await replicas?.stop();
    await fleet?.stop();
  });

  async function replaceLocal(name: string, mutate: (svc: V1Service) => void): Promise<void> {
    const svc = await fleet.local.readNamespacedService({ namespace: NS, name });
    mutate(svc);
    await fleet.local.replaceNamespacedService({ namespace: NS, name, body: svc });
  }

  async function deleteLocal(name: string): Promise<void> {
    for (const remove of [
      () => fleet.local.deleteNamespacedService({ namespace: NS, name }),
      () => fleet.local.deleteNamespacedEndpoints({ namespace: NS, name }),
    ]) {
      try {
        await remove();
      } catch (error) {
        if (statusCode(error) !== 404) throw error;
      }
    }
  }

  const setPort = (port: number) => (svc: V1Service) => {
    svc.spec = { ...svc.spec, ports: [{ name: "http", port, targetPort: 8080, protocol: "TCP" }] };
  };

  it("reports exactly the writes that differ, follows the world, writes nothing; a real run then writes exactly that", async (t) => {
    try {
      // Another controller (another fleet-mirror, its own identity) writes the mirrors, then stops.
      for (const name of ["same", "changed", "missing", "taken"]) await fleet.createService("east", NS, name);
      const other = await replicas.add("other-controller", { args: ENDPOINTS });
      for (const name of ["same", "changed", "missing", "taken"])
        await fleet.waitForEndpoints(NS, `${name}-east`, (e) => (e.subsets?.length ?? 0) > 0, 60_000);
      await other.kill();

      // What linkerd's service mirror (or a person) leaves behind, as the admin identity.
      await replaceLocal("changed-east", setPort(81));
      await deleteLocal("missing-east");
      await fleet.local.createNamespacedService({
        namespace: NS,
        body: {
          metadata: { name: "extra-east", labels: MIRROR_LABELS },
          spec: { ports: [{ name: "http", port: 80, protocol: "TCP" }] },
        },
      });
      await deleteLocal("taken-east");
      await fleet.local.createNamespacedService({
        namespace: NS,
        body: { metadata: { name: "taken-east" }, spec: { ports: [{ name: "web", port: 8080, protocol: "TCP" }] } },
      });
      await fleet.createService("east", "fresh", "api"); // no namespace "fresh" in the local cluster

      const dry = await replicas.add("dry-run", { args: ["--dry-run", ...ENDPOINTS] });
      const expected = [
        "create Endpoints fresh/api-east",
        "create Endpoints shop/missing-east",
        "create Namespace fresh",
        "create Service fresh/api-east",
        "create Service shop/missing-east",
        "delete Service shop/extra-east",
        "update Service shop/changed-east",
      ];
      const same = (want: readonly string[]) => (status: AdminStatus) => {
        const plan = planOf(status);
        return plan && JSON.stringify(plan) === JSON.stringify(want) ? status : undefined;
      };
      const status = await dry.waitForStatus(`plan ${expected.join(", ")}`, same(expected));
      assert.deepEqual(
        status.writer?.clusters["east"]?.blocked.map((b) => `${b.key} ${b.reason}`),
        ["shop/taken-east user-owned"],
        "the user's Service holding taken-east is a conflict, left alone",
      );

      // A log line per object; the gauge per verb and resource; the status command's view.
      for (const line of expected) {
        const [verb, kind, object] = line.split(" ");
        await dry.waitForLog(new RegExp(`^dry run: would ${verb} ${kind} ${object}( |$)`));
      }
      const adminUrl = await dry.process.adminUrl();
      const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
      for (const series of [
        'fleet_mirror_dry_run_planned_writes{verb="create",resource="services"} 2',
        'fleet_mirror_dry_run_planned_writes{verb="create",resource="endpoints"} 2',
        'fleet_mirror_dry_run_planned_writes{verb="create",resource="namespaces"} 1',
        'fleet_mirror_dry_run_planned_writes{verb="update",resource="services"} 1',
        'fleet_mirror_dry_run_planned_writes{verb="delete",resource="services"} 1',
      ])
        assert.ok(metrics.includes(series), `no ${series} in\n${metrics}`);
      const shown = await cli(["status", "--admin-url", adminUrl]);
      assert.equal(shown.code, 0, show(shown));
      assert.match(shown.stdout, /DRY RUN: nothing is written\. 7 writes planned/, show(shown));
      assert.match(shown.stdout, /update\s+Service\s+shop\/changed-east\s+east/, show(shown));
      assert.match(shown.stdout, /shop\/taken-east\s+east\s+user-owned/, show(shown));

      // Level-triggered: a mirror made equal leaves the plan, one made different enters it.
      await replaceLocal("changed-east", setPort(80));
      await replaceLocal("same-east", setPort(82));
      const now = [...expected.filter((l) => !l.endsWith("changed-east")), "update Service shop/same-east"].sort();
      await dry.waitForStatus(`plan ${now.join(", ")}`, same(now));
      await dry.waitForLog(/^dry run: would update Service shop\/changed-east .*: no longer$/);

      // Zero writes of any kind by the dry run's identity, not even a failed one; the other
      // controller's writes are attributed to it (so the identity filter does see writes).
      await audit.flush();
      assert.deepEqual(audit.writes({ identity: dry.name, includeFailed: true }), [], "the dry run wrote");
      assert.ok(audit.writes({ identity: other.name }).length > 0, "the other controller's writes are in the log");
      await dry.kill();

      // The real run: its writes are exactly the plan (Events aside: a dry run never records any).
      const since = Date.now();
      const real = await replicas.add("real-run", { args: ENDPOINTS });
      await fleet.waitForMirror("fresh", "api-east");
      await fleet.waitForNoMirror(NS, "extra-east");
      await fleet.waitForMirror(NS, "same-east", (svc) => svc.spec?.ports?.[0]?.port === 80);
      await fleet.waitForEndpoints(NS, "missing-east", (e) => (e.subsets?.length ?? 0) > 0);
      await fleet.waitForEndpoints("fresh", "api-east", (e) => (e.subsets?.length ?? 0) > 0);
      await eventually("the real run to report its conflict", async () => {
        const s = await real.status();
        return s.writer?.clusters["east"]?.blocked.some((b) => b.key === "shop/taken-east") ? true : undefined;
      });
      await audit.flush();
      assert.deepEqual(
        writtenBy(audit, real.name, since),
        now,
        `the real run wrote:\n${describeWrites(audit.writes({ identity: real.name }))}`,
      );
      await real.kill();
    } catch (error) {
      t.diagnostic(replicas.tails());
      t.diagnostic(describeWrites(audit.all().filter((w) => !w.username.startsWith("system:kube"))));
      throw error;
    }
  });

  it("in the default EndpointSlice mode, plans the slices a new mirror's Service would own, and a real run writes exactly the plan", async (t) => {
    try {
      // The mirrors of the first test are linkerd-shaped (Endpoints): this mode converts
      // them all, and a mirror missing here gets its Service and then its slice.
      await deleteLocal("same-east");
      const dry = await replicas.add("dry-run-slices", { args: ["--dry-run"] });
      // Settled: every key planned (queue empty) once the cluster's complete list is in.
      const plan = await dry.waitForStatus("a settled plan with the missing mirror's slice", (status) => {
        const lines = planOf(status);
        const settled = status.writer?.clusters["east"]?.complete === true && status.writer.queueDepth === 0;
        return settled && lines?.some((l) => l.startsWith("create EndpointSlice shop/same-east")) ? lines : undefined;
      });
      assert.ok(plan.includes("create Service shop/same-east"), plan.join("\n"));
      assert.ok(plan.includes("delete Endpoints shop/missing-east"), plan.join("\n"));
      await audit.flush();
      assert.deepEqual(audit.writes({ identity: dry.name, includeFailed: true }), [], "the dry run wrote");
      await dry.kill();

      const since = Date.now();
      const real = await replicas.add("real-run-slices");
      await real.waitForStatus("the real run settled", (status) =>
        status.writer?.ready && status.writer.queueDepth === 0 && status.writer.inFlight === 0 ? true : undefined,
      );
      await eventually("the real run's writes to equal the plan", async () => {
        await audit.flush();
        return JSON.stringify(writtenBy(audit, real.name, since)) === JSON.stringify(plan) ? true : undefined;
      }).catch(() => {
        assert.deepEqual(writtenBy(audit, real.name, since), plan, "the real run's writes");
      });
    } catch (error) {
      t.diagnostic(replicas.tails());
      t.diagnostic(describeWrites(audit.all().filter((w) => !w.username.startsWith("system:kube"))));
      throw error;
    }
  });
});
