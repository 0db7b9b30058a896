import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ClusterSettings, GatewayView } from "../../src/core/desired.ts";
import {
  INITIAL_MCS_AVAILABILITY,
  type McsAvailability,
  type McsEvent,
  mcsExportFor,
  mcsForbiddenProblem,
  mcsTransition,
  serves,
} from "../../src/core/mcs.ts";
import type { Service } from "../../src/core/objects.ts";
import { deepFreeze } from "../helpers/freeze.ts";

/** Feeds `events` from the initial state; returns every step's state and effects. */
function run(events: readonly McsEvent[], from: McsAvailability = INITIAL_MCS_AVAILABILITY) {
  let availability = from;
  return events.map((event) => {
    const step = mcsTransition(availability, event);
    availability = step.availability;
    return { state: step.availability.state, effects: [...step.effects], changed: step.changed, availability };
  });
}

const FORBIDDEN: McsEvent = { kind: "watch-failed", status: 403, message: "serviceexports is forbidden" };

describe("availability of ServiceExports in a remote cluster (SPEC §12)", () => {
  it("watches when discovery serves them and is active once the first list completes", () => {
    const steps = run([{ kind: "discovered", served: true }, { kind: "listed" }]);
    assert.deepEqual(
      steps.map((s) => [s.state, s.effects, s.availability.settled, s.availability.known]),
      [
        ["watching", ["start-watch"], false, false],
        ["active", [], true, true],
      ],
    );
  });

  it("is not installed when discovery does not serve them: known at once (none exist), and re-checks", () => {
    const [step] = run([{ kind: "discovered", served: false }]);
    assert.equal(step?.state, "not-installed");
    assert.deepEqual(step?.effects, ["schedule-recheck"]);
    assert.equal(step?.availability.settled, true);
    assert.equal(step?.availability.known, true);
    assert.match(step?.availability.message ?? "", /not installed/);
  });

  it("picks up CRDs installed later: a recheck that finds them starts the watch", () => {
    const steps = run([
      { kind: "discovered", served: false },
      { kind: "discovered", served: false },
      { kind: "discovered", served: true },
      { kind: "listed" },
    ]);
    assert.deepEqual(
      steps.map((s) => [s.state, s.effects, s.changed]),
      [
        ["not-installed", ["schedule-recheck"], true],
        ["not-installed", ["schedule-recheck"], false],
        ["watching", ["start-watch"], true],
        ["active", [], true],
      ],
    );
  });

  it("stops the watch on 403, keeps what it held, and stays forbidden through its rechecks (reported once)", () => {
    const steps = run([
      { kind: "discovered", served: true },
      FORBIDDEN,
      { kind: "discovered", served: true },
      FORBIDDEN,
      { kind: "discovered", served: true },
      { kind: "listed" },
    ]);
    assert.deepEqual(
      steps.map((s) => [s.state, s.effects, s.changed]),
      [
        ["watching", ["start-watch"], true],
        ["forbidden", ["stop-watch", "schedule-recheck"], true],
        ["forbidden", ["start-watch"], false],
        ["forbidden", ["stop-watch", "schedule-recheck"], false],
        ["forbidden", ["start-watch"], false],
        ["active", [], true],
      ],
    );
    assert.equal(steps[1]?.availability.settled, true);
    assert.equal(steps[1]?.availability.known, false, "refused before any list: the exports are unknown, not none");
    assert.equal(steps[5]?.availability.known, true);
  });

  it("keeps the exports known when a read is refused after a list (what was listed stays)", () => {
    const steps = run([{ kind: "discovered", served: true }, { kind: "listed" }, FORBIDDEN]);
    assert.deepEqual(steps[2]?.effects, ["stop-watch", "schedule-recheck"]);
    assert.equal(steps[2]?.availability.known, true);
  });

  it("forgets the exports when the CRD goes away under a running watch (404)", () => {
    const steps = run([
      { kind: "discovered", served: true },
      { kind: "listed" },
      { kind: "watch-failed", status: 404, message: "not found" },
    ]);
    assert.deepEqual(steps[2]?.effects, ["drop-watch", "schedule-recheck"]);
    assert.equal(steps[2]?.state, "not-installed");
  });

  it("leaves other watch failures to the watcher's own backoff", () => {
    const steps = run([
      { kind: "discovered", served: true },
      { kind: "listed" },
      { kind: "watch-failed", status: 500, message: "boom" },
    ]);
    assert.deepEqual(steps[2], { ...steps[1], effects: [], changed: false });
  });

  it("a list that fails before its first answer (500, a timeout) settles the read as unknown: the other modes are not held up", () => {
    const steps = run([
      { kind: "discovered", served: true },
      { kind: "watch-failed", status: 500, message: "conversion webhook failed" },
      { kind: "watch-failed", status: 0, message: "timed out" },
      { kind: "listed" },
    ]);
    assert.deepEqual(
      steps.map((s) => [s.state, s.effects, s.availability.settled, s.availability.known, s.availability.watching]),
      [
        ["watching", ["start-watch"], false, false, true],
        ["watching", [], true, false, true],
        ["watching", [], true, false, true],
        ["active", [], true, true, true],
      ],
    );
    assert.match(
      steps[1]?.availability.message ?? "",
      /failed \(conversion webhook failed\): they are unknown, not none/,
    );
    assert.deepEqual(
      steps.map((s) => s.changed),
      [true, true, false, true],
      "said once",
    );
    assert.equal(steps[3]?.availability.message, undefined);
  });

  it("reports a failed first discovery as unavailable: settled (the other modes are not held up) but unknown, never none; retries soon", () => {
    const steps = run([
      { kind: "discovery-failed", message: "ECONNRESET" },
      { kind: "discovered", served: true },
      { kind: "listed" },
    ]);
    assert.equal(steps[0]?.state, "unavailable");
    assert.deepEqual(
      steps[0]?.effects,
      ["schedule-retry"],
      "nothing known: retried with backoff, not after a whole period",
    );
    assert.equal(steps[0]?.availability.settled, true);
    assert.equal(steps[0]?.availability.known, false, "a failed discovery says nothing of which exports exist");
    assert.equal(steps[1]?.state, "watching");
    assert.equal(steps[1]?.availability.known, false);
    assert.equal(steps[2]?.availability.known, true);
  });

  it("a failed recheck of a cluster known not to serve them keeps it known (none)", () => {
    const steps = run([
      { kind: "discovered", served: false },
      { kind: "discovery-failed", message: "503" },
    ]);
    assert.equal(steps[1]?.state, "not-installed");
    assert.equal(steps[1]?.availability.known, true);
    assert.deepEqual(steps[1]?.effects, ["schedule-recheck"], "a known state waits its period");
  });

  it("never starts a second watch, and ignores events that do not apply", () => {
    const watching = run([{ kind: "discovered", served: true }])[0]?.availability as McsAvailability;
    assert.deepEqual(mcsTransition(watching, { kind: "discovered", served: true }).effects, []);
    assert.deepEqual(mcsTransition(INITIAL_MCS_AVAILABILITY, { kind: "listed" }).effects, []);
    assert.deepEqual(mcsTransition(INITIAL_MCS_AVAILABILITY, FORBIDDEN).effects, []);
  });

  it("turns forbidden into one problem of the cluster, and nothing else into one", () => {
    const forbidden = run([{ kind: "discovered", served: true }, FORBIDDEN])[1]?.availability as McsAvailability;
    const problem = mcsForbiddenProblem("east", forbidden);
    assert.equal(problem?.reason, "export-mode-forbidden");
    assert.equal(problem?.remote, "multicluster.x-k8s.io/serviceexports");
    assert.match(problem?.message ?? "", /forbidden \(403\)/);
    assert.equal(mcsForbiddenProblem("east", INITIAL_MCS_AVAILABILITY), undefined);
  });

  it("reads a discovery document", () => {
    assert.equal(serves({ resources: [{ name: "serviceimports" }, { name: "serviceexports" }] }), true);
    assert.equal(serves({ resources: [{ name: "serviceimports" }] }), false);
    assert.equal(serves("nope"), false);
  });
});

