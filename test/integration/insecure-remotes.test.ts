/**
 * A credentials Secret whose kubeconfig sets insecure-skip-tls-verify (its token would go
 * to whoever answers at the server's address) registers nothing unless the controller
 * runs with --allow-insecure-remotes: it is reported as every bad Secret is (SPEC §1, §7:
 * its status row `invalid` with reason kubeconfig-insecure, which the
 * fleet_mirror_clusters{state="invalid"} metric counts, and an InvalidCredentials Event on
 * the Secret), no actor runs and nothing is mirrored. A controller started with the flag
 * registers the same Secret and mirrors its cluster.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { clustersByState } from "../../src/admin/snapshot-series.ts";
import type { Supervisor } from "../../src/supervisor/supervisor.ts";
import { CONTROLLER_NAMESPACE, Fleet } from "../helpers/fleet.ts";
import { waitForSecretRow } from "../helpers/supervision.ts";

const SECRET = "cluster-credentials-skipper";

describe("credentials Secrets without verified TLS (--allow-insecure-remotes)", () => {
  let fleet: Fleet;
  let controller: Supervisor | undefined;

  before(async () => {
    fleet = await Fleet.start(["east"]);
    await fleet.createGateway("east", { ingress: [{ ip: "198.18.0.10" }] });
    await fleet.createService("east", "shop", "web");
    // The east API server's kubeconfig, its CA replaced by insecure-skip-tls-verify.
    const kubeconfig = (await fleet.remoteKubeconfig("east")).replace(
      /certificate-authority-data: .*/,
      "insecure-skip-tls-verify: true",
    );
    assert.match(kubeconfig, /insecure-skip-tls-verify: true/);
    await fleet.local.createNamespacedSecret({
      namespace: CONTROLLER_NAMESPACE,
      body: fleet.secretBody({ secretName: SECRET, clusterName: "skipper", kubeconfig }),
    });
  });
  after(async () => {
    await controller?.stop();
    await fleet?.stop();
  });

  it("reports a Secret with insecure-skip-tls-verify as invalid and registers nothing without the flag", async () => {
    controller = fleet.startInProcess();
    const row = await waitForSecretRow(controller, SECRET, (r) => r.state === "invalid", "to be invalid");
    assert.equal(row.cluster, "skipper");
    assert.match(row.reason ?? "", /^kubeconfig-insecure: .*insecure-skip-tls-verify.*--allow-insecure-remotes/);
    assert.equal(clustersByState(controller.status()).get("invalid"), 1);
    const event = await fleet.waitForSecretEvent(SECRET, "InvalidCredentials");
    assert.equal(event.type, "Warning");
    assert.match(event.message ?? "", /insecure-skip-tls-verify/);
    assert.equal(controller.registry.registered.has("skipper"), false);
    assert.equal(controller.actorThread("skipper"), undefined);
    assert.equal(await fleet.localService("shop", "web-skipper"), undefined);
    await controller.stop();
    controller = undefined;
  });

  it("registers the same Secret, and mirrors its cluster, when the operator allows insecure remotes", async () => {
    controller = fleet.startInProcess({ allowInsecureRemotes: true });
    await waitForSecretRow(controller, SECRET, (r) => r.state !== "invalid", "to be registered");
    await fleet.waitForMirror("shop", "web-skipper");
  });
});
