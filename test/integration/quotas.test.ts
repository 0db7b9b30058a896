/**
 * Per-cluster quotas on real API servers: what one remote cluster may make the local
 * cluster hold. `--max-mirrors-per-cluster` (local Services its exports ask for: the
 * first in name order that fit; the rest reported, not written), `--max-hosts-per-
 * headless-service` (per-host Services of one headless Service), and
 * `--max-namespaces-per-cluster` (Namespaces created for it: in name order; a mirror
 * whose namespace would pass it is blocked and reported). Each is reached and reported,
 * and what is refused is never written.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { Fleet } from "../helpers/fleet.ts";
import { createHeadless, setSlice } from "../helpers/headless.ts";
import { eventually, statusCode } from "../helpers/kube.ts";
import { waitForClusterRow } from "../helpers/supervision.ts";

const GATEWAY_IP = "198.18.0.50";

describe("per-cluster quotas", () => {
  let fleet: Fleet;
  let controller: Supervisor | undefined;
  const started = new Set<Supervisor>();
  const start = (...args: Parameters<Fleet["startInProcess"]>): Supervisor => {
    controller = fleet.startInProcess(...args);
    started.add(controller);
    return controller;
  };

  const localNamespace = async (name: string): Promise<boolean> => {
    try {
      await fleet.local.readNamespace({ name });
      return true;
    } catch (error) {
      if (statusCode(error) === 404) return false;
      throw error;
    }
  };
  const blocked = (key: string) =>
    controller?.status().writer?.clusters["east"]?.blocked.find((b) => b.key === key) ?? undefined;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: GATEWAY_IP }] });
    await fleet.register("east");
    // The first two tests' namespaces exist locally: only the third counts created ones.
    for (const ns of ["quota-m", "quota-h"]) await fleet.ensureNamespace("local", ns);
  });
  after(async () => {
    for (const supervisor of started) await supervisor.stop();
    await fleet?.stop();
  });

  it("--max-mirrors-per-cluster 3: the first three exports in name order are mirrored, the fourth is reported and not written until one goes", async () => {
    for (const name of ["a", "b", "c", "d"]) await fleet.createService("east", "quota-m", name);
    const running = start({ maxMirrorsPerCluster: 3 });
    const row = await waitForClusterRow(running, "east", "the fourth export reported over the quota", (r) =>
      r.problems.some((p) => p.remote === "quota-m/d" && p.reason === "cluster-quota"),
    );
    assert.match(row.problems.find((p) => p.remote === "quota-m/d")?.message ?? "", /quota of 3/);
    for (const name of ["a", "b", "c"]) await fleet.waitForMirror("quota-m", `${name}-east`);
    // The problem is the sender's decision about d: its mirror was never sent.
    assert.equal(await fleet.localService("quota-m", "d-east"), undefined);
    const event = await fleet.waitForSecretEvent("cluster-credentials-east", "MirrorSkipped", (e) =>
      /quota-m\/d/.test(e.message ?? ""),
    );
    assert.match(event.message ?? "", /cluster-quota/);

    await fleet.deleteService("east", "quota-m", "b");
    await fleet.waitForMirror("quota-m", "d-east");
    await fleet.waitForNoMirror("quota-m", "b-east");
    await waitForClusterRow(running, "east", "no quota problem left", (r) =>
      r.problems.every((p) => p.reason !== "cluster-quota"),
    );
    await running.stop();
    started.delete(running);
  });

  it("--max-hosts-per-headless-service 2: two per-host Services, the third host reported", async () => {
    await createHeadless(fleet, "east", "quota-h", "db");
    await setSlice(fleet, "east", "quota-h", "db", "db-x1", ["db-0", "db-1", "db-2"]);
    const running = start({ maxHostsPerHeadlessService: 2 });
    const row = await waitForClusterRow(running, "east", "the third host reported", (r) =>
      r.problems.some((p) => p.remote === "quota-h/db" && /more than the 2 mirrored/.test(p.message)),
    );
    assert.ok(row);
    for (const host of ["db-0", "db-1"]) await fleet.waitForMirror("quota-h", `${host}-east`);
    await fleet.waitForMirror("quota-h", "db-east", (s) => s.spec?.clusterIP === "None");
    assert.equal(await fleet.localService("quota-h", "db-2-east"), undefined);
    await running.stop();
    started.delete(running);
  });

  it("--max-namespaces-per-cluster 2: two Namespaces created in name order, the third mirror blocked and reported; an existing namespace is not counted", async () => {
    await fleet.ensureNamespace("local", "quota-n0");
    for (const ns of ["quota-n0", "quota-n3", "quota-n1", "quota-n2"]) await fleet.createService("east", ns, "web");
    start({ maxNamespacesPerCluster: 2 });
    const refused = await eventually("quota-n3/web-east blocked by the namespace quota", () => {
      const b = blocked("quota-n3/web-east");
      return b?.reason === "namespace-quota" ? b : undefined;
    });
    assert.match(refused.message, /quota of 2/);
    for (const ns of ["quota-n0", "quota-n1", "quota-n2"]) await fleet.waitForMirror(ns, "web-east");
    assert.equal(await localNamespace("quota-n3"), false, "the third namespace was not created");
    const created = await fleet.local.readNamespace({ name: "quota-n1" });
    assert.equal(created.metadata?.labels?.["mirror.linkerd.io/cluster-name"], "east");
  });
});
