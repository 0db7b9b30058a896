/**
 * `check` and `status` for fleet-wide Services (SPEC §11), run as child processes against
 * a real control plane with the controller running as `fleet-mirror run`: `check` reports
 * a user's object under a name a fleet-wide Service of the remote members would take, as
 * it reports a mirror's name conflict; `status` shows each fleet-wide Service with its
 * member clusters, ready and not-ready addresses and conflicts, from the controller or,
 * when none answers, from the fleet-wide Services on the local cluster.
 *
 * One fleet for the whole file; the tests run in order and each leaves the fleet healthy.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DiscoveryV1Api, type V1ServicePort } from "@kubernetes/client-node";
import type { AdminStatus } from "../../src/admin/source.ts";
import type { FederatedServiceStatus } from "../../src/protocol/messages.ts";
import { type CliResult, cli, show } from "../helpers/cli.ts";
import { CONTROLLER_NAMESPACE, type ControllerProcess, Fleet } from "../helpers/fleet.ts";
import { eventually } from "../helpers/kube.ts";

const MEMBER = { "mirror.linkerd.io/federated": "member" };
const GATEWAYS: Record<string, string> = { east: "198.18.1.1", west: "198.18.2.1" };
const HTTP: V1ServicePort[] = [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }];

describe("check and status for fleet-wide Services", () => {
  let fleet: Fleet;
  let discovery: DiscoveryV1Api;
  let controller: ControllerProcess;
  let adminUrl: string;
  let scratch: string;
  /** The local cluster as the controller sees it (least privilege). */
  let controllerKc: string;
  const ns = ["-n", CONTROLLER_NAMESPACE];

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), "fleet-mirror-cli-federated-"));
    fleet = await Fleet.start(["east", "west"]);
    discovery = fleet.kubeConfig("local").makeApiClient(DiscoveryV1Api);
    controllerKc = join(scratch, "controller.kubeconfig");
    writeFileSync(controllerKc, fleet.controllerKubeconfig(), { mode: 0o600 });
    for (const cluster of ["east", "west"])
      await fleet.createGateway(cluster, {
        namespace: "linkerd-multicluster",
        name: "linkerd-gateway",
        ingress: [{ ip: GATEWAYS[cluster] ?? "" }],
      });
    // Registration order: east's Secret first, so east's ports win a port conflict.
    await fleet.register("east");
    await new Promise((resolve) => setTimeout(resolve, 1_100)); // creationTimestamp has 1 s resolution
    await fleet.register("west");
    // A short re-check: a user's object leaving is not watched (the stores hold labelled objects only).
    controller = await fleet.startProcess(["--endpoints-api", "endpointslices", "--blocked-recheck-period", "1s"]);
    adminUrl = await controller.adminUrl(90_000);
  });

  after(async () => {
    await controller?.stop();
    await fleet?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  async function createMember(cluster: string, namespace: string, name: string, ports = HTTP): Promise<void> {
    await fleet.ensureNamespace(cluster, namespace);
    await fleet
      .api(cluster)
      .createNamespacedService({ namespace, body: { metadata: { name, labels: MEMBER }, spec: { ports } } });
  }

  /** Waits until the controller's /status shows fleet-wide Service `key` as `wanted` says. */
  async function waitForFederated(
    key: string,
    wanted: (f: FederatedServiceStatus, status: AdminStatus) => boolean,
  ): Promise<void> {
    let last: AdminStatus | undefined;
    await eventually(
      () => `${key} in /status as wanted (now ${JSON.stringify(last?.writer?.federated)})`,
      async () => {
        last = (await (await fetch(`${adminUrl}/status`)).json()) as AdminStatus;
        const found = last.writer?.federated?.find((f) => f.key === key);
        return found && wanted(found, last) ? true : undefined;
      },
    );
  }

  const check = (): Promise<CliResult> => cli(["check", "--kubeconfig", controllerKc, ...ns]);
  const status = (...extra: string[]): Promise<CliResult> => cli(["status", "--admin-url", adminUrl, ...extra]);

  it("check reports a user's Service and EndpointSlice under fleet-wide names; status shows the conflict; both clear once they are gone", async () => {
    await fleet.ensureNamespace("local", "fed");
    await fleet.local.createNamespacedService({
      namespace: "fed",
      body: { metadata: { name: "search-federated" }, spec: { ports: [{ port: 9 }] } },
    });
    await discovery.createNamespacedEndpointSlice({
      namespace: "fed",
      body: {
        metadata: { name: "search-federated-west-ipv4" },
        addressType: "IPv4",
        endpoints: [{ addresses: ["10.9.9.9"] }],
      },
    });
    await createMember("east", "fed", "search");
    await createMember("west", "fed", "search");

    const failed = await check();
    assert.equal(failed.code, 1, show(failed));
    assert.match(failed.stdout, /\n✓ 0 exported Service\(s\) \(0 by label\), 1 fleet-wide member\(s\)\n/);
    assert.match(
      failed.stdout,
      /\n✗ service\/fed\/search-federated is needed for the fleet-wide Service fed\/search-federated \(member fed\/search from east, fed\/search from west\) but is not fleet-mirror's .*: a user's object\n/,
    );
    assert.match(
      failed.stdout,
      /\n✗ endpointslice\/fed\/search-federated-west-ipv4 is needed for the fleet-wide Service fed\/search-federated \(member fed\/search from west\) but is not fleet-mirror's/,
    );
    assert.doesNotMatch(failed.stdout, /endpointslice\/fed\/search-federated-east-ipv4/);

    await waitForFederated(
      "fed/search-federated",
      (f, s) =>
        f.clusters.join() === "east,west" &&
        (s.clusters ?? []).every((row) => row.problems.some((p) => p.key === "fed/search-federated")),
    );
    const blocked = await status();
    assert.equal(blocked.code, 0, show(blocked));
    assert.match(blocked.stdout, /\n\nFLEET-WIDE SERVICE\s+MEMBERS\s+READY\s+NOT READY\s+CONFLICTS\n/);
    assert.match(
      blocked.stdout,
      /\nfed\/search-federated\s+east, west\s+0\s+0\s+east: user-owned: .*; west: user-owned: /,
    );

    await fleet.local.deleteNamespacedService({ namespace: "fed", name: "search-federated" });
    await discovery.deleteNamespacedEndpointSlice({ namespace: "fed", name: "search-federated-west-ipv4" });
    await waitForFederated("fed/search-federated", (f, s) => f.ready === 2 && f.notReady === 0 && noProblems(s));
    const passed = await check();
    assert.equal(passed.code, 0, show(passed));
    assert.match(passed.stdout, /\n✓ no local object holds a fleet-wide Service's name\n/);
    const healthy = await status();
    assert.match(healthy.stdout, /\nfed\/search-federated\s+east, west\s+2\s+0\s+-\n/);
  });

  it("status shows a member whose ports differ as a conflict of the fleet-wide Service, in the table and -o json", async () => {
    await createMember("east", "fed", "cart");
    await createMember("west", "fed", "cart", [{ name: "http", port: 81, targetPort: 8080, protocol: "TCP" }]);
    await waitForFederated(
      "fed/cart-federated",
      (f, s) =>
        f.clusters.join() === "east" &&
        f.ready === 1 &&
        (s.clusters ?? []).some((row) => row.problems.some((p) => p.reason === "port-conflict")),
    );
    const table = await status();
    assert.match(
      table.stdout,
      /\nfed\/cart-federated\s+east\s+1\s+0\s+west: port-conflict: ports of fed\/cart in cluster west differ from those of cluster east/,
    );
    const json = await status("-o", "json");
    assert.equal(json.code, 0, show(json));
    const report = JSON.parse(json.stdout) as { federated: { service: string; clusters: string[] }[] };
    assert.deepEqual(
      report.federated.map((f) => [f.service, f.clusters.join()]),
      [
        ["fed/cart-federated", "east"],
        ["fed/search-federated", "east,west"],
      ],
    );
    // A port conflict is not a name conflict: check still passes.
    const passed = await check();
    assert.equal(passed.code, 0, show(passed));
  });

  it("status without a controller shows each fleet-wide Service's members from its annotation, counts unknown", async () => {
    const r = await cli(["status", "--admin-url", "http://127.0.0.1:1", "--kubeconfig", controllerKc, ...ns]);
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /^controller not reachable; from cluster objects/);
    assert.match(r.stdout, /\nfed\/cart-federated\s+east\s+unknown\s+unknown\s+unknown\n/);
    assert.match(r.stdout, /\nfed\/search-federated\s+east, west\s+unknown\s+unknown\s+unknown\n/);
  });
});

/** No cluster row reports a problem with a fleet-wide key. */
function noProblems(status: AdminStatus): boolean {
  return (status.clusters ?? []).every((row) => row.problems.every((p) => !p.key?.endsWith("-federated")));
}