const settings: ClusterSettings = deepFreeze({
  name: "east",
  domain: "cluster.local",
  excludedNamespaces: ["kube-system"],
  defaultGateway: { name: "linkerd-gateway", namespace: "linkerd-multicluster" },
});
const gateway: GatewayView = deepFreeze({
  exists: true,
  addresses: ["198.51.100.1", "198.51.100.2"],
  notReadyAddresses: ["198.51.100.2"],
  incomingPort: 4143,
  identity: "gw.east",
});
const web: Service = deepFreeze({
  metadata: { name: "web", namespace: "shop" },
  spec: { ports: [{ name: "http", port: 80, targetPort: 8080 }] },
});
const exportOf = (namespace: string, name = "web") =>
  deepFreeze({ metadata: { name, namespace, creationTimestamp: "2026-12-04T10:00:00Z" } });

describe("what a ServiceExport contributes (SPEC §12)", () => {
  it("exports the Service of its name through the default gateway, with its creation time", () => {
    const outcome = mcsExportFor(settings, exportOf("shop"), web, gateway);
    assert.deepEqual(outcome, {
      kind: "export",
      export: {
        cluster: "east",
        namespace: "shop",
        name: "web",
        remote: "shop/web",
        ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
        addresses: ["198.51.100.1", "198.51.100.2"],
        notReadyAddresses: ["198.51.100.2"],
        endpointPorts: [{ name: "http", protocol: "TCP", port: 4143 }],
        identity: "gw.east",
        exportedAt: "2026-12-04T10:00:00Z",
        spec: { type: "ClusterSetIP", ports: [{ name: "http", protocol: "TCP", port: 80 }], sessionAffinity: "None" },
      },
    });
  });

  it("exports nothing of an ExternalName Service, and says why (SPEC §16)", () => {
    const external = deepFreeze({
      metadata: web.metadata,
      spec: { type: "ExternalName", externalName: "example.com" },
    });
    const outcome = mcsExportFor(settings, exportOf("shop"), external, gateway);
    assert.equal(outcome.kind === "problem" ? outcome.problem.reason : outcome.kind, "service-export-invalid-type");
  });

  it("records the version discovery found, and forgets it when the watch stops", () => {
    const [found] = run([{ kind: "discovered", served: true, version: "v1alpha1" }]);
    assert.equal(found?.availability.version, "v1alpha1");
    const [, gone] = run([
      { kind: "discovered", served: true, version: "v1beta1" },
      { kind: "watch-failed", status: 404, message: "gone" },
    ]);
    assert.equal(gone?.availability.version, undefined);
  });

  it("exports no addresses while the gateway is unusable", () => {
    const outcome = mcsExportFor(settings, exportOf("shop"), web, { exists: false, addresses: [] });
    assert.equal(outcome.kind, "export");
    if (outcome.kind === "export") {
      assert.deepEqual(outcome.export.addresses, []);
      assert.deepEqual(outcome.export.endpointPorts, []);
    }
  });

  it("reports a ServiceExport without its Service, in an excluded namespace, or of a Service without ports", () => {
    const missing = mcsExportFor(settings, exportOf("shop", "gone"), undefined, gateway);
    assert.equal(missing.kind === "problem" && missing.problem.reason, "service-export-without-service");
    assert.equal(missing.kind === "problem" && missing.problem.remote, "shop/gone");
    const excluded = mcsExportFor(settings, exportOf("kube-system"), web, gateway);
    assert.equal(excluded.kind === "problem" && excluded.problem.reason, "excluded-namespace");
    assert.match(excluded.kind === "problem" ? excluded.problem.message : "", /^ServiceExport: /);
    const portless = mcsExportFor(
      settings,
      exportOf("shop"),
      deepFreeze({ metadata: web.metadata, spec: {} }),
      gateway,
    );
    assert.equal(portless.kind === "problem" && portless.problem.reason, "no-ports");
  });
});
